package stream_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/weirstream/weir/connector/datagen"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

// incrementalBackends are the state backends whose incremental
// checkpoints TestIncrementalCheckpoints proves.
var incrementalBackends = []struct {
	name string
	kv   []string
}{
	{"pebble", []string{"state.backend.type=rocksdb", "state.backend.pebble.memory=4 mb"}},
	{"hashmap", []string{"state.backend.type=hashmap"}},
}

// TestIncrementalCheckpoints runs a keyed running sum over many keys with
// incremental checkpoints every few milliseconds, on the pebble backend
// (native snapshots: the store's files) and on the heap (deltas over the
// earlier checkpoints' keyed state), fails the sum's subtasks twice at
// seeded points (so they restore from an incremental checkpoint, and go
// on building on new ones), and checks: the output holds every record's
// sum exactly once; the retained checkpoints name files that earlier
// checkpoints wrote (the checkpoints are incremental); and the checkpoint
// directory holds exactly the files the retained checkpoints name,
// nothing that retention should have deleted.
func TestIncrementalCheckpoints(t *testing.T) {
	const partitions, perPartition = 2, 6000
	for _, seed := range diffSeedList(3 * len(incrementalBackends)) {
		backend := incrementalBackends[int(seed)%len(incrementalBackends)]
		name := fmt.Sprintf("seed=%d backend=%s", seed, backend.name)
		gen := func(p int, seq int64) rec {
			return rec{Key: fmt.Sprintf("k%d", datagen.Mix(seed, p, seq)%5000), Value: int64(p) + 2*seq + 1, P: p, Seq: seq}
		}
		dir, local := t.TempDir(), t.TempDir()
		var ev streamtest.Events
		faults := streamtest.NewFaults()
		// The first failure waits for a completed checkpoint as well, so
		// that the job restores one (a failure before any would redeploy
		// from the beginning, where the second, after a restore, never
		// strikes).
		checkpointed := func(stream.FaultSite) bool { return ev.Count(stream.EventCheckpointCompleted) > 0 }
		first := faults.Add(stream.FaultBatch, streamtest.Fail(nil), streamtest.OnVertex("sum"), streamtest.AfterRecords(int64(1000+seed%3*700)), streamtest.When(checkpointed))
		second := faults.Add(stream.FaultBatch, streamtest.Fail(nil), streamtest.OnVertex("sum"), streamtest.AfterRestore(), streamtest.AfterRecords(int64(1500+seed%5*300)))
		env, err := stream.NewEnvironment(stream.WithConfig(mustConfig(t, append([]string{
			"parallelism.default=2", "execution.checkpointing.interval=15 ms",
			"execution.checkpointing.dir=" + dir, "execution.checkpointing.num-retained=3", "execution.checkpointing.externalized-checkpoint-retention=RETAIN_ON_CANCELLATION",
			"execution.checkpointing.data-inline-threshold=0 b", "execution.checkpointing.incremental=true",
			"state.backend.pebble.localdir=" + local,
			"restart-strategy.type=fixed-delay", "restart-strategy.fixed-delay.attempts=10", "restart-strategy.fixed-delay.delay=0 ms"}, backend.kv...)...)),
			stream.WithLogger(quiet), stream.WithJobID("incremental"), faults.Option(), ev.Option())
		if err != nil {
			t.Fatal(err)
		}
		src, _ := datagen.New(gen, datagen.Partitions(partitions), datagen.Count(perPartition), datagen.BatchSize(20), datagen.RatePerSecond(6000))
		in := stream.FromSource(env, src, "numbers", stream.NoWatermarks[rec]())
		sums := stream.Process(stream.KeyBy(in, func(r rec) string { return r.Key }), stream.KeyedProcessFunction[string, rec, KeyedSum](&runningSum{}), stream.Uid("sum"))
		sink := streamtest.NewCollector[KeyedSum](true)
		stream.SinkTo(sums, sink, stream.Uid("sink"))
		if err := env.Execute(context.Background(), "incremental"); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !first.Fired() || !second.Fired() {
			t.Fatalf("%s: faults fired %v, %v: the job restored too few times to prove anything; events %v", name, first.Fired(), second.Fired(), &ev)
		}
		if err := checkRunningSums(sink.Results(), recordsByKey(gen, partitions, perPartition)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}

		st, err := storage.Open(context.Background(), dir, "incremental")
		if err != nil {
			t.Fatal(err)
		}
		infos, err := st.List(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		named := map[string]bool{}
		retained, reused, files := 0, 0, 0
		for _, info := range infos {
			md, err := st.ReadMetadata(context.Background(), st.CheckpointPath(info.ID))
			if err != nil {
				continue // incomplete: not retained
			}
			retained++
			op, ok := md.Operator("sum")
			if !ok {
				t.Fatalf("%s: checkpoint %d has no state of the sum", name, md.CheckpointID)
			}
			for _, sub := range op.Subtasks {
				for _, h := range sub.Keyed {
					if h.Path != "" {
						named[h.Path] = true
					}
					if h.File == "" {
						continue
					}
					files++
					if !strings.HasPrefix(h.Path, fmt.Sprintf("chk-%d/", md.CheckpointID)) {
						reused++
					}
				}
			}
			for _, o := range md.Operators {
				for _, sub := range o.Subtasks {
					for _, hs := range [][]checkpoint.StateHandle{sub.Operator, sub.InputChannels} {
						for _, h := range hs {
							if h.Path != "" {
								named[h.Path] = true
							}
						}
					}
				}
			}
		}
		t.Logf("%s: %d retained checkpoints name %d files of native snapshots or earlier pieces, %d of them written by an earlier checkpoint; %d restarts",
			name, retained, files, reused, ev.Count(stream.EventRestarting))
		if files == 0 || reused == 0 {
			t.Fatalf("%s: the retained checkpoints name %d native snapshot files or earlier pieces, %d of an earlier checkpoint: not incremental", name, files, reused)
		}
		// Every state file in the job's directory is named by a retained
		// checkpoint: retention deleted what it no longer needed. (The
		// job's _latest, the newest checkpoint's id, is no state file.)
		var stray []string
		root := filepath.Join(dir, "incremental")
		err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			rel = filepath.ToSlash(rel)
			if path.Base(rel) != storage.MetadataFile && rel != storage.LatestFile && !named[rel] {
				stray = append(stray, rel)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(stray) > 0 {
			slices.Sort(stray)
			for _, info := range infos {
				if _, err := st.ReadMetadata(context.Background(), st.CheckpointPath(info.ID)); err != nil {
					t.Logf("%s: checkpoint %d: %v", name, info.ID, err)
				}
			}
			t.Fatalf("%s: %d files in the checkpoint directory that no retained checkpoint names, e.g. %v", name, len(stray), stray[:min(len(stray), 5)])
		}
		if left, err := os.ReadDir(local); err != nil || len(left) > 0 {
			t.Fatalf("%s: the pebble backend's directory holds %v after the job ended (%v)", name, left, err)
		}
	}
}
