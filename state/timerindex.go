package state

// timerIndex maps each timer of a key group's queue to its node's slot. It
// is an open-addressing hash table with linear probing and backward-shift
// deletion: registering and deleting timers at a high rate (a timeout per
// request, cancelled when the request completes) leaves no tombstones,
// where a Go map's deleted slots lengthen the probes of later lookups
// until it grows. A timer's hash mixes two integers the queue already
// has, its key's hash and its timestamp, so a lookup never hashes the key
// itself; timers of one key and timestamp in different namespaces share a
// hash and are told apart by comparing keys.
//
// An entry holds the timer's 32-bit hash (its home position is the hash's
// low bits) and its slot plus one (0: the entry is empty); a resize needs
// no node. The table is at most 3/4 full and shrinks when it falls under
// 1/8, so its memory follows the number of timers.
type timerIndex struct {
	e []indexEntry // len(e) is 0 or a power of two
	n int
}

type indexEntry struct {
	hash uint32
	slot int32 // the node's slot + 1; 0: empty
}

const minIndexLen = 16

// timerHash is the hash of the timer of key hash h at ts.
func timerHash(h uint32, ts int64) uint32 {
	x := uint64(ts)*0x9e3779b97f4a7c15 ^ uint64(h)
	x ^= x >> 31
	x *= 0xd6e8feb86659fd93
	x ^= x >> 32
	return uint32(x)
}

// lookup returns the slot of tk, whose hash is hv, in nodes.
func lookup[K, N comparable](ix *timerIndex, nodes []timerNode[K, N], hv uint32, tk timerKey[K, N]) (int32, bool) {
	slot, _, ok := lookupAt(ix, nodes, hv, tk)
	return slot, ok
}

// lookupAt is lookup that also returns the entry's position in ix, for
// removeEntry.
func lookupAt[K, N comparable](ix *timerIndex, nodes []timerNode[K, N], hv uint32, tk timerKey[K, N]) (int32, uint32, bool) {
	if ix.n == 0 {
		return 0, 0, false
	}
	mask := uint32(len(ix.e) - 1)
	for p := hv & mask; ; p = (p + 1) & mask {
		en := ix.e[p]
		if en.slot == 0 {
			return 0, 0, false
		}
		if en.hash == hv && nodes[en.slot-1].timerKey == tk {
			return en.slot - 1, p, true
		}
	}
}

// insert adds slot under hv; the timer must not be in the index.
func (ix *timerIndex) insert(hv uint32, slot int32) {
	if (ix.n+1)*4 > len(ix.e)*3 {
		ix.resize(max(minIndexLen, 2*len(ix.e)))
	}
	ix.place(indexEntry{hash: hv, slot: slot + 1})
	ix.n++
}

func (ix *timerIndex) place(en indexEntry) {
	mask := uint32(len(ix.e) - 1)
	for p := en.hash & mask; ; p = (p + 1) & mask {
		if ix.e[p].slot == 0 {
			ix.e[p] = en
			return
		}
	}
}

// remove deletes slot, whose timer's hash is hv.
func (ix *timerIndex) remove(hv uint32, slot int32) {
	mask := uint32(len(ix.e) - 1)
	p := hv & mask
	for ix.e[p].slot != slot+1 {
		if ix.e[p].slot == 0 {
			panic("state: timer index: removing a slot it does not hold")
		}
		p = (p + 1) & mask
	}
	ix.removeEntry(p)
}

// removeEntry deletes the entry at position p.
func (ix *timerIndex) removeEntry(p uint32) {
	mask := uint32(len(ix.e) - 1)
	ix.n--
	// Backward shift: move later entries of the probe run into the hole
	// while that keeps each at or after its home position.
	for {
		ix.e[p] = indexEntry{}
		j := p
		for {
			j = (j + 1) & mask
			en := ix.e[j]
			if en.slot == 0 {
				if ix.n*8 < len(ix.e) && len(ix.e) > minIndexLen {
					ix.resize(len(ix.e) / 2)
				}
				return
			}
			if (j-en.hash)&mask >= (j-p)&mask {
				ix.e[p] = en
				p = j
				break
			}
		}
	}
}

func (ix *timerIndex) resize(n int) {
	old := ix.e
	ix.e = make([]indexEntry, n)
	for _, en := range old {
		if en.slot != 0 {
			ix.place(en)
		}
	}
}

// clone returns a copy of ix that shares nothing with it.
func (ix *timerIndex) clone() timerIndex {
	return timerIndex{e: append([]indexEntry(nil), ix.e...), n: ix.n}
}
