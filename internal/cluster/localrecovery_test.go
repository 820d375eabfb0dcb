package cluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/cluster"
	"github.com/weirstream/weir/internal/launch"
	"github.com/weirstream/weir/internal/runtime"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

// restoredMetrics waits until every subtask of the sum reports a
// deployment of attempt at least attempt that has restored its state
// (a deployment's first metrics may come before its restore is done),
// and returns their metrics.
func restoredMetrics(t *testing.T, h *launch.Handle, attempt int) []runtime.SubtaskMetrics {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var sums []runtime.SubtaskMetrics
		for _, m := range h.Master().SubtaskMetrics() {
			if m.Task.Vertex == "sum" && m.Attempt >= attempt && m.RestoredLocalBytes+m.RestoredRemoteBytes > 0 {
				sums = append(sums, m)
			}
		}
		if len(sums) == 4 {
			return sums
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sum's subtasks of attempt %d did not all report a restore: %+v", attempt, h.Master().SubtaskMetrics())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestClusterLocalRecovery runs a keyed sum with local recovery over two
// task managers. A failure of one subtask restarts the job on the same
// task managers: every sum subtask restores its own state from its task
// manager's local copies (the restore's local and remote bytes are in its
// metrics). Then a task manager is killed and another joins: the two
// subtasks that move to it read only checkpoint storage, the two that
// stay restore locally. The output is exact.
func TestClusterLocalRecovery(t *testing.T) {
	ev := newEvents()
	var mu sync.Mutex
	failed := false
	fault := func(_ context.Context, site stream.FaultSite) error {
		if site.Point != stream.FaultBatch || site.Task.Vertex != "sum" || site.Task.Subtask != 0 || site.Attempt != 0 {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		if !failed && len(ev.Of(stream.EventCheckpointCompleted)) >= 2 {
			failed = true
			return errors.New("injected failure of sum[0]")
		}
		return nil
	}
	sj := &sumJobs{sink: streamtest.NewCollector[keyedSum](true),
		cfg: []string{"parallelism.default=4", "execution.checkpointing.interval=50 ms",
			"execution.checkpointing.dir=" + t.TempDir(), "execution.checkpointing.data-inline-threshold=0 b",
			"execution.state-recovery.from-local=true", "execution.checkpointing.local-backup.dirs=" + t.TempDir(),
			"jobmanager.execution.failover-strategy=full",
			"restart-strategy.type=fixed-delay", "restart-strategy.fixed-delay.attempts=5", "restart-strategy.fixed-delay.delay=100 ms"}}
	jobs := newEnvJobs(sj.env, ev.Option(), stream.WithFaults(fault))
	_, addr := startJobManager(t, jobs)
	var tms []*taskManager
	for _, id := range []string{"tm-0", "tm-1"} {
		tms = append(tms, startTaskManager(t, id, addr, 2, jobs))
	}
	c, err := cluster.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	args, _ := json.Marshal(sumArgs{Rate: 1_000})
	id, err := c.Submit(context.Background(), cluster.Submission{JobID: "job-local", Job: "sum", Args: args})
	if err != nil {
		t.Fatal(err)
	}
	if r := ev.waitFor(t, stream.EventRestored, nil); r.Checkpoint < 2 {
		t.Fatalf("restored checkpoint %d, want at least 2", r.Checkpoint)
	}
	h := jobs.job()
	// Each subtask's own files come from local copies; the sink's
	// location is union state, every subtask's read by every one, and
	// the files written on the other task manager come from storage.
	for _, m := range restoredMetrics(t, h, 1) {
		if m.RestoredLocalBytes == 0 {
			t.Errorf("%s (attempt %d) restored %d bytes locally and %d from checkpoint storage on the task manager that ran it: want its own state local",
				m.Task, m.Attempt, m.RestoredLocalBytes, m.RestoredRemoteBytes)
		}
	}

	ev.waitFor(t, stream.EventCheckpointCompleted, nil)
	tms[1].stop()
	startTaskManager(t, "tm-2", addr, 2, jobs)
	ev.waitFor(t, stream.EventRestored, func(e stream.JobEvent) bool { return e.Checkpoint > 0 })
	var local, remote int
	for _, m := range restoredMetrics(t, h, 2) {
		switch {
		case m.RestoredLocalBytes > 0:
			local++ // on the task manager that survived
		default:
			remote++ // moved to the new one: nothing there is local
		}
	}
	if local != 2 || remote != 2 {
		t.Errorf("after losing a task manager %d sum subtasks restored their state locally and %d only from checkpoint storage: want 2 and 2", local, remote)
	}
	st := waitJob(t, c, id)
	if st.State != "FINISHED" {
		t.Fatalf("job ended %s: %s", st.State, st.Error)
	}
	check(t, sj.sink.Results())
}
