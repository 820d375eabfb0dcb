package storage

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/weirstream/weir/internal/checkpoint"
)

// deleteParallelism bounds the deletes in flight while discarding.
const deleteParallelism = 8

// Discard deletes checkpoints ids, for retention, except the state files
// that another completed checkpoint names. A checkpoint deletes its
// directory, chk-<n>/, and the files it wrote in shared/; of the files it
// names that earlier checkpoints wrote, it deletes those no other
// completed checkpoint names: a file in shared/ goes with the last
// completed checkpoint that names it. (A checkpoint written before
// shared/ was used names files in earlier checkpoints' directories: the
// same goes for them, and a directory holding a file a completed
// checkpoint names stays, with that file.) The references are read from
// the _metadata of the job's other checkpoints, not kept in memory, so
// they hold across restarts of the process and for checkpoints another
// run wrote; they are read once for all of ids, so discarding a backlog
// of checkpoints costs one pass over the others.
//
// The files a checkpoint wrote in shared/ are found by their names
// (newSharedPath), so those of a checkpoint that never completed, and
// names none, go too. A pending checkpoint may name files that ids wrote
// or named: a caller discards a checkpoint only once no pending one
// builds on it.
//
// It deletes a checkpoint's _metadata first, so a checkpoint whose
// deletion is interrupted is incomplete rather than complete with missing
// files; then every other file in its directory, including temporary
// files of abandoned writes. Files already gone are not an error, so
// Discard can be repeated after a partial failure, and discarding a
// checkpoint that does not exist succeeds. When the other checkpoints'
// references cannot be read it deletes nothing and returns the error. It
// never touches taskowned/ or savepoints.
func (s *Storage) Discard(ctx context.Context, ids ...int64) error {
	except := make(map[int64]bool, len(ids))
	for _, id := range ids {
		if id < 0 {
			return fmt.Errorf("storage: negative checkpoint id %d", id)
		}
		except[id] = true
	}
	if len(ids) == 0 {
		return nil
	}
	owns := make([]map[string]bool, len(ids))
	for i, id := range ids {
		own, err := s.references(ctx, id)
		if err != nil {
			return err
		}
		owns[i] = own
	}
	live, err := s.liveReferences(ctx, except)
	if err != nil {
		return err
	}
	var errs []error
	for i, id := range ids {
		if err := s.discardOne(ctx, id, owns[i], live); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// DiscardIncomplete deletes the checkpoints of the job that have no
// _metadata: aborted ones whose state some subtask wrote after the abort's
// discard, or that the job ended during, with the files they wrote in
// shared/, and, in a local directory, the empty chk-<n> directories that
// writes abandoned before their file was in place leave. Call it when nothing writes into the job's checkpoints any
// more (the job has ended): a checkpoint being written is incomplete too.
// Files a completed checkpoint names are kept, and so is a checkpoint
// whose _metadata is there but corrupt.
func (s *Storage) DiscardIncomplete(ctx context.Context) error {
	ids, err := s.checkpointIDs(ctx)
	if err != nil {
		return err
	}
	// A checkpoint may have written files in shared/ only.
	shared, err := s.sharedWriters(ctx)
	if err != nil {
		return err
	}
	for id := range shared {
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	var incomplete []int64
	for _, id := range ids {
		// A corrupt _metadata is kept, for a person to look at.
		_, err := s.st.stat(ctx, s.checkpointKey(id)+"/"+MetadataFile)
		switch {
		case isNotExist(err):
			incomplete = append(incomplete, id)
		case err != nil:
			return err
		}
	}
	if err := s.Discard(ctx, incomplete...); err != nil {
		return err
	}
	s.st.removeEmptyDirs(strings.TrimSuffix(s.jobKey, "/"), isCheckpointDir)
	return nil
}

// isCheckpointDir reports whether name is a checkpoint's directory's.
func isCheckpointDir(name string) bool {
	_, ok := parseCheckpointDir(name)
	return ok
}

// sharedWriters returns the checkpoints that wrote the files in shared/.
func (s *Storage) sharedWriters(ctx context.Context) (map[int64]bool, error) {
	objs, err := s.st.list(ctx, s.jobKey+SharedDir+"/", false)
	if err != nil {
		return nil, err
	}
	ids := map[int64]bool{}
	for _, o := range objs {
		if id, _, ok := parseSharedPath(strings.TrimPrefix(o.Key, s.jobKey)); ok {
			ids[id] = true
		}
	}
	return ids, nil
}

// discardOne deletes checkpoint id, whose metadata named own, keeping the
// files in live.
func (s *Storage) discardOne(ctx context.Context, id int64, own, live map[string]bool) error {
	key := s.checkpointKey(id)
	if err := s.st.remove(ctx, key+"/"+MetadataFile); err != nil {
		return err
	}
	if err := s.removeAllExcept(ctx, key+"/", live); err != nil {
		return err
	}
	// The files id wrote in shared/ (temporary files of abandoned writes
	// included), but those later checkpoints name.
	if err := s.removeAllExcept(ctx, s.jobKey+sharedPrefix(id), live); err != nil {
		return err
	}
	// Files that earlier checkpoints wrote and id was the last to name.
	// A file a complete checkpoint names is in live.
	var errs []error
	dirs := map[string]bool{}
	for k := range own {
		if live[k] {
			continue
		}
		if err := s.st.remove(ctx, k); err != nil {
			errs = append(errs, err)
			continue
		}
		dirs[parentKey(k)] = true
	}
	// Emptied checkpoint directories of the layout before shared/; never
	// shared/ itself, where other checkpoints' files are being written.
	delete(dirs, s.jobKey+SharedDir)
	for d := range dirs {
		s.st.removeEmptyDir(d)
	}
	s.st.removeEmptyDir(key)
	return errors.Join(errs...)
}

// references returns the keys of the state files that checkpoint id's
// metadata names and that it may not have written itself: in shared/, or
// in other checkpoints' directories. A checkpoint without readable
// metadata (never completed, already being discarded, or corrupt) names
// none.
func (s *Storage) references(ctx context.Context, id int64) (map[string]bool, error) {
	m, err := s.readMetadata(ctx, id)
	if err != nil || m == nil {
		return nil, err
	}
	own := map[string]bool{}
	_ = eachHandle(m, func(_ string, h checkpoint.StateHandle) error {
		if h.Path == "" || !validHandlePath(h.Path) || strings.HasPrefix(h.Path, checkpointDir(id)+"/") {
			return nil
		}
		if strings.HasPrefix(h.Path, checkpointDirPrefix) || strings.HasPrefix(h.Path, SharedDir+"/") {
			own[s.jobKey+h.Path] = true
		}
		return nil
	})
	return own, nil
}

// liveReferences returns the keys of every state file that a completed
// checkpoint of the job not in except names.
func (s *Storage) liveReferences(ctx context.Context, except map[int64]bool) (map[string]bool, error) {
	ids, err := s.checkpointIDs(ctx)
	if err != nil {
		return nil, err
	}
	live := map[string]bool{}
	for _, id := range ids {
		if except[id] {
			continue
		}
		m, err := s.readMetadata(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("storage: discarding checkpoints: reading the references of checkpoint %d: %w", id, err)
		}
		if m == nil {
			continue
		}
		_ = eachHandle(m, func(_ string, h checkpoint.StateHandle) error {
			if h.Path != "" {
				live[s.jobKey+h.Path] = true
			}
			return nil
		})
	}
	return live, nil
}

// readMetadata reads checkpoint id's _metadata for the references it
// holds. It returns nil without an error when the checkpoint has none that
// counts: no _metadata, or one that is corrupt (recovery never uses it).
// A _metadata of a version this build cannot read is an error: its
// references are unknown.
func (s *Storage) readMetadata(ctx context.Context, id int64) (*checkpoint.Metadata, error) {
	metaKey := s.checkpointKey(id) + "/" + MetadataFile
	data, err := s.st.readAll(ctx, metaKey)
	if isNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	m, err := decodeMetadata(data, s.st.loc.display(metaKey))
	if errors.Is(err, ErrCorrupt) {
		return nil, nil
	}
	return m, err
}

// DiscardAll deletes every checkpoint of the job and its files in
// shared/, for DELETE_ON_CANCELLATION, and LatestFile, except the
// checkpoints keep names (one the job restored and does not own) and the
// files they name, in shared/ or in other checkpoints' directories. It
// leaves taskowned/ (the tasks' own state) and anything else in the job
// directory alone, and never touches savepoints. Like Discard it is
// tolerant of files already gone. When the metadata of a checkpoint to
// keep cannot be read it deletes nothing and returns the error.
func (s *Storage) DiscardAll(ctx context.Context, keep ...int64) error {
	ids, err := s.checkpointIDs(ctx)
	if err != nil {
		return err
	}
	ids = slices.DeleteFunc(ids, func(id int64) bool { return slices.Contains(keep, id) })
	kept := map[string]bool{}
	for _, id := range keep {
		m, err := s.readMetadata(ctx, id)
		if err != nil {
			return fmt.Errorf("storage: discarding checkpoints: reading the references of checkpoint %d, kept: %w", id, err)
		}
		if m == nil {
			continue
		}
		_ = eachHandle(m, func(_ string, h checkpoint.StateHandle) error {
			if h.Path != "" {
				kept[s.jobKey+h.Path] = true
			}
			return nil
		})
	}
	var errs []error
	// Every _metadata first, so that no checkpoint is complete while the
	// files it references are being deleted.
	for _, id := range ids {
		if err := s.st.remove(ctx, s.checkpointKey(id)+"/"+MetadataFile); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if err := s.st.remove(ctx, s.latestKey()); err != nil {
		return err
	}
	for _, id := range ids {
		key := s.checkpointKey(id)
		if err := s.removeAllExcept(ctx, key+"/", kept); err != nil {
			errs = append(errs, err)
			continue
		}
		s.st.removeEmptyDir(key)
	}
	shared := s.jobKey + SharedDir
	if err := s.removeAllExcept(ctx, shared+"/", kept); err != nil {
		errs = append(errs, err)
	}
	if len(keep) > 0 {
		return errors.Join(errs...)
	}
	s.st.removeEmptyDir(shared)
	s.st.removeEmptyDirs(strings.TrimSuffix(s.jobKey, "/"), isCheckpointDir)
	s.st.removeEmptyDir(strings.TrimSuffix(s.jobKey, "/"))
	return errors.Join(errs...)
}

// removeAllExcept is removeAll but keeps the keys in keep.
func (s *Storage) removeAllExcept(ctx context.Context, prefix string, keep map[string]bool) error {
	return removeMatching(ctx, s.st, prefix, func(key string) bool { return !keep[key] })
}

// removeAll deletes every object whose key starts with prefix, a few at a
// time, and returns every error.
func removeAll(ctx context.Context, st *store, prefix string) error {
	return removeMatching(ctx, st, prefix, func(string) bool { return true })
}

// removeMatching deletes the objects under prefix whose keys del accepts.
func removeMatching(ctx context.Context, st *store, prefix string, del func(key string) bool) error {
	objs, err := st.list(ctx, prefix, false)
	if err != nil {
		return err
	}
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
		sem  = make(chan struct{}, deleteParallelism)
	)
	for _, o := range objs {
		if !del(o.Key) {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := st.remove(ctx, o.Key); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
