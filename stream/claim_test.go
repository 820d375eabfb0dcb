package stream_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connector/datagen"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/checkpoint/storagetest"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

// TestResumeDoesNotClaim resumes a job from its own checkpoint directory,
// under the same job id, and cancels it with DELETE_ON_CANCELLATION: the
// resumed run deletes its own checkpoints but not the one it restored,
// which it does not own (NO_CLAIM).
func TestResumeDoesNotClaim(t *testing.T) {
	sink := streamtest.NewCollector[KeyedSum](true)
	build := func(env *stream.Environment) {
		gen := func(p int, seq int64) rec {
			return rec{Key: fmt.Sprintf("k%d", seq%50), Value: seq, P: p, Seq: seq}
		}
		src, _ := datagen.New(gen, datagen.Partitions(2), datagen.Count(100_000), datagen.BatchSize(10), datagen.RatePerSecond(2000))
		in := stream.FromSource(env, src, "numbers", stream.NoWatermarks[rec]())
		sums := stream.Process(stream.KeyBy(in, func(r rec) string { return r.Key }), stream.KeyedProcessFunction[string, rec, KeyedSum](&runningSum{}), stream.Uid("sum"))
		stream.SinkTo(sums, sink, stream.Uid("sink"))
	}
	common := streamtest.Config("parallelism.default=2", "execution.checkpointing.interval=10 ms")
	first := streamtest.Run(t, build, common, streamtest.JobID("same"), streamtest.UntilCheckpoints(3), streamtest.Timeout(time.Minute))
	if !first.Canceled {
		t.Fatalf("the first run ended before it was canceled: %v", first.Err)
	}
	ids := first.Checkpoints()
	if len(ids) == 0 {
		t.Fatal("the first run retained no checkpoint")
	}
	restored := ids[len(ids)-1]
	second := streamtest.Run(t, build, common, streamtest.ResumeFrom(first), streamtest.JobID("same"), streamtest.Dir(first.Dir),
		streamtest.Config("execution.checkpointing.externalized-checkpoint-retention=DELETE_ON_CANCELLATION"),
		streamtest.UntilCheckpoints(3), streamtest.Timeout(time.Minute))
	if !second.Canceled {
		t.Fatalf("the second run ended before it was canceled: %v", second.Err)
	}
	if r, _ := second.Events.Last(stream.EventRestored); r.Checkpoint != restored {
		t.Fatalf("the second run restored checkpoint %d, want %d", r.Checkpoint, restored)
	}
	if got := second.Checkpoints(); len(got) != 1 || got[0] != restored {
		t.Errorf("after the second run's cancel the job directory holds checkpoints %v, want only the restored %d", got, restored)
	}
	if _, err := os.Stat(second.CheckpointDir(restored)); err != nil {
		t.Errorf("the restored checkpoint: %v", err)
	}
}

// claimJob is the keyed running sum the claim tests resume, over a
// bounded input read at a bounded rate: a first run is canceled after a
// few checkpoints, and a resumed run completes many before its input
// ends. sink outlives the runs, as an external system does.
type claimJob struct {
	partitions   int
	perPartition int64
	gen          func(p int, seq int64) rec
	sink         connector.Sink[KeyedSum]
}

func newClaimJob(sink connector.Sink[KeyedSum]) *claimJob {
	return &claimJob{partitions: 2, perPartition: 8000, sink: sink,
		gen: func(p int, seq int64) rec {
			return rec{Key: fmt.Sprintf("k%d", datagen.Mix(11, p, seq)%3000), Value: int64(p) + 2*seq + 1, P: p, Seq: seq}
		}}
}

func (j *claimJob) build(env *stream.Environment) {
	src, _ := datagen.New(j.gen, datagen.Partitions(j.partitions), datagen.Count(j.perPartition), datagen.BatchSize(20), datagen.RatePerSecond(2500))
	in := stream.FromSource(env, src, "numbers", stream.NoWatermarks[rec]())
	sums := stream.Process(stream.KeyBy(in, func(r rec) string { return r.Key }), stream.KeyedProcessFunction[string, rec, KeyedSum](&runningSum{}), stream.Uid("sum"))
	stream.SinkTo(sums, j.sink, stream.Uid("sink"))
}

func (j *claimJob) check(t *testing.T, out []KeyedSum) {
	t.Helper()
	if err := checkRunningSums(out, recordsByKey(j.gen, j.partitions, j.perPartition)); err != nil {
		t.Fatal(err)
	}
}

