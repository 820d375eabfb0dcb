package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/weirstream/weir/internal/checkpoint"
)

// castagnoli is the CRC-32C table every checksum in a checkpoint uses.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt is matched (with errors.Is) by every error that reports
// stored data that does not verify: a checksum or size mismatch, a missing
// state file, a _metadata file that does not parse.
var ErrCorrupt = errors.New("corrupt")

// CorruptError reports stored data that failed verification.
type CorruptError struct {
	// Path is the file (or, for inline state, the metadata) that failed.
	Path string
	// Reason says what is wrong, with the expected and the actual value.
	Reason string
}

func (e *CorruptError) Error() string {
	return "storage: corrupt " + e.Path + ": " + e.Reason
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// Permanent reports that restarting cannot cure the error: a restore reads
// the same damaged checkpoint again (connector.IsPermanent and the job
// master honour it). Resuming the job from its checkpoint directory falls
// back to an older checkpoint that verifies.
func (e *CorruptError) Permanent() bool { return true }

func checksumError(p string, want, got uint32) error {
	return &CorruptError{Path: p, Reason: fmt.Sprintf("checksum mismatch: expected crc32c %08x, got %08x", want, got)}
}

func sizeError(p string, want, got int64) error {
	return &CorruptError{Path: p, Reason: fmt.Sprintf("size mismatch: expected %d bytes, got %d", want, got)}
}

// validName reports whether name can name a file in a checkpoint or
// savepoint directory: a clean relative path with no "..", not starting
// with "_" (reserved for _metadata and the like), not ending in ".tmp"
// (temporary files), and plain (see plainKey).
func validName(name string) error {
	switch {
	case name == "" || name == "." || !utf8.ValidString(name) || !plainKey(name):
		return fmt.Errorf("storage: invalid state name %q", name)
	case path.Clean(name) != name || strings.HasPrefix(name, "/") || name == ".." || strings.HasPrefix(name, "../"):
		return fmt.Errorf("storage: state name %q is not a clean relative path", name)
	case strings.HasPrefix(path.Base(name), "_"):
		return fmt.Errorf("storage: state name %q: names starting with _ are reserved", name)
	case strings.HasSuffix(name, ".tmp"):
		return fmt.Errorf("storage: state name %q: names ending in .tmp are reserved", name)
	}
	return nil
}

// plainKey reports whether s has none of the characters fileblob escapes
// in a file's name: control characters and, on Windows, the characters
// Windows does not allow in names. localFS writes the file of a key at the
// key's path unescaped, where fileblob reads it only for plain keys.
func plainKey(s string) bool {
	for _, r := range s {
		if r < 0x20 || os.PathSeparator == '\\' && strings.ContainsRune(`\<>:"|?*`, r) {
			return false
		}
	}
	return true
}

// validHandlePath reports whether p is a path a StateHandle may hold:
// relative, clean, inside its directory.
func validHandlePath(p string) bool {
	return p != "" && path.Clean(p) == p && !strings.HasPrefix(p, "/") && p != ".." && !strings.HasPrefix(p, "../") && p != "."
}

// StateWriter writes one piece of state and computes its CRC-32C on the
// way. State smaller than the inline threshold stays in memory and comes
// back inline in the handle; larger state goes to a file that appears
// only when Close succeeds, so a failed or abandoned write never leaves a
// file that looks complete. A StateWriter is used by one goroutine; any
// number of them may write at once.
type StateWriter struct {
	ctx       context.Context
	st        *store
	key       string // the file's key in the bucket
	path      string // the handle's path
	threshold int

	buf  []byte       // the state so far, while it is below the threshold
	w    objectWriter // the file, once the state reached the threshold
	size int64
	crc  uint32
	err  error // sticky: the first failure, or errDone after Close/Abort
}

var errDone = errors.New("storage: state writer already closed")

func newStateWriter(ctx context.Context, st *store, key, handlePath string, threshold int) *StateWriter {
	return &StateWriter{ctx: ctx, st: st, key: key, path: handlePath, threshold: threshold}
}

// Path is the path the handle will carry if the state goes to a file.
func (w *StateWriter) Path() string { return w.path }

// Write appends p to the state.
func (w *StateWriter) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	if w.w == nil && len(w.buf)+len(p) < w.threshold {
		w.buf = append(w.buf, p...)
		w.size += int64(len(p))
		w.crc = crc32.Update(w.crc, castagnoli, p)
		return len(p), nil
	}
	if w.w == nil {
		if err := w.spill(); err != nil {
			return 0, err
		}
	}
	n, err := w.w.Write(p)
	w.size += int64(n)
	w.crc = crc32.Update(w.crc, castagnoli, p[:n])
	if err != nil {
		w.fail(w.st.opError("write", w.key, err))
		return n, w.err
	}
	return n, nil
}

