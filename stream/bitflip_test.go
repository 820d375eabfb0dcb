package stream_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/weirstream/weir/connector/datagen"
	"github.com/weirstream/weir/connector/file"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/mini"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

// TestResumeFallsBackPastAFlippedStateFile flips one byte of a state file
// of the newest retained checkpoint (its size unchanged, so only its
// checksum tells): the checkpoint listing reports it invalid, and a resume
// from the job's directory restores the previous checkpoint instead of
// failing on it again and again; with the file sink, every record's sum is
// in the output exactly once.
func TestResumeFallsBackPastAFlippedStateFile(t *testing.T) {
	resumeFlipped(t, nil, false, func(t *testing.T, first *streamtest.Result, ids []int64) (string, int64) {
		newest, previous := ids[len(ids)-1], ids[len(ids)-2]
		files, _ := filepath.Glob(filepath.Join(first.CheckpointDir(newest), "*"))
		for _, f := range files {
			if fi, err := os.Stat(f); err == nil && filepath.Base(f) != "_metadata" && fi.Size() > 1024 {
				return f, previous
			}
		}
		t.Fatalf("checkpoint %d has no state file (files %v): the keyed state is small enough to be inline, so this test shows nothing", newest, files)
		return "", 0
	})
}

// TestResumeFallsBackPastAFlippedSharedFile is the same with incremental
// checkpoints of the embedded LSM store, where checkpoints share the
// store's files: the byte flipped is in a file that the newest checkpoint
// took over from an earlier one (the input stopped before the last
// checkpoints, which therefore share the store's files), so every
// checkpoint that names it is invalid, and the resume restores the newest
// that does not; if every retained checkpoint names it, the resume fails.
func TestResumeFallsBackPastAFlippedSharedFile(t *testing.T) {
	// No state inline in _metadata, so that the checkpoints name the
	// store's files however small they are.
	resumeFlipped(t, []string{"state.backend.type=rocksdb", "execution.checkpointing.incremental=true", "execution.checkpointing.num-retained=5",
		"execution.checkpointing.data-inline-threshold=0"}, true,
		func(t *testing.T, first *streamtest.Result, ids []int64) (string, int64) {
			st, err := storage.Open(context.Background(), first.Dir, first.JobID)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			// The files each checkpoint names, relative to the job's
			// directory.
			names := map[int64]map[string]bool{}
			for _, id := range ids {
				md, err := st.ReadMetadata(context.Background(), first.CheckpointDir(id))
				if err != nil {
					t.Fatal(err)
				}
				names[id] = map[string]bool{}
				for _, op := range md.Operators {
					for _, sub := range op.Subtasks {
						for _, h := range sub.Keyed {
							if h.Path != "" {
								names[id][h.Path] = true
							}
						}
					}
				}
			}
			newest := ids[len(ids)-1]
			for _, path := range slices.Sorted(maps.Keys(names[newest])) {
				// A file an earlier checkpoint wrote, in shared/.
				if by, _, _ := storage.ParseStatePath(path); by == newest || !strings.HasPrefix(path, storage.SharedDir+"/") || !strings.HasSuffix(path, ".sst") {
					continue
				}
				// The newest retained checkpoint that does not name it,
				// if any.
				for i := len(ids) - 2; i >= 0; i-- {
					if !names[ids[i]][path] {
						return filepath.Join(first.JobDir(), filepath.FromSlash(path)), ids[i]
					}
				}
				return filepath.Join(first.JobDir(), filepath.FromSlash(path)), 0
			}
			t.Fatalf("the newest checkpoint %d shares no file with an older one (%v): this test shows nothing", newest, names)
			return "", 0
		})
}

