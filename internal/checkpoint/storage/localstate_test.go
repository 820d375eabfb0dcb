package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/weirstream/weir/internal/checkpoint"
)

// remoteReads counts the reads of state files (not _metadata) that reach
// checkpoint storage.
type remoteReads struct {
	mu   sync.Mutex
	keys []string
}

func (r *remoteReads) hook(_ context.Context, op Op, key string) error {
	if op == OpRead && !strings.HasSuffix(key, MetadataFile) {
		r.mu.Lock()
		r.keys = append(r.keys, key)
		r.mu.Unlock()
	}
	return nil
}

func (r *remoteReads) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := r.keys
	r.keys = nil
	return k
}

// writeBoth writes data as state file name of checkpoint id to s, with a
// local copy in l, as a subtask with local backup does.
func writeBoth(t *testing.T, s *Storage, l *LocalStore, id int64, name string, data []byte) checkpoint.StateHandle {
	t.Helper()
	w, err := s.CreateState(context.Background(), id, name)
	if err != nil {
		t.Fatal(err)
	}
	lw := l.Create(id, name)
	if _, err := io.MultiWriter(w, lw).Write(data); err != nil {
		t.Fatal(err)
	}
	h, err := w.Close()
	if err != nil {
		lw.Abort()
		t.Fatal(err)
	}
	lw.Commit(h)
	return h
}

func openLocal(t *testing.T) *LocalStore {
	t.Helper()
	l, err := OpenLocalStore([]string{t.TempDir(), t.TempDir()}, testJob)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func stateBytes(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7)
	}
	return b
}

// TestLocalReaderReadsNoRemoteState restores every state file of a
// checkpoint through the local copies: not one state file is read from
// checkpoint storage, and the bytes are those written.
func TestLocalReaderReadsNoRemoteState(t *testing.T) {
	forBackends(t, func(t *testing.T, be *backend) {
		var reads remoteReads
		s := be.open(t, InlineThreshold(16), WithFaults(NewHookFaults(1, reads.hook)))
		l := openLocal(t)
		want := map[string][]byte{}
		var hs []checkpoint.StateHandle
		for i := range 6 {
			b := stateBytes(100+i*50, byte(i))
			h := writeBoth(t, s, l, 3, fmt.Sprintf("op-%d-keyed", i), b)
			hs = append(hs, h)
			want[h.Path] = b
		}
		if len(l.Paths()) != 6 {
			t.Fatalf("local copies %v, want 6", l.Paths())
		}
		r := l.Reader(s, nil)
		for _, h := range hs {
			b, err := r.ReadState(context.Background(), h)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(b, want[h.Path]) {
				t.Fatalf("%s: restored bytes differ", h.Path)
			}
		}
		if got := reads.take(); len(got) != 0 {
			t.Fatalf("remote reads %v, want none", got)
		}
		local, remote, bad := r.RestoreStats()
		if local == 0 || remote != 0 || bad != 0 {
			t.Fatalf("stats local %d remote %d unverified %d", local, remote, bad)
		}
		// Without the local store, the same restore reads every file.
		for _, h := range hs {
			if _, err := s.ReadState(context.Background(), h); err != nil {
				t.Fatal(err)
			}
		}
		if got := reads.take(); len(got) != len(hs) {
			t.Fatalf("remote reads without local copies: %d, want %d", len(got), len(hs))
		}
	})
}

