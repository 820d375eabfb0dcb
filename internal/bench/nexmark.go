package bench

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connector/file"
	"github.com/weirstream/weir/examples/nexmark"
	"github.com/weirstream/weir/stream"
)

// NexmarkConfig configures one Nexmark run.
type NexmarkConfig struct {
	Query       string
	Gen         nexmark.GenConfig
	Parallelism int
	Checkpoint  time.Duration // interval; 0 disables checkpoints
	// CheckpointDir is where checkpoints are written; "" keeps them in
	// the job master's memory.
	CheckpointDir string
	// Output, if set, is a directory where the query's rows go, as lines
	// of canonical rows (nexmark.Lines) in exactly-once files, instead
	// of being discarded.
	Output string
	// Backend is a side-by-side backend (SideBackends); "" is weir's
	// default.
	Backend string
	// Latency, if set, makes the run a latency run: the source paced at
	// the generator's rate, the rows' latencies counted into files in its
	// directory (LatencyRun), Output unused.
	Latency *LatencyRun
	// Kafka, if set, lists the brokers of KafkaTopic, which holds Gen's
	// events (nexmark.Generator.ProduceKafka): the job reads them from
	// there, bounded, instead of generating them in-process.
	Kafka      []string
	KafkaTopic string
}

// DefaultNexmark is what `weir bench nexmark` runs: ten million events
// on two splits at the nexmark-flink suite's rate of ten million events
// per second, parallelism 2, a checkpoint every second.
func DefaultNexmark() NexmarkConfig {
	g := nexmark.DefaultGenConfig()
	g.Events, g.Splits, g.Rate = 10_000_000, 2, 10_000_000
	return NexmarkConfig{Query: "all", Gen: g, Parallelism: 2, Checkpoint: time.Second}
}

// NexmarkResult is one measured query.
type NexmarkResult struct {
	Query   string        `json:"query"`
	Events  int64         `json:"events"`
	Elapsed time.Duration `json:"elapsed_ns"`
	// CPU is user plus system time and PeakRSS the maximum resident set
	// in bytes, from the process's resource usage (getrusage): the run's
	// own process when it ran in a child.
	CPU     time.Duration `json:"cpu_ns"`
	PeakRSS int64         `json:"peak_rss_bytes"`
	// Checkpoints are the durations (trigger to completion) of the
	// checkpoints completed, and CheckpointSizes their bytes of state.
	Checkpoints     []time.Duration `json:"checkpoints_ns"`
	CheckpointSizes []int64         `json:"checkpoint_sizes"`
}

// PerSecond is events per second of wall time.
func (r NexmarkResult) PerSecond() float64 { return float64(r.Events) / r.Elapsed.Seconds() }

// PerCPUSecond is events per CPU-second.
func (r NexmarkResult) PerCPUSecond() float64 { return float64(r.Events) / r.CPU.Seconds() }

