package state

import (
	"encoding/binary"
	"fmt"
	"io"
	"slices"
)

// Delta snapshots: incremental checkpoints of the heap backend.
//
// A backend created WithIncrementalSnapshots tracks what changes between
// snapshots (table.go: every entry is stamped with the epoch it was last
// written in, every shard with the epoch it was last made writable in,
// and a removal leaves a tomb). IncrementalSnapshot then writes, instead
// of every entry, the changes since the snapshot of an earlier checkpoint
// (its base): a delta blob, in the format of format.go with kind 'D'. Its
// header is the base's checkpoint id followed by a keyed snapshot's
// header; its blocks, one per key group as in a full snapshot, hold per
// changed state
//
//	state:uvarint flags:uvarint puts:uvarint entry* dels:uvarint key*
//
// where an entry is a length-prefixed key, namespace and value as in a
// full snapshot, a key is a removed entry's key and namespace followed by
// an empty value, and flag 1 says the key group's entries of the state
// are replaced (timers: a key group's queue is copied on write whole, so
// its delta is the whole queue). A checkpoint's keyed state is then a
// chain: a full snapshot, and the deltas after it in order, each naming
// the checkpoint of the piece before it. RestoreChain verifies every piece
// (checksums, block sequence, the chain's links) before loading anything,
// loads the full snapshot, and applies the deltas in order: removals, then
// puts, as the owner did them. The caller decides when a chain has grown
// enough to start again from a full snapshot (internal/ops: when the
// deltas outweigh the full snapshot), which bounds a restore's work.

// Segment operations of a restored state not registered yet.
const (
	opPut      = iota // entries of a full snapshot
	opDeltaPut        // entries written by a delta
	opDel             // keys removed by a delta
)

// delta flags.
const deltaReplace = 1

// deltaView is a stateView that can write its changes since an epoch.
type deltaView interface {
	// appendDelta appends the entries of key group kgIdx written after
	// epoch since to puts, the keys removed after it to dels, and says
	// whether the puts replace the key group's entries.
	appendDelta(puts, dels []byte, kgIdx int, since uint64) (p, d []byte, replace bool, np, nd int)
}

// deltaCapturer is a state whose delta view copies its changes when the
// snapshot is taken instead of holding its shards.
type deltaCapturer interface {
	captureDelta(now int64, since uint64) stateView
}

// captureDelta returns a view of the entries written and removed after
// epoch since, copied now (keys and values; a value that is a container
// is shared, as copy-on-write allows): a delta snapshot holds no shard,
// so the owner's writes after it copy none. It walks the shards written
// since then, on the owner's goroutine.
func (s *stateTable[MK, E]) captureDelta(now int64, since uint64) stateView {
	v := &deltaTableView[MK, E]{appendEntry: s.appendEntry, appendKey: s.appendKey,
		putStart: make([]int, len(s.groups)+1), delStart: make([]int, len(s.groups)+1),
		puts: make([]deltaEntry[MK, E], 0, s.deltaHint)}
	if s.ttl != nil {
		v.prune, v.cutoff = s.ttl.prune, now-s.ttl.ttl
	}
	for kg := range s.groups {
		v.putStart[kg], v.delStart[kg] = len(v.puts), len(v.dels)
		s.eachShard(kg, func(sh *shard[MK, E]) {
			if sh.mod <= since {
				return
			}
			if s.ep.track && since+1 >= s.writtenBase(sh) && len(sh.written) < sh.listCap() {
				// The keys written after since are listed, few
				// enough to look up one by one. Later deltas build on
				// since or later (it is the horizon): the list keeps
				// only the keys written after it.
				out := sh.written[:0]
				for _, mk := range sh.written {
					if e, ok := sh.m.get(s.hv(s.hash(mk), mk), mk); ok && e.ep > since {
						v.puts = append(v.puts, deltaEntry[MK, E]{mk, e.v})
						out = append(out, mk)
					}
				}
				clear(sh.written[len(out):])
				sh.written, sh.wbase = out, max(sh.wbase, since+1)
			} else {
				// Walking the slots in order costs less than a lookup
				// each (which misses the CPU caches in a large state).
				for mk, e := range sh.m.all() {
					if e.ep > since {
						v.puts = append(v.puts, deltaEntry[MK, E]{mk, e.v})
					}
				}
				if s.ep.track {
					// The deltas after this one build on it: the list
					// starts again with the next epoch's writes.
					clear(sh.written)
					sh.written, sh.wbase = sh.written[:0], s.ep.cur+1
				}
			}
			for _, tb := range sh.gone {
				if tb.ep <= since {
					continue
				}
				if sh.m.find(s.hv(s.hash(tb.mk), tb.mk), tb.mk) < 0 { // else written again since: its put says it
					v.dels = append(v.dels, tb.mk)
				}
			}
		})
	}
	v.putStart[len(s.groups)], v.delStart[len(s.groups)] = len(v.puts), len(v.dels)
	s.deltaHint = len(v.puts) + len(v.puts)/8
	return v
}

