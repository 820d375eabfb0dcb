package file

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/weirstream/weir/connector"
)

// Guarantee sets the sink's delivery guarantee: connector.ExactlyOnce (the
// default) or connector.AtLeastOnce; the zero value keeps the default.
//
//   - connector.ExactlyOnce stages each checkpoint's records in a hidden
//     in-progress file and makes it visible, by renaming it, once the
//     checkpoint completes.
//   - connector.AtLeastOnce appends to one visible file per subtask,
//     flushed and fsynced at every checkpoint; records replayed after a
//     restore are written again.
//
// connector.None is not supported.
func Guarantee(g connector.DeliveryGuarantee) SinkOption {
	return sinkOptionFunc(func(c *sinkConfig) {
		if g != "" {
			c.guarantee = g
		}
	})
}

// SinkOption configures a Sink: Guarantee, WriteBufferSize.
type SinkOption interface{ applySink(*sinkConfig) }

type sinkOptionFunc func(*sinkConfig)

func (f sinkOptionFunc) applySink(c *sinkConfig) { f(c) }

type sinkConfig struct {
	guarantee connector.DeliveryGuarantee
	bufSize   int
}

// WriteBufferSize sets the size of each writer's output buffer. Default
// 64 KiB.
func WriteBufferSize(n int) SinkOption { return sinkOptionFunc(func(c *sinkConfig) { c.bufSize = n }) }

// Sink writes records of type T to files under a directory, one encoded
// record per line. It implements connector.Sink[T]; the package comment
// describes the files and the commit protocol.
//
// The output is exactly once (with connector.ExactlyOnce) when the job checkpoints
// in EXACTLY_ONCE mode; in AT_LEAST_ONCE mode records that passed a
// barrier early may be replayed, so the output is at least once. Without
// checkpointing the records become visible when the input ends.
//
// A writer removes stale in-progress files once its first checkpoint
// completes: those of its own uid and subtask (and, after the parallelism
// shrank, of the former subtasks the engine hands its committables to)
// that it did not write. That is safe because the engine commits a
// restored checkpoint's committables when it opens the writer, before any
// write; once a checkpoint of the new writer has completed, no checkpoint
// the job can recover from needs a file an earlier writer left
// uncommitted. It also means that a directory and uid belong to one
// running job at a time: a second job writing the same uid into the same
// directory would have its staged files removed.
type Sink[T any] struct {
	dir       string
	encode    func(T) ([]byte, error) // nil: encoding/json
	guarantee connector.DeliveryGuarantee
	bufSize   int
}

// NewSink returns a sink that writes encode(v) and a newline for each
// record v. The encoded bytes must not contain a newline.
func NewSink[T any](dir string, encode func(T) ([]byte, error), opts ...SinkOption) (*Sink[T], error) {
	if encode == nil {
		return nil, fmt.Errorf("file: the encode function is nil")
	}
	return newSink(dir, encode, opts)
}

// JSONLines returns a sink that writes each record as one JSON object per
// line, encoded as encoding/json's Marshal does, except that <, > and &
// are not escaped.
func JSONLines[T any](dir string, opts ...SinkOption) (*Sink[T], error) {
	return newSink[T](dir, nil, opts)
}

func newSink[T any](dir string, encode func(T) ([]byte, error), opts []SinkOption) (*Sink[T], error) {
	c := sinkConfig{guarantee: connector.ExactlyOnce, bufSize: 64 << 10}
	for _, o := range opts {
		o.applySink(&c)
	}
	switch {
	case dir == "":
		return nil, fmt.Errorf("file: the output directory is empty")
	case c.guarantee != connector.ExactlyOnce && c.guarantee != connector.AtLeastOnce:
		return nil, fmt.Errorf("file: unsupported delivery guarantee %q (want exactly-once or at-least-once)", c.guarantee)
	case c.bufSize < 16:
		return nil, fmt.Errorf("file: write buffer size must be at least 16 bytes, got %d", c.bufSize)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("file: output directory %s: %w", dir, err)
	}
	return &Sink[T]{dir: filepath.Clean(abs), encode: encode, guarantee: c.guarantee, bufSize: c.bufSize}, nil
}

// Dir returns the output directory, as an absolute path.
func (s *Sink[T]) Dir() string { return s.dir }

// ReconcilesOnRestore implements connector.Reconciler: an exactly-once
// writer restored from checkpoint K removes the files that later
// checkpoints committed (the at-least-once writer appends, and cannot).
func (s *Sink[T]) ReconcilesOnRestore() bool { return s.guarantee == connector.ExactlyOnce }

