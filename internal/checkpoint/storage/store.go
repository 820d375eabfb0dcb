package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	"gocloud.dev/gcerrors"
)

// location names a bucket: a local directory, or a bucket of a gocloud
// driver. Two equal locations are the same bucket.
type location struct {
	scheme string // "file" for a local directory
	dir    string // file: the absolute directory
	host   string // other schemes: the URL's host (the bucket's name)
	query  string // other schemes: the URL's query without "prefix"
}

// display returns the path or URL a person (or Resolve) would use for key.
func (l location) display(key string) string {
	if l.scheme == "file" {
		return filepath.Join(l.dir, filepath.FromSlash(key))
	}
	s := l.scheme + "://" + l.host + "/" + key
	if l.query != "" {
		s += "?" + l.query
	}
	return s
}

func (l location) url() string {
	s := l.scheme + "://" + l.host
	if l.query != "" {
		s += "?" + l.query
	}
	return s
}

// parseLocation splits a storage URL or plain path into the bucket it
// names and the key inside that bucket, without leading or trailing "/".
// A local directory is its own bucket, so its key is always "": the path
// is in the location.
func parseLocation(raw string) (location, string, error) {
	if raw == "" {
		return location{}, "", errors.New("storage: empty location")
	}
	if !strings.Contains(raw, "://") {
		abs, err := filepath.Abs(raw)
		if err != nil {
			return location{}, "", fmt.Errorf("storage: %s: %w", raw, err)
		}
		return location{scheme: "file", dir: abs}, "", nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return location{}, "", fmt.Errorf("storage: %w", err)
	}
	if u.Scheme == "file" {
		if u.RawQuery != "" {
			return location{}, "", fmt.Errorf("storage: %s: file URLs take no query parameters", raw)
		}
		p := u.Path
		switch u.Host {
		case "", "localhost":
		case ".":
			p = strings.TrimPrefix(p, "/")
		default:
			return location{}, "", fmt.Errorf("storage: %s: file URL with host %q", raw, u.Host)
		}
		if p == "" {
			return location{}, "", fmt.Errorf("storage: %s: no path", raw)
		}
		abs, err := filepath.Abs(filepath.FromSlash(p))
		if err != nil {
			return location{}, "", fmt.Errorf("storage: %s: %w", raw, err)
		}
		return location{scheme: "file", dir: abs}, "", nil
	}
	q := u.Query()
	key := strings.Trim(q.Get("prefix"), "/")
	q.Del("prefix")
	if p := strings.Trim(u.Path, "/"); p != "" {
		key = joinKey(key, p)
	}
	// Keys are paths: "a/../b" is "b", as in a local directory.
	key = strings.Trim(path.Clean("/"+key), "/")
	return location{scheme: u.Scheme, host: u.Host, query: q.Encode()}, key, nil
}

// joinKey joins key elements with "/", skipping empty ones.
func joinKey(elems ...string) string {
	var b strings.Builder
	for _, e := range elems {
		if e == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('/')
		}
		b.WriteString(e)
	}
	return b.String()
}

// parentKey returns the key of the directory holding key, "" at the root.
func parentKey(key string) string {
	if i := strings.LastIndexByte(key, '/'); i >= 0 {
		return key[:i]
	}
	return ""
}

// store is one opened bucket plus what this package knows about it. It is
// safe for concurrent use.
type store struct {
	bucket *blob.Bucket
	owned  bool // Close closes bucket
	loc    location
	faults *Faults
	// local writes the files of a fileblob bucket this package opened, so
	// that they are durable, and removes emptied directories; nil for
	// other buckets.
	local *localFS
}

