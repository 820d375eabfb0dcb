// Package storage persists checkpoints and savepoints through
// gocloud.dev/blob and finds them again for recovery.
//
// A checkpoint directory (execution.checkpointing.dir) is a local path, a
// file:// URL, mem:// (tests) or any URL a gocloud driver registered with
// the URL mux opens (s3://, gs://, ...; see the URLMux option). The layout
// is Flink's:
//
//	<dir>/<job-id>/
//	  chk-<n>/       checkpoint n's _metadata and the state files only it
//	                 names
//	  shared/        state files later checkpoints may name too
//	  taskowned/     state the tasks own, never deleted here (reserved)
//	<savepoint-dir>/savepoint-<job-id prefix>-<random>/
//	                 a savepoint's state files and _metadata, self-contained
//
// A state file that later checkpoints may name instead of writing it
// again (an immutable file of an embedded store's incremental snapshot, a
// piece of a heap backend's incremental chain, the last state of a
// subtask that finished) is written to shared/ (CreateSharedState), named
// after the checkpoint that wrote it, a random component and its name
// ("shared/7-1x2y3z-op-0-keyed-000012.sst"), so no two writes, by
// whatever attempt or run of the job, ever share a name. Every other
// file is written to the checkpoint's own directory (CreateState).
//
// A checkpoint is complete when its _metadata exists: it is written last,
// and only ever appears whole. Every state file is named in _metadata with
// its size and CRC-32C. _metadata itself is a one-line JSON header (file
// format, version, and the size and CRC-32C of the rest) followed by
// checkpoint.Metadata as indented JSON, so it reads as text and through
// jq. Recovery can therefore tell a damaged checkpoint and fall back to
// the one before it (Latest).
//
// A write is durable when it returns. In a local directory this package
// writes every file itself rather than through fileblob, which renames
// its temporary file into place without syncing anything: a file is
// written to a temporary file next to it, synced, and renamed into place,
// and then its directory is synced (except on Windows, which cannot sync
// a directory); a directory created for it is made durable by syncing its
// parent (once per process, whoever created it). So after a power loss a
// _metadata file, and every state file it names, is there whole or not at
// all once WriteMetadata has returned. A failed sync fails the write, and
// the file is removed. Object stores
// guarantee this without syncs or renames: an upload (an S3 PUT or
// multipart upload, a GCS or Azure blob upload) becomes visible
// atomically, whole, when it completes, and is durable once acknowledged,
// and there are no directories. A _metadata that is empty or torn anyway
// (a file system that does not honour fsync, an incomplete copy) fails
// its checksum or header, and Latest skips it.
//
// Paths in state handles are relative: to the job directory for a
// checkpoint ("chk-7/op-0-keyed", "shared/7-1x2y3z-op-0-keyed-000012.sst"),
// to the savepoint directory for a savepoint ("op-0-keyed"), so a
// savepoint can be moved as a whole. Discarding a checkpoint deletes its
// directory and the files in shared/ that no other completed checkpoint
// names (see Discard). Checkpoints written before shared/ was used name
// files in earlier checkpoints' directories instead; those are read, and
// kept, the same way.
package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"

	"github.com/weirstream/weir/internal/checkpoint"
)

// Names in a job's checkpoint directory.
const (
	// MetadataFile is the name of the file that completes a checkpoint or
	// savepoint directory.
	MetadataFile = "_metadata"
	// SharedDir is the job directory's folder for state files that later
	// checkpoints may name too (CreateSharedState).
	SharedDir = "shared"
	// TaskOwnedDir is the job directory's folder for state the tasks own.
	// Reserved: nothing here writes or deletes it.
	TaskOwnedDir = "taskowned"

	checkpointDirPrefix = "chk-"
	savepointDirPrefix  = "savepoint-"
)

// checkpointDir returns the name of checkpoint id's directory.
func checkpointDir(id int64) string { return checkpointDirPrefix + strconv.FormatInt(id, 10) }

// parseCheckpointDir returns the id in a directory name "chk-<id>".
func parseCheckpointDir(name string) (int64, bool) {
	s, ok := strings.CutPrefix(name, checkpointDirPrefix)
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id < 0 || strconv.FormatInt(id, 10) != s {
		return 0, false
	}
	return id, true
}

