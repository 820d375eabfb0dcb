package storage

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/workdir"
)

// ErrNoLocalCopy is returned by LocalStore.ReadState for state it keeps no
// copy of.
var ErrNoLocalCopy = errors.New("storage: no local copy")

// StateReader reads a piece of state, verified against its handle: a
// Storage, a Snapshot, or anything that reads them. ReadState returns it
// whole; OpenState streams it and verifies it as the reader reaches its
// end (see Storage.OpenState).
type StateReader interface {
	ReadState(ctx context.Context, h checkpoint.StateHandle) ([]byte, error)
	OpenState(ctx context.Context, h checkpoint.StateHandle) (io.ReadCloser, error)
}

// LocalStore keeps, on this process's disk, a copy of the state files a
// worker's subtasks write for checkpoints, and serves restores from them:
// Flink's task-local state (execution.checkpointing.local-backup.enabled,
// restored with execution.state-recovery.from-local).
//
// A copy is found by its handle's path in checkpoint storage
// ("chk-7/op-0-keyed", "shared/7-1x2y3z-op-0-keyed-000012.sst"), and is
// used only when
// it has the size and CRC-32C of the handle the restore reads: the
// metadata of the checkpoint the job master chose decides what is
// restored, a local copy only saves reading it remotely. A copy that is
// missing or does not verify is dropped, and the caller reads the remote
// file (LocalReader does both).
//
// Copies live in a directory of the store's own under each root
// (weir-local-<job>-<random>), a file's chosen by its path, so two task
// managers or two jobs sharing a root never meet. They are kept while a
// checkpoint that may be restored names them: Confirm (a checkpoint
// completed) deletes the copies of older checkpoints that it does not name
// itself, Abort those of an aborted checkpoint, Close every one, with the
// directories. Nothing here survives the process: a restarted task
// manager starts without copies, and the directories a killed process
// left are removed when the next local store (or pebble store) is created
// under the same root (internal/workdir).
//
// Local copies are not synced: a copy torn by a crash fails its checksum
// and the restore reads the remote file. Safe for concurrent use.
type LocalStore struct {
	dirs []string
	wds  []*workdir.Dir // hold dirs

	mu sync.Mutex
	// files are the copies, by handle path.
	files map[string]*localCopy
	// checkpoints are the handle paths of the copies each checkpoint
	// names.
	checkpoints map[int64]map[string]bool
	confirmed   int64
	closed      bool
}

type localCopy struct {
	file string
	size int64
	crc  uint32
}

// OpenLocalStore creates the local store of job jobID: a directory of its
// own under each of roots (created if missing).
func OpenLocalStore(roots []string, jobID string) (*LocalStore, error) {
	if len(roots) == 0 {
		return nil, errors.New("storage: no directory for local copies of state")
	}
	if !plainKey(jobID) {
		return nil, fmt.Errorf("storage: invalid job id %q", jobID)
	}
	l := &LocalStore{files: map[string]*localCopy{}, checkpoints: map[int64]map[string]bool{}}
	for _, root := range roots {
		if err := os.MkdirAll(root, 0o777); err != nil {
			l.removeDirs()
			return nil, fmt.Errorf("storage: local state directory: %w", err)
		}
		wd, _, err := workdir.Create(root, "weir-local-"+jobID+"-")
		if err != nil {
			l.removeDirs()
			return nil, fmt.Errorf("storage: local state directory: %w", err)
		}
		l.dirs, l.wds = append(l.dirs, wd.Path()), append(l.wds, wd)
	}
	return l, nil
}

// Dirs returns the store's directories, one under each root.
func (l *LocalStore) Dirs() []string { return append([]string(nil), l.dirs...) }

// fileFor returns where the copy of the state at handle path p goes.
func (l *LocalStore) fileFor(p string) string {
	return filepath.Join(l.dirs[int(fnvHash(p))%len(l.dirs)], filepath.FromSlash(p))
}

func fnvHash(s string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(s))
	return h.Sum32()
}