// openStore opens the bucket loc names. create makes a missing local
// directory.
func openStore(ctx context.Context, c *config, loc location, create bool) (*store, error) {
	if loc.scheme == "file" {
		b, err := fileblob.OpenBucket(loc.dir, &fileblob.Options{
			CreateDir: create,
			// Temporary files go next to the final file, so the rename
			// that publishes a file never crosses a mount point.
			NoTempDir: true,
			// No ".attrs" sidecar files: a checkpoint directory holds
			// exactly the state files and _metadata.
			Metadata: fileblob.MetadataDontWrite,
		})
		if err != nil {
			return nil, fmt.Errorf("storage: open %s: %w", loc.dir, err)
		}
		return &store{bucket: b, owned: true, loc: loc, faults: c.faults, local: newLocalFS(loc.dir)}, nil
	}
	b, err := c.mux.OpenBucket(ctx, loc.url())
	if err != nil {
		return nil, fmt.Errorf("storage: open %s: %w", loc.url(), err)
	}
	return &store{bucket: b, owned: true, loc: loc, faults: c.faults}, nil
}

func (s *store) close() error {
	if !s.owned {
		return nil
	}
	return s.bucket.Close()
}

// errNotExist marks an object that is not there, whether the driver said
// so or an injected fault did.
var errNotExist = fs.ErrNotExist

func isNotExist(err error) bool {
	return errors.Is(err, errNotExist) || gcerrors.Code(err) == gcerrors.NotFound
}

// opError wraps err from op on key with the key's path.
func (s *store) opError(op, key string, err error) error {
	if isNotExist(err) && !errors.Is(err, errNotExist) {
		err = fmt.Errorf("%w: %w", errNotExist, err)
	}
	return fmt.Errorf("storage: %s %s: %w", op, s.loc.display(key), err)
}

// objectWriter writes one object. Close publishes it; Abort discards it.
// Either must be called, once.
type objectWriter interface {
	io.Writer
	Close() error
	Abort()
}

// newWriter starts writing key. The object appears, complete, only when
// Close returns nil, and cancelling the write's context before Close
// discards it. In a local directory this package opened, Close returns
// once the file is durable (see localFS); elsewhere the bucket's driver
// publishes the write on Close (object stores complete the upload).
func (s *store) newWriter(ctx context.Context, key, contentType string) (objectWriter, error) {
	f := s.faults.decide(ctx, OpWrite, key)
	var w objectWriter
	if s.local != nil {
		lw, err := s.local.create(ctx, key)
		if err != nil {
			return nil, s.opError("write", key, err)
		}
		w = lw
	} else {
		ctx, cancel := context.WithCancel(ctx)
		bw, err := s.bucket.NewWriter(ctx, key, &blob.WriterOptions{ContentType: contentType})
		if err != nil {
			cancel()
			return nil, s.opError("write", key, err)
		}
		w = &bucketWriter{w: bw, cancel: cancel, ctx: ctx, st: s, key: key}
	}
	if f != nil {
		return &faultWriter{under: w, fault: f}, nil
	}
	return w, nil
}

type bucketWriter struct {
	w      *blob.Writer
	cancel context.CancelFunc
	ctx    context.Context
	st     *store
	key    string
}

func (w *bucketWriter) Write(p []byte) (int, error) { return w.w.Write(p) }

func (w *bucketWriter) Close() error {
	defer w.cancel()
	return w.w.Close()
}

func (w *bucketWriter) Abort() {
	w.cancel()
	_ = w.w.Close()
	abortUploads(w.ctx, w.st, w.key)
}

// objectReader reads one object.
type objectReader interface {
	io.ReadCloser
	// Size is the object's size as the bucket reports it.
	Size() int64
}

func (s *store) newReader(ctx context.Context, key string) (objectReader, error) {
	f := s.faults.decide(ctx, OpRead, key)
	if f != nil {
		switch f.Action {
		case Fail:
			return nil, s.opError("read", key, f.err())
		case Drop:
			return nil, s.opError("read", key, fmt.Errorf("%w (%w)", errNotExist, ErrInjected))
		}
	}
	r, err := s.bucket.NewReader(ctx, key, nil)
	if err != nil {
		return nil, s.opError("read", key, err)
	}
	if f != nil {
		fr, err := newFaultReader(r, f)
		if err != nil {
			return nil, s.opError("read", key, err)
		}
		return fr, nil
	}
	return r, nil
}

