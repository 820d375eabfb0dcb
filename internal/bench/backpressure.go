package bench

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connector/datagen"
	"github.com/weirstream/weir/internal/checkpoint/coordinator"
	"github.com/weirstream/weir/internal/launch"
	"github.com/weirstream/weir/stream"
)

// BackpressureConfig configures the backpressure benchmark: a fast
// unbounded source into a keyed operator that spends Cost of processor time
// on each record, so that every channel into it stays full.
type BackpressureConfig struct {
	Duration       time.Duration // how long each mode runs
	Checkpoint     time.Duration // checkpoint interval
	Cost           time.Duration // processor time per record in the slow operator
	Parallelism    int
	AlignedTimeout time.Duration // the aligned-checkpoint timeout of the third mode
	// Warmup is left out of the throughput: the records the sink had
	// received by then are not counted, nor the time.
	Warmup time.Duration
	// BatchSize and ChannelCapacity size the data plane (records per
	// batch, batches a channel buffers); 0 keeps the engine's defaults.
	// Their product bounds the records in flight per channel, which an
	// aligned barrier waits behind.
	BatchSize, ChannelCapacity int
	// DebloatTarget is the buffer-debloating target of the
	// aligned-debloat mode (taskmanager.network.memory.buffer-debloat.target).
	DebloatTarget time.Duration
}

// DefaultBackpressure is the benchmark's default configuration.
func DefaultBackpressure() BackpressureConfig {
	return BackpressureConfig{Duration: 10 * time.Second, Checkpoint: 200 * time.Millisecond, Cost: 10 * time.Microsecond, Parallelism: 2,
		AlignedTimeout: 20 * time.Millisecond, Warmup: time.Second, DebloatTarget: 50 * time.Millisecond}
}

// BackpressureMode is how the benchmark's checkpoints align.
type BackpressureMode string

// The modes, in the order the benchmark runs them.
const (
	ModeAligned        BackpressureMode = "aligned"
	ModeUnaligned      BackpressureMode = "unaligned"
	ModeAlignedTimeout BackpressureMode = "aligned-timeout"
	// ModeAlignedDebloat is aligned checkpoints with buffer debloating:
	// the slow operator limits the records in flight on its inputs to
	// what it consumes within the debloating target.
	ModeAlignedDebloat BackpressureMode = "aligned-debloat"
)

// BackpressureModes are the benchmark's modes, in the order it runs them.
var BackpressureModes = []BackpressureMode{ModeAligned, ModeUnaligned, ModeAlignedTimeout, ModeAlignedDebloat}

// BackpressureResult is one mode's run.
type BackpressureResult struct {
	Mode BackpressureMode
	// Records is the number of records the sink received over Elapsed,
	// which starts after the warm-up.
	Records int64
	Elapsed time.Duration
	// Durations, Alignments and Persisted are, per completed checkpoint,
	// its end-to-end duration, its longest subtask alignment, and the
	// in-flight bytes persisted with it.
	Durations, Alignments []time.Duration
	Persisted             []int64
	Failed                int64
	// InFlightLimit is the slow operator's in-flight limit per input
	// channel at the end of the run (buffer debloating; 0 without), and
	// BarrierInFlight the most records an aligned barrier found queued
	// ahead of it on one of its input channels.
	InFlightLimit, BarrierInFlight int64
}

// PerSecond is the sink's throughput.
func (r BackpressureResult) PerSecond() float64 { return float64(r.Records) / r.Elapsed.Seconds() }

type slowSummer struct {
	summer
	cost time.Duration
}

func (s *slowSummer) ProcessElement(ctx *stream.Context[int64, struct{}], r Record) error {
	for start := time.Now(); time.Since(start) < s.cost; {
	}
	return s.summer.ProcessElement(ctx, r)
}

