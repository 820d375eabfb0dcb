package stream_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/connector/datagen"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

// TestUnalignedCheckpointRescales runs numbers → rebalance → a slow pass →
// keyBy → a slow running sum at parallelism 2 with unaligned checkpoints,
// so that both exchanges stay full and the checkpoints persist records in
// flight on each; cancels it once such a checkpoint is retained; and
// resumes a new job from that checkpoint at a seeded other parallelism,
// one of whose subtasks fails its first read of the channel state.
// The records in flight must be placed on the new subtasks — by key
// group on the hash exchange, by old subtask on the rebalance — and the
// sink's committed output must hold every record's sum exactly once.
func TestUnalignedCheckpointRescales(t *testing.T) {
	// Enough records that the first job, at its cost per record, runs for
	// seconds: it must not end before such a checkpoint is taken.
	const partitions, perPartition = 2, 20000
	for _, seed := range diffSeedList(3) {
		r := rand.New(rand.NewPCG(seed, 91))
		parallelism := []int{1, 3, 4}[r.IntN(3)]
		backend := []string{"hashmap", "pebble"}[r.IntN(2)]
		name := fmt.Sprintf("seed=%d resumed-parallelism=%d backend=%s", seed, parallelism, backend)
		gen := func(p int, seq int64) rec {
			return rec{Key: fmt.Sprintf("k%d", datagen.Mix(seed, p, seq)%300), Value: int64(p) + 2*seq + 1, P: p, Seq: seq}
		}
		dir := t.TempDir()
		sink := streamtest.NewCollector[KeyedSum](true)
		var jobOpts []stream.Option
		start := func(ctx context.Context, jobID string, cost time.Duration, extra ...string) *stream.JobClient {
			conf := append([]string{"parallelism.default=2", "state.backend.type=" + backend,
				"execution.checkpointing.interval=30 ms", "execution.checkpointing.dir=" + dir,
				"execution.checkpointing.unaligned.enabled=true", "execution.checkpointing.num-retained=100",
				"execution.checkpointing.externalized-checkpoint-retention=RETAIN_ON_CANCELLATION"}, extra...)
			env, err := stream.NewEnvironment(append([]stream.Option{stream.WithConfig(mustConfig(t, conf...)), stream.WithLogger(quiet), stream.WithJobID(jobID)}, jobOpts...)...)
			if err != nil {
				t.Fatal(err)
			}
			src, _ := datagen.New(gen, datagen.Partitions(partitions), datagen.Count(perPartition), datagen.BatchSize(16))
			in := stream.FromSource(env, src, "numbers", stream.NoWatermarks[rec]())
			slow := stream.Map(stream.Rebalance(in), slowPass(cost), stream.Uid("slow"), stream.DisableChaining())
			sums := stream.Process(stream.KeyBy(slow, func(r rec) string { return r.Key }),
				stream.KeyedProcessFunction[string, rec, KeyedSum](&slowSum{cost: cost}), stream.Uid("sum"))
			stream.SinkTo(sums, sink, stream.Uid("sink"))
			c, err := env.ExecuteAsync(ctx, "rescale")
			if err != nil {
				t.Fatal(err)
			}
			return c
		}

		// The first job, until a retained checkpoint holds records in
		// flight into both the slow pass and the sum.
		ctx, cancel := context.WithCancel(context.Background())
		first := start(ctx, "first", 40*time.Microsecond)
		path := checkpointWithInFlight(t, name, dir, "first", first, "slow", "sum")
		cancel()
		<-first.Done()

		// The first read of the checkpoint's channel state by one subtask
		// of the resumed job fails: its restore is retried, and the
		// records in flight are still placed once.
		faults := streamtest.NewFaults()
		broken := faults.Add(stream.FaultRestoreChannels, streamtest.Fail(nil),
			streamtest.OnVertex([]string{"slow", "sum"}[r.IntN(2)]), streamtest.OnSubtask(r.IntN(parallelism)), streamtest.InAttempt(0))
		jobOpts = []stream.Option{faults.Option()}
		ctx2, cancel2 := context.WithCancel(context.Background())
		second := start(ctx2, "second", 0, "execution.state-recovery.path="+path, fmt.Sprintf("parallelism.default=%d", parallelism),
			"restart-strategy.type=fixed-delay", "restart-strategy.fixed-delay.attempts=3", "restart-strategy.fixed-delay.delay=10 ms")
		select {
		case <-second.Done():
		case <-time.After(2 * time.Minute):
			cancel2()
			t.Fatalf("%s: the job resumed from %s did not finish within two minutes (%v)", name, path, second.Wait())
		}
		cancel2()
		if err := second.Wait(); err != nil {
			t.Fatalf("%s: the job resumed from %s: %v", name, path, err)
		}
		if !broken.Fired() {
			t.Fatalf("%s: no read of channel state failed (%s): the restore read none on that subtask", name, broken)
		}
		if err := checkRunningSums(sink.Results(), recordsByKey(gen, partitions, perPartition)); err != nil {
			t.Fatalf("%s: resumed from %s: %v", name, path, err)
		}
		t.Logf("%s: resumed exactly from %s, past a failed read of its channel state", name, path)
	}
}

