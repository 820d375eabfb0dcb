// Package connector defines the contracts between weir and the systems it
// reads from and writes to. A connector is a Source, a Sink, or both: the
// engine drives them, keeps their positions and transactions in checkpoint
// state, and calls them back when a checkpoint completes. Implementations
// live in the subpackages (datagen, file, kafka) and in users' code.
package connector

import (
	"context"
	"errors"
	"time"
)

// Source describes an input made of splits (Kafka partitions, files,
// generator partitions). Each split is read by exactly one source subtask;
// its position is a 64-bit offset that the engine records in every
// checkpoint and hands back on restore, together with the split's reader
// state if the reader keeps one (SplitStateReader).
type Source[T any] interface {
	// Splits lists the source's splits. The job lists them when it
	// starts, on the job manager, and assigns split i of the returned
	// slice to subtask i mod parallelism; a source that implements
	// SplitDiscoverer is listed again while the job runs, and the splits
	// a listing adds are assigned to the subtasks with the fewest. A
	// split keeps its subtask while the job runs; only a job started
	// from a checkpoint at another parallelism assigns them anew.
	Splits(ctx context.Context) ([]string, error)
	// NewReader opens a reader for the given splits, each starting at its
	// offset (or, with StartDefault, where the source's configuration says:
	// earliest, latest, committed...).
	NewReader(ctx context.Context, info ReaderInfo, splits []SplitStart) (Reader[T], error)
	// Bounded reports whether the source ends (every split reaches an end);
	// an unbounded source reads until the job is cancelled.
	Bounded() bool
}

// ReaderInfo tells a reader where it runs.
type ReaderInfo struct {
	Subtask     int
	Parallelism int
	JobID       string
}

// StartDefault as a SplitStart offset means "no checkpointed position".
//
// A reader that resolves StartDefault to a position that moves (the end of
// a partition, a consumer group's committed offset) records the position
// it resolved in the split's state (SplitStateReader), and starts there
// when that state comes back: a checkpoint taken before the split's first
// record was read must restore to the same position, or the records read
// after it and rolled back would not be read again.
const StartDefault int64 = -1

// SplitStart is a split, the offset of the first record to read, and the
// reader state checkpointed with that offset.
type SplitStart struct {
	Split  string
	Offset int64
	// State is the split's reader state (see SplitStateReader) recorded
	// in the checkpoint the reader restores from, with Offset. It is nil
	// on a fresh start, and for readers that keep no split state.
	State []byte
	// Late is set on a split the source's first listing did not have (a
	// partition added to a topic after the job started): with Offset
	// StartDefault and no State, the reader starts it at its beginning,
	// whatever the source's configured starting position, since every
	// record in it was written after the job chose where to start.
	Late bool
}

// Reader reads records from its splits. Fetch is called from one goroutine
// (the subtask's fetcher); Close may be called from another once Fetch has
// returned.
type Reader[T any] interface {
	// Fetch blocks until records are available, and returns them from one
	// split. It returns ErrEndOfInput once every split of a bounded source
	// is exhausted, and ctx's error when ctx is done.
	Fetch(ctx context.Context) (Fetch[T], error)
	Close() error
}

// Fetch is a batch of records from one split.
type Fetch[T any] struct {
	Split   string
	Records []T
	// Timestamps holds each record's timestamp (e.g. Kafka's record
	// timestamp) in Unix milliseconds, or is nil when the source has none;
	// the job's timestamp assigner may use it.
	Timestamps []int64
	// Next is the split's offset after the last record: where a restore
	// resumes if the checkpoint is taken right after this fetch.
	Next int64
	// EndOfSplit reports that the split has no more records.
	EndOfSplit bool
	// State, if not nil, replaces the split's reader state (see
	// SplitStateReader) from Next on: a checkpoint taken after this fetch
	// records it with Next.
	State []byte
	// Recycle, if not nil, is called on the subtask's goroutine once the
	// engine has emitted every record of the fetch. Records are passed on
	// by value, so from then on nothing refers to the Records slice
	// itself, and the reader may fill it again for a later fetch (what
	// the records point to is not the reader's to reuse). A fetch the
	// engine drops unemitted (its reader is replaced, the job fails) is
	// never recycled.
	Recycle func()
}

// Permanent marks err as a failure that restarting cannot cure (a
// checkpointed position past the end of its input, an output that belongs
// to another job): the job fails at once instead of restarting. It returns
// nil for a nil err.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

// IsPermanent reports whether err, or an error it wraps, was marked by
// Permanent.
func IsPermanent(err error) bool {
	var p interface{ Permanent() bool }
	return errors.As(err, &p) && p.Permanent()
}

type permanentError struct{ err error }

func (e permanentError) Error() string   { return e.err.Error() }
func (e permanentError) Unwrap() error   { return e.err }
func (e permanentError) Permanent() bool { return true }

// ErrEndOfInput is returned by Reader.Fetch when a bounded source has
// nothing more to read.
var ErrEndOfInput = errors.New("connector: end of input")

// SplitStateReader is implemented by readers that keep state per split
// which a restore must get back with the split's offset because it
// cannot be derived again: a bounded Kafka reader's end offsets, fixed
// when the job first listed its partitions. The state is opaque to the
// engine.
//
// SplitStates is called once, on the goroutine that called NewReader,
// after NewReader returns and before the first Fetch. It returns the
// state of each of the reader's splits that has one (the state a split
// was opened with, from SplitStart.State, or new). The engine records
// each split's state in every checkpoint with the split's offset, and
// hands it back in SplitStart.State when a reader is opened from that
// checkpoint, in this process or another. A Fetch whose State is not nil
// replaces its split's state; a split whose reader does not report one
// keeps the state it was opened with.
type SplitStateReader interface {
	SplitStates() map[string][]byte
}