type deltaEntry[MK comparable, E any] struct {
	mk MK
	v  E
}

// deltaTableView is a table's delta: the entries written and the keys
// removed since the delta's base, by key group
// (puts[putStart[kg]:putStart[kg+1]]).
type deltaTableView[MK comparable, E any] struct {
	puts     []deltaEntry[MK, E]
	dels     []MK
	putStart []int
	delStart []int

	appendEntry func(dst []byte, mk MK, e E) []byte
	appendKey   func(dst []byte, mk MK) []byte
	// prune, if set, records the values expired at cutoff as removed.
	prune  pruneFunc[E]
	cutoff int64
}

// A delta view is only ever written as a delta.
func (v *deltaTableView[MK, E]) groupLen(int) int                     { return 0 }
func (v *deltaTableView[MK, E]) appendGroup(dst []byte, _ int) []byte { return dst }

func (v *deltaTableView[MK, E]) appendDelta(puts, dels []byte, kgIdx int, _ uint64) ([]byte, []byte, bool, int, int) {
	np, nd := 0, 0
	for _, e := range v.puts[v.putStart[kgIdx]:v.putStart[kgIdx+1]] {
		val := e.v
		if v.prune != nil {
			var k keep
			if val, k = v.prune(val, v.cutoff, 0); k == keepNone {
				dels = v.appendKey(dels, e.mk)
				nd++
				continue
			}
		}
		puts = v.appendEntry(puts, e.mk, val)
		np++
	}
	for _, mk := range v.dels[v.delStart[kgIdx]:v.delStart[kgIdx+1]] {
		dels = v.appendKey(dels, mk)
		nd++
	}
	return puts, dels, false, np, nd
}

// deltaTarget is a state that a delta can be applied to directly.
type deltaTarget interface {
	// removeGroup removes the n entries of key group kgIdx named in
	// data (keys and namespaces, empty values).
	removeGroup(kgIdx, n int, data []byte) error
	// clearGroup removes every entry of key group kgIdx.
	clearGroup(kgIdx int) error
}

// WithIncrementalSnapshots makes the backend track the changes between
// snapshots, for IncrementalSnapshot. Once it has taken a snapshot, it
// keeps a tomb per removal until no delta can build on a snapshot before
// it; writes cost the same either way.
func WithIncrementalSnapshots() BackendOption {
	return func(c *backendConfig) { c.incremental = true }
}

// keptEpochs is how many recent snapshots' epochs a backend remembers as
// possible bases of a delta.
const keptEpochs = 8

// IncrementalSnapshot captures the backend for checkpoint checkpointID as
// a delta over the snapshot it took for checkpoint base, or as a full
// snapshot if full is set, if base is 0 or not one of the backend's
// recent snapshots, or if the backend does not track changes (it was not
// created WithIncrementalSnapshots, or it keeps its states in an embedded
// LSM store). KeyedSnapshot.Delta says which it is. A delta copies the
// keys and values it writes before it returns (it walks the shards
// written since the base), so it holds no shard and the owner's writes
// after it copy none; the owner goes on as soon as it returns. The
// backend forgets the removals at or before the base (later deltas build
// on it or on a later checkpoint), so a base older than an earlier
// call's gets a full snapshot.
func (b *KeyedBackend[K]) IncrementalSnapshot(checkpointID, base int64, full bool) *KeyedSnapshot {
	since, ok := b.snapEpochs[base]
	// A base before the horizon may have lost its tombs.
	ok = ok && since >= b.ep.horizon
	if ok {
		// Later deltas build on this base or a later one.
		b.ep.horizon = since
	}
	if full || !ok || b.lsm != nil || since == 0 {
		return b.snapshot(checkpointID, false)
	}
	s := b.snapshotSince(checkpointID, false, since)
	s.base = base
	return s
}

// Delta reports whether the snapshot is a delta, and over which
// checkpoint's snapshot.
func (s *KeyedSnapshot) Delta() (base int64, ok bool) { return s.base, s.since > 0 }