// TestUnalignedCheckpointWithBroadcastInFlight: records in flight on a
// broadcast exchange cannot be placed at another parallelism (which old
// subtask's copies a new one should replay is not defined), so a resume
// from such a checkpoint at parallelism 3 fails saying so, and one at the
// checkpoint's own parallelism resumes.
func TestUnalignedCheckpointWithBroadcastInFlight(t *testing.T) {
	dir := t.TempDir()
	gen := func(p int, seq int64) rec { return rec{Key: "k", Value: 1, P: p, Seq: seq} }
	sink := streamtest.NewCollector[rec](true)
	start := func(ctx context.Context, jobID string, cost time.Duration, extra ...string) *stream.JobClient {
		conf := append([]string{"parallelism.default=2", "execution.checkpointing.interval=30 ms", "execution.checkpointing.dir=" + dir,
			"execution.checkpointing.unaligned.enabled=true", "execution.checkpointing.num-retained=100",
			"execution.checkpointing.externalized-checkpoint-retention=RETAIN_ON_CANCELLATION",
			"restart-strategy.type=none"}, extra...)
		env, err := stream.NewEnvironment(stream.WithConfig(mustConfig(t, conf...)), stream.WithLogger(quiet), stream.WithJobID(jobID))
		if err != nil {
			t.Fatal(err)
		}
		src, _ := datagen.New(gen, datagen.Partitions(2), datagen.Count(20000), datagen.BatchSize(16))
		in := stream.FromSource(env, src, "numbers", stream.NoWatermarks[rec]())
		slow := stream.Map(stream.Broadcast(in), slowPass(cost), stream.Uid("slow"), stream.DisableChaining())
		stream.SinkTo(slow, sink, stream.Uid("sink"))
		c, err := env.ExecuteAsync(ctx, "broadcast")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	ctx, cancel := context.WithCancel(context.Background())
	first := start(ctx, "first", 40*time.Microsecond)
	path := checkpointWithInFlight(t, "broadcast", dir, "first", first, "slow")
	cancel()
	<-first.Done()

	err := start(context.Background(), "rescaled", 0, "execution.state-recovery.path="+path, "parallelism.default=3").Wait()
	if err == nil || !strings.Contains(err.Error(), "broadcast edge") || !strings.Contains(err.Error(), "restore it at the parallelism it was taken with") {
		t.Fatalf("a resume at parallelism 3 with records in flight on a broadcast edge: %v, want a refusal that says why", err)
	}
	if err := start(context.Background(), "same", 0, "execution.state-recovery.path="+path).Wait(); err != nil {
		t.Fatalf("a resume at the checkpoint's parallelism: %v", err)
	}
}

// checkpointWithInFlight waits until job jobID, running as client c with
// checkpoints in dir, has retained a checkpoint that holds records in
// flight into every one of the operators uids, and returns its path.
func checkpointWithInFlight(t *testing.T, name, dir, jobID string, c *stream.JobClient, uids ...string) string {
	t.Helper()
	st, err := storage.Open(context.Background(), dir, jobID)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for deadline := time.Now().Add(2 * time.Minute); ; {
		select {
		case <-c.Done():
			t.Fatalf("%s: the job ended (%v) before a checkpoint held records in flight into %v", name, c.Wait(), uids)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no checkpoint held records in flight into %v within two minutes", name, uids)
		}
		md, _, err := st.Latest(context.Background())
		if err != nil || md == nil {
			continue
		}
		if !slices.ContainsFunc(uids, func(uid string) bool {
			op, ok := md.Operator(uid)
			return !ok || !slices.ContainsFunc(op.Subtasks, func(s checkpoint.SubtaskState) bool { return len(s.InputChannels) > 0 })
		}) {
			return st.CheckpointPath(md.CheckpointID)
		}
	}
}