// claimCommon is the configuration of every claim test's runs: state in
// files (no inline state), restarts after an injected failure.
func claimCommon() streamtest.RunOption {
	return streamtest.Config("parallelism.default=2", "execution.checkpointing.interval=10 ms",
		"execution.checkpointing.data-inline-threshold=0 b",
		"restart-strategy.type=fixed-delay", "restart-strategy.fixed-delay.attempts=5", "restart-strategy.fixed-delay.delay=0 ms")
}

// claimBackends are the state backends the claim tests run on: the heap
// (full checkpoints) and the embedded LSM store with incremental
// checkpoints, which name the files of earlier checkpoints.
func claimBackends(t *testing.T) []struct {
	name string
	kv   []string
} {
	return []struct {
		name string
		kv   []string
	}{
		{"heap", []string{"state.backend.type=hashmap"}},
		{"pebble incremental", []string{"state.backend.type=pebble", "execution.checkpointing.incremental=true",
			"state.backend.pebble.localdir=" + t.TempDir(), "state.backend.pebble.memory=4 mb"}},
	}
}

// readCheckpoint reads the metadata of checkpoint id of job jobID under
// the checkpoint directory dir.
func readCheckpoint(dir, jobID string, id int64) (*checkpoint.Metadata, error) {
	st, err := storage.Open(context.Background(), dir, jobID)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	return st.ReadMetadata(context.Background(), st.CheckpointPath(id))
}

// snapshotFiles returns the SHA-256 of checkpoint id's _metadata and of
// every file it names, by path relative to the job's directory.
func snapshotFiles(t *testing.T, r *streamtest.Result, id int64) map[string][32]byte {
	t.Helper()
	md, err := readCheckpoint(r.Dir, r.JobID, id)
	if err != nil {
		t.Fatalf("checkpoint %d: %v", id, err)
	}
	sums := map[string][32]byte{}
	for _, p := range append(storagetest.Paths(md), fmt.Sprintf("chk-%d/%s", id, storage.MetadataFile)) {
		b, err := os.ReadFile(filepath.Join(r.JobDir(), filepath.FromSlash(p)))
		if err != nil {
			t.Fatalf("checkpoint %d: %v", id, err)
		}
		sums[p] = sha256.Sum256(b)
	}
	return sums
}

// checkUntouched fails the test unless every file in want is there with
// the same bytes.
func checkUntouched(t *testing.T, r *streamtest.Result, want map[string][32]byte, when string) {
	t.Helper()
	for p, sum := range want {
		b, err := os.ReadFile(filepath.Join(r.JobDir(), filepath.FromSlash(p)))
		if err != nil {
			t.Fatalf("%s: the restored checkpoint's file %s: %v", when, p, err)
		}
		if sha256.Sum256(b) != sum {
			t.Fatalf("%s: the restored checkpoint's file %s changed", when, p)
		}
	}
}

// checkOnlyRetained fails the test unless the directories of jobs under
// the checkpoint directory dir hold exactly the completed checkpoints'
// _metadata, the files those name, and each job's LatestFile, and no
// chk-<n> directory but the completed checkpoints': the files a later
// checkpoint names are in shared/, so a discarded checkpoint's directory
// is gone whole. It returns the completed checkpoints by job.
func checkOnlyRetained(t *testing.T, dir string, jobs ...string) map[string][]int64 {
	t.Helper()
	retained, stray, err := storagetest.Unreferenced(context.Background(), dir, jobs...)
	if err != nil {
		t.Fatal(err)
	}
	if len(stray) > 0 {
		t.Fatalf("%d files under the jobs' directories that no retained checkpoint names (retained: %v), e.g. %v", len(stray), retained, stray[:min(len(stray), 8)])
	}
	return retained
}

