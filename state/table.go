package state

import (
	"math"
	"slices"
)

// Copy-on-write tables.
//
// Every keyed state keeps its entries in a table, split by key group and,
// within a key group, into shards by the high bits of the key hash
// (extendible hashing: a key group's directory has 2^depth slots, and a
// shard of local depth d fills the 2^(depth-d) consecutive slots that share
// its d-bit hash prefix). A shard splits in two when it outgrows its limit,
// so a shard stays small whatever the size of the state.
//
// Epochs. The backend has a current epoch. Every object the tables own that
// a snapshot can reach (shards, and mutable containers inside entries) is
// stamped with the epoch in which it was created. Snapshot captures the
// shard pointers, records the current epoch as the snapshot's epoch, and
// advances the current epoch. maxPending is the highest epoch of a
// snapshot not yet released (0 if none).
//
// Invariant: an object with epoch > maxPending is reachable from no pending
// snapshot, so the owner may modify it in place. An object with epoch <=
// maxPending may be reachable from one and is never modified again: the
// owner copies it (stamping the copy with the current epoch) and modifies
// the copy. A snapshot therefore sees exactly the state at the time it was
// taken, while the owner keeps writing; each object is copied at most once
// per snapshot, on its first write.
//
// The only mutation allowed on a shared object is appending to a list past
// the length any snapshot has captured (see listAdd).
//
// Shards are reachable from full snapshots only: a delta snapshot copies
// the entries it writes (their keys and values; values that are
// containers are shared as any value is) when it is taken, so shards
// follow the invariant with maxShards, the highest epoch of a pending full
// snapshot, and everything else with maxPending.
//
// Changes. Every entry carries the epoch in which it was last written (its
// slot's stamp), and every shard the epoch in which it was last made
// writable (mod). A delta snapshot over an earlier snapshot of epoch B
// (incremental checkpoints, see delta.go) writes the entries stamped after
// B, skipping the shards not written since B, and the removals after B:
// while the backend tracks changes, a removal leaves a tomb (the key and
// the epoch) in its shard. Tombs live in the shard, so a snapshot sees
// those of its time; a tomb at or before the horizon (the epoch of the
// latest base a delta was asked for: later deltas build on it or on a
// later one) is dropped when its shard is copied or split.
//
// Written keys. So that a delta does not walk every entry of a shard
// written since its base (with writes spread over many keys, every shard
// is, and the walk happens at the barrier), a shard also lists the keys
// written in it while the backend tracks changes, as long as they are few:
// written holds every key put in the shard at an epoch >= max(wbase, the
// epoch tracking began), each once unless it was removed and put again,
// and maybe keys since removed or no longer needed. A put at or after
// that bound appends its key when the entry's previous stamp is below it
// (or it had none), so a key written again and again costs one list
// entry. A delta over epoch B looks up the listed keys instead of walking
// the shard when B+1 reaches the bound and the list is short, and keeps
// only those written after B (B is the horizon then). A list that reaches
// listCap keys (where walking the shard costs less than a lookup per key)
// is dropped, and wbase becomes the next epoch: the shard lists nothing
// more in this epoch, and a delta over an earlier base walks it. A delta
// that walks a shard leaves its list empty from the next epoch on: the
// deltas after it build on it (or, if its checkpoint fails, walk again).
// So a write costs nothing more once its shard has many changes, which is
// when the changes are many and a delta walks every shard anyway.

const (
	// defaultShardSize is the default number of entries at which a shard
	// splits. Copying a full shard (the cost of the first write to it after
	// a snapshot) takes about 60µs at this size; capturing one is a pointer
	// copy.
	defaultShardSize = 1024
	// maxDepth bounds the directory of a key group at 2^maxDepth slots.
	maxDepth = 20
)

// epochs tracks the snapshots pending on a backend.
type epochs struct {
	cur        uint64
	maxPending uint64
	pending    []uint64
	// maxShards is the highest epoch of a pending snapshot that holds
	// shards (a full one: a delta snapshot copies the entries it writes
	// when it is taken, see captureDelta); shardless lists the pending
	// ones that hold none.
	maxShards uint64
	shardless []uint64
	// track says removals leave tombs (the backend takes delta
	// snapshots); tombs at or before horizon are no longer needed.
	track   bool
	horizon uint64
	// trackFrom is the first epoch whose writes happened while the
	// backend tracked changes (the shards' written lists hold none
	// before it).
	trackFrom uint64
}

func newEpochs() *epochs { return &epochs{cur: 1} }

// maxEpoch bounds the epochs of a backend: a table's slots keep the epoch
// they were written in in 32 bits. A backend reaches it after 2^32-1
// snapshots, 136 years of one a second.
const maxEpoch = math.MaxUint32

