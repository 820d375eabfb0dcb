package stream_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/weirstream/weir/connector/datagen"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/runtime"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

// TestFinishedSubtaskLargeStateSurvivesRestore runs two pipelines into one
// exactly-once sink: a bounded source of many short splits whose position
// map (above the 20 KiB inline threshold, so a file) is complete within
// milliseconds, feeding a keyed running sum over thousands of keys (a file
// too), and a slow source that keeps running. Once the first pipeline has
// finished, the second fails, after a seeded number of further
// checkpoints, and again after the restore; with num-retained 1 the
// checkpoint that wrote the finished subtasks' files is discarded by then.
// The output must hold every record's sum exactly once: a finished split
// read again after a restore duplicates its records.
func TestFinishedSubtaskLargeStateSurvivesRestore(t *testing.T) {
	const (
		smallSplits, smallPerSplit = 800, 4
		smallTotal                 = smallSplits * smallPerSplit
		smallKeys                  = 3000
		longSplits, longPerSplit   = 2, 2500
	)
	carriedAfterDiscard := 0
	for _, seed := range diffSeedList() {
		r := rand.New(rand.NewPCG(seed, 31))
		retained := 1 + r.IntN(3)
		after := []int{2 + r.IntN(4), 2 + r.IntN(4)} // checkpoints before each failure
		name := fmt.Sprintf("seed=%d num-retained=%d failures after %v checkpoints", seed, retained, after)
		dir := t.TempDir()
		jobID := fmt.Sprintf("finished-%d", seed)

		genSmall := func(p int, seq int64) rec {
			return rec{Key: fmt.Sprintf("s%04d", datagen.Mix(seed, p, seq)%smallKeys), Value: int64(p*smallPerSplit) + seq + 1, P: p, Seq: seq}
		}
		genLong := func(p int, seq int64) rec {
			return rec{Key: fmt.Sprintf("l%d", datagen.Mix(seed, p, seq)%5), Value: int64(p) + longSplits*seq + 1, P: p, Seq: seq}
		}

		var (
			mu          sync.Mutex
			completed   int
			failAt      = -1 // checkpoints completed when the next failure strikes
			struck      int
			restores    []string
			restoreErrs []error
		)
		st, err := storage.Open(context.Background(), dir, jobID)
		if err != nil {
			t.Fatal(err)
		}
		onEvent := func(e stream.JobEvent) {
			mu.Lock()
			defer mu.Unlock()
			switch e.Kind {
			case runtime.EventCheckpointCompleted:
				completed++
			case runtime.EventRestored:
				if e.Checkpoint == 0 {
					return
				}
				// Inspect the checkpoint being restored while it is the
				// job's newest: where the finished subtasks' state lives.
				how, err := finishedStateOf(st, e.Message)
				restores = append(restores, how)
				restoreErrs = append(restoreErrs, err)
			}
		}
		fault := func(task stream.TaskInfo, attempt int, records int64) error {
			mu.Lock()
			defer mu.Unlock()
			if task.Vertex == "small-sum" && records >= smallTotal && failAt < 0 && struck == 0 {
				failAt = completed + after[0]
			}
			if task.Vertex == "long-sum" && failAt >= 0 && completed >= failAt && attempt == struck && struck < len(after) {
				struck++
				failAt = -1
				if struck < len(after) {
					failAt = completed + after[struck]
				}
				return fmt.Errorf("injected failure %d after %d checkpoints", struck, completed)
			}
			return nil
		}
		env, err := stream.NewEnvironment(
			stream.WithConfig(mustConfig(t, "parallelism.default=2", "execution.checkpointing.interval=10 ms",
				"execution.checkpointing.dir="+dir, fmt.Sprintf("execution.checkpointing.num-retained=%d", retained),
				"restart-strategy.type=fixed-delay", "restart-strategy.fixed-delay.attempts=10", "restart-strategy.fixed-delay.delay=0 ms")),
			stream.WithLogger(quiet), stream.WithJobID(jobID), stream.WithEvents(onEvent), stream.WithFaults(fault))
		if err != nil {
			t.Fatal(err)
		}
		small, _ := datagen.New(genSmall, datagen.Partitions(smallSplits), datagen.Count(smallPerSplit), datagen.BatchSize(smallPerSplit))
		long, _ := datagen.New(genLong, datagen.Partitions(longSplits), datagen.Count(longPerSplit), datagen.BatchSize(25), datagen.RatePerSecond(3000))
		key := func(r rec) string { return r.Key }
		smallSums := stream.Process(stream.KeyBy(stream.FromSource(env, small, "small", stream.NoWatermarks[rec](), stream.Parallelism(1)), key),
			stream.KeyedProcessFunction[string, rec, KeyedSum](&runningSum{}), stream.Uid("small-sum"), stream.Parallelism(1))
		longSums := stream.Process(stream.KeyBy(stream.FromSource(env, long, "long", stream.NoWatermarks[rec]()), key),
			stream.KeyedProcessFunction[string, rec, KeyedSum](&runningSum{}), stream.Uid("long-sum"))
		sink := streamtest.NewCollector[KeyedSum](true)
		stream.SinkTo(stream.Union(smallSums, longSums), sink, stream.Uid("sink"))
		runErr := env.Execute(context.Background(), "finished")
		st.Close()
		if runErr != nil {
			t.Fatalf("%s: %v", name, runErr)
		}
		if struck != len(after) {
			t.Fatalf("%s: %d of %d failures struck: the slow pipeline ended too soon", name, struck, len(after))
		}
		records := map[string]map[[2]int64]rec{}
		add := func(gen func(int, int64) rec, splits, per int) {
			for p := range splits {
				for seq := range int64(per) {
					x := gen(p, seq)
					if records[x.Key] == nil {
						records[x.Key] = map[[2]int64]rec{}
					}
					records[x.Key][[2]int64{int64(p), seq}] = x
				}
			}
		}
		add(genSmall, smallSplits, smallPerSplit)
		add(genLong, longSplits, longPerSplit)
		if err := checkRunningSums(sink.Results(), records); err != nil {
			t.Fatalf("%s: restores %v: %v", name, restores, err)
		}
		t.Logf("%s: restored %v", name, restores)
		for i, how := range restores {
			if restoreErrs[i] != nil {
				t.Fatalf("%s: restore %d: %v", name, i+1, restoreErrs[i])
			}
			if how == "carried, original discarded" {
				carriedAfterDiscard++
			}
		}
	}
	if carriedAfterDiscard == 0 {
		t.Fatal("no restore read finished subtasks' state from a discarded checkpoint's directory: the test proves nothing about retention")
	}
}

