package kafka_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/connector/kafka"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

var discoverySeeds = flag.Int("kafka.discovery-seeds", 6, "seeds of TestRegionFailoverWithPartitionsAdded")

// TestRegionFailoverWithPartitionsAdded runs a job whose two source
// subtasks are failover regions of their own (source → map → exactly-once
// sink, all forward), over topics a and b of one partition each. A
// subtask fails before any partition is added; then a partition is added
// to each topic, which puts a-1 before b-0 in the sorted list of splits,
// and more records are written to every partition; then a subtask fails
// again, right after the partitions were added (maybe before the job
// discovered them) or once a-1's first records were read, with or without
// a checkpoint in between. The seed chooses which subtasks fail, when,
// and which of those; the committed output must be every record written,
// exactly once: the oracle is the list of records the test wrote.
func TestRegionFailoverWithPartitionsAdded(t *testing.T) {
	for seed := range uint64(*discoverySeeds) {
		t.Run(fmt.Sprintf("seed=%d", seed+1), func(t *testing.T) {
			regionFailoverWithPartitionsAdded(t, seed+1)
		})
	}
}

// discoveryFaults is the failure schedule of one seed.
type discoveryFaults struct {
	rnd        string // the seed's choices, for the failure message
	first      int    // subtask that fails before the partitions are added
	firstAfter int64  // after this many records of its first attempt
	second     int    // subtask that fails after they are added
	onNewSplit bool   // the second failure waits for a-1's first records
	checkpoint bool   // and for a checkpoint completed after them

	mu                    sync.Mutex
	firstDone, secondDone bool
	armed                 bool  // the partitions exist
	sawNew                bool  // a-1's records were read
	sawNewAt              int64 // completed checkpoints when they were
	completed             int64
}

func newDiscoveryFaults(seed uint64) *discoveryFaults {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	f := &discoveryFaults{
		first:      r.IntN(2),
		firstAfter: 50 + r.Int64N(200),
		second:     r.IntN(2),
		onNewSplit: r.IntN(2) == 0,
		checkpoint: r.IntN(2) == 0,
	}
	f.rnd = fmt.Sprintf("first failure: subtask %d after %d records; second: subtask %d, on a-1's records %v, after a checkpoint %v",
		f.first, f.firstAfter, f.second, f.onNewSplit, f.checkpoint)
	return f
}

func (f *discoveryFaults) fault(_ context.Context, site stream.FaultSite) error {
	if site.Point != stream.FaultBatch {
		return nil
	}
	task, attempt, records := site.Task, site.Attempt, site.Records
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case !f.firstDone:
		if task.Subtask == f.first && attempt == 0 && records >= f.firstAfter && f.completed > 0 {
			f.firstDone = true
			return errors.New("injected failure before the partitions were added")
		}
	case f.armed && !f.secondDone && task.Subtask == f.second:
		if f.onNewSplit && (!f.sawNew || f.checkpoint && f.completed <= f.sawNewAt) {
			return nil
		}
		f.secondDone = true
		return errors.New("injected failure after the partitions were added")
	}
	return nil
}