func (s *store) readAll(ctx context.Context, key string) ([]byte, error) {
	r, err := s.newReader(ctx, key)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, s.opError("read", key, err)
	}
	return b, nil
}

// object is one listed object, or a directory when listing with a
// delimiter.
type object struct {
	Key     string
	Size    int64
	ModTime time.Time
	IsDir   bool
}

func (s *store) stat(ctx context.Context, key string) (object, error) {
	if f := s.faults.decide(ctx, OpStat, key); f != nil {
		if f.Action == Drop {
			return object{}, s.opError("stat", key, fmt.Errorf("%w (%w)", errNotExist, ErrInjected))
		}
		return object{}, s.opError("stat", key, f.err())
	}
	a, err := s.bucket.Attributes(ctx, key)
	if err != nil {
		return object{}, s.opError("stat", key, err)
	}
	return object{Key: key, Size: a.Size, ModTime: a.ModTime}, nil
}

// list returns the objects whose keys start with prefix, in key order.
// With dirs, keys are cut at the first "/" after prefix and such
// directories are listed once, with IsDir set.
func (s *store) list(ctx context.Context, prefix string, dirs bool) ([]object, error) {
	if f := s.faults.decide(ctx, OpList, prefix); f != nil {
		if f.Action == Drop {
			return nil, nil
		}
		return nil, s.opError("list", prefix, f.err())
	}
	opts := &blob.ListOptions{Prefix: prefix}
	if dirs {
		opts.Delimiter = "/"
	}
	for attempt := 1; ; attempt++ {
		out, err := s.listOnce(ctx, opts)
		if err == nil {
			return out, nil
		}
		if !isNotExist(err) || attempt == listAttempts {
			return nil, s.opError("list", prefix, err)
		}
	}
}

// listAttempts bounds how often list starts over after an object vanished
// while it was being listed.
const listAttempts = 8

// listOnce lists the objects opts selects. On a local directory the
// listing walks the tree and reads each file's attributes: a file renamed
// or deleted between the directory read and the attributes' (a
// checkpoint's state written beside the listing, or another checkpoint's
// discard) fails the walk with a not-exist error, and list lists again.
func (s *store) listOnce(ctx context.Context, opts *blob.ListOptions) ([]object, error) {
	var out []object
	it := s.bucket.List(opts)
	for {
		o, err := it.Next(ctx)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, object{Key: o.Key, Size: o.Size, ModTime: o.ModTime, IsDir: o.IsDir})
	}
}

// remove deletes key. A key that is not there is not an error.
func (s *store) remove(ctx context.Context, key string) error {
	if f := s.faults.decide(ctx, OpDelete, key); f != nil {
		if f.Action == Drop {
			return nil
		}
		return s.opError("delete", key, f.err())
	}
	if err := s.bucket.Delete(ctx, key); err != nil && !isNotExist(err) {
		return s.opError("delete", key, err)
	}
	return nil
}

// removeEmptyDir removes the directory dirKey if it is empty, on local
// directories: fileblob deletes files but leaves their directories behind.
func (s *store) removeEmptyDir(dirKey string) {
	if s.local == nil || dirKey == "" {
		return
	}
	_ = os.Remove(s.local.path(dirKey))
}

// removeEmptyDirs removes the empty directories in dirKey whose names
// match says, on local directories. A write abandoned before its file was
// renamed into place (a subtask canceled while writing a checkpoint's
// state) leaves the directory fileblob made for it, which no listing
// reports, since listings list files.
func (s *store) removeEmptyDirs(dirKey string, match func(name string) bool) {
	if s.local == nil {
		return
	}
	entries, err := os.ReadDir(s.local.path(dirKey))
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.IsDir() && match(e.Name()) {
			_ = os.Remove(filepath.Join(s.local.path(dirKey), e.Name()))
		}
	}
}
