package state

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"iter"
	"slices"

	"github.com/weirstream/weir/codec"
)

// Timer is a timer of a keyed operator: at Timestamp (event or processing
// time), for Key in Namespace (a window, or VoidNamespace).
type Timer[K, N comparable] struct {
	Timestamp int64
	Key       K
	Namespace N
}

// Timers is a queue of timers, one per (timestamp, key, namespace), kept
// with the keyed state of a KeyedBackend backend: it is snapshotted per key
// group with the other states and restored with them, so a rescaled
// subtask gets the timers of the keys it now owns. An operator keeps one
// Timers for event time and one for processing time.
//
// Timers fire in timestamp order; timers with the same timestamp fire in
// an order that depends only on the timers themselves (key hash, then key
// and namespace encodings), so that a restored job fires them in the same
// order as one that never failed.
//
// Internally each key group has a binary heap with an index for
// deduplication and deletion (timerIndex), copied on write while a snapshot shares it,
// and a small heap orders the key groups by their earliest timer. In a
// steady state (timers registered and fired at a similar rate, no snapshot
// pending) registering and firing do not allocate.
type Timers[K, N comparable] struct {
	b         *KeyedBackend[K]
	inf       stateInfo
	nc        codec.Codec[N]
	q         []*timerQueue[K, N] // by key group index
	groupHeap                     // key groups with timers, by earliest timer
	n         int
	// l keeps the timers in the backend's embedded LSM store instead
	// (lsmtimers.go); the heap fields are then unused.
	l *lsmTimers

	// Scratch buffers for ordering timers whose timestamps and key hashes
	// are equal.
	bufA, bufB []byte
}

type timerKey[K, N comparable] struct {
	ts  int64
	key K
	ns  N
}

type timerNode[K, N comparable] struct {
	timerKey[K, N]
	hash uint32
	pos  int32 // position in the heap
}

// heapEntry is an element of a key group's heap. It repeats the timestamp
// and key hash of its node, which decide almost every comparison, so that
// sifting reads only the heap array.
type heapEntry struct {
	ts   int64
	hash uint32
	slot int32
}

// timerQueue is the timers of one key group. nodes is a slab (free lists
// its unused slots), heap orders the slots, and index maps each timer to
// its slot.
type timerQueue[K, N comparable] struct {
	nodes []timerNode[K, N]
	heap  []heapEntry
	index timerIndex
	free  []int32
	epoch uint64
	mod   uint64 // the epoch in which the queue was last made writable
}

// NewTimers registers a timer queue named name in b. A nil nsCodec means
// codec.For[N](). Registering the same name again returns the same queue.
func NewTimers[K, N comparable](b *KeyedBackend[K], name string, nsCodec codec.Codec[N]) (*Timers[K, N], error) {
	inf := stateInfo{name, kindTimers, true, false}
	nc, err := orFor(nsCodec)
	if err != nil {
		return nil, fmt.Errorf("state: %v: namespace: %w", inf, err)
	}
	// In the store, a state's id is its index in the backend, as for the
	// other states (registerLSM).
	idx, ok := b.byName[inf.name]
	if !ok {
		idx = len(b.states)
	}
	return register(b, inf, layout{}, func() *Timers[K, N] {
		t := &Timers[K, N]{b: b, inf: inf, nc: nc}
		if b.lsm != nil && !b.lsm.heapTimers {
			t.l = newLSMTimers(b.lsm, uint16(idx), b.kgs.Len())
			b.lsm.caches = append(b.lsm.caches, t.l)
			return t
		}
		t.q = make([]*timerQueue[K, N], b.kgs.Len())
		t.groupHeap = newGroupHeap(b.kgs.Len())
		for i := range t.q {
			t.q[i] = &timerQueue[K, N]{epoch: b.ep.cur, mod: b.ep.cur}
		}
		return t
	})
}

