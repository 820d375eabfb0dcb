package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/weirstream/weir/internal/checkpoint"
)

// ErrNoCheckpoint is returned by Latest when the job has no completed
// checkpoint that verifies.
var ErrNoCheckpoint = errors.New("storage: no completed checkpoint")

// Snapshot is a completed checkpoint or savepoint opened for restore. Its
// metadata has been verified (see ReadMetadata); its state is read with
// OpenState or ReadState. Close it when done.
type Snapshot struct {
	// Metadata is the snapshot's verified metadata.
	Metadata *checkpoint.Metadata
	// Path is the snapshot's directory, as a path or URL.
	Path string

	st    *store
	owned bool   // Close closes st
	base  string // key prefix the handles' paths are relative to
}

// OpenState opens the state h of the snapshot; see Storage.OpenState for
// how it is verified.
func (s *Snapshot) OpenState(ctx context.Context, h checkpoint.StateHandle) (io.ReadCloser, error) {
	return openState(ctx, s.st, s.base, h)
}

// ReadState returns the state h of the snapshot, verified.
func (s *Snapshot) ReadState(ctx context.Context, h checkpoint.StateHandle) ([]byte, error) {
	return readState(ctx, s.st, s.base, h)
}

// Verify reads every state file of the snapshot and checks its size and
// CRC-32C.
func (s *Snapshot) Verify(ctx context.Context) error {
	return eachHandle(s.Metadata, func(_ string, h checkpoint.StateHandle) error {
		r, err := openState(ctx, s.st, s.base, h)
		if err != nil {
			return err
		}
		defer r.Close()
		_, err = io.Copy(io.Discard, r)
		return err
	})
}

// Close releases the bucket the snapshot opened, if it opened one.
func (s *Snapshot) Close() error {
	if s.owned {
		return s.st.close()
	}
	return nil
}

// Resolve opens the completed checkpoint or savepoint at p, for
// --from / execution.state-recovery.path. p names the snapshot's
// directory or its _metadata file, as a local path (absolute, or relative
// to the working directory), a file:// URL, or a URL of another scheme
// (s3://bucket/checkpoints/<job>/chk-7). It may belong to another job or
// live in another bucket; paths this storage returns (CheckpointPath,
// WriteMetadata, List) always work. The metadata is verified as
// ReadMetadata says.
func (s *Storage) Resolve(ctx context.Context, p string) (*Snapshot, error) {
	st, dirKey, owned, err := s.locate(ctx, p)
	if err != nil {
		return nil, err
	}
	m, base, err := readSnapshot(ctx, st, dirKey, s.cfg.verifyChecksums)
	if err != nil {
		if owned {
			_ = st.close()
		}
		return nil, err
	}
	return &Snapshot{Metadata: m, Path: st.loc.display(dirKey), st: st, owned: owned, base: base}, nil
}

// locate finds the bucket and directory key p names, opening the bucket
// unless it is this storage's.
func (s *Storage) locate(ctx context.Context, p string) (st *store, dirKey string, owned bool, err error) {
	loc, key, err := parseLocation(p)
	if err != nil {
		return nil, "", false, err
	}
	if loc.scheme == "file" {
		dir := loc.dir
		if filepath.Base(dir) == MetadataFile {
			dir = filepath.Dir(dir)
		}
		if s.st.loc.scheme == "file" {
			if rel, err := filepath.Rel(s.st.loc.dir, dir); err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
				return s.st, filepath.ToSlash(rel), false, nil
			}
		}
		// Root a bucket at the snapshot's parent, so a checkpoint's paths
		// ("chk-7/...") and a savepoint's resolve alike.
		parent := filepath.Dir(dir)
		if parent == dir {
			return nil, "", false, fmt.Errorf("storage: %s: not a checkpoint or savepoint directory", p)
		}
		st, err := openStore(ctx, &s.cfg, location{scheme: "file", dir: parent}, false)
		if err != nil {
			return nil, "", false, err
		}
		return st, filepath.Base(dir), true, nil
	}
	if path.Base(key) == MetadataFile {
		key = parentKey(key)
	}
	if key == "" {
		return nil, "", false, fmt.Errorf("storage: %s: not a checkpoint or savepoint directory", p)
	}
	if loc == s.st.loc {
		return s.st, key, false, nil
	}
	st, err = openStore(ctx, &s.cfg, loc, false)
	if err != nil {
		return nil, "", false, err
	}
	return st, key, true, nil
}

// Skipped is a checkpoint Latest passed over, and why.
type Skipped struct {
	CheckpointID int64
	// Path is the checkpoint's directory.
	Path string
	// Err says why: it matches ErrIncomplete (no _metadata: never
	// completed, or still being written), ErrCorrupt or
	// ErrUnsupportedVersion.
	Err error
}

func (s Skipped) String() string {
	return fmt.Sprintf("checkpoint %d skipped: %v", s.CheckpointID, s.Err)
}

// LogValue lets a Skipped be logged with slog as a group.
func (s Skipped) LogValue() slog.Value {
	reason := "unknown"
	if s.Err != nil {
		reason = s.Err.Error()
	}
	return slog.GroupValue(
		slog.Int64("checkpoint_id", s.CheckpointID),
		slog.String("path", s.Path),
		slog.String("reason", reason),
	)
}