// rememberEpoch records the epoch of checkpoint id's snapshot, a base
// deltas may build on. Removals leave tombs from the first snapshot on:
// before it, no delta can need them. A base is one of the remembered
// snapshots, so the tombs at or before the oldest of them are not needed
// either.
func (b *KeyedBackend[K]) rememberEpoch(id int64, ep uint64) {
	if !b.incremental {
		return
	}
	if !b.ep.track {
		// Writes from now on are listed in their shards.
		b.ep.track, b.ep.trackFrom = true, b.ep.cur
	}
	if b.snapEpochs == nil {
		b.snapEpochs = make(map[int64]uint64)
	}
	b.snapEpochs[id] = ep
	for len(b.snapEpochs) > keptEpochs {
		oldest := id
		for k := range b.snapEpochs {
			oldest = min(oldest, k)
		}
		delete(b.snapEpochs, oldest)
	}
	if len(b.snapEpochs) == keptEpochs {
		oldest := ep
		for _, e := range b.snapEpochs {
			oldest = min(oldest, e)
		}
		b.ep.horizon = max(b.ep.horizon, oldest)
	}
}

// writeDelta writes the blocks of a delta snapshot after its header.
func (s *KeyedSnapshot) writeDelta(bw *blobWriter) (int64, error) {
	stats := &SnapshotStats{KeyGroups: s.kgs, KeyGroupOffsets: make([]int64, s.kgs.Len())}
	var buf, puts, dels []byte
	for kgIdx := range s.kgs.Len() {
		buf = buf[:0]
		for i, v := range s.views {
			dv, ok := v.(deltaView)
			if !ok {
				return bw.n, fmt.Errorf("state: delta snapshot of checkpoint %d: %v cannot write its changes", s.checkpointID, s.infos[i])
			}
			var (
				replace bool
				np, nd  int
			)
			puts, dels, replace, np, nd = dv.appendDelta(puts[:0], dels[:0], kgIdx, s.since)
			if np == 0 && nd == 0 && !replace {
				continue
			}
			stats.Entries += int64(np + nd)
			buf = binary.AppendUvarint(buf, uint64(i))
			flags := uint64(0)
			if replace {
				flags |= deltaReplace
			}
			buf = binary.AppendUvarint(buf, flags)
			buf = binary.AppendUvarint(buf, uint64(np))
			buf = append(buf, puts...)
			buf = binary.AppendUvarint(buf, uint64(nd))
			buf = append(buf, dels...)
		}
		stats.KeyGroupOffsets[kgIdx] = bw.block(s.kgs.Start+kgIdx, buf)
		if bw.err != nil {
			break
		}
	}
	n, err := bw.end()
	if err != nil {
		return n, fmt.Errorf("state: writing delta snapshot of checkpoint %d: %w", s.checkpointID, err)
	}
	stats.Bytes = n
	s.stats.Store(stats)
	return n, nil
}

// Views of states that have no changes of their own: a restored state
// not registered yet holds what it was restored with, and a state in an
// embedded store is never part of a delta (emptyView).

func (v *rawView) appendDelta(puts, dels []byte, _ int, _ uint64) ([]byte, []byte, bool, int, int) {
	return puts, dels, false, 0, 0
}

func (emptyView) appendDelta(puts, dels []byte, _ int, _ uint64) ([]byte, []byte, bool, int, int) {
	return puts, dels, false, 0, 0
}

func (v *timersView[K, N]) appendDelta(puts, dels []byte, kgIdx int, since uint64) ([]byte, []byte, bool, int, int) {
	q := v.q[kgIdx]
	if q.mod <= since {
		return puts, dels, false, 0, 0
	}
	return v.appendGroup(puts, kgIdx), dels, true, len(q.heap), 0
}

// deltaSegment is the part of a delta block holding one state's changes.
type deltaSegment struct {
	state   int
	replace bool
	puts    rawSegment
	dels    rawSegment
}

type deltaBlock struct {
	kgIdx int
	segs  []deltaSegment
}

// parsedDelta is a verified delta blob.
type parsedDelta struct {
	h      *keyedHeader
	base   int64
	blocks []deltaBlock
}