// Len returns the number of timers. For timers in the embedded LSM store
// it reads the rows its caches do not hold: it is for tests and tools,
// not for every record.
func (t *Timers[K, N]) Len() int {
	if t.l != nil {
		return t.lsmLen()
	}
	return t.n
}

// Register adds a timer for the current key at ts in namespace ns. A timer
// that already exists is not added again.
func (t *Timers[K, N]) Register(ns N, ts int64) {
	if t.l != nil {
		t.lsmRegister(ns, ts)
		return
	}
	kg, h := t.b.pos()
	tk := timerKey[K, N]{ts, t.b.key, ns}
	q0 := t.q[kg]
	if _, ok := lookup(&q0.index, q0.nodes, timerHash(h, ts), tk); ok {
		return
	}
	q := t.writable(kg)
	i := t.push(q, timerNode[K, N]{timerKey: tk, hash: h})
	t.n++
	if q.nodes[i].pos == 0 { // a new earliest timer for the key group
		t.fixHead(kg)
	}
}

// Delete removes the current key's timer at ts in namespace ns, if any.
func (t *Timers[K, N]) Delete(ns N, ts int64) {
	if t.l != nil {
		t.lsmDelete(ns, ts)
		return
	}
	kg, h := t.b.pos()
	tk := timerKey[K, N]{ts, t.b.key, ns}
	q0 := t.q[kg]
	i, at, ok := lookupAt(&q0.index, q0.nodes, timerHash(h, ts), tk)
	if !ok {
		return
	}
	q := t.writable(kg) // a copy keeps the index's positions
	pos := q.nodes[i].pos
	t.removeAt(q, pos, int64(at))
	t.n--
	if pos == 0 {
		t.fixHead(kg)
	}
}

// Contains reports whether the current key has a timer at ts in ns.
func (t *Timers[K, N]) Contains(ns N, ts int64) bool {
	if t.l != nil {
		return t.lsmContains(ns, ts)
	}
	kg, h := t.b.pos()
	q := t.q[kg]
	_, ok := lookup(&q.index, q.nodes, timerHash(h, ts), timerKey[K, N]{ts, t.b.key, ns})
	return ok
}

// Peek returns the earliest timer.
func (t *Timers[K, N]) Peek() (Timer[K, N], bool) {
	if t.l != nil {
		return t.lsmPeek()
	}
	if len(t.heads) == 0 {
		return Timer[K, N]{}, false
	}
	q := t.q[t.heads[0]]
	n := &q.nodes[q.heap[0].slot]
	return Timer[K, N]{n.ts, n.key, n.ns}, true
}

// Pop removes and returns the earliest timer if its timestamp is at most
// upTo, and makes its key the backend's current key, as a timer callback
// expects.
func (t *Timers[K, N]) Pop(upTo int64) (Timer[K, N], bool) {
	if t.l != nil {
		return t.lsmPop(upTo)
	}
	if len(t.heads) == 0 {
		return Timer[K, N]{}, false
	}
	kg := t.heads[0]
	q := t.q[kg]
	if q.heap[0].ts > upTo {
		return Timer[K, N]{}, false
	}
	n := q.nodes[q.heap[0].slot]
	q = t.writable(int(kg))
	t.removeAt(q, 0, -1)
	t.n--
	t.fixHead(int(kg))
	t.b.SetCurrentKeyWithHash(n.key, n.hash)
	return Timer[K, N]{n.ts, n.key, n.ns}, true
}

// PopUntil iterates over the timers with timestamps at most upTo in firing
// order, removing each before it is yielded (with its key as the current
// key). Timers registered during the iteration fire in the same iteration
// if they are due.
func (t *Timers[K, N]) PopUntil(upTo int64) iter.Seq[Timer[K, N]] {
	return func(yield func(Timer[K, N]) bool) {
		for {
			tm, ok := t.Pop(upTo)
			if !ok || !yield(tm) {
				return
			}
		}
	}
}

