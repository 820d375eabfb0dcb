package state

import (
	"bytes"
	"io"
	"strconv"
	"testing"
	"time"
)

func benchKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "user-" + strconv.Itoa(i)
	}
	return keys
}

// benchBackend returns a backend with n keys in a ValueState[int64] and,
// if mapToo, a MapState with two entries per key.
func benchBackend(b *testing.B, n int, mapToo bool) (*KeyedBackend[string], ValueState[int64], []string) {
	b.Helper()
	be, err := NewKeyedBackend[string](nil, 128, KeyGroupRange{0, 127})
	if err != nil {
		b.Fatal(err)
	}
	v := must(Value(be, ValueDescriptor[int64]{Name: "v"}))
	var m MapState[string, int64]
	if mapToo {
		m = must(Map(be, MapDescriptor[string, int64]{Name: "m"}))
	}
	keys := benchKeys(n)
	for i, k := range keys {
		be.SetCurrentKey(k)
		v.Update(int64(i))
		if mapToo {
			m.Put("a", 1)
			m.Put("b", 2)
		}
	}
	return be, v, keys
}

// BenchmarkSnapshotSync measures the synchronous part of a checkpoint:
// Snapshot (and the Release that ends it) of a backend holding a million
// keys.
func BenchmarkSnapshotSync(b *testing.B) {
	for _, tc := range []struct {
		name   string
		mapToo bool
	}{{"1M-keys-value", false}, {"1M-keys-value+map", true}} {
		b.Run(tc.name, func(b *testing.B) {
			be, _, _ := benchBackend(b, 1_000_000, tc.mapToo)
			b.ReportAllocs()
			for b.Loop() {
				s := be.Snapshot(1)
				s.Release()
			}
		})
	}
}

// BenchmarkSnapshotWriteTo measures the asynchronous part: serializing a
// million-key snapshot.
func BenchmarkSnapshotWriteTo(b *testing.B) {
	be, _, _ := benchBackend(b, 1_000_000, false)
	s := be.Snapshot(1)
	defer s.Release()
	n, _ := s.WriteTo(io.Discard)
	b.SetBytes(n)
	b.ReportMetric(float64(n), "snapshot-bytes")
	for b.Loop() {
		if _, err := s.WriteTo(io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRestore measures restoring a million-key snapshot into a fresh
// backend, decoding entries as the state is registered.
func BenchmarkRestore(b *testing.B) {
	be, _, _ := benchBackend(b, 1_000_000, false)
	s := be.Snapshot(1)
	var buf bytes.Buffer
	if _, err := s.WriteTo(&buf); err != nil {
		b.Fatal(err)
	}
	s.Release()
	b.SetBytes(int64(buf.Len()))
	for b.Loop() {
		nb, _ := NewKeyedBackend[string](nil, 128, KeyGroupRange{0, 127})
		if err := nb.Restore(bytes.NewReader(buf.Bytes())); err != nil {
			b.Fatal(err)
		}
		must(Value(nb, ValueDescriptor[int64]{Name: "v"}))
	}
}

// BenchmarkValueState measures the per-record hot path, SetCurrentKey then
// Value or Update, over 100k keys: with no snapshot pending; with one
// snapshot pending for the whole run (so the first write to each shard
// copies it, amortized over the run); and with a snapshot taken and
// released every 100k operations, as periodic checkpoints do.
func BenchmarkValueState(b *testing.B) {
	const n = 100_000
	for _, mode := range []string{"no-snapshot", "snapshot-pending", "snapshot-every-100k"} {
		for _, op := range []string{"Value", "Update"} {
			b.Run(op+"/"+mode, func(b *testing.B) {
				be, v, keys := benchBackend(b, n, false)
				var pending *KeyedSnapshot
				if mode == "snapshot-pending" {
					pending = be.Snapshot(1)
				}
				b.ReportAllocs()
				i := 0
				var sum int64
				for b.Loop() {
					if mode == "snapshot-every-100k" && i%100_000 == 0 {
						if pending != nil {
							pending.Release()
						}
						pending = be.Snapshot(int64(i))
					}
					be.SetCurrentKey(keys[i%n])
					if op == "Value" {
						x, _ := v.Value()
						sum += x
					} else {
						v.Update(int64(i))
					}
					i++
				}
				if pending != nil {
					pending.Release()
				}
				_ = sum
			})
		}
	}
}

// BenchmarkSetCurrentKey isolates hashing the key into its key group.
func BenchmarkSetCurrentKey(b *testing.B) {
	be, _, keys := benchBackend(b, 1000, false)
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		be.SetCurrentKey(keys[i%len(keys)])
		i++
	}
}

// BenchmarkValueStateInt64Key is the hot path with int64 keys.
func BenchmarkValueStateInt64Key(b *testing.B) {
	be, err := NewKeyedBackend[int64](nil, 128, KeyGroupRange{0, 127})
	if err != nil {
		b.Fatal(err)
	}
	v := must(Value(be, ValueDescriptor[int64]{Name: "v"}))
	const n = 100_000
	for i := range int64(n) {
		be.SetCurrentKey(i)
		v.Update(i)
	}
	b.ReportAllocs()
	i := int64(0)
	for b.Loop() {
		be.SetCurrentKey(i % n)
		x, _ := v.Value()
		v.Update(x + 1)
		i++
	}
}

// BenchmarkMapStatePut measures MapState.Put on existing keys.
func BenchmarkMapStatePut(b *testing.B) {
	be, _, keys := benchBackend(b, 100_000, true)
	m := must(Map(be, MapDescriptor[string, int64]{Name: "m"}))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		be.SetCurrentKey(keys[i%len(keys)])
		m.Put("a", int64(i))
		i++
	}
}

// BenchmarkBaselineGoMap is the floor for BenchmarkValueState: a plain Go
// map lookup and store per record, with the same keys.
func BenchmarkBaselineGoMap(b *testing.B) {
	for _, n := range []int{1000, 100_000} {
		b.Run(strconv.Itoa(n)+"-keys", func(b *testing.B) {
			keys := benchKeys(n)
			m := make(map[string]int64, n)
			for i, k := range keys {
				m[k] = int64(i)
			}
			i := 0
			for b.Loop() {
				k := keys[i%n]
				m[k] = m[k] + 1
				i++
			}
		})
	}
}

// BenchmarkValueStateSmall is BenchmarkValueState's Value then Update with
// 1000 keys, which fit in the CPU caches, to show the backend's own cost.
func BenchmarkValueStateSmall(b *testing.B) {
	be, v, keys := benchBackend(b, 1000, false)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		be.SetCurrentKey(keys[i%len(keys)])
		x, _ := v.Value()
		v.Update(x + 1)
		i++
	}
}