// Location implements connector.Located: the output directory, as an
// absolute path. A job restored from a checkpoint that wrote to another
// directory fails to start.
func (s *Sink[T]) Location() string { return s.dir }

// Guarantee returns the sink's delivery guarantee.
func (s *Sink[T]) Guarantee() connector.DeliveryGuarantee { return s.guarantee }

// inProgressDir is where exactly-once writers stage their files; the
// leading dot hides it from readers (and from Lines).
const inProgressDir = ".inprogress"

// NewWriter implements connector.Sink. It creates the output directory
// if needed and checks that it is writable; info.UID must not be empty,
// since it names the files. The writer is transactional with
// connector.ExactlyOnce whatever info.ExactlyOnce says.
func (s *Sink[T]) NewWriter(_ context.Context, info connector.WriterInfo) (connector.SinkWriter[T], error) {
	if info.UID == "" {
		return nil, fmt.Errorf("file: writing to %s: the writer has no uid (WriterInfo.UID), which names its files", s.dir)
	}
	if info.Subtask < 0 {
		return nil, fmt.Errorf("file: writing to %s: invalid subtask %d", s.dir, info.Subtask)
	}
	if err := probeDir(s.dir); err != nil {
		return nil, err
	}
	w := writer[T]{sink: s, info: info, uid: escapeName(info.UID)}
	w.bw = bufio.NewWriterSize(nil, s.bufSize)
	w.cw = countingWriter{w: w.bw}
	if s.guarantee == connector.AtLeastOnce {
		return &appendWriter[T]{writer: w}, nil
	}
	staging := filepath.Join(s.dir, inProgressDir)
	if err := probeDir(staging); err != nil {
		return nil, err
	}
	if info.RestoredCheckpointID > 0 {
		if err := w.reconcile(info.RestoredCheckpointID); err != nil {
			return nil, err
		}
	}
	var b [8]byte
	rand.Read(b[:])
	return &txnWriter[T]{writer: w, staging: staging, token: hex.EncodeToString(b[:])}, nil
}

// reconcile removes the files that transactions of checkpoints after
// restored committed, for this writer's uid and the subtasks it inherits:
// the restore abandoned those checkpoints, and the replay writes their
// records again. Such files exist when a job resumes from a checkpoint
// older than its newest (the newest did not verify, or the user chose an
// older one); without this the output would hold their records twice.
func (w *writer[T]) reconcile(restored int64) error {
	entries, err := os.ReadDir(w.sink.dir)
	if err != nil {
		return fmt.Errorf("file: reconciling %s with checkpoint %d: %w", w.sink.dir, restored, err)
	}
	removed := false
	for _, e := range entries {
		s, id, ok := parseFinal(e.Name(), w.uid)
		if !ok || id <= restored || !inherits(w.info, s) {
			continue
		}
		if err := os.Remove(filepath.Join(w.sink.dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("file: reconciling %s with checkpoint %d: %w", w.sink.dir, restored, err)
		}
		removed = true
	}
	if removed {
		return syncDir(w.sink.dir)
	}
	return nil
}

// parseFinal parses the name of a committed file of uid (escaped):
// part-<uid>-<subtask>-<checkpoint>.jsonl.
func parseFinal(name, uid string) (subtask int, checkpointID int64, ok bool) {
	rest, ok := strings.CutPrefix(name, "part-"+uid+"-")
	if !ok {
		return 0, 0, false
	}
	rest, ok = strings.CutSuffix(rest, ".jsonl")
	if !ok {
		return 0, 0, false
	}
	f := strings.Split(rest, "-")
	if len(f) != 2 || !digits(f[0]) || !digits(f[1]) {
		return 0, 0, false
	}
	s, err := strconv.Atoi(f[0])
	if err != nil {
		return 0, 0, false
	}
	id, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return 0, 0, false
	}
	return s, id, true
}

// probeDir creates dir if needed and checks that a file can be created in
// it, so that a misconfigured output fails when the job starts.
func probeDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("file: output directory %s: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, ".probe-*")
	if err != nil {
		return fmt.Errorf("file: output directory %s is not writable: %w", dir, unwrapPath(err))
	}
	name := f.Name()
	f.Close()
	os.Remove(name)
	return nil
}