// writable returns key group kg's queue for modification, copying it first
// if a pending snapshot may share it.
func (t *Timers[K, N]) writable(kg int) *timerQueue[K, N] {
	q := t.q[kg]
	if !t.b.ep.shared(q.epoch) {
		q.mod = t.b.ep.cur
		return q
	}
	c := &timerQueue[K, N]{
		nodes: slices.Clone(q.nodes),
		heap:  slices.Clone(q.heap),
		index: q.index.clone(),
		free:  slices.Clone(q.free),
		epoch: t.b.ep.cur,
		mod:   t.b.ep.cur,
	}
	t.q[kg] = c
	return c
}

// less orders the timers of heap entries a and b (of queues qa and qb):
// by timestamp, then key hash, then the encodings of key and namespace.
// Equal timers do not occur in one queue.
func (t *Timers[K, N]) less(qa *timerQueue[K, N], a heapEntry, qb *timerQueue[K, N], b heapEntry) bool {
	if a.ts != b.ts {
		return a.ts < b.ts
	}
	if a.hash != b.hash {
		return a.hash < b.hash
	}
	return t.lessTie(&qa.nodes[a.slot], &qb.nodes[b.slot])
}

func (t *Timers[K, N]) lessTie(a, b *timerNode[K, N]) bool {
	if a.key != b.key {
		t.bufA = t.b.keyCodec.Append(t.bufA[:0], a.key)
		t.bufB = t.b.keyCodec.Append(t.bufB[:0], b.key)
		return bytes.Compare(t.bufA, t.bufB) < 0
	}
	t.bufA = t.nc.Append(t.bufA[:0], a.ns)
	t.bufB = t.nc.Append(t.bufB[:0], b.ns)
	return bytes.Compare(t.bufA, t.bufB) < 0
}

// push adds n to q and returns its slot.
func (t *Timers[K, N]) push(q *timerQueue[K, N], n timerNode[K, N]) int32 {
	var i int32
	if k := len(q.free); k > 0 {
		i = q.free[k-1]
		q.free = q.free[:k-1]
	} else {
		i = int32(len(q.nodes))
		q.nodes = append(q.nodes, timerNode[K, N]{})
	}
	n.pos = int32(len(q.heap))
	q.nodes[i] = n
	q.heap = append(q.heap, heapEntry{n.ts, n.hash, i})
	q.index.insert(timerHash(n.hash, n.ts), i)
	t.up(q, int(n.pos))
	return i
}

// removeAt removes the timer at heap position pos, whose index entry is
// at position at (-1: to be looked up).
func (t *Timers[K, N]) removeAt(q *timerQueue[K, N], pos int32, at int64) {
	i := q.heap[pos].slot
	last := int32(len(q.heap) - 1)
	if pos != last {
		t.swap(q, int(pos), int(last))
	}
	q.heap = q.heap[:last]
	if pos != last && !t.down(q, int(pos)) {
		t.up(q, int(pos))
	}
	if at >= 0 {
		q.index.removeEntry(uint32(at))
	} else {
		q.index.remove(timerHash(q.nodes[i].hash, q.nodes[i].ts), i)
	}
	q.nodes[i] = timerNode[K, N]{} // drop references held by the key and namespace
	q.free = append(q.free, i)
}

func (t *Timers[K, N]) swap(q *timerQueue[K, N], a, b int) {
	q.heap[a], q.heap[b] = q.heap[b], q.heap[a]
	q.nodes[q.heap[a].slot].pos = int32(a)
	q.nodes[q.heap[b].slot].pos = int32(b)
}

func (t *Timers[K, N]) up(q *timerQueue[K, N], j int) {
	for j > 0 {
		p := (j - 1) / 2
		if !t.less(q, q.heap[j], q, q.heap[p]) {
			return
		}
		t.swap(q, j, p)
		j = p
	}
}

// down sifts position j down and reports whether it moved.
func (t *Timers[K, N]) down(q *timerQueue[K, N], j int) bool {
	start, n := j, len(q.heap)
	for {
		l := 2*j + 1
		if l >= n {
			break
		}
		c := l
		if r := l + 1; r < n && t.less(q, q.heap[r], q, q.heap[l]) {
			c = r
		}
		if !t.less(q, q.heap[c], q, q.heap[j]) {
			break
		}
		t.swap(q, j, c)
		j = c
	}
	return j > start
}

