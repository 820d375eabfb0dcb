// Package bench holds weir's benchmarks as library code, shared by
// `weir bench` and `go test -bench`.
package bench

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connector/datagen"
	"github.com/weirstream/weir/state"
	"github.com/weirstream/weir/stream"
)

// KeyedSumConfig configures the keyed-sum benchmark.
type KeyedSumConfig struct {
	Records     int64         // total records
	Keys        int64         // distinct keys
	Parallelism int           // of the keyed operator and the source
	Checkpoint  time.Duration // interval; 0 disables checkpoints
	Partitions  int
	// CheckpointDir is where checkpoints are written (a directory or a
	// blob URL); "" keeps them in the job master's memory.
	CheckpointDir string
	// Active, if in (0, 1), is the fraction of the keys that change once
	// every key has been written: the first Keys records write each key
	// once, and the rest go to the first Active*Keys keys only. 0 (or 1)
	// spreads every record over all the keys.
	Active float64
	// Incremental takes incremental checkpoints
	// (execution.checkpointing.incremental).
	Incremental bool
}

// DefaultKeyedSum is the configuration `weir bench keyed-sum` runs.
func DefaultKeyedSum() KeyedSumConfig {
	return KeyedSumConfig{Records: 20_000_000, Keys: 10_000, Parallelism: 2, Checkpoint: time.Second, Partitions: 2}
}

// Record is what the benchmark's source generates.
type Record struct {
	Key   int64
	Value int64
}

func (c KeyedSumConfig) gen() func(p int, seq int64) Record {
	keys := uint64(c.Keys)
	if c.Active <= 0 || c.Active >= 1 {
		return func(p int, seq int64) Record {
			m := datagen.Mix(1, p, seq)
			return Record{Key: int64(m % keys), Value: int64(m>>32) & 0xff}
		}
	}
	hot := max(uint64(c.Active*float64(c.Keys)), 1)
	parts := uint64(max(c.Partitions, 1))
	return func(p int, seq int64) Record {
		m := datagen.Mix(1, p, seq)
		if i := uint64(seq)*parts + uint64(p); i < keys {
			return Record{Key: int64(i), Value: int64(m>>32) & 0xff}
		}
		return Record{Key: int64(m % hot), Value: int64(m>>32) & 0xff}
	}
}

// Result is one measured run.
type Result struct {
	Records     int64
	Elapsed     time.Duration
	Checkpoints int
	// CPUTime is the process's user and system time during an engine run
	// (RunEngine): on a machine shared with other work it measures the
	// cost of the records, and of their checkpoints, better than the wall
	// time does. LastCheckpoint is the duration of the run's last
	// completed checkpoint, from trigger to completion, and
	// LastCheckpointSize the size of the state it names.
	CPUTime, LastCheckpoint time.Duration
	LastCheckpointSize      int64
}

// PerSecond is the throughput in records per second.
func (r Result) PerSecond() float64 { return float64(r.Records) / r.Elapsed.Seconds() }

// CPUPerMillion is the CPU time per million records, in seconds.
func (r Result) CPUPerMillion() float64 { return r.CPUTime.Seconds() / (float64(r.Records) / 1e6) }

type summer struct {
	sum state.ValueState[int64]
}

func (s *summer) Open(rc *stream.RuntimeContext[int64]) error {
	var err error
	s.sum, err = stream.ValueState[int64](rc, "sum")
	return err
}

func (s *summer) ProcessElement(ctx *stream.Context[int64, struct{}], r Record) error {
	v, _ := s.sum.Value()
	s.sum.Update(v + r.Value)
	return nil
}

