package storage

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/checkpoint"
)

// incremental writes the checkpoints of one subtask of an incremental
// checkpoint's operator: each names a private file (chk-<n>/) and files
// in shared/, some of which it writes and some an earlier checkpoint
// wrote.
type incremental struct {
	t *testing.T
	s *Storage
	// files are the handles of the shared files written so far, by the
	// name the test gives them.
	files map[string]checkpoint.StateHandle
	// named are the paths each completed checkpoint names.
	named map[int64][]string
}

func (inc *incremental) writeShared(id int64, name string) checkpoint.StateHandle {
	inc.t.Helper()
	w, err := inc.s.CreateSharedState(context.Background(), id, "op-0-keyed-"+name)
	if err != nil {
		inc.t.Fatal(err)
	}
	h := writeState(inc.t, w, payload(uint64(id)<<8+uint64(len(inc.files)), 30<<10))
	inc.files[name] = h
	return h
}

// checkpoint writes checkpoint id: a private file, the shared files
// write names, and the handles of reuse, which earlier checkpoints
// wrote. With complete it writes the _metadata too.
func (inc *incremental) checkpoint(id int64, write, reuse []string, complete bool) {
	inc.t.Helper()
	ctx := context.Background()
	w, err := inc.s.CreateState(ctx, id, "op-0-keyed")
	if err != nil {
		inc.t.Fatal(err)
	}
	hs := []checkpoint.StateHandle{writeState(inc.t, w, payload(uint64(id), 30<<10))}
	for _, n := range write {
		hs = append(hs, inc.writeShared(id, n))
	}
	for _, n := range reuse {
		hs = append(hs, inc.files[n])
	}
	if !complete {
		return
	}
	m := &checkpoint.Metadata{
		JobID: testJob, CheckpointID: id, Kind: checkpoint.KindCheckpoint,
		TriggerTime: time.Unix(id, 0), CompletionTime: time.Unix(id, 0),
		Operators: []checkpoint.OperatorState{{UID: "op", Parallelism: 1, MaxParallelism: 128,
			Subtasks: []checkpoint.SubtaskState{{Keyed: hs}}}},
	}
	if _, err := inc.s.WriteMetadata(ctx, m); err != nil {
		inc.t.Fatal(err)
	}
	for _, h := range hs {
		inc.named[id] = append(inc.named[id], h.Path)
	}
}

// TestSharedLayout pins the layout of incremental checkpoints: the files
// later checkpoints may name are in shared/, named after the checkpoint
// that wrote them, everything else and _metadata in chk-<n>/; discarding
// a checkpoint removes its chk-<n>/ whole, and a file in shared/ goes
// exactly when the last retained checkpoint naming it is discarded (the
// coordinator's count of references to it drops to zero); the files an
// aborted checkpoint wrote in shared/ go with it, and DiscardAll leaves
// nothing in shared/.
func TestSharedLayout(t *testing.T) {
	forBackends(t, func(t *testing.T, be *backend) {
		ctx := context.Background()
		s := be.open(t)
		inc := &incremental{t: t, s: s, files: map[string]checkpoint.StateHandle{}, named: map[int64][]string{}}
		var retained []int64
		// check asserts that the job directory holds exactly the retained
		// checkpoints' directories and the shared files they name.
		check := func(step string) {
			t.Helper()
			refs := map[string]int{} // the coordinator's sharedRefs
			for _, id := range retained {
				for _, p := range inc.named[id] {
					refs[p]++
				}
			}
			var want, got []string
			for p := range refs {
				if strings.HasPrefix(p, SharedDir+"/") {
					want = append(want, p)
				}
			}
			chkDirs := map[string]bool{}
			for _, k := range be.keys(t, "") {
				switch {
				case strings.HasPrefix(k, SharedDir+"/"):
					got = append(got, k)
				case strings.HasPrefix(k, checkpointDirPrefix):
					dir, _, _ := strings.Cut(k, "/")
					chkDirs[dir] = true
					if _, ok := refs[k]; !ok && !strings.HasSuffix(k, "/"+MetadataFile) {
						t.Fatalf("%s: %s is left, which no retained checkpoint names", step, k)
					}
				}
			}
			slices.Sort(want)
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Fatalf("%s: shared/ holds %q, want %q", step, got, want)
			}
			var wantDirs []string
			for _, id := range retained {
				wantDirs = append(wantDirs, checkpointDir(id))
			}
			if gotDirs := slices.Sorted(maps.Keys(chkDirs)); !slices.Equal(gotDirs, wantDirs) {
				t.Fatalf("%s: checkpoint directories %q, want those of the retained %v", step, gotDirs, wantDirs)
			}
			if be.dir != "" {
				// No empty directory is left either.
				entries, err := os.ReadDir(filepath.Join(be.dir, testJob))
				if err != nil {
					t.Fatal(err)
				}
				var dirs []string
				for _, e := range entries {
					if strings.HasPrefix(e.Name(), checkpointDirPrefix) {
						dirs = append(dirs, e.Name())
					}
				}
				slices.Sort(dirs)
				if !slices.Equal(dirs, wantDirs) {
					t.Fatalf("%s: checkpoint directories on disk %q, want %q", step, dirs, wantDirs)
				}
			}
		}
		// complete adds checkpoint id and, as the coordinator does with
		// two retained, discards the oldest.
		complete := func(id int64, write, reuse []string) {
			t.Helper()
			inc.checkpoint(id, write, reuse, true)
			retained = append(retained, id)
			for len(retained) > 2 {
				old := retained[0]
				retained = retained[1:]
				if err := s.Discard(ctx, old); err != nil {
					t.Fatal(err)
				}
			}
			check(fmt.Sprintf("after checkpoint %d", id))
		}

		complete(1, []string{"a", "b"}, nil)
		for n, h := range inc.files {
			if !strings.HasPrefix(h.Path, "shared/1-") || !strings.HasSuffix(h.Path, "-op-0-keyed-"+n) {
				t.Fatalf("the shared file %s of checkpoint 1 is at %s", n, h.Path)
			}
		}
		complete(2, []string{"c"}, []string{"a"})
		complete(3, []string{"d"}, []string{"a", "c"}) // 1 goes, and b with it
		if refs := be.keys(t, inc.files["b"].Path); len(refs) != 0 {
			t.Fatalf("b, which only checkpoint 1 named, is left: %q", refs)
		}
		complete(4, []string{"e"}, []string{"d"}) // 2 goes: a and c stay, 3 names them
		if len(be.keys(t, inc.files["a"].Path)) != 1 {
			t.Fatal("a went while checkpoint 3 names it")
		}
		complete(5, nil, []string{"d", "e"}) // 3 goes, the last to name a and c
		// Old files restore.
		for _, id := range retained {
			snap, err := s.Resolve(ctx, s.CheckpointPath(id))
			if err != nil {
				t.Fatal(err)
			}
			if err := snap.Verify(ctx); err != nil {
				t.Fatal(err)
			}
			snap.Close()
		}

		// An aborted checkpoint: discarded without _metadata, it takes the
		// files it wrote in shared/ along, not those it named.
		inc.checkpoint(6, []string{"f"}, []string{"e"}, false)
		if err := s.Discard(ctx, 6); err != nil {
			t.Fatal(err)
		}
		check("after the abort of checkpoint 6")
		// A shared file written after its checkpoint's abort was
		// discarded, and no chk-7/: DiscardIncomplete finds it by its name.
		inc.writeShared(7, "g")
		if err := s.DiscardIncomplete(ctx); err != nil {
			t.Fatal(err)
		}
		check("after DiscardIncomplete")

		// Two writes of one name for one checkpoint (two attempts of a
		// subtask) never share a file.
		h1, h2 := inc.writeShared(8, "h"), inc.writeShared(8, "h")
		if h1.Path == h2.Path {
			t.Fatalf("two writes of one shared file both at %s", h1.Path)
		}

		if err := s.DiscardAll(ctx); err != nil {
			t.Fatal(err)
		}
		if keys := be.keys(t, ""); len(keys) != 0 {
			t.Fatalf("DiscardAll left %q", keys)
		}
	})
}

