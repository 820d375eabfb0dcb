package storage

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// A listing that misses checkpoints (an object store whose listings lag
// its writes) cannot make Latest restore an older checkpoint, nor find
// none: _latest names the newest, and is read, not listed.
func TestLatestDoesNotDependOnListing(t *testing.T) {
	forBackends(t, func(t *testing.T, be *backend) {
		ctx := context.Background()
		s := be.open(t)
		for id := int64(1); id <= 3; id++ {
			writeCheckpoint(t, s, id, 30<<10)
		}
		// Every listing of the job directory comes back empty.
		faults := NewFaults(1, Fault{Op: OpList, Path: testJob, Action: Drop})
		stale := be.open(t, WithFaults(faults))
		if m, skipped := mustLatest(t, stale); m.CheckpointID != 3 || len(skipped) != 0 {
			t.Fatalf("with an empty listing, Latest = checkpoint %d (skipped %v), want 3", m.CheckpointID, skipped)
		}
		// The listing alone would have found nothing: _latest is what
		// found checkpoint 3.
		be.remove(t, LatestFile)
		if _, _, err := stale.Latest(ctx); !errors.Is(err, ErrNoCheckpoint) {
			t.Fatalf("without _latest and with an empty listing, Latest: %v, want ErrNoCheckpoint", err)
		}
	})
}

// _latest is a lower bound: a newer complete checkpoint the listing shows
// wins (the process stopped between writing its _metadata and _latest),
// and a checkpoint _latest names that is gone falls back as an
// incomplete one does.
func TestLatestFileIsALowerBound(t *testing.T) {
	forBackends(t, func(t *testing.T, be *backend) {
		ctx := context.Background()
		s := be.open(t)
		writeCheckpoint(t, s, 1, 30<<10)
		writeCheckpoint(t, s, 2, 30<<10)
		be.mutate(t, LatestFile, func([]byte) []byte { return []byte("1\n") })
		if m, _ := mustLatest(t, s); m.CheckpointID != 2 {
			t.Fatalf("Latest = %d, want 2, which the listing shows", m.CheckpointID)
		}

		be.mutate(t, LatestFile, func([]byte) []byte { return []byte("5\n") })
		m, skipped := mustLatest(t, s)
		if m.CheckpointID != 2 || len(skipped) != 1 || skipped[0].CheckpointID != 5 || !errors.Is(skipped[0].Err, ErrIncomplete) {
			t.Fatalf("with _latest naming a missing checkpoint 5: Latest = %d, skipped %v; want 2 after skipping 5 as incomplete", m.CheckpointID, skipped)
		}
		infos, err := s.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for _, in := range infos {
			ids = append(ids, in.ID)
		}
		if !slices.Equal(ids, []int64{1, 2}) {
			t.Fatalf("List ids = %v, want [1 2]: checkpoint 5 has neither files nor _metadata", ids)
		}

		// A _latest that is not a number is ignored.
		be.mutate(t, LatestFile, func([]byte) []byte { return []byte("x") })
		if m, _ := mustLatest(t, s); m.CheckpointID != 2 {
			t.Fatalf("Latest = %d, want 2", m.CheckpointID)
		}
	})
}

// _latest only moves forward, and failing to write it does not fail the
// checkpoint its _metadata completed, which Latest then finds by listing.
func TestLatestFileWrites(t *testing.T) {
	forBackends(t, func(t *testing.T, be *backend) {
		ctx := context.Background()
		faults := NewFaults(1)
		s := be.open(t, WithFaults(faults))
		writeCheckpoint(t, s, 2, 10)
		writeCheckpoint(t, s, 1, 10) // completes after 2
		b, err := be.raw.ReadAll(ctx, be.key(LatestFile))
		if err != nil || string(b) != "2\n" {
			t.Fatalf("_latest = %q (%v), want 2", b, err)
		}
		faults.Add(Fault{Op: OpWrite, Path: LatestFile, Times: 1})
		writeCheckpoint(t, s, 3, 10)
		if len(faults.Events()) != 1 {
			t.Fatalf("the fault on _latest struck %d times, want once", len(faults.Events()))
		}
		b, err = be.raw.ReadAll(ctx, be.key(LatestFile))
		if err != nil || string(b) != "2\n" {
			t.Fatalf("_latest = %q (%v), want 2, its write having failed", b, err)
		}
		if m, _ := mustLatest(t, s); m.CheckpointID != 3 {
			t.Fatalf("Latest = %d, want 3", m.CheckpointID)
		}
	})
}