// advance returns the current epoch and starts the next.
func (e *epochs) advance() uint64 {
	if e.cur == maxEpoch {
		panic("state: a keyed backend took 2^32-1 snapshots; its epochs are exhausted")
	}
	ep := e.cur
	e.cur++
	return ep
}

// begin starts a snapshot and returns its epoch.
func (e *epochs) begin() uint64 {
	ep := e.advance()
	e.pending = append(e.pending, ep)
	e.maxPending, e.maxShards = ep, ep
	return ep
}

// beginDelta starts a delta snapshot, which holds no shards, and returns
// its epoch.
func (e *epochs) beginDelta() uint64 {
	ep := e.advance()
	e.pending = append(e.pending, ep)
	e.shardless = append(e.shardless, ep)
	e.maxPending = ep
	return ep
}

// end releases the snapshot of epoch ep; it reports false if ep was not
// pending.
func (e *epochs) end(ep uint64) bool {
	for i, p := range e.pending {
		if p == ep {
			e.pending = append(e.pending[:i], e.pending[i+1:]...)
			if j := slices.Index(e.shardless, ep); j >= 0 {
				e.shardless = slices.Delete(e.shardless, j, j+1)
			}
			e.maxPending, e.maxShards = 0, 0
			for _, q := range e.pending {
				e.maxPending = max(e.maxPending, q)
				if !slices.Contains(e.shardless, q) {
					e.maxShards = max(e.maxShards, q)
				}
			}
			return true
		}
	}
	return false
}

// shared reports whether an object stamped with epoch ep may be reachable
// from a pending snapshot.
func (e *epochs) shared(ep uint64) bool { return ep <= e.maxPending }

type shard[MK comparable, E any] struct {
	m omap[MK, E]
	// claim is the claim of the one pending full snapshot that holds
	// the shard, or its table's contested claim (see claim.go). It
	// shares m's cache line: a snapshot sets it and reads m's length.
	claim *shardClaim[MK, E]
	epoch uint64
	mod   uint64 // the epoch in which the shard was last made writable
	depth uint8  // local depth: the shard holds the keys whose hash starts with a depth-bit prefix
	limit int    // split when len(m) exceeds limit
	// gone holds the removals while the backend tracks changes.
	gone []tomb[MK]
	// written lists the keys put at epoch max(wbase, trackFrom) or later
	// (see Written keys above).
	written []MK
	wbase   uint64
}

// slot is a table entry: its value and the epoch it was last written in.
type slot[E any] struct {
	v  E
	ep uint64
}

// tomb records that the entry of key mk was removed in epoch ep.
type tomb[MK comparable] struct {
	mk MK
	ep uint64
}

// pruneTombs drops the tombs of gone at or before the horizon, in place.
func pruneTombs[MK comparable](gone []tomb[MK], horizon uint64) []tomb[MK] {
	out := gone[:0]
	for _, t := range gone {
		if t.ep > horizon {
			out = append(out, t)
		}
	}
	clear(gone[len(out):])
	return out
}

// liveTombs returns the tombs of gone after the horizon, in a slice of
// their own.
func liveTombs[MK comparable](gone []tomb[MK], horizon uint64) []tomb[MK] {
	var out []tomb[MK]
	for _, t := range gone {
		if t.ep > horizon {
			out = append(out, t)
		}
	}
	return out
}

type group[MK comparable, E any] struct {
	dir   []*shard[MK, E]
	shift uint8 // 32 - global depth: the slot of hash h is h >> shift
}

// table is the copy-on-write store of one keyed state. Entries are keyed by
// MK (the key, or the key and namespace) and hold E.
type table[MK comparable, E any] struct {
	ep     *epochs
	groups []group[MK, E]
	hash   func(MK) uint32 // the key hash of an entry, to split shards
	// nsHash, if set, hashes an entry's namespace into its inner hash
	// (namespaced state: the entries of a key share its hash).
	nsHash    func(MK) uint32
	shardSize int
	// contest is the claim of shards several pending snapshots hold.
	contest *shardClaim[MK, E]
}

func newTable[MK comparable, E any](ep *epochs, groups, shardSize int, hash, nsHash func(MK) uint32) *table[MK, E] {
	t := &table[MK, E]{ep: ep, groups: make([]group[MK, E], groups), hash: hash, nsHash: nsHash, shardSize: shardSize}
	for i := range t.groups {
		t.groups[i] = group[MK, E]{
			dir:   []*shard[MK, E]{{epoch: ep.cur, mod: ep.cur, limit: shardSize}},
			shift: 32,
		}
	}
	return t
}