// Storage is one job's checkpoint storage. Its methods are safe for
// concurrent use.
type Storage struct {
	cfg    config
	jobID  string
	st     *store
	jobKey string // the job directory's key prefix, ending in "/"

	latestMu      sync.Mutex
	latestWritten int64 // the newest id written to LatestFile, -1 for none
}

// Open opens the checkpoint storage of job jobID under the checkpoint
// directory url: a local path (relative to the working directory, or
// absolute), a file:// URL, or a URL of a scheme the URL mux knows, whose
// path is the directory inside the bucket (s3://bucket/checkpoints). A
// local directory is created if missing.
func Open(ctx context.Context, url, jobID string, opts ...Option) (*Storage, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if jobID == "" || jobID == "." || jobID == ".." || strings.ContainsAny(jobID, "/\\") || !plainKey(jobID) {
		return nil, fmt.Errorf("storage: invalid job id %q", jobID)
	}
	loc, prefix, err := parseLocation(url)
	if err != nil {
		return nil, err
	}
	var st *store
	if cfg.bucket != nil {
		st = &store{bucket: cfg.bucket, loc: loc, faults: cfg.faults}
	} else if st, err = openStore(ctx, &cfg, loc, true); err != nil {
		return nil, err
	}
	return &Storage{cfg: cfg, jobID: jobID, st: st, jobKey: joinKey(prefix, jobID) + "/", latestWritten: -1}, nil
}

// Close closes the bucket, unless it was passed in with the Bucket option.
// Writers and readers still open fail from then on.
func (s *Storage) Close() error { return s.st.close() }

// JobID returns the job the storage belongs to.
func (s *Storage) JobID() string { return s.jobID }

// Path returns the job's checkpoint directory, as a path or URL.
func (s *Storage) Path() string { return s.st.loc.display(strings.TrimSuffix(s.jobKey, "/")) }

// CheckpointPath returns the directory of checkpoint id, as a path or URL
// that Resolve accepts.
func (s *Storage) CheckpointPath(id int64) string { return s.st.loc.display(s.checkpointKey(id)) }

func (s *Storage) checkpointKey(id int64) string { return s.jobKey + checkpointDir(id) }

// CreateState starts writing a piece of state of checkpoint checkpointID
// under the file name name (unique within the checkpoint; it may contain
// "/", may not start with "_" or end in ".tmp"). The caller writes the
// state and calls Close for its handle, or Abort to drop it.
func (s *Storage) CreateState(ctx context.Context, checkpointID int64, name string) (*StateWriter, error) {
	if checkpointID < 0 {
		return nil, fmt.Errorf("storage: negative checkpoint id %d", checkpointID)
	}
	if err := validName(name); err != nil {
		return nil, err
	}
	p := checkpointDir(checkpointID) + "/" + name
	return newStateWriter(ctx, s.st, s.jobKey+p, p, s.cfg.inlineThreshold), nil
}

// CreateSharedState is CreateState for a piece of state that later
// checkpoints may name too: it goes to the job's shared/ directory, under
// a name no other write ever uses (see the package documentation), and
// is deleted with the last completed checkpoint that names it, or with
// checkpoint checkpointID if that is never completed.
func (s *Storage) CreateSharedState(ctx context.Context, checkpointID int64, name string) (*StateWriter, error) {
	if checkpointID < 0 {
		return nil, fmt.Errorf("storage: negative checkpoint id %d", checkpointID)
	}
	if err := validName(name); err != nil {
		return nil, err
	}
	p := newSharedPath(checkpointID, name)
	return newStateWriter(ctx, s.st, s.jobKey+p, p, s.cfg.inlineThreshold), nil
}

// newSharedPath returns a new path in shared/ for state name of checkpoint
// id: "shared/<id>-<random>-<name>". The random part (64 bits) keeps apart
// the files that two attempts, or two runs of the job, write for the same
// checkpoint id and name.
func newSharedPath(id int64, name string) string {
	return sharedPrefix(id) + strconv.FormatUint(rand.Uint64(), 36) + "-" + name
}

// sharedPrefix starts the paths of the files checkpoint id writes in
// shared/.
func sharedPrefix(id int64) string {
	return SharedDir + "/" + strconv.FormatInt(id, 10) + "-"
}