// parseDelta reads and verifies a delta blob, keeping the blocks of the
// key groups in want.
func (b *KeyedBackend[K]) parseDelta(r io.Reader, want KeyGroupRange) (*parsedDelta, error) {
	br := newBlobReader(r)
	p, err := br.header(blobDelta)
	if err != nil {
		return nil, err
	}
	d := &decoder{b: p}
	pd := &parsedDelta{base: d.varint()}
	if pd.h, err = decodeKeyedHeader(d, &keyedHeader{}); err != nil {
		return nil, err
	}
	h := pd.h
	if h.MaxParallelism != b.maxP {
		return nil, fmt.Errorf("delta of checkpoint %d has %d key groups, this backend %d: maxParallelism cannot change", h.CheckpointID, h.MaxParallelism, b.maxP)
	}
	if h.native() {
		return nil, corrupt("delta of checkpoint %d names states in an embedded store", h.CheckpointID)
	}
	next := h.KeyGroups.Start
	for {
		kg, payload, ok, err := br.next()
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		if kg != next || kg > h.KeyGroups.End {
			return nil, corrupt("block for key group %d where %d was expected (delta range %v)", kg, next, h.KeyGroups)
		}
		next++
		if !want.Contains(kg) {
			continue
		}
		segs, err := parseDeltaBlock(payload, len(h.infos))
		if err != nil {
			return nil, fmt.Errorf("key group %d: %w", kg, err)
		}
		pd.blocks = append(pd.blocks, deltaBlock{kg - b.kgs.Start, segs})
	}
	if next != h.KeyGroups.End+1 {
		return nil, corrupt("delta ends after key group %d of %v", next-1, h.KeyGroups)
	}
	return pd, nil
}

// parseDeltaBlock splits a delta block into the segments of each state,
// verifying its structure.
func parseDeltaBlock(p []byte, states int) ([]deltaSegment, error) {
	if states == 0 && len(p) > 0 {
		return nil, corrupt("changes in a delta without states")
	}
	var segs []deltaSegment
	d := &decoder{b: p}
	last := -1
	entries := func(removals bool) rawSegment {
		n := d.int(len(d.b), "entry count")
		start := d.b
		for range n {
			d.bytes()
			d.bytes()
			if v := d.bytes(); removals && len(v) != 0 && d.err == nil {
				d.err = corrupt("a removal with %d value bytes", len(v))
			}
			if d.err != nil {
				break
			}
		}
		used := len(start) - len(d.b)
		return rawSegment{n: n, data: start[:used:used]}
	}
	for len(d.b) > 0 {
		i := d.int(states-1, "state index")
		if d.err == nil && i <= last {
			return nil, corrupt("state %d after state %d", i, last)
		}
		last = i
		flags := d.uvarint()
		if d.err == nil && flags&^deltaReplace != 0 {
			return nil, corrupt("delta flags %#x", flags)
		}
		seg := deltaSegment{state: i, replace: flags&deltaReplace != 0}
		seg.puts = entries(false)
		seg.dels = entries(true)
		seg.puts.op, seg.dels.op = opDeltaPut, opDel
		if d.err != nil {
			return nil, d.err
		}
		segs = append(segs, seg)
	}
	return segs, nil
}

// RestoreChain restores the key groups of kgs (within the backend's) from
// a chain of snapshots: pieces[0] a full keyed snapshot, each following
// one a delta over the piece before it. Every piece is read and verified
// first (checksums, block sequence, that each delta names the checkpoint
// of the piece before it and covers the same key groups), so a corrupt,
// missing or misplaced piece changes nothing; then the full snapshot is
// loaded and the deltas applied in order. As with Restore, it runs before
// any record, each key group may be restored once, and a backend whose
// restore failed while loading must be discarded.
func (b *KeyedBackend[K]) RestoreChain(pieces []io.Reader, kgs KeyGroupRange) error {
	if err := b.restoreChain(pieces, kgs.Intersect(b.kgs)); err != nil {
		return fmt.Errorf("state: restoring a chain of keyed snapshots: %w", err)
	}
	return nil
}

func (b *KeyedBackend[K]) restoreChain(pieces []io.Reader, want KeyGroupRange) error {
	if len(pieces) == 0 {
		return fmt.Errorf("no snapshot")
	}
	h, blocks, err := b.parse(pieces[0], want)
	if err != nil {
		return fmt.Errorf("full snapshot: %w", err)
	}
	if h.native() {
		return fmt.Errorf("snapshot of checkpoint %d is a native snapshot of an embedded LSM store", h.CheckpointID)
	}
	deltas := make([]*parsedDelta, 0, len(pieces)-1)
	prev := h
	for i, r := range pieces[1:] {
		pd, err := b.parseDelta(r, want)
		if err != nil {
			return fmt.Errorf("delta %d of %d: %w", i+1, len(pieces)-1, err)
		}
		switch {
		case pd.base != prev.CheckpointID:
			return fmt.Errorf("delta %d of %d (checkpoint %d) builds on checkpoint %d, but follows checkpoint %d's snapshot",
				i+1, len(pieces)-1, pd.h.CheckpointID, pd.base, prev.CheckpointID)
		case pd.h.KeyGroups != h.KeyGroups:
			return fmt.Errorf("delta of checkpoint %d covers key groups %v, its chain %v", pd.h.CheckpointID, pd.h.KeyGroups, h.KeyGroups)
		}
		deltas = append(deltas, pd)
		prev = pd.h
	}
	// Verified: load.
	if _, _, err := b.load(h, blocks, false); err != nil {
		return err
	}
	for _, pd := range deltas {
		if err := b.applyDelta(pd); err != nil {
			return fmt.Errorf("delta of checkpoint %d: %w", pd.h.CheckpointID, err)
		}
	}
	return nil
}