// TestLocalReaderFallsBack damages a local copy (missing, truncated, a
// flipped byte, grown): the restore reads that one file remotely, gets
// the right bytes, and keeps reading the others locally.
func TestLocalReaderFallsBack(t *testing.T) {
	damages := []struct {
		name       string
		damage     func(string) error
		unverified int64
	}{
		{"missing", os.Remove, 0},
		{"truncated", func(p string) error { return os.Truncate(p, 10) }, 1},
		{"flipped byte", func(p string) error {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			b[len(b)/2] ^= 0x10
			return os.WriteFile(p, b, 0o644)
		}, 1},
		{"grown", func(p string) error {
			f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = f.Write([]byte{0})
			return err
		}, 1},
	}
	for _, d := range damages {
		t.Run(d.name, func(t *testing.T) {
			be := memBackend(t)
			var reads remoteReads
			s := be.open(t, InlineThreshold(0), WithFaults(NewHookFaults(1, reads.hook)))
			l := openLocal(t)
			a := writeBoth(t, s, l, 2, "op-0-keyed", stateBytes(300, 1))
			b := writeBoth(t, s, l, 2, "op-1-keyed", stateBytes(400, 2))
			if err := d.damage(l.fileFor(a.Path)); err != nil {
				t.Fatal(err)
			}
			r := l.Reader(s, nil)
			for _, h := range []checkpoint.StateHandle{a, b} {
				got, err := r.ReadState(context.Background(), h)
				if err != nil {
					t.Fatalf("%s: %v", h.Path, err)
				}
				want, _ := s.ReadState(context.Background(), h)
				if !bytes.Equal(got, want) {
					t.Fatalf("%s: restored bytes differ from checkpoint storage's", h.Path)
				}
			}
			reads.take() // the comparison's own reads
			if !slices.Equal(reads.take(), nil) {
				t.Fatal("unexpected reads")
			}
			local, remote, bad := r.RestoreStats()
			if local != b.Size || remote != a.Size || bad != d.unverified {
				t.Fatalf("local %d remote %d unverified %d, want %d %d %d", local, remote, bad, b.Size, a.Size, d.unverified)
			}
			if l.Has(a.Path) {
				t.Fatalf("the damaged copy of %s is still kept", a.Path)
			}
		})
	}
}

// TestLocalCopyServesOnlyItsHandle: a copy is used for the handle it was
// written for, never for a file of another checkpoint with the same name
// nor for a handle whose checksum it does not have.
func TestLocalCopyServesOnlyItsHandle(t *testing.T) {
	be := memBackend(t)
	var reads remoteReads
	s := be.open(t, InlineThreshold(0), WithFaults(NewHookFaults(1, reads.hook)))
	l := openLocal(t)
	writeBoth(t, s, l, 4, "op-0-keyed", stateBytes(200, 4))
	// Checkpoint 5's file of the same name, written without a local copy.
	w, _ := s.CreateState(context.Background(), 5, "op-0-keyed")
	w.Write(stateBytes(200, 5))
	h5, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	r := l.Reader(s, nil)
	got, err := r.ReadState(context.Background(), h5)
	if err != nil || !bytes.Equal(got, stateBytes(200, 5)) {
		t.Fatalf("checkpoint 5's state: %v", err)
	}
	if n := len(reads.take()); n != 1 {
		t.Fatalf("remote reads %d, want 1", n)
	}
	// A handle of checkpoint 4's path with another checksum (a metadata
	// that names other bytes) is not served by the copy.
	h := checkpoint.StateHandle{Path: "chk-4/op-0-keyed", Size: 200, CRC32C: h5.CRC32C}
	if _, err := l.ReadState(context.Background(), h); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("copy read for a handle of other bytes: %v, want a corrupt error", err)
	}
	// A copy that did not verify is dropped.
	if _, err := l.ReadState(context.Background(), h); !errors.Is(err, ErrNoLocalCopy) {
		t.Fatalf("copy read again after it did not verify: %v, want no local copy", err)
	}
}

