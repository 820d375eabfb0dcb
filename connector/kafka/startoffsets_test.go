package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/connector/kafka"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

// TestLatestStartSurvivesRestore: a source that starts at the partitions'
// ends (Latest) resolves them once. A failure after it read records that
// no completed checkpoint has an offset for restores the checkpoint taken
// before them, which must start at the same offsets and read those
// records again; resolving Latest again would skip them. Every record
// written after the job started is committed exactly once, none written
// before. Seeds vary the partitions, the parallelism and when the failure
// comes.
func TestLatestStartSurvivesRestore(t *testing.T) {
	for seed := range uint64(6) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { latestStartSurvivesRestore(t, seed) })
	}
}

func latestStartSurvivesRestore(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 0x1a7e))
	partitions := 1 + r.IntN(3)
	parallelism := 1 + r.IntN(2)
	failAfter := int64(1 + r.IntN(30))
	what := fmt.Sprintf("seed %d: %d partitions, parallelism %d, failure after %d records", seed, partitions, parallelism, failAfter)
	brokers := newCluster(t, int32(partitions), []string{"events"})
	ctx := testCtx(t)
	var splits []string
	for p := range partitions {
		splits = append(splits, fmt.Sprintf("events-%d", p))
	}
	writeSplits(t, ctx, brokers, splits, 0, 50) // before the job: not read

	cfg, err := config.ParseDynamic([]string{fmt.Sprintf("parallelism.default=%d", parallelism),
		"execution.checkpointing.interval=20 ms",
		"restart-strategy.type=fixed-delay", "restart-strategy.fixed-delay.attempts=5", "restart-strategy.fixed-delay.delay=0 ms"})
	if err != nil {
		t.Fatal(err)
	}
	var (
		completed, restores atomic.Int32
		armed, failed       atomic.Bool
	)
	env, err := stream.NewEnvironment(stream.WithConfig(cfg), stream.WithLogger(slog.New(slog.DiscardHandler)),
		stream.WithEvents(func(e stream.JobEvent) {
			switch e.Kind {
			case stream.EventCheckpointCompleted:
				completed.Add(1)
			case stream.EventRestored:
				restores.Add(1)
			}
		}),
		stream.WithFaults(func(_ context.Context, site stream.FaultSite) error {
			if site.Point == stream.FaultBatch && armed.Load() && site.Records >= failAfter && failed.CompareAndSwap(false, true) {
				return errors.New("injected failure after reading records no checkpoint has an offset for")
			}
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	src, err := kafka.NewSource(value, kafka.BootstrapServers(brokers...), kafka.Topics("events"),
		kafka.StartingOffsets(kafka.Latest()), kafka.MaxPollRecords(10), kafka.ClientOptions(kgo.FetchMaxWait(50*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	sink := streamtest.NewCollector[string](true)
	stream.SinkTo(stream.FromSource(env, src, "events", stream.NoWatermarks[string]()), sink, stream.Uid("sink"))
	jctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- env.Execute(jctx, "latest") }()

	// A completed checkpoint: every reader has opened and resolved its
	// partitions' ends, and none has read a record.
	waitFor(t, done, func() bool { return completed.Load() > 0 }, "completed checkpoint")
	armed.Store(true)
	want := writeSplits(t, ctx, brokers, splits, 50, 100)
	waitFor(t, done, func() bool { return failed.Load() && restores.Load() > 0 }, "failure and restore")
	waitFor(t, done, func() bool { return len(sink.Results()) >= len(want) }, "records written after the start ("+what+")")
	got := sink.Results()
	cancel()
	<-done
	if diff := diffOnce(got, want); diff != "" {
		t.Fatalf("%s: %d records committed, %d written after the start: %s", what, len(got), len(want), diff)
	}
}

// TestPartitionAddedWhileDownIsReadFromItsBeginning: a job reading from
// Latest is stopped with a retained checkpoint; a partition is added and
// written to; the job resumed from the checkpoint finds the partition in
// its first listing but not in the checkpoint's assignment, and reads it
// from its beginning: records written to it before the resume are the
// job's, not skipped. Partitions it had resume from their offsets.
func TestPartitionAddedWhileDownIsReadFromItsBeginning(t *testing.T) {
	brokers := newCluster(t, 1, []string{"events"})
	ctx := testCtx(t)
	writeSplits(t, ctx, brokers, []string{"events-0"}, 0, 40) // before the first job: not read
	dir := t.TempDir()
	// One sink for both jobs, as one external system: the resumed job
	// commits what the first left pending at its last checkpoint.
	sink := streamtest.NewCollector[string](true)

	run := func(jobID string, extra ...string) (stop func(), completed *atomic.Int32) {
		cfg, err := config.ParseDynamic(append([]string{"parallelism.default=2",
			"execution.checkpointing.interval=20 ms", "execution.checkpointing.dir=" + dir,
			"execution.checkpointing.externalized-checkpoint-retention=RETAIN_ON_CANCELLATION"}, extra...))
		if err != nil {
			t.Fatal(err)
		}
		completed = new(atomic.Int32)
		env, err := stream.NewEnvironment(stream.WithConfig(cfg), stream.WithLogger(slog.New(slog.DiscardHandler)), stream.WithJobID(jobID),
			stream.WithEvents(func(e stream.JobEvent) {
				if e.Kind == stream.EventCheckpointCompleted {
					completed.Add(1)
				}
			}))
		if err != nil {
			t.Fatal(err)
		}
		src, err := kafka.NewSource(value, kafka.BootstrapServers(brokers...), kafka.Topics("events"),
			kafka.StartingOffsets(kafka.Latest()), kafka.PartitionDiscoveryInterval(0), kafka.ClientOptions(kgo.FetchMaxWait(50*time.Millisecond)))
		if err != nil {
			t.Fatal(err)
		}
		stream.SinkTo(stream.FromSource(env, src, "events", stream.NoWatermarks[string]()), sink, stream.Uid("sink"))
		jctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- env.Execute(jctx, jobID) }()
		var once sync.Once
		stop = func() { once.Do(func() { cancel(); <-done }) }
		t.Cleanup(stop)
		waitFor(t, done, func() bool { return completed.Load() > 0 }, "completed checkpoint of "+jobID)
		return stop, completed
	}

	stop, completed := run("first")
	want := writeSplits(t, ctx, brokers, []string{"events-0"}, 40, 20)
	waitFor(t, nil, func() bool { return len(sink.Results()) >= 20 }, "the first job's records")
	// A checkpoint that holds the offsets of what was read.
	n := completed.Load()
	waitFor(t, nil, func() bool { return completed.Load() > n+1 }, "checkpoints after the records")
	stop()

	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreatePartitions(ctx, 1, "events"); err != nil {
		t.Fatal(err)
	}
	want = append(want, writeSplits(t, ctx, brokers, []string{"events-0"}, 60, 10)...)
	want = append(want, writeSplits(t, ctx, brokers, []string{"events-1"}, 0, 30)...)

	st, err := storage.Open(ctx, dir, "first")
	if err != nil {
		t.Fatal(err)
	}
	infos, err := st.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var latest int64
	for _, info := range infos {
		if info.Status == storage.Completed {
			latest = max(latest, info.ID)
		}
	}
	if latest == 0 {
		t.Fatal("the first job retained no completed checkpoint")
	}
	stop, _ = run("second", "execution.state-recovery.path="+st.CheckpointPath(latest))
	waitFor(t, nil, func() bool { return len(sink.Results()) >= len(want) }, "the resumed job's records")
	stop()
	got := sink.Results()
	if diff := diffOnce(got, want); diff != "" {
		t.Fatalf("%d records committed by both jobs, %d written after the first started: %s", len(got), len(want), diff)
	}
}

// TestPartitionsAddedWhileRunningStartAtTheirBeginning: with Latest, the
// partitions added while the job runs are read from their beginning: the
// records written to them before the next discovery are not skipped.
func TestPartitionsAddedWhileRunningStartAtTheirBeginning(t *testing.T) {
	brokers := newCluster(t, 1, []string{"events"})
	ctx := testCtx(t)
	writeSplits(t, ctx, brokers, []string{"events-0"}, 0, 50) // before the job: not read
	cfg, err := config.ParseDynamic([]string{"parallelism.default=2", "execution.checkpointing.interval=20 ms"})
	if err != nil {
		t.Fatal(err)
	}
	var completed atomic.Int32
	env, err := stream.NewEnvironment(stream.WithConfig(cfg), stream.WithLogger(slog.New(slog.DiscardHandler)),
		stream.WithEvents(func(e stream.JobEvent) {
			if e.Kind == stream.EventCheckpointCompleted {
				completed.Add(1)
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	// Discovery is slow next to the writes below, so that the added
	// partitions hold records when they are found.
	src, err := kafka.NewSource(value, kafka.BootstrapServers(brokers...), kafka.Topics("events"), kafka.StartingOffsets(kafka.Latest()),
		kafka.PartitionDiscoveryInterval(300*time.Millisecond), kafka.ClientOptions(kgo.FetchMaxWait(50*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	sink := streamtest.NewCollector[string](true)
	stream.SinkTo(stream.FromSource(env, src, "events", stream.NoWatermarks[string]()), sink, stream.Uid("sink"))
	jctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- env.Execute(jctx, "discovery-latest") }()
	waitFor(t, done, func() bool { return completed.Load() > 0 }, "completed checkpoint")

	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreatePartitions(ctx, 2, "events"); err != nil {
		t.Fatal(err)
	}
	want := writeSplits(t, ctx, brokers, []string{"events-1", "events-2"}, 0, 100)
	want = append(want, writeSplits(t, ctx, brokers, []string{"events-0"}, 50, 100)...)
	waitFor(t, done, func() bool { return len(sink.Results()) >= len(want) }, "the records written after the start")
	got := sink.Results()
	cancel()
	<-done
	if diff := diffOnce(got, want); diff != "" {
		t.Fatalf("%d records committed, %d written after the start: %s", len(got), len(want), diff)
	}
}