// Create starts the local copy of the state file name of checkpoint
// checkpointID (as Storage.CreateState or CreateSharedState names it), to
// be written alongside the remote file. Writing a copy never fails: a
// copy that could not be written is not kept, and the restore reads the
// remote file.
func (l *LocalStore) Create(checkpointID int64, name string) *LocalWriter {
	w := &LocalWriter{l: l, id: checkpointID, name: name}
	if err := validName(name); err != nil {
		w.err = err
		return w
	}
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		w.err = errDone
		return w
	}
	// The copy's temporary file is where the copy of a file in the
	// checkpoint's directory goes; Commit renames it to its handle's
	// path under the same root, which for a file in shared/ only the
	// remote write decides.
	p := filepath.FromSlash(checkpointDir(checkpointID) + "/" + name)
	w.root = l.dirs[int(fnvHash(checkpointDir(checkpointID)+"/"+name))%len(l.dirs)]
	if err := os.MkdirAll(filepath.Dir(filepath.Join(w.root, p)), 0o777); err != nil {
		w.err = err
		return w
	}
	w.f, w.err = createTemp(filepath.Join(w.root, p))
	return w
}

// LocalWriter writes one local copy; see LocalStore.Create.
type LocalWriter struct {
	l    *LocalStore
	id   int64
	name string // the state's name in checkpoint id
	root string // the store's directory the copy goes to
	f    *os.File
	size int64
	crc  uint32
	err  error
}

// Write appends p to the copy. It always reports success: a failed write
// only drops the copy.
func (w *LocalWriter) Write(p []byte) (int, error) {
	if w.err == nil {
		_, w.err = w.f.Write(p)
		w.size += int64(len(p))
		w.crc = crc32.Update(w.crc, castagnoli, p)
	}
	return len(p), nil
}

// Commit keeps the copy as the local copy of h, the handle the remote
// write returned, if h is the file this copy was made for (in the
// checkpoint's directory or in shared/) and what was written has its
// size and checksum; otherwise (inline state, a failed write) it drops
// it.
func (w *LocalWriter) Commit(h checkpoint.StateHandle) {
	if w.err != nil || !w.madeFor(h.Path) || h.Size != w.size || h.CRC32C != w.crc {
		w.Abort()
		return
	}
	final := filepath.Join(w.root, filepath.FromSlash(h.Path))
	if err := w.f.Close(); err != nil {
		os.Remove(w.f.Name())
		return
	}
	if err := os.MkdirAll(filepath.Dir(final), 0o777); err != nil {
		os.Remove(w.f.Name())
		return
	}
	if err := os.Rename(w.f.Name(), final); err != nil {
		os.Remove(w.f.Name())
		return
	}
	w.err = errDone
	w.l.add(w.id, h, final)
}

// madeFor reports whether p is the handle path of the file the copy is
// made for.
func (w *LocalWriter) madeFor(p string) bool {
	if p == checkpointDir(w.id)+"/"+w.name {
		return true
	}
	id, name, ok := parseSharedPath(p)
	return ok && id == w.id && name == w.name
}

// Abort drops the copy.
func (w *LocalWriter) Abort() {
	if w.f != nil && w.err != errDone {
		w.f.Close()
		os.Remove(w.f.Name())
	}
	w.err = errDone
}

// add records file as the copy of h, named by checkpoint id, unless the
// checkpoint is subsumed already or the store closed: then it deletes it.
func (l *LocalStore) add(id int64, h checkpoint.StateHandle, file string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || id < l.confirmed {
		os.Remove(file)
		return
	}
	if old, ok := l.files[h.Path]; ok && old.file != file {
		os.Remove(old.file)
	}
	l.files[h.Path] = &localCopy{file: file, size: h.Size, crc: h.CRC32C}
	l.name(id, h.Path)
}

func (l *LocalStore) name(id int64, p string) {
	m := l.checkpoints[id]
	if m == nil {
		m = map[string]bool{}
		l.checkpoints[id] = m
	}
	m[p] = true
}

// Link keeps the file at src, which was written to checkpoint storage as
// h for checkpoint checkpointID, as its local copy: a hard link (an
// embedded store's immutable file), or a copy where src is on another
// file system.
func (l *LocalStore) Link(checkpointID int64, h checkpoint.StateHandle, src string) error {
	if h.Path == "" || !validHandlePath(h.Path) {
		return nil // inline state is in the metadata
	}
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return nil
	}
	dst := l.fileFor(h.Path)
	if err := os.MkdirAll(filepath.Dir(dst), 0o777); err != nil {
		return err
	}
	tmp := dst + ".link.tmp"
	os.Remove(tmp)
	if err := os.Link(src, tmp); err != nil {
		if err := copyLocal(src, tmp); err != nil {
			os.Remove(tmp)
			return err
		}
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return err
	}
	l.add(checkpointID, h, dst)
	return nil
}

