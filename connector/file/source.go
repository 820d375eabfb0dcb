package file

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/weirstream/weir/connector"
)

// Line is one line of an input file.
type Line struct {
	// File is the line's split: the file's path relative to the source's
	// directory, with forward slashes. It does not depend on where the
	// input is mounted, so outputs that carry it (dead letters) are
	// reproducible.
	File string
	// Offset is the byte offset of the line's first byte in the file.
	Offset int64
	// Text is the line without its line ending ("\n" or "\r\n"). The lines
	// of one fetch share a backing array; each Text is capped at its own
	// length, so appending to one never overwrites another.
	Text []byte
}

// LineSource is a bounded source of the lines of a set of files, one
// split per file. It implements connector.Source[Line].
type LineSource struct {
	pattern string
	base    string
	splits  []string
	index   map[string]int
	batch   int
	bufSize int
	rate    float64
}

// SourceOption configures a LineSource.
type SourceOption func(*sourceConfig)

type sourceConfig struct {
	batch   int
	bufSize int
	rate    float64
}

// LinesPerSecond paces the source: each split is read at about r lines a
// second, as if the files were being written as the job reads them (to
// replay a recorded trace at its own pace). 0, the default, reads as fast
// as the job takes the lines.
func LinesPerSecond(r float64) SourceOption { return func(c *sourceConfig) { c.rate = r } }

// BatchLines sets the most lines returned per fetch. Default 1024.
func BatchLines(n int) SourceOption { return func(c *sourceConfig) { c.batch = n } }

// ReadBufferSize sets the size of each open file's read buffer. Lines
// longer than the buffer are read in pieces; the buffer only bounds how
// much is read per system call. Default 64 KiB.
func ReadBufferSize(n int) SourceOption { return func(c *sourceConfig) { c.bufSize = n } }

// Lines returns a source of the lines of the files at path, which is
// either a directory, whose regular files are read (not its
// subdirectories), a single file, or a glob pattern (filepath.Match
// syntax), whose split ids are relative to the pattern's longest
// directory without wildcards. Files and directories whose names start
// with "." or "_" are skipped (the sink's .inprogress directory, markers
// such as _SUCCESS). Split ids are sorted, so split i is the i-th file in
// byte order of its relative path.
//
// The file list is taken now: a missing path, or a path that names no
// files, is an error that names it.
func Lines(path string, opts ...SourceOption) (*LineSource, error) {
	c := sourceConfig{batch: 1024, bufSize: 64 << 10}
	for _, o := range opts {
		o(&c)
	}
	switch {
	case path == "":
		return nil, fmt.Errorf("file: the source path is empty")
	case c.batch < 1:
		return nil, fmt.Errorf("file: batch lines must be at least 1, got %d", c.batch)
	case c.bufSize < 16:
		return nil, fmt.Errorf("file: read buffer size must be at least 16 bytes, got %d", c.bufSize)
	case c.rate < 0:
		return nil, fmt.Errorf("file: lines per second must not be negative, got %v", c.rate)
	}
	base, paths, err := listInputs(path)
	if err != nil {
		return nil, err
	}
	s := &LineSource{pattern: path, base: base, index: make(map[string]int, len(paths)), batch: c.batch, bufSize: c.bufSize, rate: c.rate}
	for _, p := range paths {
		rel, err := filepath.Rel(base, p)
		if err != nil {
			return nil, fmt.Errorf("file: %s: %w", p, err)
		}
		s.splits = append(s.splits, filepath.ToSlash(rel))
	}
	slices.Sort(s.splits)
	for i, id := range s.splits {
		s.index[id] = i
	}
	return s, nil
}

// listInputs resolves a source path to its base directory and its files.
func listInputs(path string) (base string, files []string, err error) {
	if !hasMeta(path) {
		fi, err := os.Stat(path)
		if err != nil {
			return "", nil, fmt.Errorf("file: source path %s: %w", path, unwrapPath(err))
		}
		if !fi.IsDir() {
			if !fi.Mode().IsRegular() {
				return "", nil, fmt.Errorf("file: source path %s is not a regular file or directory", path)
			}
			return filepath.Dir(path), []string{path}, nil
		}
		entries, err := os.ReadDir(path)
		if err != nil {
			return "", nil, fmt.Errorf("file: source directory %s: %w", path, unwrapPath(err))
		}
		for _, e := range entries {
			p := filepath.Join(path, e.Name())
			if hidden(e.Name()) || !isRegular(p) {
				continue
			}
			files = append(files, p)
		}
		if len(files) == 0 {
			return "", nil, fmt.Errorf("file: source directory %s has no files", path)
		}
		return path, files, nil
	}
	matches, err := filepath.Glob(path)
	if err != nil {
		return "", nil, fmt.Errorf("file: source pattern %s: %w", path, err)
	}
	base = globBase(path)
	for _, p := range matches {
		if hidden(filepath.Base(p)) || !isRegular(p) {
			continue
		}
		files = append(files, p)
	}
	if len(files) == 0 {
		return "", nil, fmt.Errorf("file: source pattern %s matches no files", path)
	}
	return base, files, nil
}

