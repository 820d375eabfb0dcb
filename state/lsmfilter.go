package state

import (
	"hash/maphash"

	"github.com/cockroachdb/pebble/v2"
)

// rowFilter is a Bloom filter of the row keys that a state's rows in the
// store may have, in front of its write-back cache: a read that misses
// the cache and that the filter rules out is answered (absent) without
// reading the store. Keys that come once and go (a request waiting for
// its response, a session) then cost no read of the store at all, where
// a read of a row the store lacks would probe its memtables and a filter
// block in every level.
//
// The filter learns a key when the cache writes its row to the store; a
// deletion cannot be unlearned, so a key deleted stays possible until
// the filter is built again. It is built from the store's rows (a scan
// of the state's key groups) on the first miss, after a restore wrote
// rows behind the cache's back, and when more keys than it was sized for
// have been added; then at twice the rows it finds. The filters of a
// backend take at most an eighth of the caches' budget, and count
// against it: a filter that would need more than is left is turned off
// for good, and every miss reads the store, as without it (state far
// larger than memory).
type rowFilter struct {
	bits []uint64
	n    int // keys added
	cap  int // keys it was sized for
	// valid: built and up to date; off: too large, never built again.
	valid, off bool
	seed       maphash.Seed
	charged    int64
}

const (
	filterBitsPerKey = 10
	filterProbes     = 6 // about 1 % false positives at filterBitsPerKey
	filterMinKeys    = 4096
)

func (f *rowFilter) hash(k []byte) (h1, h2 uint64) {
	h := maphash.Bytes(f.seed, k)
	return h, h>>29 | h<<35 | 1
}

// mayHave reports whether the store may have row k.
func (f *rowFilter) mayHave(k []byte) bool {
	h1, h2 := f.hash(k)
	m := uint64(len(f.bits)) * 64
	for i := range uint64(filterProbes) {
		b := (h1 + i*h2) % m
		if f.bits[b/64]&(1<<(b%64)) == 0 {
			return false
		}
	}
	return true
}

// add records that the store may have row k; past the filter's size it
// invalidates it, to be built again.
func (f *rowFilter) add(k []byte) {
	if !f.valid || f.mayHave(k) {
		return
	}
	h1, h2 := f.hash(k)
	m := uint64(len(f.bits)) * 64
	for i := range uint64(filterProbes) {
		b := (h1 + i*h2) % m
		f.bits[b/64] |= 1 << (b % 64)
	}
	if f.n++; f.n > f.cap {
		f.valid = false
	}
}

// build sizes the filter for twice the state's rows in the store and
// adds their keys, or turns it off if that would take more than limit
// bytes. It returns the change in the bytes the filter holds.
func (f *rowFilter) build(db *pebble.DB, kgs KeyGroupRange, id uint16, limit int64) (int64, error) {
	old := f.charged
	rows := 0
	err := eachRowKey(db, kgs, id, func([]byte) bool {
		rows++
		return int64(2*rows)*filterBitsPerKey/8 <= limit
	})
	if err != nil {
		return 0, err
	}
	keys := max(filterMinKeys, 2*rows)
	size := int64((keys*filterBitsPerKey + 63) / 64 * 8)
	if size > limit {
		*f = rowFilter{off: true}
		return -old, nil
	}
	if f.seed == (maphash.Seed{}) {
		f.seed = maphash.MakeSeed()
	}
	f.bits = make([]uint64, size/8)
	f.n, f.cap, f.valid, f.charged = 0, keys, true, size
	err = eachRowKey(db, kgs, id, func(k []byte) bool {
		f.add(k)
		return true
	})
	if err != nil {
		*f = rowFilter{seed: f.seed}
		return -old, err
	}
	return size - old, nil
}

// eachRowKey calls fn with the key of every row of state id in the key
// groups kgs, until fn returns false.
func eachRowKey(db *pebble.DB, kgs KeyGroupRange, id uint16, fn func(k []byte) bool) error {
	for kg := kgs.Start; kg <= kgs.End; kg++ {
		lo := appendRowPrefix(nil, kg, id)
		it, err := db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
		if err != nil {
			return err
		}
		more := true
		for ok := it.First(); ok && more; ok = it.Next() {
			more = fn(it.Key())
		}
		if err := it.Close(); err != nil {
			return err
		}
		if !more {
			return nil
		}
	}
	return nil
}