// TestResumeClaims resumes a job from its retained checkpoint with
// execution.state-recovery.claim-mode=CLAIM, on the heap and on the
// embedded LSM store with incremental checkpoints, both under the same
// job id (the checkpoint lies in the job's own directory) and under
// another: the claimed checkpoint counts among the num-retained, so once
// the resumed job has completed more than that many checkpoints it is
// gone, its directory and every file of it that no retained checkpoint
// names with it, and the jobs' directories hold exactly what the
// retained checkpoints name. The output holds every record's sum
// exactly once.
func TestResumeClaims(t *testing.T) {
	for _, be := range claimBackends(t) {
		for _, sameJob := range []bool{true, false} {
			name := be.name + ", another job"
			if sameJob {
				name = be.name + ", same job"
			}
			t.Run(name, func(t *testing.T) {
				sink := streamtest.NewCollector[KeyedSum](true)
				j := newClaimJob(sink)
				backend := streamtest.Config(be.kv...)
				first := streamtest.Run(t, j.build, claimCommon(), backend, streamtest.JobID("first"),
					streamtest.Config("execution.checkpointing.num-retained=1"), streamtest.UntilCheckpoints(4), streamtest.Timeout(time.Minute))
				if !first.Canceled {
					t.Fatalf("the first run ended before it was canceled (%v): make the input longer", first.Err)
				}
				ids := first.Checkpoints()
				if len(ids) == 0 {
					t.Fatal("the first run retained no checkpoint")
				}
				claimed := ids[len(ids)-1]
				claimedFiles := snapshotFiles(t, first, claimed)

				jobID := "second"
				if sameJob {
					jobID = "first"
				}
				var firstNew int64
				var reused int
				var readErr error
				second := streamtest.Run(t, j.build, claimCommon(), backend, streamtest.ResumeFrom(first), streamtest.JobID(jobID), streamtest.Dir(first.Dir),
					streamtest.Config("execution.state-recovery.claim-mode=CLAIM", "execution.checkpointing.num-retained=2"),
					streamtest.Until(func(evs []stream.JobEvent) bool {
						// The first checkpoint after the restore, read
						// before the next one can complete.
						ev := evs[len(evs)-1]
						if ev.Kind != stream.EventCheckpointCompleted || firstNew != 0 {
							return false
						}
						firstNew = ev.Checkpoint
						md, err := readCheckpoint(first.Dir, jobID, ev.Checkpoint)
						if err != nil {
							readErr = err
							return false
						}
						for _, p := range storagetest.Paths(md) {
							if _, ok := claimedFiles[p]; ok {
								reused++
							}
						}
						return false
					}), streamtest.Timeout(2*time.Minute))
				if second.Err != nil {
					t.Fatalf("the claiming run: %v", second.Err)
				}
				if readErr != nil {
					t.Fatalf("the first checkpoint after the restore: %v", readErr)
				}
				if r := second.Events.Of(stream.EventRestored); len(r) == 0 || r[0].Checkpoint != claimed {
					t.Fatalf("the claiming run restored %+v, want checkpoint %d first", r, claimed)
				}
				if n := second.Events.Count(stream.EventCheckpointCompleted); n <= 2 {
					t.Fatalf("the claiming run completed %d checkpoints, not more than the 2 retained: make the input longer", n)
				}
				// Gone: its directory, and every file of it in shared/
				// that no retained checkpoint names (checkOnlyRetained);
				// under the same job id the files the job's incremental
				// checkpoints name stay in its shared/, in another job's
				// directory nothing does.
				if _, err := os.Stat(filepath.Join(first.CheckpointDir(claimed), storage.MetadataFile)); !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("the claimed checkpoint %d is still complete (%v) after the job subsumed it", claimed, err)
				}
				if _, err := os.Stat(first.CheckpointDir(claimed)); !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("the claimed checkpoint %d's directory is still there (%v) after the job subsumed it", claimed, err)
				}
				retained := checkOnlyRetained(t, first.Dir, "first", jobID)
				if len(retained[jobID]) != 2 {
					t.Fatalf("retained checkpoints %v, want the claiming run's newest 2", retained)
				}
				// Whether the first new checkpoint names a file of the
				// claimed one (it builds on it under the same job id) is
				// logged, not asserted: the store's compactions may have
				// rewritten every restored file by then.
				t.Logf("claimed checkpoint %d (%d files), the first new one (%d) names %d of them; retained at the end %v",
					claimed, len(claimedFiles), firstNew, reused, retained)
				j.check(t, sink.Results())
			})
		}
	}
}