// applyDelta applies a verified delta to the backend's states: to a
// registered one directly, to a placeholder as segments that its
// registration applies in order.
func (b *KeyedBackend[K]) applyDelta(pd *parsedDelta) error {
	h := pd.h
	targets := make([]keyedState, len(h.infos))
	evs := make([]*evolution, len(h.infos))
	for i, inf := range h.infos {
		j, ok := b.byName[inf.name]
		if !ok {
			j = len(b.states)
			raw, err := b.newRaw(inf, j)
			if err != nil {
				return err
			}
			b.byName[inf.name] = j
			b.states = append(b.states, raw)
			b.layouts[inf.name] = layout{stateSchema: h.schemas[i]}
		}
		if got := b.states[j].info(); got != inf {
			return fmt.Errorf("delta has %v, backend has %v", inf, got)
		}
		if _, ok := b.states[j].(*rawState); ok {
			if prev := b.layouts[inf.name]; !slices.Equal(prev.value, h.schemas[i].value) || !slices.Equal(prev.key, h.schemas[i].key) {
				return fmt.Errorf("%v: the snapshots restored disagree on its schema", inf)
			}
		} else {
			ev, err := planEvolution(inf, h.schemas[i], b.layouts[inf.name])
			if err != nil {
				return err
			}
			evs[i] = ev
		}
		targets[i] = b.states[j]
	}
	for _, blk := range pd.blocks {
		for _, seg := range blk.segs {
			st := targets[seg.state]
			dt, ok := st.(deltaTarget)
			if !ok {
				return fmt.Errorf("%v cannot take the changes of a delta", st.info())
			}
			kg := blk.kgIdx + b.kgs.Start
			if seg.replace {
				if err := dt.clearGroup(blk.kgIdx); err != nil {
					return fmt.Errorf("%v, key group %d: %w", st.info(), kg, err)
				}
			}
			if seg.dels.n > 0 {
				if err := dt.removeGroup(blk.kgIdx, seg.dels.n, seg.dels.data); err != nil {
					return fmt.Errorf("%v, key group %d: %w", st.info(), kg, err)
				}
			}
			if seg.puts.n > 0 {
				puts := seg.puts
				if ev := evs[seg.state]; ev != nil {
					var err error
					if puts, err = ev.segment(puts); err != nil {
						return fmt.Errorf("key group %d: %w", kg, err)
					}
				}
				var err error
				if r, ok := st.(*rawState); ok {
					err = r.addSegment(blk.kgIdx, puts)
				} else {
					err = st.restoreGroup(blk.kgIdx, puts.n, puts.data)
				}
				if err != nil {
					return fmt.Errorf("%v, key group %d: %w", st.info(), kg, err)
				}
			}
		}
	}
	return nil
}

// mergeRaw merges the segments of a placeholder's key group, applying
// the deltas' removals and replacements, into n entries in data: each
// key (and namespace) once, with its last value.
func mergeRaw(segs []rawSegment) (n int, data []byte) {
	type ent struct {
		key, ns, val []byte
		live         bool
	}
	var ents []ent
	idx := map[string]int{}
	var id []byte
	for _, seg := range segs {
		// Verified when parsed: eachEntry cannot fail.
		_ = eachEntry(seg.n, seg.data, func(key, ns, val []byte) error {
			id = appendBytes(appendBytes(id[:0], key), ns)
			i, ok := idx[string(id)]
			switch {
			case seg.op == opDel:
				if ok {
					ents[i].live = false
				}
			case ok:
				ents[i].val, ents[i].live = val, true
			default:
				idx[string(id)] = len(ents)
				ents = append(ents, ent{key, ns, val, true})
			}
			return nil
		})
	}
	for _, e := range ents {
		if e.live {
			data = appendBytes(appendBytes(appendBytes(data, e.key), e.ns), e.val)
			n++
		}
	}
	return n, data
}

// merged reports whether a placeholder's key group holds a delta's
// segments, which must be merged to be written as one snapshot's.
func merged(segs []rawSegment) bool {
	for _, s := range segs {
		if s.op != opPut {
			return true
		}
	}
	return false
}