// BenchmarkFirstWriteAfterSnapshot measures the latency of the one write
// that copies a shard: each iteration takes a snapshot, updates one key
// (copying that key's shard, up to 1024 entries by default) and releases
// the snapshot. The backend holds a million keys.
func BenchmarkFirstWriteAfterSnapshot(b *testing.B) {
	be, v, keys := benchBackend(b, 1_000_000, false)
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		s := be.Snapshot(int64(i))
		be.SetCurrentKey(keys[i%len(keys)])
		v.Update(int64(i))
		s.Release()
		i++
	}
}

// BenchmarkTTLValue measures the record path of a value state with a
// time to live (a read and a write per record, over 100,000 keys whose
// values never expire during the run), with the background cleanup
// configured as named: Flink's defaults ("default"), also on every
// record ("every-record"), and off ("disabled": cleanup on read only).
func BenchmarkTTLValue(b *testing.B) {
	for _, storage := range []string{"heap", "pebble"} {
		for _, tc := range []struct {
			name string
			cfg  TTLConfig
		}{
			{"default", TTLConfig{TTL: time.Hour}},
			{"every-record", TTLConfig{TTL: time.Hour, CleanupEveryRecord: true}},
			{"disabled", TTLConfig{TTL: time.Hour, DisableCleanupInBackground: true}},
		} {
			b.Run(storage+"/"+tc.name, func(b *testing.B) {
				var opts []BackendOption
				if storage == "pebble" {
					opts = append(opts, pebbleBackend(b))
				}
				be, err := NewKeyedBackend[string](nil, 128, KeyGroupRange{0, 127}, opts...)
				if err != nil {
					b.Fatal(err)
				}
				closeAtEnd(b, be)
				v := must(Value(be, ValueDescriptor[int64]{Name: "v", TTL: &tc.cfg}))
				keys := benchKeys(100_000)
				for i, k := range keys {
					be.SetCurrentKey(k)
					v.Update(int64(i))
				}
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					be.SetCurrentKey(keys[i%len(keys)])
					x, _ := v.Value()
					v.Update(x + 1)
					i++
				}
			})
		}
	}
}

// BenchmarkCheckpointCycle measures one full checkpoint of a million
// int64 counters while the owner writes: Snapshot, then a write to every
// 64th key (a first write to nearly every shard, which copy-on-write
// copies or the owner encodes for the snapshot, see claim.go), then
// WriteTo and Release. cpu-ms/op is the process's CPU time per cycle.
func BenchmarkCheckpointCycle(b *testing.B) {
	be := must(NewKeyedBackend[int64](nil, 128, KeyGroupRange{0, 127}))
	v := must(Value(be, ValueDescriptor[int64]{Name: "sum"}))
	const keys = 1_000_000
	for k := range int64(keys) {
		be.SetCurrentKey(k)
		v.Update(k)
	}
	b.ReportAllocs()
	id := int64(0)
	cpu := processCPU()
	for b.Loop() {
		id++
		s := be.Snapshot(id)
		for k := int64(0); k < keys; k += 64 {
			be.SetCurrentKey(k)
			v.Update(id)
		}
		if _, err := s.WriteTo(io.Discard); err != nil {
			b.Fatal(err)
		}
		s.Release()
	}
	b.ReportMetric(float64(processCPU()-cpu)/float64(b.N)/1e6, "cpu-ms/op")
}