func (f *discoveryFaults) saw(v string) {
	if !strings.HasPrefix(v, "a-1:") {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.sawNew {
		f.sawNew, f.sawNewAt = true, f.completed
	}
}

func regionFailoverWithPartitionsAdded(t *testing.T, seed uint64) {
	faults := newDiscoveryFaults(seed)
	brokers := newCluster(t, 1, []string{"a", "b"})
	ctx := testCtx(t)
	var want []string
	write := func(parts []string, from, n int) {
		t.Helper()
		want = append(want, writeSplits(t, ctx, brokers, parts, from, n)...)
	}
	write([]string{"a-0", "b-0"}, 0, 400)

	cfg, err := config.ParseDynamic([]string{"parallelism.default=2", "execution.checkpointing.interval=20 ms",
		"restart-strategy.type=fixed-delay", "restart-strategy.fixed-delay.attempts=10", "restart-strategy.fixed-delay.delay=0 ms",
		"jobmanager.execution.failover-strategy=region"})
	if err != nil {
		t.Fatal(err)
	}
	var restores atomic.Int32
	var completed atomic.Int64
	env, err := stream.NewEnvironment(stream.WithConfig(cfg), stream.WithLogger(slog.New(slog.DiscardHandler)),
		stream.WithEvents(func(e stream.JobEvent) {
			switch e.Kind {
			case stream.EventCheckpointCompleted:
				completed.Add(1)
				faults.mu.Lock()
				faults.completed++
				faults.mu.Unlock()
			case stream.EventRestored:
				restores.Add(1)
			case stream.EventTaskFailed:
				t.Logf("%s failed: %v", e.Task, e.Err)
			}
		}),
		stream.WithFaults(faults.fault))
	if err != nil {
		t.Fatal(err)
	}
	src, err := kafka.NewSource(value, kafka.BootstrapServers(brokers...), kafka.Topics("a", "b"),
		kafka.MaxPollRecords(20), kafka.PartitionDiscoveryInterval(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	sink := streamtest.NewCollector[string](true)
	in := stream.Map(stream.FromSource(env, src, "events", stream.NoWatermarks[string]()), func(v string) string {
		faults.saw(v)
		time.Sleep(50 * time.Microsecond) // let checkpoints and failures fall between records
		return v
	})
	stream.SinkTo(in, sink, stream.Uid("sink"))
	jctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- env.Execute(jctx, "discovery") }()

	// The partitions are added once the first failure has been restored.
	waitFor(t, done, func() bool {
		faults.mu.Lock()
		defer faults.mu.Unlock()
		return faults.firstDone && restores.Load() >= 1
	}, "the first failure and its restore")
	adm, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	if _, err := kadm.NewClient(adm).CreatePartitions(ctx, 1, "a", "b"); err != nil {
		t.Fatal(err)
	}
	faults.mu.Lock()
	faults.armed = true
	faults.mu.Unlock()
	write([]string{"a-0", "b-0"}, 400, 100)
	write([]string{"a-1", "b-1"}, 0, 100)
	// Records keep coming to every partition until the second failure
	// has struck (or for 30 s), so that both subtasks have batches to
	// fail on.
	deadline := time.Now().Add(30 * time.Second)
	next := map[string]int{"a-0": 500, "b-0": 500, "a-1": 100, "b-1": 100}
	for {
		faults.mu.Lock()
		second := faults.secondDone
		faults.mu.Unlock()
		if second || time.Now().After(deadline) {
			break
		}
		for _, p := range []string{"a-0", "b-0", "a-1", "b-1"} {
			write([]string{p}, next[p], 10)
			next[p] += 10
		}
		time.Sleep(5 * time.Millisecond)
	}

	// The output is complete once it holds as many records as were
	// written; two more checkpoints must not change it.
	complete := func() bool { return len(sink.Results()) >= len(want) }
	var got []string
	for !complete() && time.Now().Before(deadline) {
		select {
		case err := <-done:
			t.Fatalf("seed %d (%s): the job ended: %v", seed, faults.rnd, err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if complete() {
		n := completed.Load()
		waitFor(t, done, func() bool { return completed.Load() >= n+2 }, "two more checkpoints")
	}
	got = sink.Results()
	cancel()
	<-done
	faults.mu.Lock()
	second := faults.secondDone
	faults.mu.Unlock()
	if diff := diffOnce(got, want); diff != "" || !second {
		if !second {
			diff += "; the second failure never struck"
		}
		t.Fatalf("seed %d (%s): %d records committed, %d written: %s", seed, faults.rnd, len(got), len(want), diff)
	}
	t.Logf("seed %d (%s): %d records exactly once, %d restores, %d checkpoints", seed, faults.rnd, len(got), restores.Load(), completed.Load())
}

// waitFor waits until cond holds, failing the test if the job ends or
// 30 s pass first.
func waitFor(t *testing.T, done <-chan error, cond func() bool, what string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for !cond() {
		select {
		case err := <-done:
			t.Fatalf("the job ended before %s: %v", what, err)
		case <-deadline:
			t.Fatalf("no %s after 30 s", what)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// diffOnce describes how got differs from holding every record of want
// exactly once, or returns "".
func diffOnce(got, want []string) string {
	count := map[string]int{}
	for _, v := range got {
		count[v]++
	}
	var missing, dups []string
	for _, v := range want {
		switch count[v] {
		case 0:
			missing = append(missing, v)
		case 1:
		default:
			dups = append(dups, fmt.Sprintf("%s×%d", v, count[v]))
		}
		delete(count, v)
	}
	var extra []string
	for v := range count {
		extra = append(extra, v)
	}
	if len(missing)+len(dups)+len(extra) == 0 {
		return ""
	}
	slices.Sort(extra)
	return fmt.Sprintf("%d missing %s, %d duplicated %s, %d never written %s",
		len(missing), head(missing), len(dups), head(dups), len(extra), head(extra))
}

func head(s []string) string {
	if len(s) > 5 {
		return fmt.Sprint(s[:5]) + "..."
	}
	return fmt.Sprint(s)
}

// TestPartitionsAddedWhileRunningAreRead: partitions added to a topic
// while a job reads it are discovered and read, every record once, without
// any restart: subtask 1 starts with no partition at all and gets one.
func TestPartitionsAddedWhileRunningAreRead(t *testing.T) {
	brokers := newCluster(t, 1, []string{"events"})
	ctx := testCtx(t)
	want := writeSplits(t, ctx, brokers, []string{"events-0"}, 0, 100)
	cfg, err := config.ParseDynamic([]string{"parallelism.default=2", "execution.checkpointing.interval=20 ms"})
	if err != nil {
		t.Fatal(err)
	}
	var restarts atomic.Int32
	env, err := stream.NewEnvironment(stream.WithConfig(cfg), stream.WithLogger(slog.New(slog.DiscardHandler)),
		stream.WithEvents(func(e stream.JobEvent) {
			if e.Kind == stream.EventRestarting {
				restarts.Add(1)
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	// A reader takes an added partition into its next fetch request,
	// which, on a quiet partition, waits up to the fetch max wait.
	src, err := kafka.NewSource(value, kafka.BootstrapServers(brokers...), kafka.Topics("events"),
		kafka.PartitionDiscoveryInterval(20*time.Millisecond), kafka.ClientOptions(kgo.FetchMaxWait(100*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	sink := streamtest.NewCollector[string](true)
	stream.SinkTo(stream.FromSource(env, src, "events", stream.NoWatermarks[string]()), sink, stream.Uid("sink"))
	jctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- env.Execute(jctx, "discovery") }()
	waitFor(t, done, func() bool { return len(sink.Results()) >= len(want) }, "the first partition's records")

	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreatePartitions(ctx, 2, "events"); err != nil {
		t.Fatal(err)
	}
	want = append(want, writeSplits(t, ctx, brokers, []string{"events-0"}, 100, 100)...)
	want = append(want, writeSplits(t, ctx, brokers, []string{"events-1", "events-2"}, 0, 100)...)
	waitFor(t, done, func() bool { return len(sink.Results()) >= len(want) }, "the added partitions' records")
	got := sink.Results()
	cancel()
	<-done
	if diff := diffOnce(got, want); diff != "" {
		t.Fatalf("%d records committed, %d written: %s", len(got), len(want), diff)
	}
	if n := restarts.Load(); n != 0 {
		t.Fatalf("the job restarted %d times: the partitions must be read without a restart", n)
	}
}

// writeSplits writes n records to each of the partitions named by their
// split ids, with values "<split>:<i>" for i from from, and returns the
// values.
func writeSplits(t *testing.T, ctx context.Context, brokers, splits []string, from, n int) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	var values []string
	for _, sp := range splits {
		i := strings.LastIndexByte(sp, '-')
		p, err := strconv.Atoi(sp[i+1:])
		if err != nil {
			t.Fatal(err)
		}
		for j := from; j < from+n; j++ {
			v := fmt.Sprintf("%s:%d", sp, j)
			recs = append(recs, &kgo.Record{Topic: sp[:i], Partition: int32(p), Value: []byte(v)})
			values = append(values, v)
		}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return values
}
