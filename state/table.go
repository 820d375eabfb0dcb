package state

import (
	"maps"
	"math"
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
}

func newEpochs() *epochs { return &epochs{cur: 1} }

// begin starts a snapshot and returns its epoch.
func (e *epochs) begin() uint64 {
	ep := e.cur
	e.cur++
	e.pending = append(e.pending, ep)
	e.maxPending = ep
	return ep
}

// end releases the snapshot of epoch ep; it reports false if ep was not
// pending.
func (e *epochs) end(ep uint64) bool {
	for i, p := range e.pending {
		if p == ep {
			e.pending = append(e.pending[:i], e.pending[i+1:]...)
			e.maxPending = 0
			for _, q := range e.pending {
				e.maxPending = max(e.maxPending, q)
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
	m     map[MK]E
	epoch uint64
	depth uint8 // local depth: the shard holds the keys whose hash starts with a depth-bit prefix
	limit int   // split when len(m) exceeds limit
}

type group[MK comparable, E any] struct {
	dir   []*shard[MK, E]
	shift uint8 // 32 - global depth: the slot of hash h is h >> shift
}

// table is the copy-on-write store of one keyed state. Entries are keyed by
// MK (the key, or the key and namespace) and hold E.
type table[MK comparable, E any] struct {
	ep        *epochs
	groups    []group[MK, E]
	hash      func(MK) uint32 // the key hash of an entry, to split shards
	shardSize int
}

func newTable[MK comparable, E any](ep *epochs, groups, shardSize int, hash func(MK) uint32) *table[MK, E] {
	t := &table[MK, E]{ep: ep, groups: make([]group[MK, E], groups), hash: hash, shardSize: shardSize}
	for i := range t.groups {
		t.groups[i] = group[MK, E]{
			dir:   []*shard[MK, E]{{m: make(map[MK]E), epoch: ep.cur, limit: shardSize}},
			shift: 32,
		}
	}
	return t
}

// shardFor returns the shard for hash h in key group kg, for reading.
func (t *table[MK, E]) shardFor(kg int, h uint32) *shard[MK, E] {
	g := &t.groups[kg]
	return g.dir[h>>g.shift]
}

func (t *table[MK, E]) get(kg int, h uint32, mk MK) (E, bool) {
	e, ok := t.shardFor(kg, h).m[mk]
	return e, ok
}

// writable returns the shard for hash h in key group kg for writing,
// copying it first if a pending snapshot may share it.
func (t *table[MK, E]) writable(kg int, h uint32) *shard[MK, E] {
	g := &t.groups[kg]
	s := g.dir[h>>g.shift]
	if s.epoch > t.ep.maxPending {
		return s
	}
	return t.copyShard(g, h, s)
}

func (t *table[MK, E]) copyShard(g *group[MK, E], h uint32, s *shard[MK, E]) *shard[MK, E] {
	c := &shard[MK, E]{m: maps.Clone(s.m), epoch: t.ep.cur, depth: s.depth, limit: s.limit}
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

// put stores e under mk in the writable shard s (from writable).
func (t *table[MK, E]) put(kg int, h uint32, s *shard[MK, E], mk MK, e E) {
	s.m[mk] = e
	if len(s.m) > s.limit {
		t.split(kg, h, s)
	}
}

func (t *table[MK, E]) set(kg int, h uint32, mk MK, e E) {
	t.put(kg, h, t.writable(kg, h), mk, e)
}

func (t *table[MK, E]) remove(kg int, h uint32, mk MK) {
	s := t.shardFor(kg, h)
	if _, ok := s.m[mk]; !ok {
		return
	}
	delete(t.writable(kg, h).m, mk)
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
	a := &shard[MK, E]{m: make(map[MK]E, len(s.m)/2), epoch: t.ep.cur, depth: d}
	b := &shard[MK, E]{m: make(map[MK]E, len(s.m)/2), epoch: t.ep.cur, depth: d}
	for mk, e := range s.m {
		if t.hash(mk)>>(32-d)&1 == 0 {
			a.m[mk] = e
		} else {
			b.m[mk] = e
		}
	}
	// A shard that a split could not shrink (its keys share a longer hash
	// prefix, or one key has many namespaces) waits until it doubles.
	a.limit = max(t.shardSize, 2*len(a.m))
	b.limit = max(t.shardSize, 2*len(b.m))
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
	if len(g.dir) != 1 || len(g.dir[0].m) != 0 {
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
		g.dir[i] = &shard[MK, E]{m: make(map[MK]E, per), epoch: t.ep.cur, depth: d, limit: t.shardSize}
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