// hv returns the inner hash of mk, whose key hash is h.
func (t *table[MK, E]) hv(h uint32, mk MK) uint32 {
	if t.nsHash != nil {
		h ^= t.nsHash(mk) * 0x9e3779b9
	}
	return innerHash(h)
}

// shardFor returns the shard for hash h in key group kg, for reading.
func (t *table[MK, E]) shardFor(kg int, h uint32) *shard[MK, E] {
	g := &t.groups[kg]
	return g.dir[h>>g.shift]
}

func (t *table[MK, E]) get(kg int, h uint32, mk MK) (E, bool) {
	e, ok := t.shardFor(kg, h).m.get(t.hv(h, mk), mk)
	return e.v, ok
}

// at returns the value of mk, whose inner hash is hv, in shard s.
func (s *shard[MK, E]) at(hv uint32, mk MK) (E, bool) {
	e, ok := s.m.get(hv, mk)
	return e.v, ok
}

// writable returns the shard for hash h in key group kg for writing,
// copying it first if a pending snapshot may share it.
func (t *table[MK, E]) writable(kg int, h uint32) *shard[MK, E] {
	g := &t.groups[kg]
	s := g.dir[h>>g.shift]
	if s.epoch > t.ep.maxShards {
		s.mod = t.ep.cur
		return s
	}
	if s.claim != nil && t.take(s) {
		// The snapshot that holds s reads it no more (claim.go).
		s.epoch, s.mod = t.ep.cur, t.ep.cur
		return s
	}
	return t.copyShard(g, h, s)
}

func (t *table[MK, E]) copyShard(g *group[MK, E], h uint32, s *shard[MK, E]) *shard[MK, E] {
	c := &shard[MK, E]{m: s.m.clone(), epoch: t.ep.cur, mod: t.ep.cur, depth: s.depth, limit: s.limit, wbase: s.wbase}
	if len(s.gone) > 0 {
		c.gone = liveTombs(s.gone, t.ep.horizon)
	}
	if len(s.written) > 0 {
		c.written = slices.Clone(s.written)
	}
	lo, n := g.slots(h, s.depth)
	for i := lo; i < lo+n; i++ {
		g.dir[i] = c
	}
	return c
}

// slots returns the directory slots of the shard of local depth d that
// holds hash h.
func (g *group[MK, E]) slots(h uint32, d uint8) (lo, n int) {
	global := 32 - g.shift
	prefix := uint64(h) >> (32 - d) // 0 when d == 0
	return int(prefix << (global - d)), 1 << (global - d)
}

// put stores e under mk, whose inner hash is hv, in the writable shard s
// (from writable).
func (t *table[MK, E]) put(kg int, h uint32, s *shard[MK, E], hv uint32, mk MK, e E) {
	en, found := t.entry(s, hv, mk)
	t.store(kg, h, s, en, found, e)
}

// entry returns the entry of mk, whose inner hash is hv, in the writable
// shard s (from writable), added with a zero value if absent, and whether
// it was there: a read and a write for one probe. The caller stores the
// new value with store before any other change to the table.
func (t *table[MK, E]) entry(s *shard[MK, E], hv uint32, mk MK) (*oent[MK, E], bool) {
	en, found := s.m.upsert(hv, mk)
	if t.ep.track {
		// List mk if the shard lists this epoch's writes and mk is not
		// listed yet (see Written keys above).
		if base := t.writtenBase(s); t.ep.cur >= base && (!found || uint64(en.ep) < base) {
			t.noteWritten(s, mk)
		}
	}
	return en, found
}

// store sets the value of en, from entry, to e, written in this epoch.
func (t *table[MK, E]) store(kg int, h uint32, s *shard[MK, E], en *oent[MK, E], found bool, e E) {
	en.setSlot(slot[E]{e, t.ep.cur})
	if !found && s.m.len() > s.limit {
		t.split(kg, h, s)
	}
}

// writtenBase is the epoch from which s.written lists every key put.
func (t *table[MK, E]) writtenBase(s *shard[MK, E]) uint64 {
	return max(s.wbase, t.ep.trackFrom)
}

// listCap is the number of listed keys at which a delta walks the shard
// rather than looking each one up.
func (s *shard[MK, E]) listCap() int { return max(8, len(s.m.es)/16) }

// noteWritten lists mk, put in the writable shard s in the current epoch
// and not listed, or drops the list if it is full.
func (t *table[MK, E]) noteWritten(s *shard[MK, E], mk MK) {
	if len(s.written) >= s.listCap() {
		clear(s.written)
		s.written, s.wbase = s.written[:0], t.ep.cur+1
		return
	}
	s.written = append(s.written, mk)
}

func (t *table[MK, E]) set(kg int, h uint32, mk MK, e E) {
	t.put(kg, h, t.writable(kg, h), t.hv(h, mk), mk, e)
}