// SplitDiscoverer is implemented by sources whose splits can grow while a
// job runs (partitions added to a Kafka topic): the job lists the splits
// again every SplitDiscoveryInterval (0: never), and hands the new ones
// to running subtasks, which read them from StartDefault, as late splits
// (SplitStart.Late). A split
// discovered after checkpoint n and read by a subtask that then restores
// from n is read again from StartDefault, by the same subtask, once.
type SplitDiscoverer interface {
	SplitDiscoveryInterval() time.Duration
}

// SplitAdder is implemented by readers that take more splits while they
// read (Flink's SourceReader.addSplits): splits the job discovered after
// the reader opened. AddSplits is called on the subtask's goroutine while
// Fetch may be running on the fetcher's; the reader must allow that. If
// the reader is a SplitStateReader, SplitStates is called again after
// AddSplits returns, for the added splits' states.
//
// A reader that does not implement it is closed and opened again with
// all its splits at their current offsets, which is exact only if a split
// still at StartDefault starts at the same offset whenever it is opened.
type SplitAdder interface {
	AddSplits(ctx context.Context, splits []SplitStart) error
}

// SplitPauser is implemented by readers that can stop reading some of
// their splits for a while and read them again later: a source whose
// watermarks are aligned (stream.WatermarkStrategy.WithWatermarkAlignment)
// pauses the splits whose watermark is ahead of their group's, so that
// the reader goes on with the others. PauseOrResumeSplits is called
// between fetches, on the goroutine that calls Fetch; a split named in
// neither list keeps its state, and a split the reader does not hold (it
// ended) is ignored. While every split the reader has left is paused,
// Fetch returns ErrSplitsPaused at once, and is called again once a split
// is resumed.
//
// A reader that does not implement it is paused as a whole, while the
// source's watermark (the lowest of its splits') is ahead.
type SplitPauser interface {
	PauseOrResumeSplits(pause, resume []string) error
}

// ErrSplitsPaused is what a SplitPauser's Fetch returns while every
// split it has left to read is paused, or when WakeUp (FetchWaker) cut it
// short.
var ErrSplitsPaused = errors.New("connector: every split left to read is paused")

// FetchWaker is implemented by SplitPausers whose Fetch can block waiting
// for records of the splits not paused (a Kafka reader whose other
// partitions have nothing new): WakeUp, called from any goroutine while
// Fetch may be running, makes a blocked Fetch, or the next one, return
// soon (ErrSplitsPaused if it has no records), so that pauses and resumes
// reach the reader without waiting for records (Flink's
// SplitReader.wakeUp).
type FetchWaker interface {
	WakeUp()
}

// CheckpointListener is implemented by readers and sink writers that act
// when a checkpoint completes (the Kafka source commits offsets for
// monitoring; a transactional sink commits).
type CheckpointListener interface {
	NotifyCheckpointComplete(ctx context.Context, checkpointID int64) error
}

// OffsetCommitter is implemented by readers that publish the positions of
// a completed checkpoint (never read back for fault tolerance).
type OffsetCommitter interface {
	CommitOffsets(ctx context.Context, checkpointID int64, offsets map[string]int64) error
}

// Sink describes an output.
type Sink[T any] interface {
	NewWriter(ctx context.Context, info WriterInfo) (SinkWriter[T], error)
}

// WriterInfo tells a sink writer where it runs.
type WriterInfo struct {
	Subtask     int
	Parallelism int
	JobID       string
	// UID is the sink operator's uid, stable across restarts: a prefix for
	// transactional ids.
	UID string
	// ExactlyOnce is true when the job checkpoints in EXACTLY_ONCE mode.
	ExactlyOnce bool
	// RestoredCheckpointID is the checkpoint the job was restored from (0:
	// none). Everything a transactional writer committed for a later
	// checkpoint was abandoned by the restore and is about to be written
	// again.
	RestoredCheckpointID int64
}

// Reconciler is implemented by transactional sinks that undo, when a
// writer is restored from checkpoint K (WriterInfo.RestoredCheckpointID),
// what transactions of checkpoints after K committed: a file sink removes
// their files. A job may then resume from an older checkpoint than its
// newest without duplicating output. A sink that cannot (a Kafka
// transaction, once committed, is read by consumers) does not implement it,
// and such a resume is refused unless duplicates are accepted
// (execution.state-recovery.allow-duplicate-output).
type Reconciler interface {
	ReconcilesOnRestore() bool
}

// Located is implemented by sinks whose output lives somewhere a resumed
// job must keep writing to: a directory, a bucket prefix, a topic. The
// engine records the location in every checkpoint, and a job restored from
// a checkpoint of a sink written elsewhere fails instead of splitting the
// output over two places (and losing the transactions the checkpoint
// holds).
type Located interface {
	Location() string
}

// SinkWriter writes records. All calls come from the subtask's goroutine.
type SinkWriter[T any] interface {
	Write(v T, ts int64) error
	// PrepareCommit is called at every checkpoint barrier, before the
	// snapshot: everything written so far must be flushed (at-least-once)
	// or staged in a transaction that will be committed later
	// (exactly-once). It returns the committables of checkpoint id — what
	// Commit needs to make the staged records visible — which the engine
	// stores in the checkpoint. A non-transactional writer returns nil.
	PrepareCommit(ctx context.Context, checkpointID int64) ([][]byte, error)
	// Close releases the writer; staged, uncommitted work is abandoned.
	Close() error
}

// Committer is implemented by transactional sink writers. Commit makes
// the committables' records visible. It is called after the checkpoint
// that holds them completes, and again after a restore for the
// committables of the restored checkpoint, so it must be idempotent:
// committing twice is a no-op.
type Committer interface {
	Commit(ctx context.Context, committables [][]byte) error
}
