package state

import (
	"flag"
	"io"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// processCPU returns the process's user and system time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// checkpointCostKeys is the number of keys BenchmarkCheckpointCost holds
// (-bench.ckptkeys): a subtask's share of `weir bench keyed-sum --keys
// 10000000` at parallelism 2 by default.
var checkpointCostKeys = int64(5_000_000)

func init() {
	flag.Int64Var(&checkpointCostKeys, "bench.ckptkeys", checkpointCostKeys, "keys of BenchmarkCheckpointCost")
}

// BenchmarkCheckpointCost is keyed-sum's subtask on one goroutine: a read
// and an update of a value state per record over -bench.ckptkeys int64
// keys spread uniformly, and every "every" records a checkpoint: the
// synchronous snapshot, then every/2 records written while it is pending
// (the copies on write), then its serialization (to io.Discard, on the
// same goroutine so that ns/op counts all the CPU it costs) and release.
// Compare cpu-ns/op (the process's CPU time per record, which a machine
// busy with other work disturbs less than ns/op) of every=0 (no
// checkpoints) with the others: the difference is the cost of
// checkpoints per record. write-cpu-ms/ckpt is the CPU time of one
// snapshot's serialization alone. The incremental variant takes delta
// snapshots (IncrementalSnapshot over the previous checkpoint), a full
// one again once the deltas outweigh the chain's full snapshot, as
// internal/ops does; bytes/ckpt is the mean size written.
func BenchmarkCheckpointCost(b *testing.B) {
	for _, tc := range []struct {
		every       int
		incremental bool
	}{{0, false}, {2_000_000, false}, {2_000_000, true}} {
		every := tc.every
		name := "every=" + strconv.Itoa(every)
		if tc.incremental {
			name += "/incremental"
		}
		b.Run(name, func(b *testing.B) {
			var opts []BackendOption
			if tc.incremental {
				opts = append(opts, WithIncrementalSnapshots())
			}
			be := must(NewKeyedBackend[int64](nil, 128, KeyGroupRange{0, 127}, opts...))
			v := must(Value(be, ValueDescriptor[int64]{Name: "sum"}))
			keys := uint64(checkpointCostKeys)
			for k := range int64(keys) {
				be.SetCurrentKey(k)
				v.Update(k)
			}
			b.ReportAllocs()
			x := uint64(0x9e3779b97f4a7c15)
			n, ckpts := 0, 0
			var snap *KeyedSnapshot
			var writeCPU time.Duration // in WriteTo
			var written, fullSize, deltas int64
			prev := int64(0)
			cpu := processCPU()
			for b.Loop() {
				x ^= x << 13
				x ^= x >> 7
				x ^= x << 17
				be.SetCurrentKey(int64(x % keys))
				s, _ := v.Value()
				v.Update(s + 1)
				if n++; every == 0 {
					continue
				}
				switch n % every {
				case 0:
					if tc.incremental {
						snap = be.IncrementalSnapshot(int64(n), prev, prev == 0 || deltas > fullSize)
						prev = int64(n)
					} else {
						snap = be.Snapshot(int64(n))
					}
				case every / 2:
					if snap != nil {
						c0 := processCPU()
						size, err := snap.WriteTo(io.Discard)
						if err != nil {
							b.Fatal(err)
						}
						writeCPU += processCPU() - c0
						written += size
						if _, ok := snap.Delta(); ok {
							deltas += size
						} else {
							fullSize, deltas = size, 0
						}
						snap.Release()
						snap = nil
						ckpts++
					}
				}
			}
			b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(ckpts), "ckpts")
			if ckpts > 0 {
				b.ReportMetric(float64(writeCPU.Milliseconds())/float64(ckpts), "write-cpu-ms/ckpt")
				b.ReportMetric(float64(written)/float64(ckpts), "bytes/ckpt")
			}
		})
	}
}
