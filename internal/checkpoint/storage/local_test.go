package storage

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// synced is one sync a localFS made: of a file, with its size then and
// whether the file it becomes was already published, or of a directory,
// with the entries it had then.
type synced struct {
	path      string
	dir       bool
	size      int64
	published bool
	entries   []string
}

// recordSyncs makes s's local writes record their syncs, and fail those
// that fail says to.
func recordSyncs(t *testing.T, s *Storage, fail func(synced) error) func() []synced {
	t.Helper()
	if s.st.local == nil {
		t.Fatal("a local directory is written through the bucket")
	}
	var mu sync.Mutex
	var all []synced
	s.st.local.sync = func(f *os.File) error {
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		e := synced{path: f.Name(), dir: fi.IsDir(), size: fi.Size()}
		if e.dir {
			des, err := os.ReadDir(f.Name())
			if err != nil {
				return err
			}
			for _, d := range des {
				e.entries = append(e.entries, d.Name())
			}
		} else {
			e.published = fileExists(finalName(f.Name()))
		}
		mu.Lock()
		all = append(all, e)
		mu.Unlock()
		if fail != nil {
			if err := fail(e); err != nil {
				return err
			}
		}
		return f.Sync()
	}
	return func() []synced {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(all)
	}
}

func skipOnWindows(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Windows cannot sync a directory")
	}
}

// finalName returns the file a temporary file "<name>.<random>.tmp" is
// renamed to.
func finalName(tmp string) string {
	s := strings.TrimSuffix(tmp, ".tmp")
	return s[:strings.LastIndexByte(s, '.')]
}

// TestLocalWritesAreDurable writes a checkpoint, with a state file in a
// subdirectory, to a new job directory, and checks that every file was
// synced whole before it was renamed into place, that its directory was
// synced after, and that every new directory's parent was synced once it
// held the directory.
func TestLocalWritesAreDurable(t *testing.T) {
	skipOnWindows(t)
	be := fileBackend(t)
	s := be.open(t)
	syncs := recordSyncs(t, s, nil)
	ctx := context.Background()
	w, err := s.CreateState(ctx, 1, "op/sub-0")
	if err != nil {
		t.Fatal(err)
	}
	writeState(t, w, payload(1, 30<<10))
	writeCheckpoint(t, s, 1, 30<<10)

	job := filepath.Join(be.dir, testJob)
	chk := filepath.Join(job, "chk-1")
	files := map[string]int64{}
	for _, rel := range []string{"op/sub-0", "tenant-cost-0-keyed", "tenant-cost-1-keyed", MetadataFile} {
		p := filepath.Join(chk, filepath.FromSlash(rel))
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		files[p] = fi.Size()
	}
	if fi, err := os.Stat(filepath.Join(job, LatestFile)); err != nil {
		t.Fatal(err)
	} else {
		files[filepath.Join(job, LatestFile)] = fi.Size()
	}
	all := syncs()
	fileSyncs := 0
	for _, e := range all {
		if !e.dir {
			fileSyncs++
		}
	}
	if fileSyncs != len(files) {
		t.Fatalf("%d file syncs for %d files: %+v", fileSyncs, len(files), all)
	}
	for p, size := range files {
		i := slices.IndexFunc(all, func(e synced) bool { return !e.dir && finalName(e.path) == p })
		if i < 0 {
			t.Fatalf("%s was never synced", p)
		}
		if e := all[i]; e.published || e.size != size {
			t.Fatalf("%s synced with %d of its %d bytes, published already: %v", p, e.size, size, e.published)
		}
		dir, base := filepath.Dir(p), filepath.Base(p)
		if !slices.ContainsFunc(all[i+1:], func(e synced) bool { return e.dir && e.path == dir && slices.Contains(e.entries, base) }) {
			t.Fatalf("%s: its directory was not synced after it was renamed into place", p)
		}
	}
	for _, d := range []string{job, chk, filepath.Join(chk, "op")} {
		parent, base := filepath.Dir(d), filepath.Base(d)
		if !slices.ContainsFunc(all, func(e synced) bool { return e.dir && e.path == parent && slices.Contains(e.entries, base) }) {
			t.Fatalf("new directory %s: its parent was not synced after it was created", d)
		}
	}
	if m, _ := mustLatest(t, s); m.CheckpointID != 1 {
		t.Fatalf("Latest = %d", m.CheckpointID)
	}

	// Another checkpoint syncs its new directory's parent, and no more
	// directories than its own.
	before := len(syncs())
	writeCheckpoint(t, s, 2, 30<<10)
	for _, e := range syncs()[before:] {
		if e.dir && e.path != job && e.path != filepath.Join(job, "chk-2") {
			t.Fatalf("checkpoint 2 synced directory %s", e.path)
		}
	}
}

