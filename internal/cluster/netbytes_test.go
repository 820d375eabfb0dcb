package cluster_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/cluster"
	"github.com/weirstream/weir/internal/runtime"
)

// TestClusterCountsNetworkBytes runs the keyed sum at parallelism 4 on two
// task managers of two slots: each sum subtask reads from the two numbers
// subtasks of its own task manager in memory and from the other two over
// the network. Every subtask reports the bytes of its channels to other
// processes, and whether those are all of its channels.
func TestClusterCountsNetworkBytes(t *testing.T) {
	sj, jobs, c := startSumCluster(t, 2)
	waitTaskManagers(t, c, 2)
	args, _ := json.Marshal(sumArgs{Rate: 5_000})
	id, err := c.Submit(context.Background(), cluster.Submission{JobID: "job-bytes", Job: "sum", Args: args})
	if err != nil {
		t.Fatal(err)
	}
	// Wait until every sum subtask has received bytes, and every numbers
	// subtask has sent some, in one report.
	var ms []runtime.SubtaskMetrics
	deadline := time.Now().Add(60 * time.Second)
	for {
		ms = nil
		if h := jobs.job(); h != nil {
			ms = h.Master().SubtaskMetrics()
		}
		in, out := 0, 0
		for _, m := range ms {
			if m.Task.Vertex == "sum" && m.NetBytesIn > 0 {
				in++
			}
			if m.Task.Vertex != "sum" && m.Task.Vertex != "sink" && m.NetBytesOut > 0 {
				out++
			}
		}
		if in == 4 && out == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not every subtask reported network bytes: %+v", ms)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, m := range ms {
		switch m.Task.Vertex {
		case "sum":
			if m.NetInAll {
				t.Errorf("sum subtask %d: every input channel counted as crossing processes, but two of four are local", m.Task.Subtask)
			}
		case "sink":
		default: // the source, which has no input channels
			if m.NetBytesIn != 0 || !m.NetInAll {
				t.Errorf("source subtask %d: %d bytes in (all: %v), want 0 of all", m.Task.Subtask, m.NetBytesIn, m.NetInAll)
			}
			if m.NetOutAll {
				t.Errorf("source subtask %d: every output channel counted as crossing processes, but two of four are local", m.Task.Subtask)
			}
		}
	}
	st := waitJob(t, c, id)
	if st.State != "FINISHED" {
		t.Fatalf("job ended %s: %s", st.State, st.Error)
	}
	check(t, sj.sink.Results())
}