// CheckpointQuantile returns the q-quantile of the checkpoint durations
// (nearest rank), 0 without checkpoints.
func (r NexmarkResult) CheckpointQuantile(q float64) time.Duration {
	if len(r.Checkpoints) == 0 {
		return 0
	}
	s := slices.Clone(r.Checkpoints)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// RunNexmark runs one query over the generated events in this process
// and measures it. CPU and PeakRSS are this process's (its whole life,
// for the peak): a caller that wants them per query runs each in a
// process of its own.
func RunNexmark(ctx context.Context, c NexmarkConfig) (NexmarkResult, error) {
	q, err := nexmark.QueryByName(c.Query)
	if err != nil {
		return NexmarkResult{}, err
	}
	gen, err := nexmark.NewGenerator(c.Gen)
	if err != nil {
		return NexmarkResult{}, err
	}
	src, err := nexmark.NewSource(gen, 1024)
	if err != nil {
		return NexmarkResult{}, err
	}
	if len(c.Kafka) > 0 && c.Latency != nil {
		return NexmarkResult{}, fmt.Errorf("nexmark: a latency run generates its events paced, it does not read them from Kafka")
	}
	kv := []string{fmt.Sprintf("parallelism.default=%d", c.Parallelism)}
	if c.Checkpoint > 0 {
		kv = append(kv, "execution.checkpointing.interval="+c.Checkpoint.String())
		if c.CheckpointDir != "" {
			kv = append(kv, "execution.checkpointing.dir="+c.CheckpointDir)
		}
	}
	if c.Backend != "" {
		be, err := WeirBackendOptions(c.Backend)
		if err != nil {
			return NexmarkResult{}, err
		}
		kv = append(kv, be...)
	}
	cfg, err := config.ParseDynamic(kv)
	if err != nil {
		return NexmarkResult{}, err
	}
	env, err := stream.NewEnvironment(stream.WithConfig(cfg), stream.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return NexmarkResult{}, err
	}
	events := func() stream.Stream[nexmark.Event] { return src.Events(env) }
	dead := &deadLetters{}
	if len(c.Kafka) > 0 {
		ks, err := nexmark.KafkaSource(c.Kafka, c.KafkaTopic, true)
		if err != nil {
			return NexmarkResult{}, err
		}
		events = func() stream.Stream[nexmark.Event] {
			evs, dl := nexmark.FromKafka(env, ks)
			stream.SinkTo(dl, connector.Sink[nexmark.DeadLetter](dead), stream.Uid("dead-letters"))
			return evs
		}
	}
	switch {
	case c.Latency != nil:
		shift := c.Latency.shiftOnce()
		dues, err := nexmark.DueTimes(c.Query, src.Paced(shift).Events(env))
		if err != nil {
			return NexmarkResult{}, err
		}
		stream.SinkTo(dues, newLatencySink(*c.Latency, shift), stream.Uid("sink"))
	case c.Output == "":
		q.Build(events())
	default:
		rows, err := nexmark.Lines(c.Query, events())
		if err != nil {
			return NexmarkResult{}, err
		}
		sink, err := file.NewSink(c.Output, func(l string) ([]byte, error) { return []byte(l), nil })
		if err != nil {
			return NexmarkResult{}, err
		}
		stream.SinkTo(rows, sink, stream.Uid("sink"))
	}
	runtime.GC()
	cpu0 := cpuTime()
	start := time.Now()
	client, err := env.ExecuteAsync(ctx, "nexmark-"+c.Query)
	if err != nil {
		return NexmarkResult{}, err
	}
	// The job's metrics hold its latest completed checkpoint: polled
	// often enough, at intervals of a second or more, that is each one.
	var (
		durations []time.Duration
		sizes     []int64
	)
	last := int64(0)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	poll := func() {
		if cp := client.Metrics().LastCheckpoint; cp.ID > last {
			last = cp.ID
			durations = append(durations, cp.Duration)
			sizes = append(sizes, cp.Size)
		}
	}
loop:
	for {
		select {
		case <-client.Done():
			break loop
		case <-tick.C:
			poll()
		}
	}
	if err := client.Wait(); err != nil {
		return NexmarkResult{}, err
	}
	elapsed := time.Since(start)
	poll()
	if err := dead.err(c.KafkaTopic); err != nil {
		return NexmarkResult{}, err
	}
	return NexmarkResult{Query: c.Query, Events: c.Gen.Events, Elapsed: elapsed, CPU: cpuTime() - cpu0, PeakRSS: peakRSS(), Checkpoints: durations, CheckpointSizes: sizes}, nil
}

// peakRSS is the process's maximum resident set size so far, in bytes.
func peakRSS() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return RusageMaxRSS(&ru)
}

// RusageMaxRSS is ru's maximum resident set in bytes (Linux reports
// kilobytes).
func RusageMaxRSS(ru *syscall.Rusage) int64 { return int64(ru.Maxrss) * 1024 }

// RusageCPU is ru's user plus system time.
func RusageCPU(ru *syscall.Rusage) time.Duration {
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// deadLetters is the sink of the records of the events topic that are not
// events: a benchmark over the topic the command itself filled has none,
// and a run that finds one fails (err) rather than measure fewer events
// than it reports.
type deadLetters struct {
	mu    sync.Mutex
	n     int
	first nexmark.DeadLetter
}

func (d *deadLetters) NewWriter(context.Context, connector.WriterInfo) (connector.SinkWriter[nexmark.DeadLetter], error) {
	return deadWriter{d}, nil
}

func (d *deadLetters) err(topic string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.n == 0 {
		return nil
	}
	return fmt.Errorf("nexmark: %d records of topic %s are not events, the first at offset %d of partition %d: %s", d.n, topic, d.first.Offset, d.first.Partition, d.first.Error)
}

type deadWriter struct{ d *deadLetters }

func (w deadWriter) Write(v nexmark.DeadLetter, _ int64) error {
	w.d.mu.Lock()
	defer w.d.mu.Unlock()
	if w.d.n == 0 {
		w.d.first = v
	}
	w.d.n++
	return nil
}

func (deadWriter) PrepareCommit(context.Context, int64) ([][]byte, error) { return nil, nil }
func (deadWriter) Close() error                                           { return nil }