func copyLocal(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// Reference records that checkpoint checkpointID names h too, a file an
// earlier checkpoint wrote (an incremental checkpoint's unchanged file):
// its copy, if there is one, is kept for as long as either checkpoint is.
func (l *LocalStore) Reference(checkpointID int64, h checkpoint.StateHandle) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.files[h.Path]; ok && !l.closed && checkpointID >= l.confirmed {
		l.name(checkpointID, h.Path)
	}
}

// Has reports whether the store keeps a copy of the state at handle path
// p.
func (l *LocalStore) Has(p string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.files[p]
	return ok
}

// Paths returns the handle paths of the copies the store keeps.
func (l *LocalStore) Paths() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	ps := make([]string, 0, len(l.files))
	for p := range l.files {
		ps = append(ps, p)
	}
	return ps
}

// ReadState returns the local copy of the state h points at, verified
// against h's size and CRC-32C as it is read, in one pass. It returns an
// error matching ErrNoLocalCopy when there is none, and a *CorruptError
// when the copy does not verify, which it then drops.
func (l *LocalStore) ReadState(ctx context.Context, h checkpoint.StateHandle) ([]byte, error) {
	c, f, err := l.open(ctx, h)
	if err != nil {
		return nil, err
	}
	r := c.reader(f, h)
	b, err := io.ReadAll(r)
	r.Close()
	if err != nil {
		l.drop(h.Path, c)
		return nil, err
	}
	return b, nil
}

// OpenState opens the local copy of the state h points at. It reads the
// copy once to check its size and CRC-32C before it returns a reader of
// it (which checks them again as it reaches the end), so that a copy
// that does not verify costs the caller nothing but a fallback: it
// returns an error matching ErrNoLocalCopy when there is none, and a
// *CorruptError when the copy does not verify, which it then drops. Both
// passes read the one open file, so a copy replaced on disk between them
// cannot slip past the first.
func (l *LocalStore) OpenState(ctx context.Context, h checkpoint.StateHandle) (io.ReadCloser, error) {
	c, f, err := l.open(ctx, h)
	if err != nil {
		return nil, err
	}
	_, err = io.Copy(io.Discard, c.reader(f, h))
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		f.Close()
		l.drop(h.Path, c)
		return nil, err
	}
	return c.reader(f, h), nil
}

// open returns the local copy of the state h points at and its file,
// open. It returns an error matching ErrNoLocalCopy when there is none
// (dropping a copy whose file is gone).
func (l *LocalStore) open(ctx context.Context, h checkpoint.StateHandle) (*localCopy, *os.File, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	l.mu.Lock()
	c, ok := l.files[h.Path]
	l.mu.Unlock()
	if !ok || h.Path == "" {
		return nil, nil, ErrNoLocalCopy
	}
	f, err := os.Open(c.file)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		l.drop(h.Path, c)
		return nil, nil, fmt.Errorf("%w: %s is gone", ErrNoLocalCopy, c.file)
	case err != nil:
		l.drop(h.Path, c)
		return nil, nil, fmt.Errorf("storage: reading local copy %s: %w", c.file, err)
	}
	return c, f, nil
}

// reader returns a reader of f, the open file of copy c, that checks its
// size and CRC-32C against h's as it reaches the end.
func (c *localCopy) reader(f *os.File, h checkpoint.StateHandle) io.ReadCloser {
	return &stateReader{r: f, path: c.file, size: h.Size, crc: h.CRC32C}
}

// drop forgets the copy c of the state at handle path p and deletes it.
func (l *LocalStore) drop(p string, c *localCopy) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.files[p] == c {
		delete(l.files, p)
		os.Remove(c.file)
	}
}

// Confirm tells the store that checkpoint id completed: the copies of
// older checkpoints are deleted, except those id (or a newer checkpoint)
// names too.
func (l *LocalStore) Confirm(id int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if id <= l.confirmed {
		return
	}
	l.confirmed = id
	for c := range l.checkpoints {
		if c < id {
			delete(l.checkpoints, c)
		}
	}
	l.collect()
}