// parseSharedPath returns the checkpoint that wrote the file at path p in
// shared/ and the name it gave it, as newSharedPath made p.
func parseSharedPath(p string) (id int64, name string, ok bool) {
	rest, ok := strings.CutPrefix(p, SharedDir+"/")
	if !ok {
		return 0, "", false
	}
	num, rest, ok1 := strings.Cut(rest, "-")
	rnd, name, ok2 := strings.Cut(rest, "-")
	if !ok1 || !ok2 || rnd == "" || name == "" {
		return 0, "", false
	}
	id, err := strconv.ParseInt(num, 10, 64)
	if err != nil || id < 0 || strconv.FormatInt(id, 10) != num {
		return 0, "", false
	}
	return id, name, true
}

// ParseStatePath splits p, the path of a checkpoint's state file relative
// to the job directory, into the checkpoint that wrote it and the name it
// was written under: "chk-7/op-0-keyed" is op-0-keyed of checkpoint 7, and
// so is "shared/7-1x2y3z-op-0-keyed", written with CreateSharedState.
func ParseStatePath(p string) (checkpointID int64, name string, ok bool) {
	if id, name, ok := parseSharedPath(p); ok {
		return id, name, true
	}
	dir, name, ok := strings.Cut(p, "/")
	if !ok || name == "" {
		return 0, "", false
	}
	id, ok := parseCheckpointDir(dir)
	if !ok {
		return 0, "", false
	}
	return id, name, true
}

// OpenState opens the state h points at, a handle of one of this job's
// checkpoints. The reader checks the state's size and CRC-32C as it
// reaches the end: instead of io.EOF it returns a *CorruptError naming the
// file and the expected and actual values. Bytes read before the end are
// not yet verified, so a caller must read to io.EOF (or use ReadState)
// before trusting any of them.
func (s *Storage) OpenState(ctx context.Context, h checkpoint.StateHandle) (io.ReadCloser, error) {
	return openState(ctx, s.st, s.jobKey, h)
}

// ReadState returns the state h points at, verified.
func (s *Storage) ReadState(ctx context.Context, h checkpoint.StateHandle) ([]byte, error) {
	return readState(ctx, s.st, s.jobKey, h)
}

// WriteMetadata completes checkpoint m.CheckpointID by writing its
// _metadata, records it in the job's LatestFile and returns the
// _metadata file's path. Failing to write LatestFile (the job being
// cancelled in between, storage failing) does not fail the checkpoint,
// which its _metadata completed: LatestFile then names an older one, and
// the listing finds this one. Call it after every state file of
// the checkpoint is closed. The file appears whole or not at all. A zero
// m.Version is written as checkpoint.MetadataVersion and an empty m.JobID
// as the storage's job; m itself is not modified. m.Kind must be
// KindCheckpoint: savepoints are written through CreateSavepoint.
func (s *Storage) WriteMetadata(ctx context.Context, m *checkpoint.Metadata) (string, error) {
	if m == nil {
		return "", errors.New("storage: nil metadata")
	}
	if m.Kind != checkpoint.KindCheckpoint {
		return "", fmt.Errorf("storage: WriteMetadata of a %s: use CreateSavepoint", m.Kind)
	}
	if m.CheckpointID < 0 {
		return "", fmt.Errorf("storage: negative checkpoint id %d", m.CheckpointID)
	}
	p, err := writeMetadata(ctx, s.st, s.checkpointKey(m.CheckpointID), s.fill(m))
	if err != nil {
		return "", err
	}
	// The checkpoint is complete once its _metadata is there, whatever
	// becomes of LatestFile, a lower bound that listings complement.
	_ = s.writeLatest(ctx, m.CheckpointID)
	return p, nil
}

// fill returns a copy of m with an unset version and job id filled in.
func (s *Storage) fill(m *checkpoint.Metadata) *checkpoint.Metadata {
	c := *m
	if c.Version == 0 {
		c.Version = checkpoint.MetadataVersion
	}
	if c.JobID == "" {
		c.JobID = s.jobID
	}
	return &c
}

// ReadMetadata reads and verifies the checkpoint or savepoint at path (any
// form Resolve accepts): the file format version, the CRC-32C of
// _metadata, the metadata version, and that every state file it references
// exists with the recorded size. State checksums are checked when the
// state is read (OpenState), or here with the VerifyChecksums option.
func (s *Storage) ReadMetadata(ctx context.Context, path string) (*checkpoint.Metadata, error) {
	snap, err := s.Resolve(ctx, path)
	if err != nil {
		return nil, err
	}
	defer snap.Close()
	return snap.Metadata, nil
}
