package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connector/datagen"
	"github.com/weirstream/weir/internal/cluster"
	"github.com/weirstream/weir/internal/clustercli"
	"github.com/weirstream/weir/internal/launch"
	"github.com/weirstream/weir/internal/netio"
	"github.com/weirstream/weir/internal/runtime"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

var quiet = slog.New(slog.DiscardHandler)

type rec struct {
	Key   string
	Value int64
	P     int
	Seq   int64
}

type keyedSum struct {
	Key string
	Sum int64
}

type runningSum struct {
	sum interface {
		Value() (int64, bool)
		Update(int64)
	}
}

func (f *runningSum) Open(rc *stream.RuntimeContext[string]) error {
	s, err := stream.ValueState[int64](rc, "sum")
	f.sum = s
	return err
}

func (f *runningSum) ProcessElement(ctx *stream.Context[string, keyedSum], r rec) error {
	s, _ := f.sum.Value()
	s += r.Value
	f.sum.Update(s)
	return ctx.Emit(keyedSum{Key: r.Key, Sum: s})
}

const (
	partitions   = 4
	perPartition = 3000
	keys         = 16
)

// keyNames are the keys, made once: formatting one per record would cost
// more than the rest of the job.
var keyNames = func() []string {
	ks := make([]string, keys)
	for i := range ks {
		ks[i] = fmt.Sprintf("k%02d", i)
	}
	return ks
}()

func gen(p int, seq int64) rec {
	return rec{Key: keyNames[(int64(p)*7+seq)%keys], Value: int64(p) + partitions*seq + 1, P: p, Seq: seq}
}

// sumJobs builds a keyed running sum over a rate-limited generator, with
// a transactional collecting sink shared by every role (they all run in
// this test's process).
type sumJobs struct {
	sink *streamtest.Collector[keyedSum]
	// discard, if set, replaces sink by one that drops everything.
	discard bool
	cfg     []string
	// mu guards cfg for a test that changes it between jobs.
	mu sync.Mutex
}

// setConfig replaces the configuration of the jobs submitted from now on.
func (j *sumJobs) setConfig(cfg []string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.cfg = cfg
}

// jobs returns the cluster.Jobs of the job, with events reported to
// events on the job manager's side.
func (j *sumJobs) jobs(events func(stream.JobEvent)) *envJobs {
	return newEnvJobs(j.env, stream.WithEvents(events))
}

type sumArgs struct {
	Rate float64 `json:"rate"`
	// Count is the records per partition (default perPartition).
	Count int64 `json:"count"`
}

func (j *sumJobs) env(sub cluster.Submission, opts ...stream.Option) (*stream.Environment, error) {
	var args sumArgs
	if err := json.Unmarshal(sub.Args, &args); err != nil {
		return nil, err
	}
	j.mu.Lock()
	cfg, err := config.ParseDynamic(j.cfg)
	j.mu.Unlock()
	if err != nil {
		return nil, err
	}
	env, err := stream.NewEnvironment(append([]stream.Option{stream.WithConfig(cfg), stream.WithJobID(sub.JobID), stream.WithLogger(quiet)}, opts...)...)
	if err != nil {
		return nil, err
	}
	count, batch := args.Count, 50
	if count == 0 {
		count = perPartition
	}
	var dgOpts []datagen.Option
	if args.Rate > 0 {
		dgOpts = append(dgOpts, datagen.RatePerSecond(args.Rate))
	} else {
		batch = 1024
	}
	src, err := datagen.New(gen, append(dgOpts, datagen.Partitions(partitions), datagen.Count(count), datagen.BatchSize(batch))...)
	if err != nil {
		return nil, err
	}
	in := stream.FromSource(env, src, "numbers", stream.NoWatermarks[rec]())
	sums := stream.Process(stream.KeyBy(in, func(r rec) string { return r.Key }), stream.KeyedProcessFunction[string, rec, keyedSum](&runningSum{}), stream.Uid("sum"))
	if j.discard {
		stream.SinkTo(sums, connector.Discard[keyedSum](), stream.Uid("sink"))
	} else {
		stream.SinkTo(sums, j.sink, stream.Uid("sink"))
	}
	return env, nil
}

// envJobs implements cluster.Jobs for the tests as binaries do, with
// clustercli.EnvJobs, and keeps the job last started.
type envJobs struct {
	clustercli.EnvJobs

	mu   sync.Mutex
	last *launch.Handle
}