// TestDiscardAllKeepsTheSharedFilesAKeptCheckpointNames: the checkpoint
// a job restored without claiming it stays whole, with the files it
// names in shared/; the others' shared files go.
func TestDiscardAllKeepsTheSharedFilesAKeptCheckpointNames(t *testing.T) {
	be := memBackend(t)
	s := be.open(t)
	inc := &incremental{t: t, s: s, files: map[string]checkpoint.StateHandle{}, named: map[int64][]string{}}
	inc.checkpoint(1, []string{"a", "b"}, nil, true)
	inc.checkpoint(2, []string{"c"}, []string{"a"}, true)
	inc.checkpoint(3, []string{"d"}, []string{"a", "c"}, true)
	if err := s.DiscardAll(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	got := be.keys(t, SharedDir+"/")
	want := []string{inc.files["a"].Path, inc.files["c"].Path}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("shared/ holds %q, want what checkpoint 2 names, %q", got, want)
	}
	snap, err := s.Resolve(context.Background(), s.CheckpointPath(2))
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	if err := snap.Verify(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestLocalCopyOfASharedFile: a local copy written alongside a file in
// shared/ is kept under the file's handle path and serves its restore.
func TestLocalCopyOfASharedFile(t *testing.T) {
	be := memBackend(t)
	var reads remoteReads
	s := be.open(t, InlineThreshold(0), WithFaults(NewHookFaults(1, reads.hook)))
	l := openLocal(t)
	data := stateBytes(300, 9)
	w, err := s.CreateSharedState(context.Background(), 3, "op-0-keyed")
	if err != nil {
		t.Fatal(err)
	}
	lw := l.Create(3, "op-0-keyed")
	if _, err := io.MultiWriter(w, lw).Write(data); err != nil {
		t.Fatal(err)
	}
	h, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	lw.Commit(h)
	assertCopies(t, l, h.Path)
	got, err := l.Reader(s, nil).ReadState(context.Background(), h)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("ReadState = %v", err)
	}
	if r := reads.take(); len(r) != 0 {
		t.Fatalf("remote reads %q, want none", r)
	}
	// A copy is not taken for another checkpoint's shared file.
	lw = l.Create(4, "op-0-keyed")
	lw.Write(data)
	lw.Commit(h)
	assertCopies(t, l, h.Path)
}

func TestParseStatePath(t *testing.T) {
	for _, c := range []struct {
		p    string
		id   int64
		name string
		ok   bool
	}{
		{"chk-7/op-0-keyed", 7, "op-0-keyed", true},
		{"shared/7-1x2y3z-op-0-keyed-000012.sst", 7, "op-0-keyed-000012.sst", true},
		{newSharedPath(12, "a/b-c"), 12, "a/b-c", true},
		{"shared/sst-1", 0, "", false},
		{"shared/07-x-y", 0, "", false},
		{"taskowned/7-x-y", 0, "", false},
		{"chk-7", 0, "", false},
		{"op-0-keyed", 0, "", false},
	} {
		id, name, ok := ParseStatePath(c.p)
		if id != c.id || name != c.name || ok != c.ok {
			t.Errorf("ParseStatePath(%q) = %d, %q, %v, want %d, %q, %v", c.p, id, name, ok, c.id, c.name, c.ok)
		}
	}
}
