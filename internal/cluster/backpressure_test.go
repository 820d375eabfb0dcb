package cluster_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connector/datagen"
	"github.com/weirstream/weir/internal/cluster"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

// slowJob is an unbounded generator → keyBy → running sum whose subtasks
// take 20 ms per batch: a slow consumer on the other side of the network.
func slowJob(sub cluster.Submission, opts ...stream.Option) (*stream.Environment, error) {
	cfg, err := config.ParseDynamic([]string{"parallelism.default=2"})
	if err != nil {
		return nil, err
	}
	slow := streamtest.NewFaults()
	slow.Add(stream.FaultBatch, streamtest.Delay(20*time.Millisecond), streamtest.OnVertex("sum"), streamtest.Always())
	env, err := stream.NewEnvironment(append([]stream.Option{stream.WithConfig(cfg), stream.WithJobID(sub.JobID), stream.WithLogger(quiet), slow.Option()}, opts...)...)
	if err != nil {
		return nil, err
	}
	src, err := datagen.New(gen, datagen.Partitions(2), datagen.BatchSize(1024))
	if err != nil {
		return nil, err
	}
	in := stream.FromSource(env, src, "numbers", stream.NoWatermarks[rec]())
	sums := stream.Process(stream.KeyBy(in, func(r rec) string { return r.Key }), stream.KeyedProcessFunction[string, rec, keyedSum](&runningSum{}), stream.Uid("sum"))
	stream.SinkTo(sums, connector.Discard[keyedSum](), stream.Uid("sink"))
	return env, nil
}

// TestClusterBackpressureIsBounded runs an unbounded source against a
// slow keyed operator on two task managers, so half of the channels cross
// the network. The sources must be held back: they wait on their outputs,
// and what they emitted beyond what the operator received stays within
// the buffers (per channel: the sending channel, the network credit, the
// receiving channel, each a few batches), however long the job runs.
func TestClusterBackpressureIsBounded(t *testing.T) {
	jobs := newEnvJobs(slowJob)
	_, addr := startJobManager(t, jobs)
	for _, id := range []string{"tm-0", "tm-1"} {
		startTaskManager(t, id, addr, 1, jobs)
	}
	c, err := cluster.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitTaskManagers(t, c, 2)
	args, _ := json.Marshal(struct{}{})
	id, err := c.Submit(context.Background(), cluster.Submission{JobID: "slow", Job: "slow", Args: args})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Cancel(context.Background(), id)

	// 4 channels (2 sources × 2 sums), each holding at most 4 batches in
	// the sender's channel, 4 in network credit and 4 in the receiver's,
	// of 1024 records, plus a partial batch per channel in the writer and
	// one batch being processed per subtask.
	const bound = 4*(4+4+4+1)*1024 + 2*1024
	var sent, received int64
	var waited int64
	start := time.Now()
	deadline := start.Add(30 * time.Second)
	for time.Now().Before(deadline) {
		sent, received, waited = 0, 0, 0
		for _, m := range jobs.job().Master().SubtaskMetrics() {
			switch m.Task.Vertex {
			case "numbers":
				sent += m.RecordsIn
				waited += m.OutBackpressuredNanos
			case "sum":
				received += m.RecordsIn
			}
		}
		if gap := sent - received; gap > bound {
			t.Fatalf("the sources ran %d records ahead of the slow operator (sent %d, received %d): more than the buffers hold (%d)", gap, sent, received, bound)
		}
		// Two seconds of a slow operator: unbounded buffering would have
		// let the sources run millions of records ahead by then.
		if time.Since(start) > 2*time.Second && received > 20*1024 && waited > int64(500*time.Millisecond) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if waited <= int64(500*time.Millisecond) || received <= 20*1024 {
		t.Fatalf("no backpressure after 30 s: the sources waited %v on their outputs, the operator received %d records", time.Duration(waited), received)
	}
	t.Logf("sources sent %d, the slow operator received %d (gap %d ≤ %d); the sources waited %v on their outputs",
		sent, received, sent-received, bound, time.Duration(waited))
}