// skippable reports whether err condemns a checkpoint, rather than being a
// failure to reach storage that a retry may cure.
func skippable(err error) bool {
	return errors.Is(err, ErrIncomplete) || errors.Is(err, ErrCorrupt) || errors.Is(err, ErrUnsupportedVersion)
}

// checkpointIDs returns the ids of the job's checkpoint directories,
// ascending: those listed, and the one LatestFile names, listed or not.
// HighestID returns the highest id of a checkpoint directory of the job,
// complete or not (the job's latest-checkpoint file counts too), or 0 if
// there is none. A run that writes into the job's directory numbers its
// checkpoints above it, so it never writes into an existing one.
func (s *Storage) HighestID(ctx context.Context) (int64, error) {
	ids, err := s.checkpointIDs(ctx)
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	return ids[len(ids)-1], nil
}

func (s *Storage) checkpointIDs(ctx context.Context) ([]int64, error) {
	objs, err := s.st.list(ctx, s.jobKey, true)
	if err != nil {
		return nil, err
	}
	var ids []int64
	for _, o := range objs {
		if !o.IsDir {
			continue
		}
		name := strings.TrimSuffix(strings.TrimPrefix(o.Key, s.jobKey), "/")
		if id, ok := parseCheckpointDir(name); ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return s.withLatest(ctx, ids)
}

// Latest returns the newest completed checkpoint whose metadata verifies
// (as ReadMetadata says), and the newer checkpoints it passed over because
// they were incomplete, corrupt or of an unknown version, newest first, so
// the caller can log them. With no such checkpoint it returns
// ErrNoCheckpoint. An error reaching storage (as opposed to a checkpoint
// found damaged) stops the search and is returned: falling back past a
// checkpoint that may be fine would restore older state than necessary.
//
// Falling back past a corrupt checkpoint n to n-1 replays input that
// checkpoint n had covered; side effects committed on n's completion
// (transactional sinks) happen again.
func (s *Storage) Latest(ctx context.Context) (*checkpoint.Metadata, []Skipped, error) {
	ids, err := s.checkpointIDs(ctx)
	if err != nil {
		return nil, nil, err
	}
	var skipped []Skipped
	for i := len(ids) - 1; i >= 0; i-- {
		key := s.checkpointKey(ids[i])
		m, _, err := readSnapshot(ctx, s.st, key, s.cfg.verifyChecksums)
		if err == nil {
			return m, skipped, nil
		}
		if !skippable(err) {
			return nil, skipped, err
		}
		skipped = append(skipped, Skipped{CheckpointID: ids[i], Path: s.st.loc.display(key), Err: err})
	}
	return nil, skipped, ErrNoCheckpoint
}

// Status is what List found of a checkpoint.
type Status int

const (
	// Completed: its metadata and state verify; recovery may use it.
	Completed Status = iota
	// Incomplete: it has no _metadata.
	Incomplete
	// Invalid: its metadata or state failed verification, or could not
	// be read.
	Invalid
)

func (s Status) String() string {
	switch s {
	case Completed:
		return "COMPLETED"
	case Incomplete:
		return "INCOMPLETE"
	case Invalid:
		return "INVALID"
	}
	return "UNKNOWN"
}

// Info describes one checkpoint directory.
type Info struct {
	ID int64
	// Path is the checkpoint's directory, as a path or URL.
	Path   string
	Status Status
	// Err says why the checkpoint is not Completed.
	Err error
	// StateSize is the size of all state the metadata references,
	// inline or not (zero unless Completed).
	StateSize int64
	// StoredSize and Files are the bytes and the number of files in the
	// checkpoint's directory, _metadata included.
	StoredSize int64
	Files      int
	// TriggerTime and CompletionTime come from the metadata (zero unless
	// Completed).
	TriggerTime, CompletionTime time.Time
	// ModTime is the newest modification time of a file in the directory.
	ModTime time.Time
}

// List describes every checkpoint directory of the job, oldest first,
// leaving out directories that hold nothing.
func (s *Storage) List(ctx context.Context) ([]Info, error) {
	ids, err := s.checkpointIDs(ctx)
	if err != nil {
		return nil, err
	}
	infos := make([]Info, 0, len(ids))
	for _, id := range ids {
		key := s.checkpointKey(id)
		info := Info{ID: id, Path: s.st.loc.display(key)}
		objs, err := s.st.list(ctx, key+"/", false)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			info.Files++
			info.StoredSize += o.Size
			if o.ModTime.After(info.ModTime) {
				info.ModTime = o.ModTime
			}
		}
		m, _, err := readSnapshot(ctx, s.st, key, s.cfg.verifyChecksums)
		switch {
		case err == nil:
			info.StateSize = m.Size()
			info.TriggerTime = m.TriggerTime
			info.CompletionTime = m.CompletionTime
		case errors.Is(err, ErrIncomplete) && info.Files == 0:
			// Nothing in it: not a checkpoint. Object stores with
			// directories (SeaweedFS's filer) list a directory whose
			// last file was deleted until they clean it up, and
			// LatestFile may name a discarded checkpoint.
			continue
		case errors.Is(err, ErrIncomplete):
			info.Status, info.Err = Incomplete, err
		default:
			info.Status, info.Err = Invalid, err
		}
		infos = append(infos, info)
	}
	return infos, nil
}
