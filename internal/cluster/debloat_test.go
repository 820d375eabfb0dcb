package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/cluster"
	"github.com/weirstream/weir/internal/runtime"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

// TestClusterDebloatAcrossTaskManagers runs the keyed sum at parallelism 4
// on two task managers, so that half of every sum's input channels cross
// the network, with aligned checkpoints and buffer debloating (target 1
// ms), fails a sum subtask once checkpoints have completed, and checks the
// output is exactly once. Each sum takes 5 ms per batch and a batch holds
// at most the floor of 64 records, so it consumes at most 12,800 records a
// second, 3 a channel within the target: its limit stays at the floor.
// Both ends of a channel between task managers start there, so every
// aligned barrier finds at most 64 records queued ahead of it, on the
// network's channels as on the local ones.
func TestClusterDebloatAcrossTaskManagers(t *testing.T) {
	ev := newEvents()
	faults := streamtest.NewFaults()
	crash := faults.Add(stream.FaultBatch, streamtest.Fail(nil), streamtest.OnVertex("sum"), streamtest.OnSubtask(1),
		streamtest.When(func(stream.FaultSite) bool { return ev.Count(stream.EventCheckpointCompleted) >= 3 }))
	faults.Add(stream.FaultBatch, streamtest.Delay(5*time.Millisecond), streamtest.OnVertex("sum"), streamtest.Always())
	sj := &sumJobs{sink: streamtest.NewCollector[keyedSum](true),
		cfg: []string{"parallelism.default=4", "execution.checkpointing.interval=20 ms",
			"taskmanager.network.memory.buffer-debloat.enabled=true", "taskmanager.network.memory.buffer-debloat.target=1 ms",
			"taskmanager.network.memory.buffer-debloat.period=10 ms",
			"restart-strategy.type=fixed-delay", "restart-strategy.fixed-delay.attempts=5", "restart-strategy.fixed-delay.delay=0 ms"}}
	jobs := newEnvJobs(sj.env, stream.WithEvents(ev.Record), faults.Option())
	_, addr := startJobManager(t, jobs)
	for i := range 2 {
		startTaskManager(t, fmt.Sprintf("tm-%d", i), addr, 2, jobs)
	}
	c, err := cluster.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitTaskManagers(t, c, 2)
	args, _ := json.Marshal(sumArgs{Rate: 1e7})
	id, err := c.Submit(context.Background(), cluster.Submission{JobID: "debloat", Job: "sum", Args: args})
	if err != nil {
		t.Fatal(err)
	}
	// The sums' metrics as the task managers report them, while the job
	// runs.
	var mu sync.Mutex
	var seen []runtime.SubtaskMetrics
	stop := make(chan struct{})
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for {
			if h := jobs.job(); h != nil {
				for _, m := range h.Master().SubtaskMetrics() {
					if m.Task.Vertex == "sum" {
						mu.Lock()
						seen = append(seen, m)
						mu.Unlock()
					}
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	st := waitJob(t, c, id)
	close(stop)
	<-polled
	if st.State != "FINISHED" {
		t.Fatalf("job ended %s: %s", st.State, st.Error)
	}
	if !crash.Fired() {
		t.Fatalf("the sum never failed (%d checkpoints): the test shows nothing about restores", ev.Count(stream.EventCheckpointCompleted))
	}
	check(t, sj.sink.Results())
	var limited, ahead int64
	for _, m := range seen {
		if m.InFlightLimit != 0 && m.InFlightLimit != runtime.DebloatFloor {
			t.Errorf("sum subtask %d reported an in-flight limit of %d, want the floor, %d", m.Task.Subtask, m.InFlightLimit, runtime.DebloatFloor)
		}
		if m.InFlightLimit != 0 {
			limited++
		}
		ahead = max(ahead, m.BarrierInFlightMax)
	}
	if limited == 0 {
		t.Fatalf("no sum subtask reported an in-flight limit in %d reports", len(seen))
	}
	if ahead > runtime.DebloatFloor {
		t.Errorf("an aligned barrier found %d records ahead of it on a channel limited to %d", ahead, runtime.DebloatFloor)
	}
	t.Logf("%d reports with a limit of %d; at most %d records ahead of an aligned barrier; %d restarts", limited, runtime.DebloatFloor, ahead, st.Restarts)
}