// RunEngine runs datagen → keyBy → running sum (keyed value state) →
// discarding sink on the engine.
func RunEngine(ctx context.Context, c KeyedSumConfig) (Result, error) {
	kv := []string{fmt.Sprintf("parallelism.default=%d", c.Parallelism)}
	if c.Checkpoint > 0 {
		kv = append(kv, "execution.checkpointing.interval="+c.Checkpoint.String())
		if c.CheckpointDir != "" {
			kv = append(kv, "execution.checkpointing.dir="+c.CheckpointDir)
		}
		if c.Incremental {
			kv = append(kv, "execution.checkpointing.incremental=true")
		}
	}
	cfg, err := config.ParseDynamic(kv)
	if err != nil {
		return Result{}, err
	}
	env, completed, err := c.job(cfg)
	if err != nil {
		return Result{}, err
	}
	runtime.GC()
	cpu0, start := cpuTime(), time.Now()
	jc, err := env.ExecuteAsync(ctx, "keyed-sum")
	if err != nil {
		return Result{}, err
	}
	if err := jc.Wait(); err != nil {
		return Result{}, err
	}
	return Result{Records: c.Records / int64(c.Partitions) * int64(c.Partitions), Elapsed: time.Since(start), Checkpoints: int(completed.Load()),
		CPUTime: cpuTime() - cpu0, LastCheckpoint: jc.Metrics().LastCheckpoint.Duration, LastCheckpointSize: jc.Metrics().LastCheckpoint.Size}, nil
}

// job builds the benchmark's job in an environment of cfg (and opts): its
// returned counter counts the checkpoints it completes.
func (c KeyedSumConfig) job(cfg *config.Configuration, opts ...stream.Option) (*stream.Environment, *atomic.Int64, error) {
	return c.buildJob(cfg, func() stream.KeyedProcessFunction[int64, Record, struct{}] { return &summer{} }, nil, opts...)
}

// buildJob builds the benchmark's job with the keyed function fn makes;
// onCompleted, if set, is called with each checkpoint it completes.
func (c KeyedSumConfig) buildJob(cfg *config.Configuration, fn func() stream.KeyedProcessFunction[int64, Record, struct{}], onCompleted func(id int64), opts ...stream.Option) (*stream.Environment, *atomic.Int64, error) {
	completed := new(atomic.Int64)
	env, err := stream.NewEnvironment(append([]stream.Option{stream.WithConfig(cfg), stream.WithLogger(slog.New(slog.DiscardHandler)),
		stream.WithEvents(func(e stream.JobEvent) {
			if e.Kind == stream.EventCheckpointCompleted {
				completed.Add(1)
				if onCompleted != nil {
					onCompleted(e.Checkpoint)
				}
			}
		})}, opts...)...)
	if err != nil {
		return nil, nil, err
	}
	per := c.Records / int64(c.Partitions)
	src, err := datagen.New(c.gen(), datagen.Partitions(c.Partitions), datagen.Count(per), datagen.BatchSize(1024))
	if err != nil {
		return nil, nil, err
	}
	in := stream.FromSource(env, src, "datagen", stream.NoWatermarks[Record]())
	sums := stream.Process(stream.KeyBy(in, func(r Record) int64 { return r.Key }), fn(), stream.Uid("sum"))
	stream.SinkTo(sums, connector.Discard[struct{}](), stream.Uid("sink"))
	return env, completed, nil
}

// RunLoop is the practical limit: one goroutine generating the same
// records and folding them into a Go map.
func RunLoop(c KeyedSumConfig) Result {
	gen := c.gen()
	sums := make(map[int64]int64, c.Keys)
	per := c.Records / int64(c.Partitions)
	runtime.GC()
	start := time.Now()
	for p := range c.Partitions {
		for seq := range per {
			r := gen(p, seq)
			sums[r.Key] += r.Value
		}
	}
	elapsed := time.Since(start)
	if len(sums) == 0 && per > 0 {
		panic("bench: empty fold")
	}
	return Result{Records: per * int64(c.Partitions), Elapsed: elapsed}
}

// SnapshotSync measures the synchronous part of a checkpoint of a keyed
// value state holding keys keys: the time Snapshot takes to return.
func SnapshotSync(keys int) (time.Duration, error) {
	b, err := state.NewKeyedBackend[int64](nil, 128, state.KeyGroupRange{Start: 0, End: 127})
	if err != nil {
		return 0, err
	}
	v, err := state.Value(b, state.ValueDescriptor[int64]{Name: "sum"})
	if err != nil {
		return 0, err
	}
	for k := range int64(keys) {
		b.SetCurrentKey(k)
		v.Update(k)
	}
	runtime.GC()
	start := time.Now()
	s := b.Snapshot(1)
	d := time.Since(start)
	s.Release()
	return d, nil
}