// TestLocalStoreLifecycle: copies of subsumed and aborted checkpoints go,
// those a newer checkpoint names stay, and Close leaves nothing.
func TestLocalStoreLifecycle(t *testing.T) {
	be := memBackend(t)
	s := be.open(t, InlineThreshold(8))
	l := openLocal(t)
	c1 := writeBoth(t, s, l, 1, "op-0-keyed", stateBytes(64, 1))
	c2a := writeBoth(t, s, l, 2, "op-0-keyed", stateBytes(64, 2))
	c2sst := writeBoth(t, s, l, 2, "op-0-keyed-000004.sst", stateBytes(64, 3))
	// Inline state has no file and no copy.
	inline := writeBoth(t, s, l, 2, "op-1-op", []byte("tiny"))
	if inline.Path != "" || len(l.Paths()) != 3 {
		t.Fatalf("inline handle %+v, copies %v", inline, l.Paths())
	}
	// Checkpoint 3 names checkpoint 2's unchanged file.
	c3 := writeBoth(t, s, l, 3, "op-0-keyed", stateBytes(64, 4))
	l.Reference(3, c2sst)
	c4 := writeBoth(t, s, l, 4, "op-0-keyed", stateBytes(64, 5))

	l.Confirm(2)
	assertCopies(t, l, c2a.Path, c2sst.Path, c3.Path, c4.Path)
	if _, err := os.Stat(l.fileFor(c1.Path)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the copy of subsumed %s is still on disk: %v", c1.Path, err)
	}
	l.Confirm(3)
	assertCopies(t, l, c2sst.Path, c3.Path, c4.Path)
	l.Abort(4)
	assertCopies(t, l, c2sst.Path, c3.Path)
	// A late copy of a subsumed checkpoint is not kept.
	writeBoth(t, s, l, 2, "op-2-keyed", stateBytes(64, 6))
	assertCopies(t, l, c2sst.Path, c3.Path)

	dirs := l.Dirs()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s remains after Close: %v", d, err)
		}
	}
	// Written after Close: not kept, nothing left on disk.
	writeBoth(t, s, l, 5, "op-0-keyed", stateBytes(64, 7))
	for _, d := range dirs {
		if _, err := os.Stat(d); err == nil {
			entries, _ := os.ReadDir(d)
			if len(entries) > 0 {
				t.Fatalf("%s has %d entries after Close", d, len(entries))
			}
		}
	}
}

func assertCopies(t *testing.T, l *LocalStore, want ...string) {
	t.Helper()
	got := l.Paths()
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("local copies %v, want %v", got, want)
	}
	var files []string
	for _, d := range l.Dirs() {
		filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if err == nil && !e.IsDir() {
				rel, _ := filepath.Rel(d, p)
				files = append(files, filepath.ToSlash(rel))
			}
			return nil
		})
	}
	slices.Sort(files)
	if !slices.Equal(files, want) {
		t.Fatalf("files on disk %v, want %v", files, want)
	}
}

// TestLocalStoreLink keeps an embedded store's file as a hard link.
func TestLocalStoreLink(t *testing.T) {
	be := memBackend(t)
	var reads remoteReads
	s := be.open(t, InlineThreshold(0), WithFaults(NewHookFaults(1, reads.hook)))
	l := openLocal(t)
	src := filepath.Join(t.TempDir(), "000007.sst")
	data := stateBytes(500, 9)
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	w, _ := s.CreateState(context.Background(), 6, "op-0-keyed-000007.sst")
	w.Write(data)
	h, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Link(6, h, src); err != nil {
		t.Fatal(err)
	}
	// The source goes (the embedded store's checkpoint is released); the
	// link stays.
	os.Remove(src)
	got, err := l.Reader(s, nil).ReadState(context.Background(), h)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("linked copy: %v", err)
	}
	if n := len(reads.take()); n != 0 {
		t.Fatalf("remote reads %d, want 0", n)
	}
}

// TestLocalOpenStateHoldsItsFile: the reader OpenState returns reads the
// copy it verified, even when the copy is replaced on disk (renamed over,
// as a damaged file would be) before the caller reads it.
func TestLocalOpenStateHoldsItsFile(t *testing.T) {
	be := memBackend(t)
	s := be.open(t, InlineThreshold(0))
	l := openLocal(t)
	want := stateBytes(500, 3)
	h := writeBoth(t, s, l, 2, "op-0-keyed", want)
	rc, err := l.OpenState(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	p := l.fileFor(h.Path)
	bad := slices.Clone(want)
	bad[len(bad)/2] ^= 0x10
	if err := os.WriteFile(p+".damaged", bad, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p+".damaged", p); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("reading the verified copy after it was replaced on disk: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the reader's bytes differ from the copy it verified")
	}
}
