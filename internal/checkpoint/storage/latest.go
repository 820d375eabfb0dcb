package storage

import (
	"context"
	"slices"
	"strconv"
	"strings"
)

// LatestFile is the name of the file in a job's checkpoint directory
// that holds the id of the job's newest completed checkpoint, in decimal.
// WriteMetadata rewrites it after each _metadata it writes.
//
// Recovery finds checkpoints by listing the job directory, and a listing
// is the one thing an object store may serve stale: S3 has listed what
// was written since December 2020, but other S3-compatible stores and
// caching layers need not. Reading an object back after writing it is
// consistent everywhere, so _latest is read, not listed: a checkpoint it
// names is a candidate whether or not the listing shows it, and a
// listing that misses the newest checkpoint cannot make Latest restore an
// older one, nor Discard delete files the newest one references. It is
// only ever a lower bound: a newer checkpoint the listing shows counts
// too (the process may have stopped between the two writes), and
// _metadata remains what makes a checkpoint complete.
const LatestFile = "_latest"

func (s *Storage) latestKey() string { return s.jobKey + LatestFile }

// writeLatest records checkpoint id as the newest completed one, unless
// this storage already recorded a newer one.
func (s *Storage) writeLatest(ctx context.Context, id int64) error {
	s.latestMu.Lock()
	defer s.latestMu.Unlock()
	if id < s.latestWritten {
		return nil
	}
	key := s.latestKey()
	w, err := s.st.newWriter(ctx, key, "text/plain; charset=utf-8")
	if err != nil {
		return err
	}
	if _, err := w.Write([]byte(strconv.FormatInt(id, 10) + "\n")); err != nil {
		w.Abort()
		return s.st.opError("write", key, err)
	}
	if err := w.Close(); err != nil {
		return s.st.opError("write", key, err)
	}
	s.latestWritten = id
	return nil
}

// readLatest returns the id _latest holds. A missing or unreadable
// _latest (not a number) is no id: the listing alone then decides. An
// error reaching storage is returned.
func (s *Storage) readLatest(ctx context.Context) (int64, bool, error) {
	data, err := s.st.readAll(ctx, s.latestKey())
	if isNotExist(err) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	id, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil || id < 0 {
		return 0, false, nil
	}
	return id, true, nil
}

// withLatest adds the id _latest holds to ids (ascending) if the listing
// missed it.
func (s *Storage) withLatest(ctx context.Context, ids []int64) ([]int64, error) {
	id, ok, err := s.readLatest(ctx)
	if err != nil || !ok {
		return ids, err
	}
	if i, found := slices.BinarySearch(ids, id); !found {
		ids = slices.Insert(ids, i, id)
	}
	return ids, nil
}
