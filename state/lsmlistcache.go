package state

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/weirstream/weir/codec"
)

// The append buffer of a Pebble list state. A list's row is written by
// merge operands (see listMerger), so an append needs no read; the buffer
// keeps the appends to each list (key and namespace) in memory, encoded,
// and writes them as one merge operand per list when the store must hold
// them: before a snapshot or a scan, with the other write-back caches,
// and when the caches exceed their budget. Adding to a window's contents
// then costs an encoding and a map lookup, not a write to the store. A
// read of a list with buffered appends reads the row and appends them; a
// replacement or a clear drops them.

// listPending is what a list's buffered appends hold: their number and
// their encodings, oldest first.
type listPending struct {
	n   uint64
	enc []byte
}

// listPendingOverhead is what a buffered list costs beside its
// encodings: its map entry, its listPending and its allocation.
const listPendingOverhead = 64

// listFreeMax bounds the buffers kept for reuse, and listFreeBytes the
// size of one kept.
const (
	listFreeMax   = 1024
	listFreeBytes = 4 << 10
)

// listCache is the append buffer of one list state.
type listCache[K, N comparable] struct {
	l  *lsm
	st *lsmState[K]
	nc codec.Codec[N] // nil: the void namespace

	rows    map[cacheKey[K, N]]*listPending
	charged int64
	free    []*listPending
	row     []byte // scratch
	op      []byte // scratch: a merge operand
}

func newListCache[K, N comparable](st *lsmState[K], nc codec.Codec[N]) *listCache[K, N] {
	c := &listCache[K, N]{l: st.b.lsm, st: st, nc: nc, rows: map[cacheKey[K, N]]*listPending{}}
	st.b.lsm.caches = append(st.b.lsm.caches, c)
	return c
}

func (c *listCache[K, N]) current(ns N) cacheKey[K, N] { return currentCacheKey(c.st, ns) }

func (c *listCache[K, N]) charge(n int64) {
	c.charged += n
	c.l.cacheUsed += n
}

// pending returns the buffer of the current key's list in namespace ns,
// making it if there is none, making room first if the caches are full.
func (c *listCache[K, N]) pending(ns N) *listPending {
	ck := c.current(ns)
	if p, ok := c.rows[ck]; ok {
		return p
	}
	if c.l.cacheUsed >= c.l.cacheBudget {
		c.l.evict()
	}
	var p *listPending
	if n := len(c.free); n > 0 {
		p = c.free[n-1]
		c.free = c.free[:n-1]
	} else {
		p = &listPending{}
	}
	c.rows[ck] = p
	c.charge(listPendingOverhead + int64(unsafe.Sizeof(ck)))
	return p
}

// grew charges p's growth from size bytes of encodings, making room if
// the caches are over their budget (which may write p).
func (c *listCache[K, N]) grew(p *listPending, size int) {
	c.charge(int64(len(p.enc) - size))
	if c.l.cacheUsed > c.l.cacheBudget {
		c.l.evict()
	}
}

// lookup returns the buffered appends of the current key's list in
// namespace ns, nil if there are none.
func (c *listCache[K, N]) lookup(ns N) *listPending {
	return c.rows[c.current(ns)]
}

// drop forgets the buffered appends of row ck.
func (c *listCache[K, N]) drop(ck cacheKey[K, N], p *listPending) {
	delete(c.rows, ck)
	c.charge(-int64(len(p.enc)) - listPendingOverhead - int64(unsafe.Sizeof(ck)))
	p.n, p.enc = 0, p.enc[:0]
	if len(c.free) < listFreeMax && cap(p.enc) <= listFreeBytes {
		c.free = append(c.free, p)
	}
}

// dropCurrent forgets the buffered appends of the current key's list in
// namespace ns.
func (c *listCache[K, N]) dropCurrent(ns N) {
	ck := c.current(ns)
	if p, ok := c.rows[ck]; ok {
		c.drop(ck, p)
	}
}

// dropKey forgets the buffered appends of the current key in every
// namespace (its rows in the store are being deleted by range).
func (c *listCache[K, N]) dropKey() {
	var ns N
	ck := c.current(ns)
	if unsafe.Sizeof(ns) == 0 {
		c.dropCurrent(ns)
		return
	}
	for k, p := range c.rows {
		if k.key == ck.key {
			c.drop(k, p)
		}
	}
}

// operand returns p's appends as a merge operand (in c.op).
func (c *listCache[K, N]) operand(p *listPending) []byte {
	c.op = append(binary.AppendUvarint(c.op[:0], p.n), p.enc...)
	return c.op
}

// write adds row ck's buffered appends to batch as a merge operand.
func (c *listCache[K, N]) write(batch *rowWriter, ck cacheKey[K, N], p *listPending) error {
	c.row = appendCachedRow(c.row[:0], c.st, c.nc, ck)
	return batch.Merge(c.row, c.operand(p))
}

// writeCurrent writes the buffered appends of the current key's list in
// namespace ns, whose row key is row, to the store, and forgets them.
func (c *listCache[K, N]) writeCurrent(ns N, row []byte) {
	ck := c.current(ns)
	p, ok := c.rows[ck]
	if !ok {
		return
	}
	c.l.mergeRow(row, c.operand(p))
	c.drop(ck, p)
}

// flush writes every buffered list to batch and forgets it: once written
// the cache has nothing left of it.
func (c *listCache[K, N]) flush(batch *rowWriter, _ bool) error {
	for ck, p := range c.rows {
		if err := c.write(batch, ck, p); err != nil {
			return err
		}
		c.drop(ck, p)
	}
	return nil
}

func (c *listCache[K, N]) evict(batch *rowWriter, goal int64) error {
	for ck, p := range c.rows {
		if c.charged <= goal {
			break
		}
		if err := c.write(batch, ck, p); err != nil {
			return err
		}
		c.drop(ck, p)
	}
	return nil
}

func (c *listCache[K, N]) used() int64 { return c.charged }
func (c *listCache[K, N]) len() int    { return len(c.rows) }

// judge leaves every row to the sweep: buffered appends are not in the
// store yet, and are judged once written.
func (c *listCache[K, N]) judge([]byte, rowPrune, int64) (bool, error) { return false, nil }

func (c *listCache[K, N]) restored() {}

// appendElems decodes n element encodings from src onto dst.
func appendElems[T any](dst []T, c codec.Codec[T], n uint64, src []byte) ([]T, error) {
	off := 0
	for i := range n {
		v, m, err := c.Decode(src[off:])
		if err != nil {
			return nil, fmt.Errorf("%w: buffered list element %d: %w", ErrCorrupt, i, err)
		}
		dst = append(dst, v)
		off += m
	}
	if off != len(src) {
		return nil, fmt.Errorf("%w: %d buffered list elements in %d bytes", ErrCorrupt, n, len(src))
	}
	return dst, nil
}
