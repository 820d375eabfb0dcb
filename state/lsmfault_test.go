package state

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// failingStore returns a 4 MiB Pebble backend whose files go through an
// error-injecting file system, and the switch that makes its operations
// of the given kinds fail.
func failingStore(t *testing.T, kinds ...errorfs.OpKind) (*KeyedBackend[int64], *errorfs.Toggle) {
	t.Helper()
	sw := &errorfs.Toggle{Injector: errorfs.InjectorFunc(func(op errorfs.Op) error {
		for _, k := range kinds {
			if op.Kind == k {
				return errorfs.ErrInjected
			}
		}
		return nil
	})}
	fs := errorfs.Wrap(vfs.Default, sw)
	b := closeFailedAtEnd(t, must(NewKeyedBackend[int64](nil, 128, KeyGroupRange{0, 127}, WithPebble(PebbleOptions{Dir: t.TempDir(), Memory: 4 << 20, FS: fs}))))
	return b, sw
}

// closeFailedAtEnd closes b when the test ends: it must close, or fail
// only with the disk's error (a write that waits in the store for ever
// leaves it open).
func closeFailedAtEnd(t *testing.T, b *KeyedBackend[int64]) *KeyedBackend[int64] {
	t.Cleanup(func() {
		if err := b.Close(); err != nil && !errors.Is(err, errorfs.ErrInjected) {
			t.Errorf("closing the backend: %v", err)
		}
	})
	return b
}

// storeFailure runs f and returns the store failure it panicked with, or
// nil if it returned.
func storeFailure(f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			var ok bool
			if err, ok = r.(lsmFailure); !ok {
				panic(r)
			}
		}
	}()
	f()
	return nil
}

// TestStoreReadFailure makes the disk fail reads once the state is larger
// than the store's memory: a read that misses the caches fails with the
// disk's error, never with a wrong value.
func TestStoreReadFailure(t *testing.T) {
	b, sw := failingStore(t, errorfs.OpFileReadAt, errorfs.OpFileRead)
	v := must(Value(b, ValueDescriptor[string]{Name: "v"}))
	const keys = 20_000
	for k := range int64(keys) {
		b.SetCurrentKey(k)
		v.Update(strings.Repeat("x", 200) + fmt.Sprint(k))
	}
	b.lsm.flushCaches(true)
	if err := b.lsm.flush(); err != nil {
		t.Fatal(err)
	}
	sw.On()
	var failed error
	for k := int64(0); k < keys && failed == nil; k++ {
		failed = storeFailure(func() {
			b.SetCurrentKey(k)
			got, ok := v.Value()
			if want := strings.Repeat("x", 200) + fmt.Sprint(k); !ok || got != want {
				t.Fatalf("key %d read %q (%v) while the disk failed, want %q", k, got, ok, want)
			}
		})
	}
	if !errors.Is(failed, errorfs.ErrInjected) {
		t.Fatalf("reads of %d keys from a failing disk: %v, want the disk's error", keys, failed)
	}
	t.Log(failed)
}

// TestStoreFlushFailure makes the disk refuse new files: Pebble retries a
// failed flush without end, so writes would wait for room that never
// comes. Instead the first write (or snapshot) after the failure fails,
// naming it.
func TestStoreFlushFailure(t *testing.T) {
	t.Run("writes", func(t *testing.T) {
		b, sw := failingStore(t, errorfs.OpCreate)
		v := must(Value(b, ValueDescriptor[string]{Name: "v"}))
		sw.On()
		var failed error
		for k := int64(0); failed == nil; k++ {
			if k > 1_000_000 {
				t.Fatal("a million writes of 200 bytes into a 4 MiB store whose disk takes no file, and none failed")
			}
			failed = storeFailure(func() {
				b.SetCurrentKey(k)
				v.Update(strings.Repeat("x", 200))
			})
		}
		if !errors.Is(failed, errorfs.ErrInjected) || !strings.Contains(failed.Error(), "background work failed") {
			t.Fatalf("writes to a store whose flushes fail: %v", failed)
		}
		t.Log(failed)
	})
	t.Run("native snapshot", func(t *testing.T) {
		b, sw := failingStore(t, errorfs.OpCreate)
		v := must(Value(b, ValueDescriptor[string]{Name: "v"}))
		for k := range int64(100) {
			b.SetCurrentKey(k)
			v.Update("x")
		}
		sw.On()
		ns, err := b.NativeSnapshot(1)
		if err == nil {
			ns.Release()
			t.Fatal("a native snapshot of a store whose flush fails succeeded")
		}
		if !errors.Is(err, errorfs.ErrInjected) {
			t.Fatalf("native snapshot: %v, want the disk's error", err)
		}
		t.Log(err)
	})
}

