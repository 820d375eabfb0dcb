package state

import (
	"errors"
	"runtime"
	"sync/atomic"
)

// Shard claims: a full snapshot's shards written, not copied.
//
// Copy-on-write (table.go) copies a shard that a pending full snapshot
// holds on the first write to it. With writes spread over all keys, that
// copies the whole state once per checkpoint, next to encoding it once in
// the snapshot: about as much CPU again, and as much memory, allocated and
// then collected. A claim lets the snapshot's writer and the owner
// decide, shard by shard, who reads the shard as the snapshot has it; the
// other then needs no copy:
//
//   - the writer claims a shard before encoding it, and releases it once
//     encoded: a first write after that modifies the shard in place;
//   - the owner, on the first write to a shard the writer has not reached,
//     claims it and encodes its entries for the snapshot (the encoding
//     the writer would have done, on the owner's goroutine), then
//     modifies it in place; the writer appends those bytes when it
//     reaches the shard. Only states with a one-loop encoder do so (int64
//     counters and sums), whose encoding of a shard costs about what its
//     copy does; the others copy such a shard, leaving the encoding to
//     the writer's goroutine;
//   - a first write to a shard the writer is encoding at that moment
//     copies it, as without claims.
//
// A claim is one atomic word per captured shard; the owner looks at it
// once per shard per snapshot (on the first write, as it looked at the
// epoch), never per record. Each shard points to the claim of the one
// pending full snapshot that holds it; a shard two pending snapshots
// hold (concurrent checkpoints) points to its table's contested claim,
// and is copied on write as before. A snapshot can be written again as
// long as the owner has modified no shard the first write encoded (one it
// has, in place, fails the second write).
//
// States with a time to live whose snapshots leave expired values out
// take no claims and stay with copy-on-write: the writer chooses their
// snapshot's entries as it writes them.

// Claim states.
const (
	claimFree    uint32 = iota // neither has read the shard for the snapshot
	claimWriter                // the writer is encoding it
	claimWritten               // the writer has encoded it
	claimOwner                 // the owner is encoding it
	claimEncoded               // the owner has encoded it into enc
	claimTaken                 // written, then modified in place by the owner
)

// shardClaim is one captured shard's claim.
type shardClaim[MK comparable, E any] struct {
	state atomic.Uint32
	// enc holds the shard's entries as the snapshot has them, encoded by
	// the owner (claimEncoded), until the snapshot is released.
	enc []byte
	// failed says the owner's encoding did not finish.
	failed bool
	set    *claimSet[MK, E]
}

// claimSet is what the claims of one snapshot's view share.
type claimSet[MK comparable, E any] struct {
	// encode appends every entry of m, as the snapshot's writer does.
	encode func(dst []byte, m *omap[MK, E]) []byte
	// ownerEncodes says the owner encodes a shard the writer has not
	// reached: only with a one-loop encoder (appendInt64Entries), which
	// costs about what a copy does. An encoding entry by entry costs
	// several times a copy, on the owner's goroutine, where the copy
	// leaves it to the writer's.
	ownerEncodes bool
	// arena holds the owner's encodings, back to back: the owner
	// appends to it, and the writer reads only what a claim's enc
	// covers, once encoded.
	arena []byte
}

// Arena chunks start small, for a snapshot during which few shards are
// written, and double up to maxArenaChunk.
const (
	minArenaChunk = 64 << 10
	maxArenaChunk = 1 << 20
)

// ownerEncode encodes m into the arena, on the owner's goroutine.
func (cs *claimSet[MK, E]) ownerEncode(m *omap[MK, E]) []byte {
	// The int64 encoding takes at most 21 bytes an entry.
	if need := m.len()*24 + 64; cap(cs.arena)-len(cs.arena) < need {
		size := min(max(minArenaChunk, 2*cap(cs.arena)), maxArenaChunk)
		cs.arena = make([]byte, 0, max(size, need))
	}
	start := len(cs.arena)
	cs.arena = cs.encode(cs.arena, m)
	return cs.arena[start:len(cs.arena):len(cs.arena)]
}