// newEnvJobs builds every job with env, adding extra options (events).
func newEnvJobs(env func(cluster.Submission, ...stream.Option) (*stream.Environment, error), extra ...stream.Option) *envJobs {
	return &envJobs{EnvJobs: clustercli.EnvJobs{Logger: quiet,
		Env: func(sub cluster.Submission, _ *slog.Logger, opts ...stream.Option) (*stream.Environment, error) {
			return env(sub, append(opts, extra...)...)
		}}}
}

func (j *envJobs) Start(ctx context.Context, sub cluster.Submission, newExec func(*runtime.JobGraph, runtime.Listener) (runtime.Executor, error)) (cluster.Job, error) {
	job, err := j.EnvJobs.Start(ctx, sub, newExec)
	if err != nil {
		return nil, err
	}
	j.mu.Lock()
	j.last = job.(clustercli.StartedJob).Handle
	j.mu.Unlock()
	return job, nil
}

// job returns the job last started.
func (j *envJobs) job() *launch.Handle {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.last
}

// taskManager is a task manager running in the test's process.
type taskManager struct {
	tm     *cluster.TaskManager
	peers  *netio.Peers
	cancel context.CancelFunc
	done   chan struct{}
	err    error // Run's, once done is closed
}

func startTaskManager(t testing.TB, id, jmAddr string, slots int, jobs cluster.Jobs) *taskManager {
	t.Helper()
	return startTaskManagerWithToken(t, id, jmAddr, slots, jobs, "")
}

// startTaskManagerWithToken starts a task manager that authenticates with
// token, to the job manager and to other task managers; Run's error is
// on x.err once done is closed.
func startTaskManagerWithToken(t testing.TB, id, jmAddr string, slots int, jobs cluster.Jobs, token string) *taskManager {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	peers := netio.NewPeers(id, ln, quiet, netio.AuthToken(token))
	ctx, cancel := context.WithCancel(context.Background())
	x := &taskManager{tm: cluster.NewTaskManager(id, jmAddr, slots, jobs, peers, quiet, cluster.WithToken(token)), peers: peers, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(x.done)
		x.err = x.tm.Run(ctx)
	}()
	t.Cleanup(x.stop)
	return x
}

// stop ends the task manager: its session, its subtasks and its data
// connections, as a crash would.
func (x *taskManager) stop() {
	x.cancel()
	x.peers.Close()
	<-x.done
}

func startJobManager(t testing.TB, jobs cluster.Jobs, opts ...cluster.JobManagerOption) (*cluster.JobManager, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	jm := cluster.NewJobManager(jobs, append([]cluster.JobManagerOption{cluster.WithLogger(quiet), cluster.WithHeartbeat(100*time.Millisecond, time.Second)}, opts...)...)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = jm.Serve(context.Background(), ln)
	}()
	t.Cleanup(func() { jm.Close(); <-done })
	return jm, ln.Addr().String()
}

// check verifies exactly-once output: one sum per record, and each key's
// last sum is the total of its records.
func check(t *testing.T, out []keyedSum) {
	t.Helper()
	checkCount(t, out, perPartition)
}

// checkCount is check for an input of perPart records per partition.
func checkCount(t *testing.T, out []keyedSum, perPart int64) {
	t.Helper()
	count := map[string]int{}
	total := map[string]int64{}
	for p := range partitions {
		for seq := range perPart {
			r := gen(p, seq)
			count[r.Key]++
			total[r.Key] += r.Value
		}
	}
	gotCount := map[string]int{}
	gotMax := map[string]int64{}
	for _, s := range out {
		gotCount[s.Key]++
		gotMax[s.Key] = max(gotMax[s.Key], s.Sum)
	}
	for k := range count {
		if gotCount[k] != count[k] || gotMax[k] != total[k] {
			t.Errorf("key %s: %d sums (want %d), last %d (want %d)", k, gotCount[k], count[k], gotMax[k], total[k])
		}
	}
	if int64(len(out)) != partitions*perPart {
		t.Errorf("%d sums for %d records", len(out), partitions*perPart)
	}
}

// events records a job's events, and waits for them in turn.
type events struct {
	streamtest.Events
	next int // the index of the first event the next waitFor looks at
}

func newEvents() *events { return &events{} }

