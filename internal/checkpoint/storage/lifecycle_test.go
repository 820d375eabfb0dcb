package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/checkpoint"
)

func TestDiscard(t *testing.T) {
	forBackends(t, func(t *testing.T, be *backend) {
		ctx := context.Background()
		s := be.open(t)
		for id := int64(1); id <= 3; id++ {
			writeCheckpoint(t, s, id, 30<<10)
		}
		if err := s.Discard(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if keys := be.keys(t, "chk-1/"); len(keys) != 0 {
			t.Fatalf("left behind %q", keys)
		}
		if be.dir != "" && fileExists(filepath.Join(be.dir, testJob, "chk-1")) {
			t.Fatal("empty chk-1 directory left behind")
		}

		// A deletion that was interrupted after _metadata went: the
		// checkpoint is incomplete, and Discard finishes it.
		be.remove(t, "chk-2/"+MetadataFile)
		be.remove(t, "chk-2/tenant-cost-0-keyed")
		if err := s.Discard(ctx, 2); err != nil {
			t.Fatal(err)
		}
		// Discarding what is gone succeeds.
		if err := s.Discard(ctx, 2); err != nil {
			t.Fatal(err)
		}
		if err := s.Discard(ctx, 99); err != nil {
			t.Fatal(err)
		}
		infos, err := s.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(infos) != 1 || infos[0].ID != 3 || infos[0].Status != Completed {
			t.Fatalf("List: %+v", infos)
		}
	})
}

// TestDiscardKeepsReferencedFiles: a checkpoint may reference files in an
// earlier checkpoint's directory (a finished subtask's state, carried by
// reference). Discarding the earlier checkpoint keeps the files a
// completed checkpoint still names; discarding the last checkpoint that
// names one deletes it.
func TestDiscardKeepsReferencedFiles(t *testing.T) {
	forBackends(t, func(t *testing.T, be *backend) {
		ctx := context.Background()
		faults := NewFaults(1)
		s := be.open(t, WithFaults(faults))
		m1, _ := writeCheckpoint(t, s, 1, 30<<10)
		keyed := func(i int) checkpoint.StateHandle { return m1.Operators[0].Subtasks[i].Keyed[0] }
		// Checkpoint 2 carries both of checkpoint 1's keyed files,
		// checkpoint 3 only subtask 0's.
		m2 := *m1
		m2.CheckpointID = 2
		if _, err := s.WriteMetadata(ctx, &m2); err != nil {
			t.Fatal(err)
		}
		m3, _ := writeCheckpoint(t, s, 3, 30<<10)
		m3.Operators[0].Subtasks[0].Keyed[0] = keyed(0)
		if _, err := s.WriteMetadata(ctx, m3); err != nil {
			t.Fatal(err)
		}
		verify := func(id int64) {
			t.Helper()
			snap, err := s.Resolve(ctx, s.CheckpointPath(id))
			if err != nil {
				t.Fatalf("checkpoint %d: %v", id, err)
			}
			defer snap.Close()
			if err := snap.Verify(ctx); err != nil {
				t.Fatalf("checkpoint %d: %v", id, err)
			}
		}
		chk1 := func() []string {
			keys := be.keys(t, "chk-1/")
			slices.Sort(keys)
			return keys
		}

		if err := s.Discard(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if got, want := chk1(), []string{keyed(0).Path, keyed(1).Path}; !slices.Equal(got, want) {
			t.Fatalf("after discarding checkpoint 1, chk-1 holds %q, want %q", got, want)
		}
		verify(2)
		verify(3)

		// While a checkpoint's references cannot be read, nothing goes.
		faults.Add(Fault{Op: OpRead, Path: "chk-3/_metadata", Times: 1})
		wantErr(t, s.Discard(ctx, 2), ErrInjected)
		verify(2)

		if err := s.Discard(ctx, 2); err != nil {
			t.Fatal(err)
		}
		if got, want := chk1(), []string{keyed(0).Path}; !slices.Equal(got, want) {
			t.Fatalf("after discarding checkpoint 2, chk-1 holds %q, want %q", got, want)
		}
		if keys := be.keys(t, "chk-2/"); len(keys) != 0 {
			t.Fatalf("left behind %q", keys)
		}
		verify(3)

		if err := s.Discard(ctx, 3); err != nil {
			t.Fatal(err)
		}
		// _latest still names checkpoint 3, which Latest now finds
		// incomplete.
		if keys := be.keys(t, ""); !slices.Equal(keys, []string{LatestFile}) {
			t.Fatalf("left behind %q", keys)
		}
		if be.dir != "" && fileExists(filepath.Join(be.dir, testJob, "chk-1")) {
			t.Fatal("empty chk-1 directory left behind")
		}
	})
}

func TestDiscardDeletesMetadataFirst(t *testing.T) {
	be := memBackend(t)
	faults := NewFaults(1)
	s := be.open(t, WithFaults(faults))
	writeCheckpoint(t, s, 1, 30<<10)
	writeCheckpoint(t, s, 2, 30<<10)

	// The first state file's delete fails: _metadata is already gone, so
	// the checkpoint no longer counts as complete.
	faults.Add(Fault{Op: OpDelete, Path: "chk-2/tenant-cost-0-keyed", Times: 1})
	err := s.Discard(context.Background(), 2)
	wantErr(t, err, ErrInjected, "chk-2/tenant-cost-0-keyed")
	m, skipped := mustLatest(t, s)
	if m.CheckpointID != 1 || len(skipped) != 1 || !errors.Is(skipped[0].Err, ErrIncomplete) {
		t.Fatalf("Latest = %d, skipped %v", m.CheckpointID, skipped)
	}
	if err := s.Discard(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	if keys := be.keys(t, "chk-2/"); len(keys) != 0 {
		t.Fatalf("left behind %q", keys)
	}

	// When _metadata itself cannot be deleted the checkpoint stays whole.
	faults.Add(Fault{Op: OpDelete, Path: "_metadata", Times: 1})
	wantErr(t, s.Discard(context.Background(), 1), ErrInjected)
	if m, _ := mustLatest(t, s); m.CheckpointID != 1 {
		t.Fatal("checkpoint 1 damaged by a failed discard")
	}
}

func TestDiscardAllKeepsSavepointsAndTaskOwned(t *testing.T) {
	forBackends(t, func(t *testing.T, be *backend) {
		ctx := context.Background()
		s := be.open(t)
		writeCheckpoint(t, s, 1, 30<<10)
		writeCheckpoint(t, s, 2, 30<<10)
		for _, k := range []string{"shared/sst-1", "taskowned/changelog-1"} {
			if err := be.raw.WriteAll(ctx, be.key(k), []byte("x"), nil); err != nil {
				t.Fatal(err)
			}
		}
		// A savepoint inside the job's own directory is still left alone.
		sp, err := s.CreateSavepoint(ctx, s.Path())
		if err != nil {
			t.Fatal(err)
		}
		spMeta := writeSavepoint(t, sp, 5)
		spPath := sp.Path()
		sp.Close()

		if err := s.DiscardAll(ctx); err != nil {
			t.Fatal(err)
		}
		if infos, _ := s.List(ctx); len(infos) != 0 {
			t.Fatalf("List after DiscardAll: %+v", infos)
		}
		keys := be.keys(t, "")
		if slices.ContainsFunc(keys, func(k string) bool { return k == "shared/sst-1" || filepath.Dir(k) == "chk-1" }) {
			t.Fatalf("left behind: %q", keys)
		}
		if !slices.Contains(keys, "taskowned/changelog-1") {
			t.Fatalf("taskowned deleted: %q", keys)
		}
		snap, err := s.Resolve(ctx, spPath)
		if err != nil {
			t.Fatalf("savepoint gone: %v", err)
		}
		defer snap.Close()
		if snap.Metadata.CheckpointID != spMeta.CheckpointID {
			t.Fatal("wrong savepoint")
		}
	})
}

// TestDiscardAllKeepsWhatAKeptCheckpointNames: DiscardAll keeps a
// checkpoint the job restored and does not own, and with it the files it
// names in the directories of the checkpoints it deletes (an incremental
// checkpoint's files written by an earlier one): the kept checkpoint
// still restores, whole.
func TestDiscardAllKeepsWhatAKeptCheckpointNames(t *testing.T) {
	forBackends(t, func(t *testing.T, be *backend) {
		ctx := context.Background()
		s := be.open(t)
		m1, _ := writeCheckpoint(t, s, 1, 30<<10)
		m2, _ := writeCheckpoint(t, s, 2, 30<<10)
		named := m1.Operators[0].Subtasks[0].Keyed[0]
		m2.Operators[0].Subtasks[0].Keyed[0] = named
		if _, err := s.WriteMetadata(ctx, m2); err != nil {
			t.Fatal(err)
		}
		writeCheckpoint(t, s, 3, 30<<10)
		if err := s.DiscardAll(ctx, 2); err != nil {
			t.Fatal(err)
		}
		snap, err := s.Resolve(ctx, s.CheckpointPath(2))
		if err != nil {
			t.Fatalf("the kept checkpoint: %v", err)
		}
		defer snap.Close()
		if err := snap.Verify(ctx); err != nil {
			t.Fatalf("the kept checkpoint: %v", err)
		}
		if got := be.keys(t, "chk-1/"); !slices.Equal(got, []string{named.Path}) {
			t.Fatalf("chk-1 holds %q, want only %q, which the kept checkpoint names", got, named.Path)
		}
		if got := be.keys(t, "chk-3/"); len(got) != 0 {
			t.Fatalf("left behind %q", got)
		}
	})
}

func TestConcurrentWriters(t *testing.T) {
	forBackends(t, func(t *testing.T, be *backend) {
		ctx := context.Background()
		s := be.open(t, InlineThreshold(1000))
		const subtasks = 16
		handles := make([]checkpoint.SubtaskState, subtasks)
		var wg sync.WaitGroup
		errs := make(chan error, subtasks)
		for i := range subtasks {
			wg.Go(func() {
				for j := range 4 {
					w, err := s.CreateState(ctx, 1, fmt.Sprintf("op-%d-%d", i, j))
					if err != nil {
						errs <- err
						return
					}
					data := payload(uint64(i*10+j), (i*j*997)%5000)
					if _, err := w.Write(data); err != nil {
						errs <- err
						return
					}
					h, err := w.Close()
					if err != nil {
						errs <- err
						return
					}
					handles[i].Keyed = append(handles[i].Keyed, h)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		m := &checkpoint.Metadata{CheckpointID: 1, Operators: []checkpoint.OperatorState{{UID: "op", Parallelism: subtasks, MaxParallelism: 128, Subtasks: handles}}}
		if _, err := s.WriteMetadata(ctx, m); err != nil {
			t.Fatal(err)
		}
		got, _ := mustLatest(t, s)
		var rg sync.WaitGroup
		for i, st := range got.Operators[0].Subtasks {
			for j, h := range st.Keyed {
				rg.Go(func() {
					b, err := s.ReadState(ctx, h)
					if err != nil || !bytes.Equal(b, payload(uint64(i*10+j), (i*j*997)%5000)) {
						t.Errorf("state %d/%d: %v", i, j, err)
					}
				})
			}
		}
		rg.Wait()
	})
}

func TestInjectedWriteFailure(t *testing.T) {
	forBackends(t, func(t *testing.T, be *backend) {
		ctx := context.Background()
		faults := NewFaults(1, Fault{Op: OpWrite, Path: "chk-1/big", Action: Fail})
		s := be.open(t, WithFaults(faults))
		w, err := s.CreateState(ctx, 1, "big")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(payload(1, 100<<10)); err != nil {
			t.Fatal(err)
		}
		_, err = w.Close()
		wantErr(t, err, ErrInjected, s.CheckpointPath(1)+"/big")
		if keys := be.keys(t, ""); len(keys) != 0 {
			t.Fatalf("a failed write left %q", keys)
		}
		if ev := faults.Events(); len(ev) != 1 || ev[0].Op != OpWrite || ev[0].Key != be.key("chk-1/big") {
			t.Fatalf("events %+v", ev)
		}

		// A failed _metadata write leaves the checkpoint incomplete.
		faults.Add(Fault{Op: OpWrite, Path: "_metadata", Err: errors.New("disk full")})
		_, err = s.WriteMetadata(ctx, &checkpoint.Metadata{CheckpointID: 1})
		wantErr(t, err, nil, "chk-1/_metadata", "disk full")
		_, _, err = s.Latest(ctx)
		wantErr(t, err, ErrNoCheckpoint)
	})
}

func TestLostAndCorruptedWrites(t *testing.T) {
	ctx := context.Background()
	t.Run("lost state file", func(t *testing.T) {
		be := memBackend(t)
		faults := NewFaults(1)
		s := be.open(t, WithFaults(faults))
		writeCheckpoint(t, s, 1, 30<<10)
		faults.Add(Fault{Op: OpWrite, Path: "chk-2/tenant-cost-1-keyed", Action: Drop})
		writeCheckpoint(t, s, 2, 30<<10) // every call reports success
		m, skipped := mustLatest(t, s)
		if m.CheckpointID != 1 || len(skipped) != 1 {
			t.Fatalf("Latest = %d, skipped %v", m.CheckpointID, skipped)
		}
		wantErr(t, skipped[0].Err, ErrCorrupt, "state file missing", "chk-2/tenant-cost-1-keyed")
	})
	t.Run("flipped bit in _metadata", func(t *testing.T) {
		be := memBackend(t)
		faults := NewFaults(1, Fault{Op: OpWrite, Path: "_metadata", After: 1, Times: 1, Action: FlipBit, Offset: -5})
		s := be.open(t, WithFaults(faults))
		writeCheckpoint(t, s, 1, 30<<10)
		writeCheckpoint(t, s, 2, 30<<10)
		writeCheckpoint(t, s, 3, 30<<10)
		if n := len(faults.Events()); n != 1 {
			t.Fatalf("%d faults fired, want 1", n)
		}
		m, skipped := mustLatest(t, s)
		if m.CheckpointID != 3 || len(skipped) != 0 {
			t.Fatalf("Latest = %d, skipped %v", m.CheckpointID, skipped)
		}
		_, err := s.ReadMetadata(ctx, s.CheckpointPath(2))
		wantErr(t, err, ErrCorrupt, "checksum mismatch")
	})
	t.Run("torn state file", func(t *testing.T) {
		be := memBackend(t)
		faults := NewFaults(1, Fault{Op: OpWrite, Path: "chk-1/*-keyed", Times: 1, Action: Truncate, Offset: 4096})
		s := be.open(t, WithFaults(faults))
		writeCheckpoint(t, s, 1, 30<<10)
		_, skipped, err := s.Latest(ctx)
		if !errors.Is(err, ErrNoCheckpoint) || len(skipped) != 1 {
			t.Fatalf("Latest: %v, %v", err, skipped)
		}
		wantErr(t, skipped[0].Err, ErrCorrupt, "expected 30720 bytes, got 4096")
	})
	t.Run("bit flipped in flight to storage", func(t *testing.T) {
		be := memBackend(t)
		faults := NewFaults(1, Fault{Op: OpWrite, Path: "tenant-cost-0-keyed", Action: FlipBit, Offset: 7})
		s := be.open(t, WithFaults(faults), VerifyChecksums(true))
		writeCheckpoint(t, s, 1, 30<<10)
		_, skipped, err := s.Latest(ctx)
		if !errors.Is(err, ErrNoCheckpoint) || len(skipped) != 1 {
			t.Fatalf("Latest: %v, %v", err, skipped)
		}
		wantErr(t, skipped[0].Err, ErrCorrupt, "checksum mismatch", "tenant-cost-0-keyed")
	})
	t.Run("probability is seeded", func(t *testing.T) {
		run := func() []string {
			be := memBackend(t)
			faults := NewFaults(42, Fault{Op: OpWrite, Probability: 0.5, Action: Drop})
			s := be.open(t, WithFaults(faults))
			for id := int64(1); id <= 5; id++ {
				writeCheckpoint(t, s, id, 30<<10)
			}
			var keys []string
			for _, e := range faults.Events() {
				keys = append(keys, e.Key)
			}
			return keys
		}
		a, b := run(), run()
		if len(a) == 0 || len(a) == 15 || !slices.Equal(a, b) {
			t.Fatalf("two runs with one seed dropped %q and %q", a, b)
		}
	})
}

func TestAbortLeavesNoFile(t *testing.T) {
	forBackends(t, func(t *testing.T, be *backend) {
		s := be.open(t)
		w, err := s.CreateState(context.Background(), 1, "big")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(payload(1, 100<<10)); err != nil {
			t.Fatal(err)
		}
		w.Abort()
		if _, err := w.Close(); err == nil {
			t.Fatal("Close after Abort succeeded")
		}

		// A write whose context is cancelled before Close is dropped too.
		ctx, cancel := context.WithCancel(context.Background())
		w, err = s.CreateState(ctx, 1, "big2")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(payload(1, 100<<10)); err != nil {
			t.Fatal(err)
		}
		cancel()
		_, err = w.Close()
		wantErr(t, err, context.Canceled, "chk-1/big2")

		if keys := be.keys(t, ""); len(keys) != 0 {
			t.Fatalf("abandoned writes left %q", keys)
		}
		if be.dir != "" {
			filepath.WalkDir(be.dir, func(p string, d os.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					t.Errorf("file left on disk: %s", p)
				}
				return nil
			})
		}
	})
}

func TestStateNames(t *testing.T) {
	s := memBackend(t).open(t)
	for _, name := range []string{"", "/abs", "../up", "a/../b", "a//b", "_metadata", "x/_hidden", "a.tmp", "."} {
		if _, err := s.CreateState(context.Background(), 1, name); err == nil {
			t.Errorf("name %q accepted", name)
		}
	}
	w, err := s.CreateState(context.Background(), 1, "op/sub-0")
	if err != nil {
		t.Fatal(err)
	}
	if w.Path() != "chk-1/op/sub-0" {
		t.Fatalf("path %q", w.Path())
	}
	w.Abort()
	if _, err := s.CreateState(context.Background(), -1, "x"); err == nil {
		t.Error("negative checkpoint id accepted")
	}
	if _, err := Open(context.Background(), "mem://", "a/b"); err == nil {
		t.Error("job id with / accepted")
	}
}

// writeSavepoint writes a savepoint with one file and one inline state.
func writeSavepoint(t *testing.T, sp *Savepoint, id int64) *checkpoint.Metadata {
	t.Helper()
	ctx := context.Background()
	w, err := sp.CreateState(ctx, "op-0-keyed")
	if err != nil {
		t.Fatal(err)
	}
	big := writeState(t, w, payload(uint64(id), 40<<10))
	w, err = sp.CreateState(ctx, "op-0-op")
	if err != nil {
		t.Fatal(err)
	}
	small := writeState(t, w, []byte("offset 17"))
	m := &checkpoint.Metadata{
		JobID: testJob, CheckpointID: id, Kind: checkpoint.KindSavepoint,
		TriggerTime: time.Unix(100, 0).UTC(), CompletionTime: time.Unix(101, 0).UTC(),
		Operators: []checkpoint.OperatorState{{UID: "op", Parallelism: 1, MaxParallelism: 128,
			Subtasks: []checkpoint.SubtaskState{{Keyed: []checkpoint.StateHandle{big}, Operator: []checkpoint.StateHandle{small}}}}},
	}
	if _, err := sp.WriteMetadata(ctx, m); err != nil {
		t.Fatal(err)
	}
	m.Version = checkpoint.MetadataVersion
	return m
}

func TestSavepointIsSelfContainedAndMovable(t *testing.T) {
	ctx := context.Background()
	be := fileBackend(t)
	s := be.open(t)
	spDir := filepath.Join(t.TempDir(), "savepoints")
	sp, err := s.CreateSavepoint(ctx, spDir)
	if err != nil {
		t.Fatal(err)
	}
	m := writeSavepoint(t, sp, 4)
	if err := sp.Abort(ctx); err != nil { // a completed savepoint stays
		t.Fatal(err)
	}
	sp.Close()
	name := filepath.Base(sp.Path())
	if ok, _ := filepath.Match("savepoint-a1b2c3-????????????", name); !ok || filepath.Dir(sp.Path()) != spDir {
		t.Fatalf("savepoint at %s", sp.Path())
	}
	if h := m.Operators[0].Subtasks[0].Keyed[0]; h.Path != "op-0-keyed" {
		t.Fatalf("savepoint state path %q, want it relative to the savepoint", h.Path)
	}

	// Move it; another job restores from it.
	moved := filepath.Join(t.TempDir(), "elsewhere", "my-savepoint")
	if err := os.MkdirAll(filepath.Dir(moved), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(sp.Path(), moved); err != nil {
		t.Fatal(err)
	}
	other, err := Open(ctx, t.TempDir(), "other-job")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for _, p := range []string{moved, moved + "/_metadata", "file://" + filepath.ToSlash(moved)} {
		snap, err := other.Resolve(ctx, p)
		if err != nil {
			t.Fatalf("Resolve(%s): %v", p, err)
		}
		if snap.Metadata.Kind != checkpoint.KindSavepoint || snap.Path != moved {
			t.Fatalf("Resolve(%s): %+v at %s", p, snap.Metadata, snap.Path)
		}
		h := snap.Metadata.Operators[0].Subtasks[0].Keyed[0]
		b, err := snap.ReadState(ctx, h)
		if err != nil || !bytes.Equal(b, payload(4, 40<<10)) {
			t.Fatalf("ReadState: %v", err)
		}
		if err := snap.Verify(ctx); err != nil {
			t.Fatal(err)
		}
		snap.Close()
	}
}

func TestSavepointAbort(t *testing.T) {
	forBackends(t, func(t *testing.T, be *backend) {
		ctx := context.Background()
		s := be.open(t)
		sp, err := s.CreateSavepoint(ctx, s.Path()+"/../savepoints")
		if err != nil {
			t.Fatal(err)
		}
		defer sp.Close()
		w, err := sp.CreateState(ctx, "x")
		if err != nil {
			t.Fatal(err)
		}
		writeState(t, w, payload(1, 30<<10))
		if err := sp.Abort(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Resolve(ctx, sp.Path()); !errors.Is(err, ErrIncomplete) {
			t.Fatalf("Resolve of an aborted savepoint: %v", err)
		}
		if be.dir != "" && fileExists(sp.Path()) {
			t.Fatalf("%s left behind", sp.Path())
		}
	})
}

func TestSavepointOnMem(t *testing.T) {
	ctx := context.Background()
	be := memBackend(t)
	s := be.open(t)
	sp, err := s.CreateSavepoint(ctx, "mem:///savepoints")
	if err != nil {
		t.Fatal(err)
	}
	m := writeSavepoint(t, sp, 9)
	snap, err := s.Resolve(ctx, sp.Path()+"/"+MetadataFile)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	if snap.Metadata.CheckpointID != m.CheckpointID {
		t.Fatal("wrong savepoint")
	}
	// Savepoints are not checkpoints: recovery does not pick them.
	if _, _, err := s.Latest(ctx); !errors.Is(err, ErrNoCheckpoint) {
		t.Fatalf("Latest: %v", err)
	}
	if _, err := s.WriteMetadata(ctx, m); err == nil {
		t.Fatal("Storage.WriteMetadata wrote a savepoint")
	}
}

func TestResolveCheckpointOfAnotherJob(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	old, err := Open(ctx, dir, "old-job")
	if err != nil {
		t.Fatal(err)
	}
	m, data := writeCheckpoint(t, old, 6, 30<<10)
	old.Close()

	s, err := Open(ctx, "file://"+filepath.ToSlash(dir), "new-job")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, p := range []string{
		filepath.Join(dir, "old-job", "chk-6"),
		filepath.Join(dir, "old-job", "chk-6", MetadataFile),
		"file://" + filepath.ToSlash(filepath.Join(dir, "old-job", "chk-6")) + "/",
	} {
		snap, err := s.Resolve(ctx, p)
		if err != nil {
			t.Fatalf("Resolve(%s): %v", p, err)
		}
		h := m.Operators[0].Subtasks[0].Keyed[0]
		b, err := snap.ReadState(ctx, h)
		if err != nil || !bytes.Equal(b, stateOf(data, h)) {
			t.Fatalf("Resolve(%s).ReadState: %v", p, err)
		}
		snap.Close()
	}
	if _, err := s.Resolve(ctx, filepath.Join(dir, "old-job", "chk-5")); !errors.Is(err, ErrIncomplete) {
		t.Fatalf("Resolve of a missing checkpoint: %v", err)
	}
}

// TestDiscardSeveralAtOnce discards checkpoints 1 and 2 in one call, where
// 2 and 3 name files of 1 (a finished subtask's state, by reference): the
// files only 2 named go with them, the one 3 still names stays, and the
// other checkpoints' references are read once, not once per checkpoint.
func TestDiscardSeveralAtOnce(t *testing.T) {
	forBackends(t, func(t *testing.T, be *backend) {
		ctx := context.Background()
		var reads sync.Map
		faults := NewHookFaults(0, func(_ context.Context, op Op, key string) error {
			if op == OpRead && filepath.Base(key) == MetadataFile {
				n, _ := reads.LoadOrStore(key, new(atomic.Int64))
				n.(*atomic.Int64).Add(1)
			}
			return nil
		})
		s := be.open(t, WithFaults(faults))
		m1, _ := writeCheckpoint(t, s, 1, 30<<10)
		keyed := func(i int) checkpoint.StateHandle { return m1.Operators[0].Subtasks[i].Keyed[0] }
		m2 := *m1
		m2.CheckpointID = 2
		if _, err := s.WriteMetadata(ctx, &m2); err != nil {
			t.Fatal(err)
		}
		m3, _ := writeCheckpoint(t, s, 3, 30<<10)
		m3.Operators[0].Subtasks[0].Keyed[0] = keyed(0)
		if _, err := s.WriteMetadata(ctx, m3); err != nil {
			t.Fatal(err)
		}
		reads.Clear()
		if err := s.Discard(ctx, 1, 2); err != nil {
			t.Fatal(err)
		}
		if got, want := be.keys(t, "chk-1/"), []string{keyed(0).Path}; !slices.Equal(got, want) {
			t.Fatalf("after discarding checkpoints 1 and 2, chk-1 holds %q, want %q", got, want)
		}
		if keys := be.keys(t, "chk-2/"); len(keys) != 0 {
			t.Fatalf("left behind %q", keys)
		}
		reads.Range(func(k, n any) bool {
			if c := n.(*atomic.Int64).Load(); c > 1 {
				t.Errorf("%s read %d times by one discard", k, c)
			}
			return true
		})
		snap, err := s.Resolve(ctx, s.CheckpointPath(3))
		if err != nil {
			t.Fatal(err)
		}
		defer snap.Close()
		if err := snap.Verify(ctx); err != nil {
			t.Fatalf("checkpoint 3 after the discard: %v", err)
		}
	})
}

// TestResolveOfACheckpointDiscardedMidRead discards a checkpoint between
// the read of its _metadata and the listing of its files, as retention
// does to a checkpoint another reader is resolving: Resolve must say the
// checkpoint is incomplete, never that it is corrupt or fail on the
// vanished listing.
func TestResolveOfACheckpointDiscardedMidRead(t *testing.T) {
	forBackends(t, func(t *testing.T, be *backend) {
		ctx := context.Background()
		other := be.open(t)
		var discarded atomic.Bool
		faults := NewHookFaults(0, func(ctx context.Context, op Op, key string) error {
			if op == OpList && filepath.Base(key) == "chk-1" && discarded.CompareAndSwap(false, true) {
				return other.Discard(ctx, 1)
			}
			return nil
		})
		s := be.open(t, WithFaults(faults))
		writeCheckpoint(t, s, 1, 30<<10)
		_, err := s.Resolve(ctx, s.CheckpointPath(1))
		if !discarded.Load() {
			t.Fatal("Resolve listed no checkpoint directory: the test discarded nothing")
		}
		var corrupt *CorruptError
		if !errors.Is(err, ErrIncomplete) || errors.As(err, &corrupt) {
			t.Fatalf("Resolve of a checkpoint discarded while it was read: %v, want ErrIncomplete", err)
		}
	})
}

// TestSavepointWrittenFromOtherProcesses writes a savepoint's state
// through OpenSavepoint, as task managers do, on a Storage of their own,
// and completes it on the creator's: the savepoint resolves with that
// state. Discard then deletes it whole, _metadata included, and
// OpenSavepoint refuses a directory that is not a savepoint's.
func TestSavepointWrittenFromOtherProcesses(t *testing.T) {
	forBackends(t, func(t *testing.T, be *backend) {
		ctx := context.Background()
		creator, writer := be.open(t), be.open(t)
		sp, err := creator.CreateSavepoint(ctx, creator.Path()+"/../savepoints")
		if err != nil {
			t.Fatal(err)
		}
		defer sp.Close()
		remote, err := writer.OpenSavepoint(ctx, sp.Path())
		if err != nil {
			t.Fatalf("OpenSavepoint(%s): %v", sp.Path(), err)
		}
		w, err := remote.CreateState(ctx, "op-0-keyed")
		if err != nil {
			t.Fatal(err)
		}
		data := payload(9, 40<<10)
		h := writeState(t, w, data)
		remote.Close()
		m := &checkpoint.Metadata{JobID: testJob, CheckpointID: 3, Kind: checkpoint.KindSavepoint,
			Operators: []checkpoint.OperatorState{{UID: "op", Parallelism: 1, MaxParallelism: 128,
				Subtasks: []checkpoint.SubtaskState{{Keyed: []checkpoint.StateHandle{h}}}}}}
		if _, err := sp.WriteMetadata(ctx, m); err != nil {
			t.Fatal(err)
		}
		snap, err := writer.Resolve(ctx, sp.Path())
		if err != nil {
			t.Fatalf("Resolve of the savepoint: %v", err)
		}
		b, err := snap.ReadState(ctx, snap.Metadata.Operators[0].Subtasks[0].Keyed[0])
		snap.Close()
		if err != nil || !bytes.Equal(b, data) {
			t.Fatalf("reading the state written through OpenSavepoint: %v", err)
		}
		if err := sp.Discard(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := writer.Resolve(ctx, sp.Path()); !errors.Is(err, ErrIncomplete) {
			t.Fatalf("Resolve of a discarded savepoint: %v, want ErrIncomplete", err)
		}
		if _, err := writer.OpenSavepoint(ctx, writer.CheckpointPath(3)); err == nil {
			t.Fatal("OpenSavepoint of a checkpoint directory succeeded")
		}
	})
}

// TestDiscardIncomplete deletes the checkpoints without a _metadata (one
// whose state was written after its abort, say) and keeps the complete
// ones, the files of an incomplete one that a complete one names, and a
// checkpoint whose _metadata is corrupt.
func TestDiscardIncomplete(t *testing.T) {
	forBackends(t, func(t *testing.T, be *backend) {
		ctx := context.Background()
		s := be.open(t)
		for id := int64(1); id <= 4; id++ {
			writeCheckpoint(t, s, id, 30<<10)
		}
		be.remove(t, "chk-2/"+MetadataFile)
		be.mutate(t, "chk-4/"+MetadataFile, func(b []byte) []byte { return append(b, 'x') })
		// A write abandoned before its file was in place (a subtask
		// canceled while it wrote checkpoint 5's state): in a local
		// directory it leaves chk-5/, empty, which no listing shows.
		w, err := s.CreateState(ctx, 5, "op-0-keyed")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(payload(5, 30<<10)); err != nil {
			t.Fatal(err)
		}
		w.Abort()
		if err := s.DiscardIncomplete(ctx); err != nil {
			t.Fatal(err)
		}
		if keys := be.keys(t, "chk-2/"); len(keys) != 0 {
			t.Fatalf("the incomplete checkpoint left %q", keys)
		}
		if be.dir != "" {
			for _, d := range []string{"chk-2", "chk-5"} {
				if _, err := os.Stat(filepath.Join(be.dir, testJob, d)); !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("the directory %s of a checkpoint that never completed is still there (%v)", d, err)
				}
			}
		}
		for _, p := range []string{"chk-1/", "chk-3/", "chk-4/"} {
			if keys := be.keys(t, p); len(keys) == 0 {
				t.Fatalf("%s was deleted", p)
			}
		}
	})
}