// errWrittenTwice reports a second WriteTo of a snapshot a shard of which
// the owner has modified in place since the first wrote it.
var errWrittenTwice = errors.New("state: a snapshot's shards were written once already, and modified since")

// errClaimFailed reports an owner's encoding of a shard that did not
// finish (its codec panicked): the snapshot lacks those entries.
var errClaimFailed = errors.New("state: encoding a shard for a snapshot on a first write failed")

// attachClaims makes claims[i] the claim of shards[i], captured by one
// full snapshot, and adds each shard's number of entries to lens[kg] for
// its key group kg (shards[start[kg]:start[kg+1]]). A shard another
// pending snapshot has claimed is contested: both copy it on write.
func (t *table[MK, E]) attachClaims(shards []*shard[MK, E], start []int, claims []shardClaim[MK, E], lens []int, set *claimSet[MK, E]) {
	for kg := range lens {
		for i := start[kg]; i < start[kg+1]; i++ {
			s := shards[i]
			claims[i].set = set
			lens[kg] += s.m.len()
			if s.claim != nil {
				s.claim = t.contested()
				continue
			}
			s.claim = &claims[i]
		}
	}
}

// contested returns the table's claim that stands for several.
func (t *table[MK, E]) contested() *shardClaim[MK, E] {
	if t.contest == nil {
		t.contest = &shardClaim[MK, E]{}
	}
	return t.contest
}

// detachClaims ends a released snapshot's claims on shards, on the
// owner's goroutine; a contested shard is free again once no full
// snapshot is pending.
func (t *table[MK, E]) detachClaims(shards []*shard[MK, E], claims []shardClaim[MK, E]) {
	for i, s := range shards {
		switch {
		case s.claim == &claims[i]:
			s.claim = nil
		case s.claim != nil && s.claim == t.contest && t.ep.maxShards == 0:
			s.claim = nil
		}
	}
}

// take reports whether the owner may write the shared shard s in place:
// the writer of the one snapshot that holds it is done with it, or the
// owner has just encoded it for that writer. It runs on the owner's
// goroutine, on the first write to s since the snapshot.
func (t *table[MK, E]) take(s *shard[MK, E]) bool {
	c := s.claim
	if c == nil || c == t.contest {
		return false
	}
	switch {
	case c.set.ownerEncodes && c.state.CompareAndSwap(claimFree, claimOwner):
		done := false
		defer func() {
			if !done {
				c.failed = true
			}
			c.state.Store(claimEncoded)
		}()
		c.enc = c.set.ownerEncode(&s.m)
		done = true
	case c.state.CompareAndSwap(claimWritten, claimTaken):
	default:
		return false // the writer is on it: copy
	}
	s.claim = nil
	return true
}

// writeClaimed appends the entries of shard s, whose claim is c, for the
// snapshot's writer: it encodes them itself, or appends what the owner
// encoded, waiting for the owner to finish if it is encoding them now.
// The snapshot may be written again as long as the owner has modified no
// shard the writer encoded.
func writeClaimed[MK comparable, E any](dst []byte, s *shard[MK, E], c *shardClaim[MK, E]) ([]byte, error) {
	for {
		switch st := c.state.Load(); st {
		case claimFree, claimWritten:
			if !c.state.CompareAndSwap(st, claimWriter) {
				continue // the owner took it meanwhile
			}
			dst = c.set.encode(dst, &s.m)
			c.state.Store(claimWritten)
			return dst, nil
		case claimOwner:
			runtime.Gosched() // the owner is encoding one shard: microseconds
		case claimEncoded:
			if c.failed {
				return dst, errClaimFailed
			}
			return append(dst, c.enc...), nil
		default: // claimTaken; claimWriter cannot be: one writer at a time
			return dst, errWrittenTwice
		}
	}
}
