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
	"time"

	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connector/datagen"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/checkpoint/storage"
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
		smallSplits, smallPerSplit = 1500, 4
		smallTotal                 = smallSplits * smallPerSplit
		smallKeys                  = 3000
		longSplits                 = 2
	)
	carriedAfterDiscard := 0
	for _, seed := range diffSeedList(12) {
		r := rand.New(rand.NewPCG(seed, 31))
		retained := 1 + r.IntN(3)
		after := []int{2 + r.IntN(4), 2 + r.IntN(4)} // checkpoints before each failure
		dir := t.TempDir()
		jobID := fmt.Sprintf("finished-%d", seed)
		// Unaligned checkpoints trigger a subtask whose inputs have all
		// ended directly, as they do a source, while it waits for its
		// final checkpoint.
		conf := []string{"parallelism.default=2", "execution.checkpointing.interval=10 ms",
			"execution.checkpointing.dir=" + dir, fmt.Sprintf("execution.checkpointing.num-retained=%d", retained),
			"restart-strategy.type=fixed-delay", "restart-strategy.fixed-delay.attempts=10", "restart-strategy.fixed-delay.delay=0 ms"}
		unaligned := r.IntN(2) == 0
		if unaligned {
			conf = append(conf, "execution.checkpointing.unaligned.enabled=true")
		}
		name := fmt.Sprintf("seed=%d num-retained=%d unaligned=%t failures after %v checkpoints", seed, retained, unaligned, after)

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
			case stream.EventCheckpointCompleted:
				completed++
			case stream.EventRestored:
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
		long := &slowSource{splits: longSplits, batch: 15, gen: genLong, end: -1}
		fault := func(_ context.Context, site stream.FaultSite) error {
			if site.Point != stream.FaultBatch {
				return nil
			}
			task, attempt, records := site.Task, site.Attempt, site.Records
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
				} else {
					// The slow pipeline may end once it has read a little
					// past the last failure.
					long.stop(300)
				}
				return fmt.Errorf("injected failure %d after %d checkpoints", struck, completed)
			}
			return nil
		}
		env, err := stream.NewEnvironment(
			stream.WithConfig(mustConfig(t, conf...)),
			stream.WithLogger(quiet), stream.WithJobID(jobID), stream.WithEvents(onEvent), stream.WithFaults(fault))
		if err != nil {
			t.Fatal(err)
		}
		small, _ := datagen.New(genSmall, datagen.Partitions(smallSplits), datagen.Count(smallPerSplit), datagen.BatchSize(smallPerSplit))
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
			t.Fatalf("%s: %d of %d failures struck before the slow pipeline's cap", name, struck, len(after))
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
		add(genLong, longSplits, int(long.stop(0)))
		if err := checkRunningSums(sink.Results(), records); err != nil {
			t.Fatalf("%s: restores %v: %v", name, restores, err)
		}
		t.Logf("%s: restored %v", name, restores)
		for i, how := range restores {
			if restoreErrs[i] != nil {
				t.Fatalf("%s: restore %d: %v", name, i+1, restoreErrs[i])
			}
			if strings.Contains(how, "carried, original discarded") {
				carriedAfterDiscard++
			}
		}
	}
	if carriedAfterDiscard == 0 {
		t.Fatal("no restore read finished subtasks' state from a discarded checkpoint's directory: the test proves nothing about retention")
	}
}

// slowSource is a bounded source of splits that yields batch records per
// split every 5 ms, in the order of datagen's, until stop fixes where every
// split ends (at the latest, after maxSlowRecords records). Records are a
// function of (split, sequence number), so restores replay them exactly.
type slowSource struct {
	splits, batch int
	gen           func(p int, seq int64) rec

	mu   sync.Mutex
	end  int64 // where every split ends; -1 until stop
	high int64 // the highest offset any reader has reached
}

const maxSlowRecords = 100_000

// stop makes every split end more records after the highest offset read
// so far, if it has no end yet, and returns the end.
func (s *slowSource) stop(more int64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.end < 0 {
		s.end = min(s.high+more, maxSlowRecords)
	}
	return s.end
}

func (s *slowSource) Splits(context.Context) ([]string, error) {
	ids := make([]string, s.splits)
	for p := range ids {
		ids[p] = datagen.SplitID(p)
	}
	return ids, nil
}

func (s *slowSource) Bounded() bool { return true }

func (s *slowSource) NewReader(_ context.Context, _ connector.ReaderInfo, splits []connector.SplitStart) (connector.Reader[rec], error) {
	r := &slowReader{src: s}
	for _, sp := range splits {
		var p int
		if _, err := fmt.Sscanf(sp.Split, "datagen-%d", &p); err != nil {
			return nil, err
		}
		r.parts = append(r.parts, [2]int64{int64(p), max(sp.Offset, 0)})
	}
	return r, nil
}

type slowReader struct {
	src   *slowSource
	parts [][2]int64 // split, next offset
	rr    int
}

func (r *slowReader) Fetch(ctx context.Context) (connector.Fetch[rec], error) {
	t := time.NewTimer(5 * time.Millisecond)
	select {
	case <-ctx.Done():
		t.Stop()
		return connector.Fetch[rec]{}, ctx.Err()
	case <-t.C:
	}
	r.src.mu.Lock()
	end := r.src.end
	r.src.mu.Unlock()
	if end < 0 {
		end = maxSlowRecords
	}
	for range r.parts {
		ps := &r.parts[r.rr]
		r.rr = (r.rr + 1) % len(r.parts)
		if ps[1] >= end {
			continue
		}
		n := min(int64(r.src.batch), end-ps[1])
		f := connector.Fetch[rec]{Split: datagen.SplitID(int(ps[0]))}
		for i := range n {
			f.Records = append(f.Records, r.src.gen(int(ps[0]), ps[1]+i))
		}
		ps[1] += n
		f.Next, f.EndOfSplit = ps[1], ps[1] == end
		r.src.mu.Lock()
		r.src.high = max(r.src.high, ps[1])
		r.src.mu.Unlock()
		return f, nil
	}
	return connector.Fetch[rec]{}, connector.ErrEndOfInput
}

func (r *slowReader) Close() error { return nil }

// finishedStateOf reads the checkpoint whose _metadata is at metaPath and
// says where the state of the first pipeline's finished subtasks lives:
// in the checkpoint itself, or carried from an earlier checkpoint that is
// still complete or that retention discarded (for the source and the sum
// apart, "source / sum", when they differ). It is an error if the
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
	// Each finished subtask's state is where it last snapshotted: the
	// source's in the checkpoint after its end of data, the sum's there
	// too or, if the sum was triggered again while it waited for its
	// final checkpoint to complete, in a later one.
	where := func(h checkpoint.StateHandle) (string, error) {
		dir := strings.Split(h.Path, "/")[0]
		if dir == fmt.Sprintf("chk-%d", md.CheckpointID) {
			return "own", nil
		}
		if _, err := st.ReadMetadata(ctx, path.Join(st.Path(), dir)); errors.Is(err, storage.ErrIncomplete) {
			return "carried, original discarded", nil
		} else if err != nil {
			return "", err
		}
		return "carried, original retained", nil
	}
	var hows []string
	for _, part := range []struct {
		uid   string
		keyed bool
	}{{"small", false}, {"small-sum", true}} {
		h, err := handle(part.uid, part.keyed)
		if err != nil {
			return "", err
		}
		how, err := where(h)
		if err != nil {
			return "", err
		}
		hows = append(hows, how)
	}
	if hows[0] == hows[1] {
		return hows[0], nil
	}
	return strings.Join(hows, " / "), nil
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
