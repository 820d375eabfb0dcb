package cluster_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/connector/datagen"
	"github.com/weirstream/weir/internal/cluster"
	"github.com/weirstream/weir/internal/launch"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

// twoPipelines is a job of two disconnected pipelines, a and b: a
// rate-limited source, a rebalance (so records cross task managers) and
// an exactly-once sink each. Subtask 1 of a's source fails once.
type twoPipelines struct {
	sinks map[string]*streamtest.Collector[int64]

	mu     sync.Mutex
	failed bool
}

const pipelineRecords = 2000 // per partition

func (j *twoPipelines) fault(_ context.Context, site stream.FaultSite) error {
	if site.Point != stream.FaultBatch {
		return nil
	}
	task, attempt, records := site.Task, site.Attempt, site.Records
	j.mu.Lock()
	defer j.mu.Unlock()
	if task.Vertex == "a-source" && task.Subtask == 1 && attempt == 0 && records >= 500 && !j.failed {
		j.failed = true
		return errors.New("injected failure in pipeline a")
	}
	return nil
}

func (j *twoPipelines) env(sub cluster.Submission, opts ...stream.Option) (*stream.Environment, error) {
	cfg, err := config.ParseDynamic([]string{"parallelism.default=2", "execution.checkpointing.interval=50 ms",
		"restart-strategy.type=fixed-delay", "restart-strategy.fixed-delay.attempts=3", "restart-strategy.fixed-delay.delay=0 ms",
		"jobmanager.execution.failover-strategy=region"})
	if err != nil {
		return nil, err
	}
	env, err := stream.NewEnvironment(append([]stream.Option{stream.WithConfig(cfg), stream.WithJobID(sub.JobID), stream.WithLogger(quiet), stream.WithFaults(j.fault)}, opts...)...)
	if err != nil {
		return nil, err
	}
	for _, name := range []string{"a", "b"} {
		src, err := datagen.New(func(p int, seq int64) int64 { return int64(p)*pipelineRecords + seq },
			datagen.Partitions(2), datagen.Count(pipelineRecords), datagen.BatchSize(20), datagen.RatePerSecond(4000))
		if err != nil {
			return nil, err
		}
		s := stream.FromSource(env, src, name+"-source", stream.NoWatermarks[int64]())
		s = stream.Rebalance(s, stream.Uid(name+"-rebalance"))
		stream.SinkTo(s, j.sinks[name], stream.Uid(name+"-sink"))
	}
	return env, nil
}

// TestClusterRegionFailover fails a subtask of one of two disconnected
// pipelines running across two task managers: the region strategy
// redeploys only that pipeline's subtasks, on the cluster, while the other
// keeps running, and both outputs are exactly-once.
func TestClusterRegionFailover(t *testing.T) {
	ev := newEvents()
	tp := &twoPipelines{sinks: map[string]*streamtest.Collector[int64]{
		"a": streamtest.NewCollector[int64](true), "b": streamtest.NewCollector[int64](true)}}
	jobs := newEnvJobs(tp.env, ev.Option())
	_, addr := startJobManager(t, jobs)
	for _, id := range []string{"tm-0", "tm-1"} {
		startTaskManager(t, id, addr, 2, jobs)
	}
	c, err := cluster.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	id, err := c.Submit(context.Background(), cluster.Submission{JobID: "regions", Job: "two-pipelines"})
	if err != nil {
		t.Fatal(err)
	}
	st := waitJob(t, c, id)
	if st.State != "FINISHED" {
		dumpJob(t, ev, jobs.job())
		t.Fatalf("job ended %s: %s", st.State, st.Error)
	}
	restarts := ev.Of(stream.EventRestarting)
	if len(restarts) != 1 {
		t.Fatalf("%d restarts, want 1", len(restarts))
	}
	var vertices []string
	for _, task := range restarts[0].Tasks {
		if !slices.Contains(vertices, task.Vertex) {
			vertices = append(vertices, task.Vertex)
		}
	}
	slices.Sort(vertices)
	if !slices.Equal(vertices, []string{"a-rebalance", "a-source"}) || len(restarts[0].Tasks) != 4 {
		t.Fatalf("restarted %v, want the 4 subtasks of pipeline a only", restarts[0].Tasks)
	}
	for name, sink := range tp.sinks {
		got := sink.Results()
		slices.Sort(got)
		if len(got) != 2*pipelineRecords {
			t.Errorf("pipeline %s: %d records, want %d", name, len(got), 2*pipelineRecords)
			continue
		}
		for i, v := range got {
			if v != int64(i) {
				t.Errorf("pipeline %s: record %d is %d", name, i, v)
				break
			}
		}
	}
}

// dumpJob logs what a test needs to see why a job did not finish: its
// events, its subtasks and the checkpoints in progress.
func dumpJob(t *testing.T, ev *events, c *launch.Handle) {
	t.Helper()
	for _, e := range ev.All() {
		t.Logf("event %d checkpoint %d task %s tasks %v err %v %s", e.Kind, e.Checkpoint, e.Task, e.Tasks, e.Err, e.Message)
	}
	if c == nil {
		return
	}
	for _, m := range c.Master().SubtaskMetrics() {
		t.Logf("subtask %s attempt %d records %d last checkpoint %d", m.Task, m.Attempt, m.RecordsIn, m.LastCheckpoint)
	}
	s, ok, _ := c.Master().CheckpointStats(context.Background())
	if !ok {
		return
	}
	for _, h := range s.History {
		if h.Status != "IN_PROGRESS" {
			continue
		}
		for v, ts := range h.Tasks {
			t.Logf("checkpoint %d in progress: %s acknowledged by %d of %d subtasks", h.ID, v, ts.NumAcknowledgedSubtasks, ts.NumSubtasks)
		}
	}
}