// Abort tells the store that checkpoint id was aborted: its copies are
// deleted, except those another checkpoint names.
func (l *LocalStore) Abort(id int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.checkpoints, id)
	l.collect()
}

// collect deletes the copies no checkpoint names.
func (l *LocalStore) collect() {
	named := map[string]bool{}
	for _, ps := range l.checkpoints {
		for p := range ps {
			named[p] = true
		}
	}
	for p, c := range l.files {
		if !named[p] {
			delete(l.files, p)
			os.Remove(c.file)
		}
	}
}

// Close deletes every copy and the store's directories. Copies written
// afterwards are not kept.
func (l *LocalStore) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	l.files, l.checkpoints = map[string]*localCopy{}, map[int64]map[string]bool{}
	return l.removeDirs()
}

func (l *LocalStore) removeDirs() error {
	var first error
	for _, wd := range l.wds {
		if err := wd.Remove(); err != nil && first == nil {
			first = fmt.Errorf("storage: removing local state: %w", err)
		}
	}
	return first
}

// Reader returns a reader of restored state that reads the local copy of
// a file where it has one that verifies, and remote otherwise.
func (l *LocalStore) Reader(remote StateReader, log *slog.Logger) *LocalReader {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &LocalReader{local: l, remote: remote, log: log}
}

// LocalReader reads restored state from a LocalStore's copies, falling
// back, file by file, to checkpoint storage: a missing copy, a torn one
// or one whose checksum does not match costs a remote read, never the
// restore. It counts the bytes each side served. Safe for concurrent use.
type LocalReader struct {
	local  *LocalStore
	remote StateReader
	log    *slog.Logger

	localBytes, remoteBytes, fallbacks atomic.Int64
}

// ReadState returns the state h points at, verified: its local copy if
// it has one that verifies (read once, see LocalStore.ReadState), else
// checkpoint storage's.
func (r *LocalReader) ReadState(ctx context.Context, h checkpoint.StateHandle) ([]byte, error) {
	if h.Path != "" {
		b, err := r.local.ReadState(ctx, h)
		if err == nil {
			r.localBytes.Add(int64(len(b)))
			return b, nil
		}
		if err := r.fallback(ctx, h, err); err != nil {
			return nil, err
		}
	}
	return readAll(r.openRemote(ctx, h))
}

// OpenState opens the state h points at: its local copy if it has one
// that verifies (see LocalStore.OpenState), else checkpoint storage's.
func (r *LocalReader) OpenState(ctx context.Context, h checkpoint.StateHandle) (io.ReadCloser, error) {
	if h.Path != "" {
		rc, err := r.local.OpenState(ctx, h)
		if err == nil {
			return &countingReader{ReadCloser: rc, n: &r.localBytes}, nil
		}
		if err := r.fallback(ctx, h, err); err != nil {
			return nil, err
		}
	}
	return r.openRemote(ctx, h)
}

// fallback decides, after the local copy of h failed with err, whether
// to read checkpoint storage instead (it returns nil) or to give up (the
// context's error).
func (r *LocalReader) fallback(ctx context.Context, h checkpoint.StateHandle, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if !errors.Is(err, ErrNoLocalCopy) {
		r.fallbacks.Add(1)
		r.log.Warn("local copy of checkpoint state does not verify; reading checkpoint storage", "path", h.Path, "err", err)
	}
	return nil
}

// openRemote opens the state h points at in checkpoint storage.
func (r *LocalReader) openRemote(ctx context.Context, h checkpoint.StateHandle) (io.ReadCloser, error) {
	rc, err := r.remote.OpenState(ctx, h)
	if err != nil || h.Path == "" {
		return rc, err
	}
	return &countingReader{ReadCloser: rc, n: &r.remoteBytes}, nil
}

// readAll reads the whole of a state opened by an OpenState.
func readAll(rc io.ReadCloser, err error) ([]byte, error) {
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// countingReader adds the bytes read through it to n.
type countingReader struct {
	io.ReadCloser
	n *atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// RestoreStats returns the bytes of state files read from local copies and
// from checkpoint storage, and how many local copies did not verify.
func (r *LocalReader) RestoreStats() (local, remote, fallbacks int64) {
	return r.localBytes.Load(), r.remoteBytes.Load(), r.fallbacks.Load()
}