// TestStoreFlushFailureWhileStalled fails the store's first flush only
// once a write waits for room in its memtables (which that flush would
// make): each kind of write that goes to the store row by row or through
// a write-back cache (a map's entries, a list replaced or cleared, a map
// cleared or counted, timers beyond a key group's cached rows) must then
// fail with the disk's error, rather than wait for ever, and the backend
// must close.
func TestStoreFlushFailureWhileStalled(t *testing.T) {
	writes := map[string]func(b *KeyedBackend[int64]) func(k int64){
		"map put": func(b *KeyedBackend[int64]) func(int64) {
			m := must(Map(b, MapDescriptor[int64, string]{Name: "m"}))
			return func(k int64) { m.Put(k, strings.Repeat("x", 200)) }
		},
		"map put and remove": func(b *KeyedBackend[int64]) func(int64) {
			m := must(Map(b, MapDescriptor[int64, string]{Name: "m"}))
			return func(k int64) {
				m.Put(k, strings.Repeat("x", 200))
				m.Remove(k - 1)
			}
		},
		"list update and clear": func(b *KeyedBackend[int64]) func(int64) {
			l := must(List(b, ListDescriptor[string]{Name: "l"}))
			return func(k int64) {
				l.Update([]string{strings.Repeat("x", 200)})
				if k%3 == 0 {
					l.Clear()
				}
			}
		},
		"map put and len": func(b *KeyedBackend[int64]) func(int64) {
			// Len writes the map's dirty cached entries before it reads
			// the store.
			m := must(MapNS[int64, int64, int64, string](b, nil, MapDescriptor[int64, string]{Name: "m"}))
			return func(k int64) {
				m.SetNamespace(k % 7)
				m.Put(k, strings.Repeat("x", 200))
				if k%5 == 0 {
					m.Len()
				}
			}
		},
		"timers beyond the cached rows": func(b *KeyedBackend[int64]) func(int64) {
			// Each key group caches 3 timer rows: the others wait as
			// pending writes for a flush or an eviction.
			tm := must(NewTimers[int64, string](b, "t", nil))
			tm.l.rows = 3
			pending := 0 // the most timer writes seen pending
			t.Cleanup(func() {
				if pending == 0 {
					t.Error("no timer write was ever pending: the case proves nothing")
				}
			})
			return func(k int64) {
				tm.Register(strings.Repeat("n", 100), k)
				tm.Register(strings.Repeat("m", 100), k+1)
				tm.Delete(strings.Repeat("m", 100), k)
				pending = max(pending, len(tm.l.pending.rows))
			}
		},
		"map put and clear": func(b *KeyedBackend[int64]) func(int64) {
			m := must(Map(b, MapDescriptor[int64, string]{Name: "m"}))
			return func(k int64) {
				m.Put(k, strings.Repeat("x", 200))
				if k%3 == 0 {
					m.Clear()
				}
			}
		},
	}
	for name, newWrite := range writes {
		t.Run(name, func(t *testing.T) {
			stalled := make(chan struct{})
			var once sync.Once
			var armed atomic.Bool
			fs := errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
				if !armed.Load() || op.Kind != errorfs.OpCreate || !strings.HasSuffix(op.Path, ".sst") {
					return nil
				}
				<-stalled // the flush fails only once a write waits for it
				return errorfs.ErrInjected
			}))
			b := closeFailedAtEnd(t, must(NewKeyedBackend[int64](nil, 128, KeyGroupRange{0, 127}, WithPebble(PebbleOptions{
				Dir: t.TempDir(), Memory: 4 << 20, FS: fs, onStall: func() { once.Do(func() { close(stalled) }) }}))))
			write := newWrite(b)
			armed.Store(true)
			var failed error
			for k := int64(0); failed == nil; k++ {
				if k > 1_000_000 {
					t.Fatal("a million writes of 200 bytes into a 4 MiB store whose flushes cannot finish, and none failed")
				}
				failed = storeFailure(func() {
					b.SetCurrentKey(k)
					write(k)
				})
			}
			select {
			case <-stalled:
			default:
				t.Fatalf("a write failed before any waited for room: %v", failed)
			}
			if !errors.Is(failed, errorfs.ErrInjected) {
				t.Fatalf("writes to a store whose flush failed while they waited: %v, want the disk's error", failed)
			}
			t.Log(failed)
		})
	}
}