// escapeName makes a uid safe as part of a file name: bytes other than
// ASCII letters, digits, '.', '_' and '-' become %XX.
func escapeName(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w *bufio.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// writer is what both guarantees share: encoding records into a buffered
// file.
type writer[T any] struct {
	sink *Sink[T]
	info connector.WriterInfo
	uid  string // escaped for file names
	bw   *bufio.Writer
	cw   countingWriter
	enc  *json.Encoder // JSON sinks, created with the first record
	f    *os.File      // the open file, or nil
	path string        // its path
}

func (w *writer[T]) encode(v T) error {
	if w.sink.encode == nil {
		if w.enc == nil {
			w.enc = json.NewEncoder(&w.cw)
			w.enc.SetEscapeHTML(false)
		}
		if err := w.enc.Encode(v); err != nil { // writes the newline too
			return fmt.Errorf("file: writing %s: %w", w.path, err)
		}
		return nil
	}
	b, err := w.sink.encode(v)
	if err != nil {
		return fmt.Errorf("file: encoding a record for %s: %w", w.path, err)
	}
	if bytes.IndexByte(b, '\n') >= 0 {
		return fmt.Errorf("file: an encoded record for %s contains a newline", w.path)
	}
	_, err = w.cw.Write(b)
	if err == nil {
		_, err = w.cw.Write([]byte{'\n'})
	}
	if err != nil {
		return fmt.Errorf("file: writing %s: %w", w.path, err)
	}
	return nil
}

// use makes f the open file.
func (w *writer[T]) use(f *os.File, size int64) {
	w.f, w.path = f, f.Name()
	w.bw.Reset(f)
	w.cw.n = size
}

// syncFile flushes, fsyncs and, if closing, closes the open file.
func (w *writer[T]) syncFile(closing bool) error {
	if err := w.bw.Flush(); err != nil {
		return fmt.Errorf("file: writing %s: %w", w.path, err)
	}
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("file: syncing %s: %w", w.path, err)
	}
	if closing {
		err := w.f.Close()
		w.f = nil
		if err != nil {
			return fmt.Errorf("file: closing %s: %w", w.path, err)
		}
	}
	return nil
}

// syncDir makes the directory's entries (new files, renames) durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("file: syncing directory %s: %w", dir, err)
	}
	err = d.Sync()
	d.Close()
	if err != nil {
		return fmt.Errorf("file: syncing directory %s: %w", dir, err)
	}
	return nil
}

// txnWriter is the exactly-once writer: one in-progress file per
// checkpoint, renamed to its final name on commit.
type txnWriter[T any] struct {
	writer[T]
	staging  string // <dir>/.inprogress
	token    string // random, unique to this writer: keeps its files apart from earlier writers'
	seq      int    // transactions opened so far
	name     string // base name of the open in-progress file
	lastID   int64  // last checkpoint prepared
	prepared bool   // whether lastID is set
	cleaned  bool   // whether stale in-progress files were removed
}

// committable is what PrepareCommit returns and Commit reads, as JSON.
// Names are relative to Dir (InProgress to its .inprogress directory).
// Dir is the absolute output directory the transaction was staged in; a
// committable without one (written before the field existed) belongs to
// the committing sink's directory.
type committable struct {
	Dir        string `json:"dir,omitempty"`
	InProgress string `json:"inprogress"`
	Final      string `json:"final"`
	Size       int64  `json:"size"`
}

// FinalName returns the name, relative to the output directory, of the
// file that an exactly-once writer of uid and subtask commits for
// checkpoint id.
func FinalName(uid string, subtask int, checkpointID int64) string {
	return fmt.Sprintf("part-%s-%d-%d.jsonl", escapeName(uid), subtask, checkpointID)
}

// AppendName returns the name, relative to the output directory, of the
// file an at-least-once writer of uid and subtask appends to.
func AppendName(uid string, subtask int) string {
	return fmt.Sprintf("part-%s-%d.jsonl", escapeName(uid), subtask)
}