// TestResumeNoClaimLeavesSnapshotAlone resumes a job, under the same job
// id and in the same directory, from a retained incremental checkpoint
// that names files of earlier checkpoints, with the default NO_CLAIM. A
// run that subsumes many checkpoints and is canceled with
// DELETE_ON_CANCELLATION leaves every byte of the restored checkpoint as
// it was; so does a run that goes on from it again. Then the restored
// checkpoint is deleted entirely, its directory and every file it names,
// and the job resumes from the second run's newest checkpoint: none of
// the new checkpoints depends on the restored one's files (its first is
// a full one), and the output holds every record's sum exactly once.
func TestResumeNoClaimLeavesSnapshotAlone(t *testing.T) {
	sink := streamtest.NewReconcilingCollector[KeyedSum]()
	j := newClaimJob(sink)
	backend := streamtest.Config("state.backend.type=pebble", "execution.checkpointing.incremental=true",
		"state.backend.pebble.localdir="+t.TempDir(), "state.backend.pebble.memory=4 mb", "execution.checkpointing.num-retained=1")
	// Canceled once a checkpoint names a file an earlier one wrote.
	var readErr error
	runDir := t.TempDir()
	first := streamtest.Run(t, j.build, claimCommon(), backend, streamtest.JobID("same"), streamtest.Dir(runDir), streamtest.Timeout(time.Minute),
		streamtest.Until(func(evs []stream.JobEvent) bool {
			ev := evs[len(evs)-1]
			if ev.Kind != stream.EventCheckpointCompleted || readErr != nil {
				return false
			}
			md, err := readCheckpoint(runDir, "same", ev.Checkpoint)
			if err != nil {
				readErr = err
				return true
			}
			own := fmt.Sprintf("chk-%d/", ev.Checkpoint)
			return slices.ContainsFunc(storagetest.Paths(md), func(p string) bool { return !strings.HasPrefix(p, own) })
		}))
	if readErr != nil {
		t.Fatal(readErr)
	}
	if !first.Canceled {
		t.Fatalf("the first run ended before it was canceled (%v): make the input longer", first.Err)
	}
	ids := first.Checkpoints()
	if len(ids) == 0 {
		t.Fatal("the first run retained no checkpoint")
	}
	restored := ids[len(ids)-1]
	files := snapshotFiles(t, first, restored)
	outside := 0
	for p := range files {
		if !strings.HasPrefix(p, fmt.Sprintf("chk-%d/", restored)) {
			outside++
		}
	}
	if outside == 0 {
		t.Fatalf("checkpoint %d names no file of an earlier checkpoint: it shows nothing of incremental state", restored)
	}
	resume := []streamtest.RunOption{claimCommon(), backend, streamtest.ResumeFrom(first), streamtest.JobID("same"), streamtest.Dir(first.Dir), streamtest.Timeout(time.Minute)}

	second := streamtest.Run(t, j.build, append(resume, streamtest.UntilCheckpoints(6),
		streamtest.Config("execution.checkpointing.externalized-checkpoint-retention=DELETE_ON_CANCELLATION"))...)
	if !second.Canceled {
		t.Fatalf("the second run ended before it was canceled (%v): make the input longer", second.Err)
	}
	if r, _ := second.Events.Last(stream.EventRestored); r.Checkpoint != restored {
		t.Fatalf("the second run restored checkpoint %d, want %d", r.Checkpoint, restored)
	}
	checkUntouched(t, first, files, "after a run that subsumed 6 checkpoints and deleted its own on cancellation")

	third := streamtest.Run(t, j.build, append(resume, streamtest.UntilCheckpoints(3))...)
	if !third.Canceled {
		t.Fatalf("the third run ended before it was canceled (%v): make the input longer", third.Err)
	}
	if r, _ := third.Events.Last(stream.EventRestored); r.Checkpoint != restored {
		t.Fatalf("the third run restored checkpoint %d, want %d", r.Checkpoint, restored)
	}
	checkUntouched(t, first, files, "after a run that retained its checkpoints")
	newest := third.Checkpoints()
	if len(newest) == 0 || newest[len(newest)-1] <= restored {
		t.Fatalf("the third run retained checkpoints %v, want one after %d", newest, restored)
	}

	// The user deletes the restored checkpoint: nothing of it is left.
	for p := range files {
		if err := os.Remove(filepath.Join(first.JobDir(), filepath.FromSlash(p))); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.RemoveAll(first.CheckpointDir(restored)); err != nil {
		t.Fatal(err)
	}
	last := streamtest.Run(t, j.build, append(resume, streamtest.Timeout(2*time.Minute))...)
	if last.Err != nil {
		t.Fatalf("resuming from checkpoint %d with checkpoint %d deleted: %v", newest[len(newest)-1], restored, last.Err)
	}
	if r := last.Events.Of(stream.EventRestored); len(r) == 0 || r[0].Checkpoint != newest[len(newest)-1] {
		t.Fatalf("the last run restored %+v, want checkpoint %d first", r, newest[len(newest)-1])
	}
	j.check(t, sink.Results())
}

// TestClaimSurvivesFailureBeforeFirstCheckpoint claims a retained
// checkpoint and fails the resumed job's keyed subtasks as they open,
// before any new checkpoint can complete: the job restores the claimed
// checkpoint again (it is deleted only once subsumed), then goes on to
// subsume and delete it, with every record's sum exactly once.
func TestClaimSurvivesFailureBeforeFirstCheckpoint(t *testing.T) {
	for _, be := range claimBackends(t) {
		t.Run(be.name, func(t *testing.T) {
			sink := streamtest.NewCollector[KeyedSum](true)
			j := newClaimJob(sink)
			backend := streamtest.Config(be.kv...)
			first := streamtest.Run(t, j.build, claimCommon(), backend, streamtest.JobID("first"),
				streamtest.Config("execution.checkpointing.num-retained=1"), streamtest.UntilCheckpoints(4), streamtest.Timeout(time.Minute))
			if !first.Canceled {
				t.Fatalf("the first run ended before it was canceled (%v): make the input longer", first.Err)
			}
			ids := first.Checkpoints()
			if len(ids) == 0 {
				t.Fatal("the first run retained no checkpoint")
			}
			claimed := ids[len(ids)-1]
			faults := streamtest.NewFaults()
			crash := faults.Add(stream.FaultOpen, streamtest.Fail(nil), streamtest.OnVertex("sum"), streamtest.InAttempt(0))
			second := streamtest.Run(t, j.build, claimCommon(), backend, streamtest.ResumeFrom(first), streamtest.JobID("second"), streamtest.Dir(first.Dir),
				streamtest.Config("execution.state-recovery.claim-mode=CLAIM", "execution.checkpointing.num-retained=1"),
				streamtest.WithFaults(faults), streamtest.Timeout(2*time.Minute))
			if second.Err != nil {
				t.Fatalf("the claiming run: %v", second.Err)
			}
			if !crash.Fired() {
				t.Fatal("the failure was never injected: the test shows nothing")
			}
			r := second.Events.Of(stream.EventRestored)
			if len(r) < 2 || r[0].Checkpoint != claimed || r[1].Checkpoint != claimed {
				t.Fatalf("the claiming run restored %+v, want checkpoint %d twice (the failure came before any new checkpoint)", r, claimed)
			}
			if _, err := os.Stat(first.CheckpointDir(claimed)); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("the claimed checkpoint %d is still there (%v) after the job subsumed it", claimed, err)
			}
			checkOnlyRetained(t, first.Dir, "first", "second")
			j.check(t, sink.Results())
		})
	}
}