// finishedStateOf reads the checkpoint whose _metadata is at metaPath and
// says where the state of the first pipeline's finished subtasks lives:
// in the checkpoint itself, or carried from an earlier checkpoint that is
// still complete or that retention discarded. It is an error if the
// source's positions or the sum's keyed state are missing or inline
// (the test means them to be files).
func finishedStateOf(st *storage.Storage, metaPath string) (string, error) {
	ctx := context.Background()
	md, err := st.ReadMetadata(ctx, metaPath)
	if err != nil {
		return "", fmt.Errorf("reading the restored checkpoint: %w", err)
	}
	handle := func(uid string, keyed bool) (checkpoint.StateHandle, error) {
		op, ok := md.Operator(uid)
		if !ok || len(op.Subtasks) != 1 {
			return checkpoint.StateHandle{}, fmt.Errorf("checkpoint %d has no state of %s", md.CheckpointID, uid)
		}
		hs := op.Subtasks[0].Operator
		if keyed {
			hs = op.Subtasks[0].Keyed
		}
		if len(hs) == 0 || hs[0].Path == "" {
			return checkpoint.StateHandle{}, fmt.Errorf("checkpoint %d: %s's state is missing or inline: %+v", md.CheckpointID, uid, op.Subtasks[0])
		}
		return hs[0], nil
	}
	src, err := handle("small", false)
	if err != nil {
		return "", err
	}
	sum, err := handle("small-sum", true)
	if err != nil {
		return "", err
	}
	own := fmt.Sprintf("chk-%d", md.CheckpointID)
	srcDir, sumDir := strings.Split(src.Path, "/")[0], strings.Split(sum.Path, "/")[0]
	if srcDir != sumDir {
		return "", fmt.Errorf("the finished subtasks' state is in %s and %s", src.Path, sum.Path)
	}
	if srcDir == own {
		return "own", nil
	}
	if _, err := st.ReadMetadata(ctx, path.Join(st.Path(), srcDir)); errors.Is(err, storage.ErrIncomplete) {
		return "carried, original discarded", nil
	} else if err != nil {
		return "", err
	}
	return "carried, original retained", nil
}

// checkRunningSums checks a keyed running sum's output against its input:
// every record's sum exactly once, each adding its record's value to the
// key's previous sum.
func checkRunningSums(out []KeyedSum, records map[string]map[[2]int64]rec) error {
	n := 0
	for _, rs := range records {
		n += len(rs)
	}
	if len(out) != n {
		return fmt.Errorf("%d sums for %d records", len(out), n)
	}
	byKey := map[string][]KeyedSum{}
	for _, s := range out {
		byKey[s.Key] = append(byKey[s.Key], s)
	}
	for k, ss := range byKey {
		slices.SortFunc(ss, func(a, b KeyedSum) int { return int(a.Sum - b.Sum) })
		prev := int64(0)
		seen := map[[2]int64]bool{}
		for _, s := range ss {
			id := [2]int64{int64(s.P), s.Seq}
			x, ok := records[k][id]
			if !ok || seen[id] || s.Sum-prev != x.Value {
				return fmt.Errorf("key %s: sum %d after %d is not the next sum with record %d/%d (duplicated: %v)", k, s.Sum, prev, s.P, s.Seq, seen[id])
			}
			seen[id], prev = true, s.Sum
		}
		if len(seen) != len(records[k]) {
			return fmt.Errorf("key %s: %d sums for %d records", k, len(seen), len(records[k]))
		}
	}
	return nil
}
