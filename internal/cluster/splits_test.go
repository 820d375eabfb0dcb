package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/connector/datagen"
	"github.com/weirstream/weir/internal/cluster"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

// growing is a generated source whose splits grow while the job runs: it
// lists the first n of its partitions, newest first (as a listing of
// topics a and b puts a partition added to a before b's), and wants them
// listed every 20 ms.
type growing struct {
	*datagen.Source[int64]
	n *atomic.Int32
}

func (g growing) Splits(ctx context.Context) ([]string, error) {
	all, err := g.Source.Splits(ctx)
	if err != nil {
		return nil, err
	}
	ids := slices.Clone(all[:g.n.Load()])
	slices.Reverse(ids)
	return ids, nil
}

func (growing) SplitDiscoveryInterval() time.Duration { return 20 * time.Millisecond }

// growingJob reads a growing source on two subtasks, each its own
// failover region (source → map → exactly-once sink), and fails subtask 1
// once it has read a split it was assigned while it ran.
type growingJob struct {
	n    atomic.Int32
	sink *streamtest.Collector[int64]
	// read counts the records each split has passed the map.
	mu     sync.Mutex
	read   map[int64]int
	failed bool
}

func (j *growingJob) env(sub cluster.Submission, opts ...stream.Option) (*stream.Environment, error) {
	cfg, err := config.ParseDynamic([]string{"parallelism.default=2", "execution.checkpointing.interval=20 ms",
		"restart-strategy.type=fixed-delay", "restart-strategy.fixed-delay.attempts=3", "restart-strategy.fixed-delay.delay=0 ms",
		"jobmanager.execution.failover-strategy=region"})
	if err != nil {
		return nil, err
	}
	env, err := stream.NewEnvironment(append([]stream.Option{stream.WithConfig(cfg), stream.WithJobID(sub.JobID), stream.WithLogger(quiet), stream.WithFaults(j.fault)}, opts...)...)
	if err != nil {
		return nil, err
	}
	src, err := datagen.New(func(p int, seq int64) int64 { return int64(p)<<32 | seq },
		datagen.Partitions(4), datagen.BatchSize(20), datagen.RatePerSecond(3000))
	if err != nil {
		return nil, err
	}
	s := stream.FromSource(env, growing{src, &j.n}, "numbers", stream.NoWatermarks[int64]())
	s = stream.Map(s, func(v int64) int64 {
		j.mu.Lock()
		j.read[v>>32]++
		j.mu.Unlock()
		return v
	})
	stream.SinkTo(s, j.sink, stream.Uid("sink"))
	return env, nil
}

func (j *growingJob) fault(_ context.Context, site stream.FaultSite) error {
	if site.Point != stream.FaultBatch {
		return nil
	}
	task := site.Task
	j.mu.Lock()
	defer j.mu.Unlock()
	if task.Subtask == 1 && !j.failed && j.read[2] >= 100 {
		j.failed = true
		return errors.New("injected failure after a split was added")
	}
	return nil
}

// TestClusterAssignsDiscoveredSplits runs a job on two task managers
// whose source has one split when it starts, so that subtask 1 reads
// nothing, and two more later: the job manager assigns them to the
// running subtasks (datagen-2 to subtask 1, datagen-1 to subtask 0, where
// splitting the new listing "i mod 2" would give subtask 1 datagen-1),
// subtask 1 fails once it has read some of its new split and restarts
// alone, and every split's committed output is exactly its first records,
// each once.
func TestClusterAssignsDiscoveredSplits(t *testing.T) {
	j := &growingJob{sink: streamtest.NewCollector[int64](true), read: map[int64]int{}}
	j.n.Store(1)
	ev := newEvents()
	jobs := newEnvJobs(j.env, ev.Option())
	_, addr := startJobManager(t, jobs)
	for _, id := range []string{"tm-0", "tm-1"} {
		startTaskManager(t, id, addr, 1, jobs)
	}
	c, err := cluster.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	id, err := c.Submit(context.Background(), cluster.Submission{JobID: "growing", Job: "growing"})
	if err != nil {
		t.Fatal(err)
	}
	// committed returns each split's committed records.
	committed := func() map[int64][]int64 {
		by := map[int64][]int64{}
		for _, v := range j.sink.Results() {
			by[v>>32] = append(by[v>>32], v&(1<<32-1))
		}
		return by
	}
	ev.waitFor(t, stream.EventCheckpointCompleted, func(stream.JobEvent) bool { return len(committed()[0]) >= 100 })
	j.n.Store(3)
	ev.waitFor(t, stream.EventRestored, nil)
	deadline := time.Now().Add(30 * time.Second)
	for {
		by := committed()
		if len(by[0]) >= 300 && len(by[1]) >= 300 && len(by[2]) >= 300 {
			break
		}
		if time.Now().After(deadline) {
			dumpJob(t, ev, jobs.job())
			t.Fatalf("committed per split after 30 s: %d, %d, %d records, want 300 each", len(by[0]), len(by[1]), len(by[2]))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := c.Cancel(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	waitJob(t, c, id)
	by := committed()
	for p := range int64(3) {
		seqs := by[p]
		slices.Sort(seqs)
		for i, s := range seqs {
			if s != int64(i) {
				t.Fatalf("split datagen-%d: %d records committed, the %d-th is seq %d: %s", p, len(seqs), i, s, describe(seqs))
			}
		}
	}
	restarts := ev.Of(stream.EventRestarting)
	if len(restarts) != 1 || len(restarts[0].Tasks) != 1 {
		t.Fatalf("restarts %v, want one of subtask 1 alone", restarts)
	}
}

// describe sums up sorted sequence numbers: duplicates and gaps.
func describe(seqs []int64) string {
	dups, gaps := 0, 0
	for i := 1; i < len(seqs); i++ {
		switch d := seqs[i] - seqs[i-1]; {
		case d == 0:
			dups++
		case d > 1:
			gaps++
		}
	}
	return fmt.Sprintf("%d duplicates, %d gaps, first %d, last %d", dups, gaps, seqs[0], seqs[len(seqs)-1])
}
