package state

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestPebbleMapCacheMatchesHeap runs seeded sequences of map operations
// on a heap backend and a Pebble backend side by side: entries put,
// removed and read in many keys and namespaces, maps iterated, counted,
// cleared (one namespace or all), through checkpoints (in weir's format
// and native), some restored at once and some after more operations that
// a crash then loses. The Pebble backend's write-back caches are cut to a
// few dozen kilobytes, so that maps leave the cache (their dirty entries
// written) and come back incomplete. Every read must agree at every step,
// and the run must have evicted maps, read complete maps from the cache
// alone and lost dirty entries in crashes (or the test proves nothing).
func TestPebbleMapCacheMatchesHeap(t *testing.T) {
	base := testSeed(t)
	for i := range 3 {
		seed := base + uint64(i)
		t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) { testMapCache(t, seed) })
	}
}

type mapHandles struct {
	b  *KeyedBackend[string]
	mp MapStateNS[window, string, string]
}

func mapRegister(t testing.TB, b *KeyedBackend[string]) *mapHandles {
	t.Helper()
	return &mapHandles{b: b, mp: must(MapNS[string, window, string, string](b, nil, MapDescriptor[string, string]{Name: "m"}))}
}

// mapCacheOf returns the cache of h's map (h on Pebble).
func mapCacheOf(h *mapHandles) *mapCache[string, window, string, string] {
	return h.mp.(*lsmMap[string, window, string, string]).c
}

func testMapCache(t *testing.T, seed uint64) {
	steps := 20_000
	if raceEnabled {
		steps = 6_000
	}
	r := rand.New(rand.NewPCG(seed, 13))
	small := func() *KeyedBackend[string] {
		b := newBackend(t, WithPebble(PebbleOptions{Dir: t.TempDir(), Memory: minPebbleMemory}))
		// An eighth of it is room for the map's filter of rows.
		b.lsm.cacheBudget = 64 << 10
		return b
	}
	hb, lb := newBackend(t), small()
	hh, lh := mapRegister(t, hb), mapRegister(t, lb)
	var (
		evictions, crashDirty, checkpoints, completeReads, filtered int
		hblob, lblob, ldir                                          string
		native                                                      bool
	)
	crashIn := -1
	for step := range steps {
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("seed %d, step %d: %s", seed, step, fmt.Sprintf(format, args...))
		}
		k := "key-" + strconv.Itoa(r.IntN(60))
		w := window{int64(r.IntN(3)) * 10, 10}
		uk := "uk-" + strconv.Itoa(r.IntN(40))
		hb.SetCurrentKey(k)
		lb.SetCurrentKey(k)
		hh.mp.SetNamespace(w)
		lh.mp.SetNamespace(w)
		switch op := r.IntN(100); {
		case op < 30:
			c := mapCacheOf(lh)
			m := c.maps[cacheKey[string, window]{w, k}]
			_, cached := m.rowsOrNil()[uk]
			if m != nil && m.complete && !cached {
				completeReads++
			}
			reads := c.reads
			a, aok := hh.mp.Get(uk)
			b, bok := lh.mp.Get(uk)
			if a != b || aok != bok {
				fail("Get(%s, %v, %s): heap %q %v, pebble %q %v", k, w, uk, a, aok, b, bok)
			}
			if !cached && (m == nil || !m.complete) && c.reads == reads {
				filtered++
			}
		case op < 60:
			v := strings.Repeat("v", r.IntN(100)) + strconv.Itoa(step)
			hh.mp.Put(uk, v)
			lh.mp.Put(uk, v)
		case op < 72:
			hh.mp.Remove(uk)
			lh.mp.Remove(uk)
		case op < 76:
			if a, b := hh.mp.Contains(uk), lh.mp.Contains(uk); a != b {
				fail("Contains(%s, %v, %s): heap %v, pebble %v", k, w, uk, a, b)
			}
		case op < 82:
			a, b := maps.Collect(hh.mp.All()), map[string]string{}
			for x, y := range lh.mp.All() {
				b[x] = y
				// Entries put during the iteration are not yielded.
				lh.mp.Put("during-"+x, y)
				hh.mp.Put("during-"+x, y)
			}
			if !maps.Equal(a, b) {
				fail("All(%s, %v): heap %d entries, pebble %d", k, w, len(a), len(b))
			}
		case op < 86:
			if a, b := hh.mp.Len(), lh.mp.Len(); a != b {
				fail("Len(%s, %v): heap %d, pebble %d", k, w, a, b)
			}
			if a, b := hh.mp.IsEmpty(), lh.mp.IsEmpty(); a != b {
				fail("IsEmpty(%s, %v): heap %v, pebble %v", k, w, a, b)
			}
		case op < 90:
			hh.mp.Clear()
			lh.mp.Clear()
		case op < 91:
			hh.mp.ClearAllNamespaces()
			lh.mp.ClearAllNamespaces()
		case op < 93:
			cmp := func(x, y window) int { return int(x.Start - y.Start) }
			a, b := hh.mp.Namespaces(), lh.mp.Namespaces()
			slices.SortFunc(a, cmp)
			slices.SortFunc(b, cmp)
			if !slices.Equal(a, b) {
				fail("Namespaces(%s): heap %v, pebble %v", k, a, b)
			}
		default:
			if crashIn >= 0 || r.IntN(4) > 0 {
				break
			}
			checkpoints++
			native = r.IntN(2) == 0
			hblob, lblob, ldir = checkpointPair(t, hb, lb, int64(step), native)
			crashIn = r.IntN(3) * r.IntN(300)
		}
		if crashIn == 0 {
			crashIn = -1
			for _, m := range mapCacheOf(lh).maps {
				for _, e := range m.rows {
					if e.dirty() {
						crashDirty++
					}
				}
			}
			evictions += lb.lsm.evictions
			hb, lb = crashRestore(t, fmt.Sprintf("seed %d, step %d", seed, step), lb, small, hblob, lblob, ldir, native)
			hh, lh = mapRegister(t, hb), mapRegister(t, lb)
		} else if crashIn > 0 {
			crashIn--
		}
	}
	evictions += lb.lsm.evictions
	if evictions == 0 || crashDirty == 0 || checkpoints == 0 || completeReads == 0 || filtered == 0 {
		t.Fatalf("seed %d: %d checkpoints, %d evictions, %d dirty entries at crashes, %d reads of complete maps, %d reads ruled out by the filter: the test proves nothing",
			seed, checkpoints, evictions, crashDirty, completeReads, filtered)
	}
	t.Logf("%d checkpoints, %d evictions, %d dirty entries lost in crashes, %d reads of complete maps, %d reads ruled out by the filter",
		checkpoints, evictions, crashDirty, completeReads, filtered)
}

// rowsOrNil returns m's entries, nil if m is.
func (m *cachedMap[UK, UV]) rowsOrNil() map[UK]cacheEntry[UV] {
	if m == nil {
		return nil
	}
	return m.rows
}