// Ordering key groups by their earliest timer.

func (t *Timers[K, N]) headLess(a, b int32) bool {
	qa, qb := t.q[a], t.q[b]
	return t.less(qa, qa.heap[0], qb, qb.heap[0])
}

// fixHead restores the order of key groups after key group kg's earliest
// timer may have changed.
func (t *Timers[K, N]) fixHead(kg int) { t.fix(kg, len(t.q[kg].heap) == 0, t.headLess) }

// groupHeap orders the key groups of a timer queue by their earliest
// timer, as a binary heap of key group indices.
type groupHeap struct {
	heads []int32 // key group indices with timers
	pos   []int32 // position of each key group in heads, -1 if absent
}

func newGroupHeap(groups int) groupHeap {
	h := groupHeap{pos: make([]int32, groups)}
	for i := range h.pos {
		h.pos[i] = -1
	}
	return h
}

func (h *groupHeap) swap(a, b int) {
	h.heads[a], h.heads[b] = h.heads[b], h.heads[a]
	h.pos[h.heads[a]] = int32(a)
	h.pos[h.heads[b]] = int32(b)
}

// fix restores the order after key group kg's earliest timer may have
// changed; empty says it has none left. less orders two key groups.
func (h *groupHeap) fix(kg int, empty bool, less func(a, b int32) bool) {
	p := int(h.pos[kg])
	if empty {
		if p < 0 {
			return
		}
		last := len(h.heads) - 1
		if p != last {
			h.swap(p, last)
		}
		h.heads = h.heads[:last]
		h.pos[kg] = -1
		if p != last {
			h.sift(p, less)
		}
		return
	}
	if p < 0 {
		p = len(h.heads)
		h.heads = append(h.heads, int32(kg))
		h.pos[kg] = int32(p)
	}
	h.sift(p, less)
}

func (h *groupHeap) sift(j int, less func(a, b int32) bool) {
	for j > 0 {
		p := (j - 1) / 2
		if !less(h.heads[j], h.heads[p]) {
			break
		}
		h.swap(j, p)
		j = p
	}
	n := len(h.heads)
	for {
		c := 2*j + 1
		if c >= n {
			return
		}
		if r := c + 1; r < n && less(h.heads[r], h.heads[c]) {
			c = r
		}
		if !less(h.heads[c], h.heads[j]) {
			return
		}
		h.swap(j, c)
		j = c
	}
}

// Snapshot and restore.

func (t *Timers[K, N]) info() stateInfo { return t.inf }
func (t *Timers[K, N]) inStore() bool   { return t.l != nil }

// adopted loads a queue whose timers are the rows of an adopted native
// snapshot: into the key groups' caches if they stay in the store, onto
// the heap (and out of the store) otherwise.
func (t *Timers[K, N]) adopted() error {
	db := t.b.lsm.db
	if t.l != nil {
		return t.l.reload(t.b.lsm, t.b.kgs.Start)
	}
	l := newLSMTimers(nil, uint16(t.b.byName[t.inf.name]), t.b.kgs.Len())
	v := &lsmView{r: db, id: l.id, kgStart: t.b.kgs.Start, timers: true, kg: -1}
	for kgIdx := range t.q {
		if n := v.groupLen(kgIdx); n > 0 {
			if err := t.restoreGroup(kgIdx, n, slices.Clone(v.buf)); err != nil {
				return err
			}
		}
		if v.err != nil {
			return v.err
		}
	}
	for kg := t.b.kgs.Start; kg <= t.b.kgs.End; kg++ {
		lo := appendRowPrefix(nil, kg, l.id)
		if err := t.b.lsm.tryDeleteRows(lo, prefixEnd(lo)); err != nil {
			return err
		}
	}
	return nil
}

