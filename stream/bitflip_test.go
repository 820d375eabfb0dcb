package stream_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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
	const partitions, perPartition, keys = 2, 12000, 5000
	gen := func(p int, seq int64) rec {
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
	common := streamtest.Config("parallelism.default=2", "execution.checkpointing.interval=20 ms", "execution.checkpointing.num-retained=3")
	// Three checkpoints that complete once 8000 records were read.
	ready := 0
	first := streamtest.Run(t, build, common, streamtest.JobID("first"), streamtest.Until(func(evs []stream.JobEvent) bool {
		if evs[len(evs)-1].Kind == stream.EventCheckpointCompleted && read.Load() >= 8000 {
			ready++
		}
		return ready >= 3
	}))
	if !first.Canceled {
		t.Fatalf("the first run ended before it was canceled (%v): make the input longer", first.Err)
	}
	ids := first.Checkpoints()
	rate = 0
	if len(ids) < 2 {
		t.Fatalf("retained completed checkpoints %v, want at least 2", ids)
	}
	newest, previous := ids[len(ids)-1], ids[len(ids)-2]
	files, _ := filepath.Glob(filepath.Join(first.CheckpointDir(newest), "*"))
	var flipped string
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil && filepath.Base(f) != "_metadata" && fi.Size() > 1024 {
			flipped = f
			break
		}
	}
	if flipped == "" {
		t.Fatalf("checkpoint %d has no state file (files %v): the keyed state is small enough to be inline, so this test shows nothing", newest, files)
	}
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
		if in.ID == newest && in.Status != storage.Invalid {
			t.Fatalf("the listing reports checkpoint %d with a flipped state file as %v", newest, in.Status)
		}
	}

	second := streamtest.Run(t, build, common, streamtest.ResumeFrom(first), streamtest.JobID("second"))
	if second.Err != nil {
		t.Fatal(second.Err)
	}
	if r := second.Events.Of(stream.EventRestored); len(r) != 1 || r[0].Checkpoint != previous {
		t.Fatalf("restored %+v, want checkpoint %d (the newest, %d, has a flipped state file)", r, previous, newest)
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