// waitFor returns the first event of kind after the one it returned last
// that satisfies ok (checked once, when the event is reported), failing
// the test if there is none within 60 s.
func (e *events) waitFor(t *testing.T, kind stream.EventKind, ok func(stream.JobEvent) bool) stream.JobEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var found stream.JobEvent
	err := e.WaitFor(ctx, func(evs []stream.JobEvent) bool {
		for ; e.next < len(evs); e.next++ {
			if ev := evs[e.next]; ev.Kind == kind && (ok == nil || ok(ev)) {
				found = ev
				e.next++
				return true
			}
		}
		return false
	})
	if err != nil {
		t.Fatalf("no event of kind %v: %v", kind, err)
	}
	return found
}

// waitTaskManagers waits until n task managers are registered.
func waitTaskManagers(t testing.TB, c *cluster.Client, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ov, err := c.List(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(ov.TaskManagers) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d task managers registered after 30 s, want %d", len(ov.TaskManagers), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func waitJob(t *testing.T, c *cluster.Client, jobID string) cluster.JobStatus {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		ov, err := c.List(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range ov.Jobs {
			if j.JobID == jobID && j.Ended() {
				return j
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Errorf("job %s still running after 30 s", jobID)
	return cluster.JobStatus{}
}

// TestClusterRunsAJobAcrossTaskManagers runs a keyed job over three task
// managers (so most channels cross processes' sockets) with checkpoints,
// and checks the output is exactly the oracle.
func TestClusterRunsAJobAcrossTaskManagers(t *testing.T) {
	sj, _, c := startSumCluster(t, 3)
	args, _ := json.Marshal(sumArgs{Rate: 20_000})
	id, err := c.Submit(context.Background(), cluster.Submission{JobID: "job-a", Job: "sum", Args: args})
	if err != nil {
		t.Fatal(err)
	}
	st := waitJob(t, c, id)
	if st.State != "FINISHED" {
		t.Fatalf("job ended %s: %s", st.State, st.Error)
	}
	if st.LastCheckpoint == 0 {
		t.Fatal("no checkpoint completed")
	}
	check(t, sj.sink.Results())
}

// startSumCluster starts a job manager and taskManagers task managers of
// two slots for the keyed sum at parallelism 4, checkpointing every 50 ms,
// and returns the jobs and a client of the job manager.
func startSumCluster(t *testing.T, taskManagers int) (*sumJobs, *envJobs, *cluster.Client) {
	t.Helper()
	sj := &sumJobs{sink: streamtest.NewCollector[keyedSum](true),
		cfg: []string{"parallelism.default=4", "execution.checkpointing.interval=50 ms"}}
	jobs := sj.jobs(newEvents().Record)
	_, addr := startJobManager(t, jobs)
	for i := range taskManagers {
		startTaskManager(t, fmt.Sprintf("tm-%d", i), addr, 2, jobs)
	}
	c, err := cluster.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return sj, jobs, c
}

// TestClusterRecoversFromALostTaskManager stops a task manager after the
// first completed checkpoint; the job manager declares it lost, the job
// restarts from the checkpoint once a replacement has registered, and the
// output is still exactly-once.
func TestClusterRecoversFromALostTaskManager(t *testing.T) {
	ev := newEvents()
	sj := &sumJobs{sink: streamtest.NewCollector[keyedSum](true),
		cfg: []string{"parallelism.default=4", "execution.checkpointing.interval=100 ms",
			"restart-strategy.type=fixed-delay", "restart-strategy.fixed-delay.attempts=5", "restart-strategy.fixed-delay.delay=100 ms"}}
	jobs := sj.jobs(ev.Record)
	_, addr := startJobManager(t, jobs)
	var tms []*taskManager
	for i := range 2 {
		tms = append(tms, startTaskManager(t, fmt.Sprintf("tm-%d", i), addr, 2, jobs))
	}
	c, err := cluster.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	args, _ := json.Marshal(sumArgs{Rate: 2_000})
	id, err := c.Submit(context.Background(), cluster.Submission{JobID: "job-b", Job: "sum", Args: args})
	if err != nil {
		t.Fatal(err)
	}
	ev.waitFor(t, stream.EventCheckpointCompleted, func(e stream.JobEvent) bool { return e.Checkpoint >= 2 })
	tms[1].stop()
	failed := ev.waitFor(t, stream.EventTaskFailed, nil)
	if failed.Err == nil {
		t.Fatalf("task failure without a cause: %+v", failed)
	}
	startTaskManager(t, "tm-2", addr, 2, jobs)
	restored := ev.waitFor(t, stream.EventRestored, nil)
	if restored.Checkpoint < 2 {
		t.Fatalf("restored from checkpoint %d, want at least 2", restored.Checkpoint)
	}
	st := waitJob(t, c, id)
	if st.State != "FINISHED" {
		t.Fatalf("job ended %s: %s", st.State, st.Error)
	}
	if st.Restarts == 0 {
		t.Fatal("the job did not restart")
	}
	check(t, sj.sink.Results())
}

// TestClusterCancelAndBadSubmissions: a canceled job ends CANCELED and
// frees its slots; a submission the job manager cannot start is refused
// with the reason.
func TestClusterCancelAndBadSubmissions(t *testing.T) {
	jobs := (&sumJobs{sink: streamtest.NewCollector[keyedSum](true), cfg: []string{"parallelism.default=2"}}).jobs(func(stream.JobEvent) {})
	_, addr := startJobManager(t, jobs)
	startTaskManager(t, "tm-0", addr, 2, jobs)
	c, err := cluster.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitTaskManagers(t, c, 1)
	if _, err := c.Submit(context.Background(), cluster.Submission{JobID: "bad", Job: "sum", Args: []byte(`{"rate": "fast"}`)}); err == nil || !strings.Contains(err.Error(), "rate") {
		t.Fatalf("a submission with bad arguments: %v, want an error naming them", err)
	}
	args, _ := json.Marshal(sumArgs{Rate: 10})
	id, err := c.Submit(context.Background(), cluster.Submission{JobID: "slow", Job: "sum", Args: args})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Submit(context.Background(), cluster.Submission{JobID: "slow", Job: "sum", Args: args}); err == nil {
		t.Fatal("a second job with the same id was accepted")
	}
	if err := c.Cancel(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	if st := waitJob(t, c, id); st.State != "CANCELED" {
		t.Fatalf("canceled job ended %s", st.State)
	}
	ov, err := c.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if ov.SlotsOccupied != 0 || ov.SlotsTotal != 2 {
		t.Fatalf("after the cancel %d of %d slots are in use, want 0 of 2", ov.SlotsOccupied, ov.SlotsTotal)
	}
	if err := c.Cancel(context.Background(), "nope"); err == nil {
		t.Fatal("canceling an unknown job succeeded")
	}
	if err := c.Cancel(context.Background(), id); err == nil || !strings.Contains(err.Error(), "job slow has already been canceled") {
		t.Fatalf("canceling a canceled job again: %v, want an error saying it had been", err)
	}
	done, _ := json.Marshal(sumArgs{})
	if _, err := c.Submit(context.Background(), cluster.Submission{JobID: "quick", Job: "sum", Args: done}); err != nil {
		t.Fatal(err)
	}
	if st := waitJob(t, c, "quick"); st.State != "FINISHED" {
		t.Fatalf("job quick ended %s: %s", st.State, st.Error)
	}
	if err := c.Cancel(context.Background(), "quick"); err == nil || !strings.Contains(err.Error(), "job quick has already finished") {
		t.Fatalf("canceling a finished job: %v, want an error saying it had finished", err)
	}
}

// TestJobManagerCancelJobAndTaskManagers: what the REST API reads and
// does through the job manager: TaskManagers lists the registered task
// managers with the job in each slot, and CancelJob cancels a job without
// waiting, which then ends CANCELED and frees its slots.
func TestJobManagerCancelJobAndTaskManagers(t *testing.T) {
	jobs := (&sumJobs{sink: streamtest.NewCollector[keyedSum](true), cfg: []string{"parallelism.default=2"}}).jobs(func(stream.JobEvent) {})
	jm, addr := startJobManager(t, jobs)
	startTaskManager(t, "tm-0", addr, 2, jobs)
	c, err := cluster.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitTaskManagers(t, c, 1)
	tms := jm.TaskManagers()
	if len(tms) != 1 || tms[0].ID != "tm-0" || tms[0].DataAddr == "" || !slices.Equal(tms[0].Jobs, []string{"", ""}) ||
		time.Since(tms[0].LastHeartbeat) > time.Minute {
		t.Fatalf("task managers %+v: want tm-0 with 2 free slots", tms)
	}
	args, _ := json.Marshal(sumArgs{Rate: 10})
	id, err := c.Submit(context.Background(), cluster.Submission{JobID: "slow", Job: "sum", Args: args})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !slices.Equal(jm.TaskManagers()[0].Jobs, []string{id, id}) {
		if time.Now().After(deadline) {
			t.Fatalf("slots %v, want both taken by %s", jm.TaskManagers()[0].Jobs, id)
		}
		time.Sleep(10 * time.Millisecond)
	}
	jm.CancelJob("nope") // unknown: nothing happens
	jm.CancelJob(id)
	if st := waitJob(t, c, id); st.State != "CANCELED" {
		t.Fatalf("job canceled with CancelJob ended %s", st.State)
	}
	if jobs := jm.TaskManagers()[0].Jobs; !slices.Equal(jobs, []string{"", ""}) {
		t.Fatalf("after the cancel the slots hold %v", jobs)
	}
}

// TestClusterUnalignedCheckpointsAcrossTaskManagers runs the keyed sum
// with unaligned checkpoints on two task managers, the sum slow enough that
// the channels between the processes stay full, and fails a sum subtask
// once checkpoints have completed: the checkpoints persist the records in
// flight across the network, the restore replays them, and the output is
// exactly once.
func TestClusterUnalignedCheckpointsAcrossTaskManagers(t *testing.T) {
	for _, mode := range []struct {
		name string
		cfg  []string
	}{
		{"unaligned", nil},
		// Barriers start aligned and cross the network behind records;
		// when the timeout passes, the receiving subtask moves them to
		// the front of its inputs.
		{"aligned-timeout", []string{"execution.checkpointing.aligned-checkpoint-timeout=5 ms"}},
	} {
		t.Run(mode.name, func(t *testing.T) { testClusterUnaligned(t, mode.cfg) })
	}
}

func testClusterUnaligned(t *testing.T, extra []string) {
	ev := newEvents()
	faults := streamtest.NewFaults()
	crash := faults.Add(stream.FaultBatch, streamtest.Fail(nil), streamtest.OnVertex("sum"), streamtest.OnSubtask(1),
		streamtest.When(func(stream.FaultSite) bool { return ev.Count(stream.EventCheckpointCompleted) >= 3 }))
	slow := faults.Add(stream.FaultBatch, streamtest.Delay(5*time.Millisecond), streamtest.OnVertex("sum"), streamtest.Always())
	replay := faults.Add(stream.FaultRestoreChannels, streamtest.Delay(0), streamtest.Always())
	sj := &sumJobs{sink: streamtest.NewCollector[keyedSum](true),
		cfg: append([]string{"parallelism.default=4", "execution.checkpointing.interval=20 ms", "execution.checkpointing.unaligned.enabled=true",
			"restart-strategy.type=fixed-delay", "restart-strategy.fixed-delay.attempts=5", "restart-strategy.fixed-delay.delay=0 ms"}, extra...)}
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
	// Batches of 50 as fast as the sums take them; three times the usual
	// input, so that the sum is still reading when the third checkpoint
	// completes, however long the checkpoints that persist the full
	// channels take.
	const count = 3 * perPartition
	args, _ := json.Marshal(sumArgs{Rate: 1e7, Count: count})
	id, err := c.Submit(context.Background(), cluster.Submission{JobID: "unaligned", Job: "sum", Args: args})
	if err != nil {
		t.Fatal(err)
	}
	st := waitJob(t, c, id)
	if st.State != "FINISHED" {
		t.Fatalf("job ended %s: %s", st.State, st.Error)
	}
	if !crash.Fired() {
		t.Fatalf("the sum never failed (slowed %d times, %d checkpoints): the test shows nothing about restores", slow.Count(), ev.Count(stream.EventCheckpointCompleted))
	}
	stats, _, err := jobs.job().Master().CheckpointStats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var unaligned, persisted int64
	for _, h := range stats.History {
		if h.Class == "completed" && h.CheckpointType == "UNALIGNED_CHECKPOINT" {
			unaligned++
			persisted += h.PersistedData
		}
	}
	if unaligned == 0 || persisted == 0 {
		t.Fatalf("%d unaligned checkpoints completed, persisting %d bytes in flight: the channels were not full", unaligned, persisted)
	}
	if !replay.Fired() {
		t.Error("the restore replayed no channel state")
	}
	t.Logf("%d unaligned checkpoints persisted %d bytes in flight; %d restarts", unaligned, persisted, st.Restarts)
	checkCount(t, sj.sink.Results(), count)
}