func (t *table[MK, E]) remove(kg int, h uint32, mk MK) {
	s := t.shardFor(kg, h)
	hv := t.hv(h, mk)
	p := s.m.find(hv, mk)
	if p < 0 {
		return
	}
	// A copy has the entries in the same slots.
	w := t.writable(kg, h)
	w.m.delAt(p)
	if t.ep.track {
		if n := len(w.gone); n > 0 && n == cap(w.gone) {
			// Before growing, drop the tombs no delta needs: a
			// writable shard's tombs are its own.
			w.gone = pruneTombs(w.gone, t.ep.horizon)
		}
		w.gone = append(w.gone, tomb[MK]{mk, t.ep.cur})
	}
}

// split replaces the writable shard s (holding hash h in key group kg) by
// two shards of one more bit of depth.
func (t *table[MK, E]) split(kg int, h uint32, s *shard[MK, E]) {
	g := &t.groups[kg]
	if s.depth >= maxDepth {
		s.limit = math.MaxInt
		return
	}
	if global := 32 - g.shift; s.depth == global {
		dir := make([]*shard[MK, E], 2*len(g.dir))
		for i, x := range g.dir {
			dir[2*i], dir[2*i+1] = x, x
		}
		g.dir = dir
		g.shift--
	}
	d := s.depth + 1
	a := &shard[MK, E]{m: newOmap[MK, E](s.m.len() / 2), epoch: t.ep.cur, mod: t.ep.cur, depth: d, wbase: s.wbase}
	b := &shard[MK, E]{m: newOmap[MK, E](s.m.len() / 2), epoch: t.ep.cur, mod: t.ep.cur, depth: d, wbase: s.wbase}
	for e := range s.m.entries() {
		if t.hash(e.mk)>>(32-d)&1 == 0 {
			a.m.add(*e)
		} else {
			b.m.add(*e)
		}
	}
	for _, mk := range s.written {
		if t.hash(mk)>>(32-d)&1 == 0 {
			a.written = append(a.written, mk)
		} else {
			b.written = append(b.written, mk)
		}
	}
	for _, tb := range s.gone {
		if tb.ep <= t.ep.horizon {
			continue
		}
		if t.hash(tb.mk)>>(32-d)&1 == 0 {
			a.gone = append(a.gone, tb)
		} else {
			b.gone = append(b.gone, tb)
		}
	}
	// A shard that a split could not shrink (its keys share a longer hash
	// prefix, or one key has many namespaces) waits until it doubles.
	a.limit = max(t.shardSize, 2*a.m.len())
	b.limit = max(t.shardSize, 2*b.m.len())
	lo, n := g.slots(h, s.depth)
	for i := lo; i < lo+n/2; i++ {
		g.dir[i] = a
	}
	for i := lo + n/2; i < lo+n; i++ {
		g.dir[i] = b
	}
}

// reserve prepares the empty key group kg for n entries, as a restore
// does: it creates the shards that n entries would split into, each sized
// for its share, rather than growing and splitting one entry at a time.
func (t *table[MK, E]) reserve(kg, n int) {
	g := &t.groups[kg]
	if len(g.dir) != 1 || g.dir[0].m.len() != 0 {
		return
	}
	d := uint8(0)
	for d < maxDepth && n>>d > t.shardSize/2 {
		d++
	}
	per := n>>d + n>>d/8 + 1
	g.dir = make([]*shard[MK, E], 1<<d)
	g.shift = 32 - d
	for i := range g.dir {
		g.dir[i] = &shard[MK, E]{m: newOmap[MK, E](per), epoch: t.ep.cur, mod: t.ep.cur, depth: d, limit: t.shardSize}
	}
}

// eachShard calls fn for every distinct shard of key group kg. The slots
// of a shard are consecutive.
func (t *table[MK, E]) eachShard(kg int, fn func(*shard[MK, E])) {
	var prev *shard[MK, E]
	for _, s := range t.groups[kg].dir {
		if s != prev {
			fn(s)
			prev = s
		}
	}
}

// capture returns the distinct shards of every key group, for a snapshot:
// shards[start[kg]:start[kg+1]] belong to key group kg.
func (t *table[MK, E]) capture() (shards []*shard[MK, E], start []int) {
	start = make([]int, len(t.groups)+1)
	n := 0
	for kg := range t.groups {
		t.eachShard(kg, func(*shard[MK, E]) { n++ })
	}
	shards = make([]*shard[MK, E], 0, n)
	for kg := range t.groups {
		start[kg] = len(shards)
		t.eachShard(kg, func(s *shard[MK, E]) { shards = append(shards, s) })
	}
	start[len(t.groups)] = len(shards)
	return shards, start
}