// resumeFlipped runs a keyed running sum into the exactly-once file sink
// with the options kv, cancels it, flips a byte of the state file pick
// chooses among the retained checkpoints ids, and resumes: the resumed job
// must restore the checkpoint pick names, and the output hold every
// record's sum exactly once. With pause, the first run's input stops
// before its last checkpoints, so that they change no state.
func resumeFlipped(t *testing.T, kv []string, pause bool, pick func(t *testing.T, first *streamtest.Result, ids []int64) (string, int64)) {
	const partitions, perPartition, keys = 2, 12000, 5000
	// gate, while set, holds the first run's input back: datagen calls gen
	// on the source's fetcher goroutine, so checkpoints go on meanwhile.
	var gate atomic.Pointer[chan struct{}]
	gen := func(p int, seq int64) rec {
		if g := gate.Load(); g != nil {
			<-*g
		}
		return rec{Key: fmt.Sprintf("key-%05d", datagen.Mix(9, p, seq)%keys), Value: int64(p) + 2*seq + 1, P: p, Seq: seq}
	}
	out := t.TempDir()
	sink, err := file.JSONLines[KeyedSum](out)
	if err != nil {
		t.Fatal(err)
	}
	// The first run reads slowly, so that it is canceled with thousands of
	// keys in its state (a file per subtask, not inline) whatever the
	// machine's load; the resumed run reads as fast as it can.
	rate, read := float64(3000), atomic.Int64{}
	build := func(env *stream.Environment) {
		src, _ := datagen.New(gen, datagen.Partitions(partitions), datagen.Count(perPartition), datagen.BatchSize(20), datagen.RatePerSecond(rate))
		in := stream.Map(stream.FromSource(env, src, "numbers", stream.NoWatermarks[rec]()), func(r rec) rec { read.Add(1); return r })
		sums := stream.Process(stream.KeyBy(in, func(r rec) string { return r.Key }), stream.KeyedProcessFunction[string, rec, KeyedSum](&runningSum{}), stream.Uid("sum"))
		stream.SinkTo(sums, sink, stream.Uid("sink"))
	}
	common := streamtest.Config(append([]string{"parallelism.default=2", "execution.checkpointing.interval=20 ms", "execution.checkpointing.num-retained=3"}, kv...)...)
	// Three checkpoints that complete once 8000 records were read (with
	// pause, four more after the input stopped, which change nothing).
	ready, need := 0, 3
	if pause {
		need = 1 + 4
	}
	first := streamtest.Run(t, build, common, streamtest.JobID("first"), streamtest.Until(func(evs []stream.JobEvent) bool {
		if evs[len(evs)-1].Kind == stream.EventCheckpointCompleted && read.Load() >= 8000 {
			ready++
			if pause && ready == 1 {
				g := make(chan struct{})
				gate.Store(&g)
			}
		}
		if ready < need {
			return false
		}
		if g := gate.Swap(nil); g != nil {
			close(*g)
		}
		return true
	}))
	if !first.Canceled {
		t.Fatalf("the first run ended before it was canceled (%v): make the input longer", first.Err)
	}
	ids := first.Checkpoints()
	rate = 0
	if len(ids) < 2 {
		t.Fatalf("retained completed checkpoints %v, want at least 2", ids)
	}
	flipped, want := pick(t, first, ids)
	t.Logf("retained checkpoints %v; flipping a byte of %s, which leaves %d the newest valid", ids, flipped, want)
	b, err := os.ReadFile(flipped)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x01
	if err := os.WriteFile(flipped, b, 0o644); err != nil {
		t.Fatal(err)
	}

	st, err := storage.Open(context.Background(), first.Dir, first.JobID, storage.VerifyChecksums(true))
	if err != nil {
		t.Fatal(err)
	}
	infos, err := st.List(context.Background())
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range infos {
		if in.ID > want && in.Status != storage.Invalid {
			t.Fatalf("the listing reports checkpoint %d, whose state file %s is flipped, as %v", in.ID, flipped, in.Status)
		}
	}

	second := streamtest.Run(t, build, common, streamtest.ResumeFrom(first), streamtest.JobID("second"))
	if want == 0 {
		// Every retained checkpoint names the flipped file: the resume
		// must fail, not start again from nothing (which would write
		// the committed output a second time).
		if second.Err == nil || second.Events.Count(stream.EventRunning) > 0 {
			t.Fatalf("resumed with every retained checkpoint corrupt: %v, events %v", second.Err, second.Events)
		}
		t.Logf("the resume failed, as it must: %v", second.Err)
		return
	}
	if second.Err != nil {
		t.Fatal(second.Err)
	}
	if r := second.Events.Of(stream.EventRestored); len(r) != 1 || r[0].Checkpoint != want {
		t.Fatalf("restored %+v, want checkpoint %d (the newer ones name the flipped %s)", r, want, flipped)
	}
	got, err := file.ReadJSONLines[KeyedSum](out)
	if err != nil {
		t.Fatal(err)
	}
	var all []mini.Element
	for p := range partitions {
		for seq := range int64(perPartition) {
			x := gen(p, seq)
			all = append(all, mini.Event{Key: x.Key, Value: x.Value})
		}
	}
	finals := mini.Fold(all, mini.ByKey, len(all))
	last, seen := map[string]int64{}, map[[2]int64]int{}
	for _, s := range got {
		last[s.Key] = max(last[s.Key], s.Sum)
		seen[[2]int64{int64(s.P), s.Seq}]++
	}
	for k, v := range finals {
		if last[k] != v {
			t.Fatalf("key %s ends at %d, the oracle at %d", k, last[k], v)
		}
	}
	if len(seen) != partitions*perPartition || len(got) != partitions*perPartition {
		t.Fatalf("%d outputs for %d distinct records, want %d of each: records lost or written twice", len(got), len(seen), partitions*perPartition)
	}
}
