package storage

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strings"
	"sync"

	"github.com/weirstream/weir/internal/checkpoint"
)

// Savepoint is a savepoint being written: a new directory
// savepoint-<job-id prefix>-<random> under the savepoint directory, with
// the same files as a checkpoint (state files and a _metadata written
// last) and state paths relative to itself, so it is self-contained and
// can be moved. Nothing in this package deletes a completed savepoint.
// Its methods are safe for concurrent use.
type Savepoint struct {
	cfg    config
	st     *store
	owned  bool
	dirKey string

	mu       sync.Mutex
	complete bool // _metadata was written
}

// CreateSavepoint starts a savepoint of the job in a new directory under
// dir (a local path or URL, like Open's; a local directory is created if
// missing). Write its state with CreateState, complete it with
// WriteMetadata, or give it up with Abort; then Close it.
func (s *Storage) CreateSavepoint(ctx context.Context, dir string) (*Savepoint, error) {
	loc, prefix, err := parseLocation(dir)
	if err != nil {
		return nil, err
	}
	var random [6]byte
	if _, err := rand.Read(random[:]); err != nil {
		return nil, fmt.Errorf("storage: savepoint name: %w", err)
	}
	jobPrefix := s.jobID
	if len(jobPrefix) > 6 {
		jobPrefix = jobPrefix[:6]
	}
	name := savepointDirPrefix + jobPrefix + "-" + hex.EncodeToString(random[:])
	return s.savepointAt(ctx, loc, joinKey(prefix, name))
}

// savepointAt returns the Savepoint in directory dirKey of loc, sharing
// this storage's bucket when loc is its own.
func (s *Storage) savepointAt(ctx context.Context, loc location, dirKey string) (*Savepoint, error) {
	sp := &Savepoint{cfg: s.cfg, dirKey: dirKey}
	if loc == s.st.loc {
		sp.st = s.st
		return sp, nil
	}
	st, err := openStore(ctx, &s.cfg, loc, true)
	if err != nil {
		return nil, err
	}
	sp.st, sp.owned = st, true
	return sp, nil
}

// OpenSavepoint opens the savepoint being written at p (a Savepoint's
// Path), for the writers of its state on other processes than the one
// that created it: CreateState works as on the creator's Savepoint;
// WriteMetadata and Abort belong to the creator. Close it after use.
func (s *Storage) OpenSavepoint(ctx context.Context, p string) (*Savepoint, error) {
	loc, key, err := parseLocation(p)
	if err != nil {
		return nil, err
	}
	if loc.scheme == "file" {
		// A local location is the directory itself: root the bucket at
		// its parent, as CreateSavepoint does.
		parent := filepath.Dir(loc.dir)
		if parent == loc.dir {
			return nil, fmt.Errorf("storage: %s: not a savepoint directory", p)
		}
		loc, key = location{scheme: "file", dir: parent}, filepath.Base(loc.dir)
	}
	if !strings.HasPrefix(path.Base(key), savepointDirPrefix) {
		return nil, fmt.Errorf("storage: %s: not a savepoint directory (its name starts with %q)", p, savepointDirPrefix)
	}
	return s.savepointAt(ctx, loc, key)
}

// Path returns the savepoint's directory, as a path or URL that Resolve
// accepts.
func (sp *Savepoint) Path() string { return sp.st.loc.display(sp.dirKey) }

// CreateState starts writing a piece of the savepoint's state; see
// Storage.CreateState. The handle's path is name.
func (sp *Savepoint) CreateState(ctx context.Context, name string) (*StateWriter, error) {
	if err := validName(name); err != nil {
		return nil, err
	}
	return newStateWriter(ctx, sp.st, sp.dirKey+"/"+name, name, sp.cfg.inlineThreshold), nil
}

// WriteMetadata completes the savepoint by writing its _metadata, and
// returns the file's path. m.Kind must be KindSavepoint; a zero m.Version
// is written as checkpoint.MetadataVersion.
func (sp *Savepoint) WriteMetadata(ctx context.Context, m *checkpoint.Metadata) (string, error) {
	if m == nil {
		return "", errors.New("storage: nil metadata")
	}
	if m.Kind != checkpoint.KindSavepoint {
		return "", fmt.Errorf("storage: Savepoint.WriteMetadata of a %s", m.Kind)
	}
	c := *m
	if c.Version == 0 {
		c.Version = checkpoint.MetadataVersion
	}
	p, err := writeMetadata(ctx, sp.st, sp.dirKey, &c)
	if err == nil {
		sp.mu.Lock()
		sp.complete = true
		sp.mu.Unlock()
	}
	return p, err
}

// Abort deletes what was written of a savepoint that was not completed.
// After WriteMetadata succeeded it does nothing: a savepoint, once
// complete, is the user's.
func (sp *Savepoint) Abort(ctx context.Context) error {
	sp.mu.Lock()
	complete := sp.complete
	sp.mu.Unlock()
	if complete {
		return nil
	}
	return sp.Discard(ctx)
}

// Discard deletes the savepoint, complete or not: for its writer when the
// savepoint failed after its _metadata was written (the checkpoint it is
// taken as was aborted meanwhile), so that nothing that was reported
// failed remains to be restored.
func (sp *Savepoint) Discard(ctx context.Context) error {
	if err := sp.st.remove(ctx, sp.dirKey+"/"+MetadataFile); err != nil {
		return err
	}
	if err := removeAll(ctx, sp.st, sp.dirKey+"/"); err != nil {
		return err
	}
	sp.st.removeEmptyDir(sp.dirKey)
	return nil
}

// Close releases the bucket the savepoint opened, if it opened one.
func (sp *Savepoint) Close() error {
	if sp.owned {
		return sp.st.close()
	}
	return nil
}
