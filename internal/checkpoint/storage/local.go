package storage

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
)

// localFS writes the files of a local directory (the root of a file
// bucket) so that a file is durable, whole, once its write's Close
// returns: fileblob renames its temporary file into place without
// syncing either the file or the directory, so after a power loss a file
// it wrote can be missing, empty or torn. Reads, listings and deletes
// still go through fileblob; the paths here are fileblob's for the same
// keys (plainKey keeps keys to those fileblob does not escape).
type localFS struct {
	root string
	// sync flushes an open file or directory to stable storage. Tests
	// replace it to see what is synced.
	sync func(f *os.File) error

	mu sync.Mutex
	// durable holds the directories whose entry in their parent this
	// process has synced (or found synced): a new file in one of them
	// needs only its own directory synced.
	durable map[string]bool
}

func newLocalFS(root string) *localFS {
	return &localFS{root: root, sync: (*os.File).Sync, durable: make(map[string]bool)}
}

// path returns the file of key.
func (l *localFS) path(key string) string { return filepath.Join(l.root, filepath.FromSlash(key)) }

// create starts writing the file of key: a temporary file next to it, in
// a directory made durable first.
func (l *localFS) create(ctx context.Context, key string) (*localWriter, error) {
	p := l.path(key)
	dir := filepath.Dir(p)
	if err := l.makeDurableDir(dir); err != nil {
		return nil, err
	}
	f, err := createTemp(p)
	if err != nil {
		return nil, err
	}
	return &localWriter{ctx: ctx, l: l, f: f, path: p, dir: dir}, nil
}

// makeDurableDir creates dir and the missing directories between it and
// the root, and syncs the parent of each one this process has not synced
// yet (whoever created it: a process that crashed may have left its entry
// unsynced). The root's own entry is synced too, at the first write, but
// as a courtesy: the root's parent is not the storage's, and a failure to
// sync it is ignored.
func (l *localFS) makeDurableDir(dir string) error {
	l.mu.Lock()
	done := l.durable[dir]
	l.mu.Unlock()
	if done {
		return nil
	}
	parent := filepath.Dir(dir)
	if dir == l.root || parent == dir {
		if err := os.MkdirAll(dir, 0o777); err != nil {
			return err
		}
		_ = l.syncDir(parent)
	} else {
		if err := l.makeDurableDir(parent); err != nil {
			return err
		}
		if err := os.Mkdir(dir, 0o777); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		if err := l.syncDir(parent); err != nil {
			return err
		}
	}
	l.mu.Lock()
	l.durable[dir] = true
	l.mu.Unlock()
	return nil
}

// syncDir makes the entries of directory dir durable. A file system that
// cannot sync a directory says so with EINVAL (or ENOTSUP), and Windows
// cannot sync one through a handle os.Open returns: there the entries are
// as durable as the file system makes them.
func (l *localFS) syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("syncing directory: %w", err)
	}
	err = l.sync(d)
	d.Close()
	if err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOTSUP) {
		return fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	return nil
}

// createTemp creates a new temporary file for path, in its directory so
// that the rename publishing it stays on one file system, named as
// fileblob names its own (path.<random>.tmp: names ending in .tmp are
// reserved, see validName). Its mode is 0666 before the umask, as
// fileblob's files are.
func createTemp(path string) (*os.File, error) {
	for range 100 {
		name := path + "." + strconv.FormatUint(rand.Uint64(), 36) + ".tmp"
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return f, err
	}
	return nil, &os.PathError{Op: "createtemp", Path: path + ".*.tmp", Err: fs.ErrExist}
}

// localWriter is a file being written. Close syncs the temporary file,
// renames it into place and syncs the directory, so the file is durable
// when Close returns nil; otherwise nothing is left behind.
type localWriter struct {
	ctx    context.Context
	l      *localFS
	f      *os.File
	path   string
	dir    string
	closed bool
}

func (w *localWriter) Write(p []byte) (int, error) { return w.f.Write(p) }

func (w *localWriter) Close() error {
	if w.closed {
		return errDone
	}
	w.closed = true
	tmp := w.f.Name()
	if err := w.ctx.Err(); err != nil {
		w.f.Close()
		os.Remove(tmp)
		return err
	}
	if err := w.l.sync(w.f); err != nil {
		w.f.Close()
		os.Remove(tmp)
		return fmt.Errorf("syncing: %w", err)
	}
	if err := w.f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, w.path); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := w.l.syncDir(w.dir); err != nil {
		// The file is visible but may not survive a power loss: take it
		// back, so that a failed write leaves nothing that looks complete.
		os.Remove(w.path)
		return err
	}
	return nil
}

func (w *localWriter) Abort() {
	if w.closed {
		return
	}
	w.closed = true
	w.f.Close()
	os.Remove(w.f.Name())
}