func (w *txnWriter[T]) Write(v T, _ int64) error {
	if w.f == nil {
		w.name = fmt.Sprintf("%s-%d-%s-%d.jsonl", w.uid, w.info.Subtask, w.token, w.seq)
		w.seq++
		f, err := os.OpenFile(filepath.Join(w.staging, w.name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return fmt.Errorf("file: creating in-progress file: %w", err)
		}
		w.use(f, 0)
	}
	return w.encode(v)
}

// PrepareCommit implements connector.SinkWriter: it flushes, fsyncs and
// closes the open in-progress file and returns one committable naming it
// and its final name for checkpointID, or none if nothing was written
// since the last checkpoint. Checkpoint ids must increase.
func (w *txnWriter[T]) PrepareCommit(_ context.Context, checkpointID int64) ([][]byte, error) {
	if w.prepared && checkpointID <= w.lastID {
		return nil, fmt.Errorf("file: writing to %s: checkpoint %d prepared after checkpoint %d", w.sink.dir, checkpointID, w.lastID)
	}
	w.lastID, w.prepared = checkpointID, true
	if w.f == nil {
		return nil, nil
	}
	if err := w.syncFile(true); err != nil {
		return nil, err
	}
	if err := syncDir(w.staging); err != nil {
		return nil, err
	}
	b, err := json.Marshal(committable{
		Dir:        w.sink.dir,
		InProgress: w.name,
		Final:      FinalName(w.info.UID, w.info.Subtask, checkpointID),
		Size:       w.cw.n,
	})
	if err != nil {
		return nil, err
	}
	return [][]byte{b}, nil
}

// Commit implements connector.Committer: see commit.
func (w *txnWriter[T]) Commit(_ context.Context, committables [][]byte) error {
	return commit(w.sink.dir, committables)
}

// NotifyCheckpointComplete implements connector.CheckpointListener. The
// first completed checkpoint removes stale in-progress files (see Sink).
// Removing them is housekeeping: a failure is retried at the next
// checkpoint and never fails the job.
func (w *txnWriter[T]) NotifyCheckpointComplete(context.Context, int64) error {
	if !w.cleaned {
		w.cleaned = w.removeStale() == nil
	}
	return nil
}

// removeStale removes in-progress files that an earlier writer of this
// writer's uid and subtask (or of a former subtask whose committables the
// engine hands to this one: s >= parallelism and s mod parallelism ==
// subtask) left behind.
func (w *txnWriter[T]) removeStale() error {
	entries, err := os.ReadDir(w.staging)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		s, token, ok := parseInProgress(e.Name(), w.uid)
		if !ok || token == w.token || !inherits(w.info, s) {
			continue
		}
		if err := os.Remove(filepath.Join(w.staging, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// inherits reports whether the writer described by info takes over
// subtask s's files.
func inherits(info connector.WriterInfo, s int) bool {
	p := info.Parallelism
	return s == info.Subtask || p > 0 && s >= p && s%p == info.Subtask
}

// parseInProgress parses an in-progress file name of uid (escaped):
// <uid>-<subtask>-<token>-<seq>.jsonl.
func parseInProgress(name, uid string) (subtask int, token string, ok bool) {
	rest, ok := strings.CutPrefix(name, uid+"-")
	if !ok {
		return 0, "", false
	}
	rest, ok = strings.CutSuffix(rest, ".jsonl")
	if !ok {
		return 0, "", false
	}
	f := strings.Split(rest, "-")
	if len(f) != 3 || !digits(f[0]) || !digits(f[2]) || len(f[1]) != 16 {
		return 0, "", false
	}
	if _, err := hex.DecodeString(f[1]); err != nil {
		return 0, "", false
	}
	s, err := strconv.Atoi(f[0])
	if err != nil {
		return 0, "", false
	}
	return s, f[1], true
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// Close implements connector.SinkWriter. It abandons the open
// transaction, whose records no checkpoint holds, and removes its file;
// files of prepared transactions stay for a commit after a restore.
func (w *txnWriter[T]) Close() error {
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	if rerr := os.Remove(filepath.Join(w.staging, w.name)); rerr != nil && err == nil {
		err = rerr
	}
	return err
}

// commit makes committed transactions visible by renaming each in-progress
// file to its final name, then fsyncs the directory. It is idempotent: a
// committable whose in-progress file is gone and whose final file exists
// with the recorded size was committed before. One whose in-progress and
// final files are both missing is an error: its records are lost.
//
// If the in-progress file exists, it replaces a final file of the same
// name. Checkpoint ids never repeat within a job's history, so such a file
// can only come from a checkpoint that a restore from an earlier one
// abandoned (a new job restored from an older checkpoint or savepoint
// numbers its checkpoints on from there); the new transaction holds the
// records that took its place.
func commit(dir string, committables [][]byte) (err error) {
	renamed := false
	defer func() {
		if renamed {
			err = errors.Join(err, syncDir(dir))
		}
	}()
	staging := filepath.Join(dir, inProgressDir)
	for _, b := range committables {
		var c committable
		if err := json.Unmarshal(b, &c); err != nil {
			return fmt.Errorf("file: decoding committable %q: %w", b, err)
		}
		if c.Dir != "" && c.Dir != dir {
			return connector.Permanent(fmt.Errorf("file: committing a transaction staged in %s from a sink that writes to %s: a restored job must write where the checkpoint's job did", c.Dir, dir))
		}
		if !plainName(c.InProgress) || !plainName(c.Final) {
			return fmt.Errorf("file: committable %q names a file outside %s", b, dir)
		}
		src, dst := filepath.Join(staging, c.InProgress), filepath.Join(dir, c.Final)
		fi, err := os.Lstat(src)
		switch {
		case err == nil:
			if fi.Size() != c.Size {
				return fmt.Errorf("file: committing %s: in-progress file %s has %d bytes, the committable says %d", dst, src, fi.Size(), c.Size)
			}
			if err := os.Rename(src, dst); err != nil {
				return fmt.Errorf("file: committing %s: %w", dst, err)
			}
			renamed = true
		case errors.Is(err, fs.ErrNotExist):
			fi, err := os.Stat(dst)
			switch {
			case errors.Is(err, fs.ErrNotExist):
				// A restart would restore the same committable again.
				return connector.Permanent(fmt.Errorf("file: committing %s: neither it nor its in-progress file %s exists: the transaction's records are lost", dst, src))
			case err != nil:
				return fmt.Errorf("file: committing %s: %w", dst, err)
			case fi.Size() != c.Size:
				return connector.Permanent(fmt.Errorf("file: committing %s: its in-progress file %s is gone and it has %d bytes, the committable says %d", dst, src, fi.Size(), c.Size))
			}
			// Committed before.
		default:
			return fmt.Errorf("file: committing %s: %w", dst, err)
		}
	}
	return nil
}

func plainName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, `/\`)
}

// appendWriter is the at-least-once writer: it appends to one file per
// subtask.
type appendWriter[T any] struct {
	writer[T]
	created bool // the file may be new: sync the directory at the next barrier
}

func (w *appendWriter[T]) Write(v T, _ int64) error {
	if w.f == nil {
		if err := w.open(); err != nil {
			return err
		}
	}
	return w.encode(v)
}

// open opens the part file for appending. A previous writer that failed
// mid-line leaves a partial last line; it is cut off, since the record it
// began was written after the last barrier and is replayed.
func (w *appendWriter[T]) open() error {
	path := filepath.Join(w.sink.dir, AppendName(w.info.UID, w.info.Subtask))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("file: opening %s: %w", path, unwrapPath(err))
	}
	size, err := trimPartialLine(f)
	if err != nil {
		f.Close()
		return fmt.Errorf("file: opening %s: %w", path, err)
	}
	w.use(f, size)
	w.created = true
	return nil
}

// trimPartialLine truncates f after its last newline and returns its new
// size.
func trimPartialLine(f *os.File) (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	end := fi.Size()
	buf := make([]byte, 4096)
	for pos := end; pos > 0; {
		n := int64(len(buf))
		if pos < n {
			n = pos
		}
		pos -= n
		if _, err := f.ReadAt(buf[:n], pos); err != nil && err != io.EOF {
			return 0, err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			keep := pos + int64(i) + 1
			if keep == end {
				return end, nil
			}
			return keep, f.Truncate(keep)
		}
	}
	if end == 0 {
		return 0, nil
	}
	return 0, f.Truncate(0)
}

// PrepareCommit implements connector.SinkWriter: it flushes and fsyncs
// the part file and returns no committables.
func (w *appendWriter[T]) PrepareCommit(context.Context, int64) ([][]byte, error) {
	if w.f == nil {
		return nil, nil
	}
	if err := w.syncFile(false); err != nil {
		return nil, err
	}
	if w.created {
		if err := syncDir(w.sink.dir); err != nil {
			return nil, err
		}
		w.created = false
	}
	return nil, nil
}

// Commit implements connector.Committer for committables restored from a
// checkpoint taken while the sink was exactly-once, so that switching
// guarantees loses no committed transaction.
func (w *appendWriter[T]) Commit(_ context.Context, committables [][]byte) error {
	return commit(w.sink.dir, committables)
}

// Close implements connector.SinkWriter: it flushes and closes the part
// file.
func (w *appendWriter[T]) Close() error {
	if w.f == nil {
		return nil
	}
	err := w.bw.Flush()
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	w.f = nil
	return err
}
