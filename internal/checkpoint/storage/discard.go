package storage

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// deleteParallelism bounds the deletes in flight while discarding.
const deleteParallelism = 8

// Discard deletes checkpoint id's directory, for retention. It deletes
// _metadata first, so a checkpoint whose deletion is interrupted is
// incomplete rather than complete with missing files; then every other
// file in the directory, including temporary files of abandoned writes.
// Files already gone are not an error, so Discard can be repeated after a
// partial failure, and discarding a checkpoint that does not exist
// succeeds. It never touches shared/, taskowned/ or savepoints.
func (s *Storage) Discard(ctx context.Context, id int64) error {
	if id < 0 {
		return fmt.Errorf("storage: negative checkpoint id %d", id)
	}
	key := s.checkpointKey(id)
	if err := s.st.remove(ctx, key+"/"+MetadataFile); err != nil {
		return err
	}
	if err := s.removeAll(ctx, key+"/"); err != nil {
		return err
	}
	s.st.removeEmptyDir(key)
	return nil
}

// DiscardAll deletes every checkpoint of the job and its shared state, for
// DELETE_ON_CANCELLATION. It leaves taskowned/ (the tasks' own state) and
// anything else in the job directory alone, and never touches savepoints.
// Like Discard it is tolerant of files already gone.
func (s *Storage) DiscardAll(ctx context.Context) error {
	ids, err := s.checkpointIDs(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range ids {
		if err := s.Discard(ctx, id); err != nil {
			errs = append(errs, err)
		}
	}
	shared := s.jobKey + SharedDir
	if err := s.removeAll(ctx, shared+"/"); err != nil {
		errs = append(errs, err)
	}
	s.st.removeEmptyDir(shared)
	s.st.removeEmptyDir(strings.TrimSuffix(s.jobKey, "/"))
	return errors.Join(errs...)
}

// removeAll deletes every object whose key starts with prefix, a few at a
// time, and returns every error.
func (s *Storage) removeAll(ctx context.Context, prefix string) error {
	return removeAll(ctx, s.st, prefix)
}

func removeAll(ctx context.Context, st *store, prefix string) error {
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