// RunBackpressure runs the benchmark's job for c.Duration in mode.
func RunBackpressure(ctx context.Context, c BackpressureConfig, mode BackpressureMode) (BackpressureResult, error) {
	kv := []string{fmt.Sprintf("parallelism.default=%d", c.Parallelism),
		"execution.checkpointing.interval=" + c.Checkpoint.String(),
		config.KeyCheckpointHistory + "=100000"}
	switch mode {
	case ModeUnaligned:
		kv = append(kv, config.KeyCheckpointingUnaligned+"=true")
	case ModeAlignedTimeout:
		kv = append(kv, config.KeyCheckpointingUnaligned+"=true", config.KeyCheckpointingAlignedTimeout+"="+c.AlignedTimeout.String())
	case ModeAlignedDebloat:
		kv = append(kv, config.KeyBufferDebloatEnabled+"=true", config.KeyBufferDebloatTarget+"="+c.DebloatTarget.String())
	case ModeAligned:
	default:
		return BackpressureResult{}, fmt.Errorf("bench: unknown backpressure mode %q", mode)
	}
	cfg, err := config.ParseDynamic(kv)
	if err != nil {
		return BackpressureResult{}, err
	}
	env, err := stream.NewEnvironment(stream.WithConfig(cfg), stream.WithLogger(slog.New(slog.DiscardHandler)),
		stream.WithBatchSize(c.BatchSize), stream.WithChannelCapacity(c.ChannelCapacity))
	if err != nil {
		return BackpressureResult{}, err
	}
	src, err := datagen.New(DefaultKeyedSum().gen(), datagen.Partitions(c.Parallelism), datagen.BatchSize(1024))
	if err != nil {
		return BackpressureResult{}, err
	}
	in := stream.FromSource(env, src, "datagen", stream.NoWatermarks[Record]())
	sums := stream.Process(stream.KeyBy(in, func(r Record) int64 { return r.Key }), stream.KeyedProcessFunction[int64, Record, struct{}](&slowSummer{cost: c.Cost}), stream.Uid("slow"))
	stream.SinkTo(sums, connector.Discard[struct{}](), stream.Uid("sink"))
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	client, err := env.ExecuteAsync(runCtx, "backpressure")
	if err != nil {
		return BackpressureResult{}, err
	}
	select {
	case <-time.After(c.Warmup):
	case <-ctx.Done():
	}
	start, before := time.Now(), client.Metrics().RecordsOut
	select {
	case <-time.After(c.Duration):
	case <-ctx.Done():
	}
	res := BackpressureResult{Mode: mode, Records: client.Metrics().RecordsOut - before, Elapsed: time.Since(start)}
	jm := launch.MasterOf(client)
	if jm == nil {
		return res, fmt.Errorf("bench: the job's master is not reachable")
	}
	for _, m := range jm.SubtaskMetrics() {
		if m.Task.Vertex == "slow" {
			res.InFlightLimit = max(res.InFlightLimit, m.InFlightLimit)
			res.BarrierInFlight = max(res.BarrierInFlight, m.BarrierInFlightMax)
		}
	}
	stats, _, err := jm.CheckpointStats(ctx)
	cancel()
	client.Wait()
	if err != nil {
		return res, err
	}
	res.Failed = stats.Counts.Failed
	hist := slices.Clone(stats.History)
	slices.SortFunc(hist, func(a, b coordinator.CheckpointStats) int { return int(a.ID - b.ID) })
	for _, h := range hist {
		if h.Class != "completed" {
			continue
		}
		res.Durations = append(res.Durations, time.Duration(h.EndToEndDuration)*time.Millisecond)
		res.Persisted = append(res.Persisted, h.PersistedData)
		var align int64
		for _, task := range h.Tasks {
			for _, s := range task.Subtasks {
				align = max(align, s.Alignment.Duration)
			}
		}
		res.Alignments = append(res.Alignments, time.Duration(align)*time.Millisecond)
	}
	return res, nil
}

// Quantile returns the q-quantile of xs (nearest rank), 0 if empty.
func Quantile[T int64 | time.Duration](xs []T, q float64) T {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}