// TestLocalSyncFailureFailsWrite: a write whose file or directory cannot
// be synced fails and leaves nothing behind, so a _metadata that is not
// durable does not complete its checkpoint.
func TestLocalSyncFailureFailsWrite(t *testing.T) {
	skipOnWindows(t)
	for _, what := range []string{"file", "directory"} {
		t.Run(what, func(t *testing.T) {
			be := fileBackend(t)
			s := be.open(t)
			writeCheckpoint(t, s, 1, 10)
			broken := errors.New("I/O error")
			recordSyncs(t, s, func(e synced) error {
				if what == "directory" && e.dir && slices.Contains(e.entries, MetadataFile) ||
					what == "file" && !e.dir && filepath.Base(finalName(e.path)) == MetadataFile {
					return broken
				}
				return nil
			})
			m, _ := mustLatest(t, s)
			m.CheckpointID = 2
			if _, err := s.WriteMetadata(context.Background(), m); !errors.Is(err, broken) {
				t.Fatalf("WriteMetadata with a failing sync: %v", err)
			}
			entries, err := os.ReadDir(filepath.Join(be.dir, testJob, "chk-2"))
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != 0 {
				t.Fatalf("a failed write left %v", entries)
			}
			if m, _ := mustLatest(t, s); m.CheckpointID != 1 {
				t.Fatalf("Latest = %d, want 1", m.CheckpointID)
			}
		})
	}
}

// TestNamesFileblobEscapesAreRejected: local files are written at their
// key's path, so names that fileblob would read at an escaped path are
// refused.
func TestNamesFileblobEscapesAreRejected(t *testing.T) {
	s := fileBackend(t).open(t)
	if _, err := s.CreateState(context.Background(), 1, "op\n-0"); err == nil {
		t.Error("name with a control character accepted")
	}
	if _, err := Open(context.Background(), "mem://", "job\x01"); err == nil {
		t.Error("job id with a control character accepted")
	}
}

// TestListWhileFilesComeAndGo lists a local job directory while state
// files are written (a temporary file renamed into place) and deleted
// beside it: a file that vanishes between the directory read and the
// read of its attributes does not fail the listing, so a discard that
// runs while the next checkpoint is written still finds the checkpoints.
func TestListWhileFilesComeAndGo(t *testing.T) {
	be := fileBackend(t)
	s := be.open(t)
	ctx := context.Background()
	writeCheckpoint(t, s, 1, 1<<10)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			key := s.jobKey + "chk-2/churn-" + strconv.Itoa(i%4)
			w, err := s.st.newWriter(ctx, key, "")
			if err != nil {
				t.Error(err)
				return
			}
			w.Write(payload(uint64(i), 64))
			if err := w.Close(); err != nil {
				t.Error(err)
				return
			}
			if err := s.st.remove(ctx, key); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	defer func() { close(stop); <-done }()
	for i := range 3000 {
		infos, err := s.List(ctx)
		if err != nil {
			t.Fatalf("listing %d: %v", i, err)
		}
		if len(infos) == 0 || infos[0].ID != 1 {
			t.Fatalf("listing %d: %+v, want checkpoint 1 first", i, infos)
		}
	}
}