// TestClaimRefusesSavepoint resumes from a savepoint with CLAIM: refused,
// saying why and naming the option, and the savepoint is left whole; the
// same resume with NO_CLAIM runs.
func TestClaimRefusesSavepoint(t *testing.T) {
	sink := streamtest.NewCollector[KeyedSum](true)
	j := newClaimJob(sink)
	spDir := t.TempDir()
	conf := streamtest.Config("execution.checkpointing.savepoint-dir=" + spDir)
	events := streamtest.NewEvents()
	job := streamtest.Start(t, j.build, claimCommon(), conf, streamtest.JobID("first"), streamtest.WithEvents(events), streamtest.Timeout(time.Minute))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := events.WaitCount(ctx, stream.EventCheckpointCompleted, 1); err != nil {
		t.Fatal(err)
	}
	sp, err := job.Client.StopWithSavepoint(ctx, "", false)
	if err != nil {
		t.Fatal(err)
	}
	if res := job.Wait(); res.Err != nil {
		t.Fatalf("the stopped job: %v", res.Err)
	}
	before, err := os.ReadFile(path.Join(sp, storage.MetadataFile))
	if err != nil {
		t.Fatal(err)
	}
	refused := streamtest.Run(t, j.build, claimCommon(), conf, streamtest.JobID("claiming"),
		streamtest.Config("execution.state-recovery.path="+sp, "execution.state-recovery.claim-mode=CLAIM"), streamtest.Timeout(time.Minute))
	if err := refused.Err; err == nil || !strings.Contains(err.Error(), "it is a savepoint") ||
		!strings.Contains(err.Error(), "execution.state-recovery.claim-mode") || !strings.Contains(err.Error(), "NO_CLAIM") {
		t.Fatalf("claiming a savepoint: %v, want a refusal that says it is a savepoint and names the option", err)
	}
	if after, err := os.ReadFile(path.Join(sp, storage.MetadataFile)); err != nil || string(after) != string(before) {
		t.Fatalf("the savepoint after the refused claim: %v", err)
	}
	resumed := streamtest.Run(t, j.build, claimCommon(), conf, streamtest.JobID("resumed"),
		streamtest.Config("execution.state-recovery.path="+sp), streamtest.Timeout(2*time.Minute))
	if resumed.Err != nil {
		t.Fatalf("resuming from the savepoint with NO_CLAIM: %v", resumed.Err)
	}
	if _, err := os.Stat(path.Join(sp, storage.MetadataFile)); err != nil {
		t.Fatalf("the savepoint after the job that resumed from it: %v", err)
	}
	j.check(t, sink.Results())
}