func hasMeta(path string) bool { return strings.ContainsAny(path, `*?[\`) }

// globBase returns the longest directory of pattern without wildcards.
func globBase(pattern string) string {
	i := strings.IndexAny(pattern, `*?[\`)
	return filepath.Dir(pattern[:i])
}

func hidden(name string) bool { return strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") }

func isRegular(path string) bool {
	fi, err := os.Stat(path) // follows symbolic links
	return err == nil && fi.Mode().IsRegular()
}

// unwrapPath drops the *fs.PathError wrapper of an error whose message
// already names the path.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Splits implements connector.Source: the files' paths relative to the
// source's directory, sorted.
func (s *LineSource) Splits(context.Context) ([]string, error) { return slices.Clone(s.splits), nil }

// Bounded implements connector.Source: every split ends at its file's end.
func (s *LineSource) Bounded() bool { return true }

// Path returns the path of split's file as the source opens it.
func (s *LineSource) Path(split string) string {
	return filepath.Join(s.base, filepath.FromSlash(split))
}

// NewReader implements connector.Source. Each split starts at its offset
// (StartDefault: the file's start), which must be a line start: 0, the
// file's size, or just after a "\n". Any other offset means the file
// changed since the checkpoint was taken, and is an error.
func (s *LineSource) NewReader(_ context.Context, _ connector.ReaderInfo, splits []connector.SplitStart) (connector.Reader[Line], error) {
	return s.newReader(splits)
}

func (s *LineSource) newReader(splits []connector.SplitStart) (*lineReader, error) {
	r := &lineReader{batch: s.batch, rate: s.rate}
	if r.rate > 0 {
		// Small batches keep a paced stream smooth: about 20 a second.
		r.batch = max(1, min(r.batch, int(r.rate/20)))
	}
	for _, sp := range splits {
		if _, ok := s.index[sp.Split]; !ok {
			r.Close()
			return nil, fmt.Errorf("file: unknown split %q of %s", sp.Split, s.pattern)
		}
		st, err := s.open(sp)
		if err != nil {
			r.Close()
			return nil, err
		}
		r.splits = append(r.splits, st)
	}
	return r, nil
}

func (s *LineSource) open(sp connector.SplitStart) (*splitReader, error) {
	path := s.Path(sp.Split)
	off := sp.Offset
	if off == connector.StartDefault {
		off = 0
	}
	if off < 0 {
		return nil, fmt.Errorf("file: %s: invalid offset %d", path, off)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("file: opening split %q: %w", sp.Split, err)
	}
	if err := checkLineStart(f, path, off); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("file: %s: seeking to %d: %w", path, off, err)
	}
	return &splitReader{id: sp.Split, path: path, f: f, br: bufio.NewReaderSize(f, s.bufSize), next: off}, nil
}

// checkLineStart verifies that off is where a line starts (or the end of
// the file).
func checkLineStart(f *os.File, path string, off int64) error {
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("file: %s: %w", path, err)
	}
	switch {
	case off > fi.Size():
		return connector.Permanent(fmt.Errorf("file: %s: offset %d is past the end of the file (%d bytes): the file changed since the offset was taken (is this the input the checkpoint's job read?)", path, off, fi.Size()))
	case off == 0 || off == fi.Size():
		return nil
	}
	var b [1]byte
	if _, err := f.ReadAt(b[:], off-1); err != nil {
		return fmt.Errorf("file: %s: %w", path, err)
	}
	if b[0] != '\n' {
		return connector.Permanent(fmt.Errorf("file: %s: offset %d is not at the start of a line: the file changed since the offset was taken (is this the input the checkpoint's job read?)", path, off))
	}
	return nil
}

type splitReader struct {
	id    string
	path  string
	f     *os.File
	br    *bufio.Reader
	next  int64 // offset of the next line
	done  bool
	lines int64 // lines returned, for pacing
	// paused: the source paused the split (connector.SplitPauser).
	paused bool
}

// lineReader reads its splits in turn, one batch from each, so that every
// split's watermark advances as the job reads.
type lineReader struct {
	splits []*splitReader
	batch  int
	rr     int
	// rate paces each split at rate lines a second (0: no pacing); read
	// counts the lines each split returned since start.
	rate  float64
	start time.Time
	// sizes of the last batch, to size the next one's allocations
	hintBytes, hintLines int
	ends                 []int // scratch: start and end of each line's text
}

func (r *lineReader) Fetch(ctx context.Context) (connector.Fetch[Line], error) {
	sp, err := r.next(ctx)
	if err != nil {
		return connector.Fetch[Line]{}, err
	}
	return r.read(sp)
}

// next returns the split to read a batch from, in turn, once the pace
// allows: connector.ErrEndOfInput when every split is done, and
// connector.ErrSplitsPaused when every split not done is paused.
func (r *lineReader) next(ctx context.Context) (*splitReader, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	paused := false
	for range r.splits {
		sp := r.splits[r.rr]
		r.rr = (r.rr + 1) % len(r.splits)
		switch {
		case sp.done:
		case sp.paused:
			paused = true
		default:
			if err := r.pace(ctx, sp); err != nil {
				return nil, err
			}
			return sp, nil
		}
	}
	if paused {
		return nil, connector.ErrSplitsPaused
	}
	return nil, connector.ErrEndOfInput
}

// PauseOrResumeSplits implements connector.SplitPauser.
func (r *lineReader) PauseOrResumeSplits(pause, resume []string) error {
	for _, sp := range r.splits {
		if slices.Contains(pause, sp.id) {
			sp.paused = true
		} else if slices.Contains(resume, sp.id) {
			sp.paused = false
		}
	}
	return nil
}

// pace waits until sp may return another batch at the configured rate.
func (r *lineReader) pace(ctx context.Context, sp *splitReader) error {
	if r.rate <= 0 {
		return nil
	}
	if r.start.IsZero() {
		r.start = time.Now()
	}
	due := r.start.Add(time.Duration(float64(sp.lines) / r.rate * float64(time.Second)))
	wait := time.Until(due)
	if wait <= 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// read returns the next batch of sp's lines. All the lines' bytes go into
// one buffer, allocated per batch because the records outlive the fetch.
func (r *lineReader) read(sp *splitReader) (connector.Fetch[Line], error) {
	buf := make([]byte, 0, r.hintBytes)
	recs := make([]Line, 0, max(r.hintLines, min(r.batch, 64)))
	ends := r.ends[:0]
	off := sp.next
	for len(recs) < r.batch {
		start := len(buf)
		var err error
		buf, err = appendLine(sp.br, buf)
		if err != nil && err != io.EOF {
			return connector.Fetch[Line]{}, fmt.Errorf("file: reading %s at offset %d: %w", sp.path, off, err)
		}
		if len(buf) == start { // nothing left
			sp.done = true
			break
		}
		recs = append(recs, Line{File: sp.id, Offset: off})
		off += int64(len(buf) - start)
		ends = append(ends, start, start+len(trimEOL(buf[start:])))
		if err == io.EOF { // a last line without a newline
			sp.done = true
			break
		}
	}
	if err := sp.finish(off, len(recs)); err != nil {
		return connector.Fetch[Line]{}, err
	}
	for i := range recs {
		s, e := ends[2*i], ends[2*i+1]
		recs[i].Text = buf[s:e:e]
	}
	r.hintBytes, r.hintLines, r.ends = len(buf)+len(buf)/8, len(recs), ends
	return connector.Fetch[Line]{Split: sp.id, Records: recs, Next: off, EndOfSplit: sp.done}, nil
}

// finish ends a batch of n lines that stopped before offset off: the split
// is done if nothing follows, and its file is closed then.
func (sp *splitReader) finish(off int64, n int) error {
	if !sp.done {
		if _, err := sp.br.Peek(1); err == io.EOF {
			sp.done = true
		} else if err != nil {
			return fmt.Errorf("file: reading %s at offset %d: %w", sp.path, off, err)
		}
	}
	sp.next = off
	sp.lines += int64(n)
	if sp.done {
		sp.f.Close()
		sp.f, sp.br = nil, nil
	}
	return nil
}

// appendLine appends the next line of br, with its newline if it has one,
// to buf. At the end of the input it returns io.EOF, with the last line if
// that has no newline.
func appendLine(br *bufio.Reader, buf []byte) ([]byte, error) {
	for {
		chunk, err := br.ReadSlice('\n')
		buf = append(buf, chunk...)
		if err != bufio.ErrBufferFull {
			return buf, err
		}
	}
}

// trimEOL removes a trailing "\n" or "\r\n".
func trimEOL(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
		if n := len(b); n > 0 && b[n-1] == '\r' {
			b = b[:n-1]
		}
	}
	return b
}

// Close implements connector.Reader: it closes the files still open.
func (r *lineReader) Close() error {
	var errs []error
	for _, sp := range r.splits {
		if sp.f != nil {
			errs = append(errs, sp.f.Close())
			sp.f, sp.br = nil, nil
		}
	}
	return errors.Join(errs...)
}