// spill opens the file and moves the buffered state into it.
func (w *StateWriter) spill() error {
	ow, err := w.st.newWriter(w.ctx, w.key, "application/octet-stream")
	if err != nil {
		w.err = err
		return err
	}
	w.w = ow
	if len(w.buf) > 0 {
		if _, err := w.w.Write(w.buf); err != nil {
			w.fail(w.st.opError("write", w.key, err))
			return w.err
		}
	}
	w.buf = nil
	return nil
}

func (w *StateWriter) fail(err error) {
	w.err = err
	if w.w != nil {
		w.w.Abort()
	}
}

// Close finishes the state and returns its handle: inline when it stayed
// below the threshold, otherwise pointing at the file, which is then
// complete. After a failed Close nothing is stored.
func (w *StateWriter) Close() (checkpoint.StateHandle, error) {
	if w.err != nil {
		return checkpoint.StateHandle{}, w.err
	}
	if w.w == nil && w.threshold == 0 {
		// Inlining is off: even an empty state is a file.
		if err := w.spill(); err != nil {
			return checkpoint.StateHandle{}, err
		}
	}
	if w.w == nil {
		w.err = errDone
		return checkpoint.StateHandle{Inline: w.buf, Size: w.size, CRC32C: w.crc}, nil
	}
	err := w.w.Close()
	w.err = errDone
	if err != nil {
		return checkpoint.StateHandle{}, w.st.opError("write", w.key, err)
	}
	return checkpoint.StateHandle{Path: w.path, Size: w.size, CRC32C: w.crc}, nil
}

// Abort discards the state; nothing is stored. It is safe to call after
// Close, where it does nothing.
func (w *StateWriter) Abort() {
	if w.err == nil {
		w.fail(errDone)
	}
}

// openState opens the state h points at; file paths are relative to the
// key prefix base.
func openState(ctx context.Context, st *store, base string, h checkpoint.StateHandle) (io.ReadCloser, error) {
	if h.Path == "" {
		if int64(len(h.Inline)) != h.Size {
			return nil, sizeError("inline state", h.Size, int64(len(h.Inline)))
		}
		if got := crc32.Checksum(h.Inline, castagnoli); got != h.CRC32C {
			return nil, checksumError("inline state", h.CRC32C, got)
		}
		return io.NopCloser(bytes.NewReader(h.Inline)), nil
	}
	if len(h.Inline) > 0 {
		return nil, fmt.Errorf("storage: state handle has both a path (%s) and inline bytes", h.Path)
	}
	if !validHandlePath(h.Path) {
		return nil, fmt.Errorf("storage: invalid state path %q", h.Path)
	}
	key := base + h.Path
	r, err := st.newReader(ctx, key)
	if err != nil {
		return nil, err
	}
	display := st.loc.display(key)
	if got := r.Size(); got != h.Size {
		r.Close()
		return nil, sizeError(display, h.Size, got)
	}
	return &stateReader{r: r, path: display, size: h.Size, crc: h.CRC32C}, nil
}

// stateReader checks, at EOF, that what it read has the size and checksum
// the handle recorded; on a mismatch it returns a CorruptError instead of
// io.EOF.
type stateReader struct {
	r    io.ReadCloser
	path string
	size int64
	crc  uint32

	n   int64
	sum uint32
	err error
}

func (r *stateReader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	n, err := r.r.Read(p)
	if r.n+int64(n) > r.size {
		n = int(r.size - r.n)
		err = &CorruptError{Path: r.path, Reason: fmt.Sprintf("size mismatch: expected %d bytes, got more", r.size)}
	}
	r.n += int64(n)
	r.sum = crc32.Update(r.sum, castagnoli, p[:n])
	switch {
	case err == io.EOF:
		if r.n != r.size {
			err = sizeError(r.path, r.size, r.n)
		} else if r.sum != r.crc {
			err = checksumError(r.path, r.crc, r.sum)
		}
	case err != nil && !errors.Is(err, ErrCorrupt):
		err = fmt.Errorf("storage: read %s: %w", r.path, err)
	}
	r.err = err
	return n, err
}

func (r *stateReader) Close() error { return r.r.Close() }

// readState reads the state h points at, verified.
func readState(ctx context.Context, st *store, base string, h checkpoint.StateHandle) ([]byte, error) {
	r, err := openState(ctx, st, base, h)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	b := make([]byte, 0, min(h.Size, 64<<20)+1)
	buf := bytes.NewBuffer(b)
	if _, err := buf.ReadFrom(r); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