func (t *Timers[K, N]) capture(int64) stateView {
	if t.l != nil {
		snap := t.b.lsm.snapshot()
		return &lsmView{l: t.b.lsm, snap: snap, r: snap, id: t.l.id, kgStart: t.b.kgs.Start, timers: true, kg: -1}
	}
	kc, nc := t.b.keyCodec, t.nc
	return &timersView[K, N]{
		q: slices.Clone(t.q),
		appendEntry: func(dst []byte, n *timerNode[K, N]) []byte {
			dst = appendPrefixed(dst, kc, n.key)
			dst = appendPrefixed(dst, nc, n.ns)
			var v [binary.MaxVarintLen64]byte
			return appendBytes(dst, binary.AppendVarint(v[:0], n.ts))
		},
	}
}

func (t *Timers[K, N]) restoreGroup(kgIdx, n int, data []byte) error {
	if t.l != nil {
		return t.lsmRestoreGroup(kgIdx, n, data)
	}
	return eachEntry(n, data, func(key, ns, val []byte) error { return t.restore(kgIdx, key, ns, val) })
}

// decodeEntry decodes and checks a snapshot's timer entry of key group
// kgIdx, returning the timer and its key's hash.
func (t *Timers[K, N]) decodeEntry(kgIdx int, key, ns, val []byte) (timerKey[K, N], uint32, error) {
	k, err := decodeExactly(t.b.keyCodec, key, "key")
	if err != nil {
		return timerKey[K, N]{}, 0, err
	}
	n, err := decodeExactly(t.nc, ns, "namespace")
	if err != nil {
		return timerKey[K, N]{}, 0, err
	}
	ts, m := binary.Varint(val)
	if m <= 0 || m != len(val) {
		return timerKey[K, N]{}, 0, corrupt("timer timestamp")
	}
	h := t.b.hasher(k)
	if err := t.b.checkKeyGroup(kgIdx, h); err != nil {
		return timerKey[K, N]{}, 0, err
	}
	return timerKey[K, N]{ts, k, n}, h, nil
}

func (t *Timers[K, N]) restore(kgIdx int, key, ns, val []byte) error {
	tk, h, err := t.decodeEntry(kgIdx, key, ns, val)
	if err != nil {
		return err
	}
	q := t.q[kgIdx]
	if _, ok := lookup(&q.index, q.nodes, timerHash(h, tk.ts), tk); ok {
		return nil
	}
	t.push(t.writable(kgIdx), timerNode[K, N]{timerKey: tk, hash: h})
	t.n++
	t.fixHead(kgIdx)
	return nil
}

// removeGroup is never part of the timers' delta: a changed key group
// is replaced whole.
func (t *Timers[K, N]) removeGroup(int, int, []byte) error {
	return corrupt("%v: a delta removes single timers", t.inf)
}

// clearGroup removes every timer of key group kgIdx, for a delta that
// replaces it.
func (t *Timers[K, N]) clearGroup(kgIdx int) error {
	if t.l != nil {
		return fmt.Errorf("%v: timers in an embedded store take no delta", t.inf)
	}
	q := t.q[kgIdx]
	if len(q.heap) == 0 {
		return nil
	}
	t.n -= len(q.heap)
	t.q[kgIdx] = &timerQueue[K, N]{epoch: t.b.ep.cur, mod: t.b.ep.cur}
	t.fixHead(kgIdx)
	return nil
}

type timersView[K, N comparable] struct {
	q           []*timerQueue[K, N]
	appendEntry func(dst []byte, n *timerNode[K, N]) []byte
}

func (v *timersView[K, N]) groupLen(kgIdx int) int { return len(v.q[kgIdx].heap) }

func (v *timersView[K, N]) appendGroup(dst []byte, kgIdx int) []byte {
	q := v.q[kgIdx]
	for _, e := range q.heap {
		dst = v.appendEntry(dst, &q.nodes[e.slot])
	}
	return dst
}
