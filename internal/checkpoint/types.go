// Package checkpoint holds what the checkpoint coordinator and the tasks
// exchange, the completed checkpoint's metadata, and (in subpackages) the
// coordinator state machine and the storage that persists checkpoints.
package checkpoint

import (
	"fmt"
	"strings"
	"time"

	"github.com/weirstream/weir/state"
)

// TaskID names one subtask of the execution graph: a vertex (a chain of
// operators, named by its head operator's uid) and a subtask index.
type TaskID struct {
	Vertex  string
	Subtask int
}

func (t TaskID) String() string { return fmt.Sprintf("%s[%d]", t.Vertex, t.Subtask) }

// Kind says what a snapshot is for.
type Kind int

const (
	// KindCheckpoint is a periodic checkpoint: used for recovery, owned and
	// retained (or discarded) by the system.
	KindCheckpoint Kind = iota
	// KindSavepoint is taken on request, always aligned, never discarded
	// by the system and never used for automatic recovery.
	KindSavepoint
)

func (k Kind) String() string {
	if k == KindSavepoint {
		return "SAVEPOINT"
	}
	return "CHECKPOINT"
}

// SavepointFormat says how a savepoint holds keyed state (Flink's
// SavepointFormatType).
type SavepointFormat uint8

const (
	// FormatCanonical is weir's backend-independent snapshot format: a
	// savepoint in it restores into either backend. The default.
	FormatCanonical SavepointFormat = iota
	// FormatNative is the backend's own: for the embedded LSM backend,
	// every file of each keyed subtask's store, written into the savepoint
	// (it names no file of a checkpoint), so that it is quick to take and
	// to restore into the same backend; it still restores into the other,
	// more slowly. The heap backend writes the canonical format for it.
	FormatNative
	// FormatDefault is the job's: its execution.savepoint.format.
	FormatDefault
)

// String returns CANONICAL, NATIVE, or "" for FormatDefault.
func (f SavepointFormat) String() string {
	switch f {
	case FormatNative:
		return "NATIVE"
	case FormatDefault:
		return ""
	}
	return "CANONICAL"
}

// ParseSavepointFormat parses CANONICAL or NATIVE, in any case; "" is
// FormatDefault.
func ParseSavepointFormat(s string) (SavepointFormat, error) {
	switch strings.ToUpper(s) {
	case "":
		return FormatDefault, nil
	case "CANONICAL":
		return FormatCanonical, nil
	case "NATIVE":
		return FormatNative, nil
	}
	return 0, fmt.Errorf("unknown savepoint format %q: want CANONICAL or NATIVE", s)
}

// MarshalText writes the kind as CHECKPOINT or SAVEPOINT.
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText reads CHECKPOINT or SAVEPOINT.
func (k *Kind) UnmarshalText(b []byte) error {
	switch string(b) {
	case "CHECKPOINT":
		*k = KindCheckpoint
	case "SAVEPOINT":
		*k = KindSavepoint
	default:
		return fmt.Errorf("checkpoint: unknown kind %q (want CHECKPOINT or SAVEPOINT)", b)
	}
	return nil
}

// KeyGroupRange is an inclusive range of key groups [Start, End]: state's,
// the one type for the concept.
type KeyGroupRange = state.KeyGroupRange

// StateHandle points at one piece of persisted state: a file in
// checkpoint storage or, when small, the bytes themselves.
type StateHandle struct {
	// Path is the file's key relative to the job's checkpoint directory
	// (e.g. "chk-7/tenant-cost-2-keyed"); empty when Inline is used.
	Path string `json:"path,omitempty"`
	// Inline holds the state itself when it is smaller than the inline
	// threshold.
	Inline []byte `json:"inline,omitempty"`
	// Size is the state's size in bytes.
	Size int64 `json:"size"`
	// CRC32C is the Castagnoli checksum of the bytes, verified on restore.
	CRC32C uint32 `json:"crc32c"`
	// KeyGroups is the range of key groups a keyed state handle covers; nil
	// for operator state.
	KeyGroups *KeyGroupRange `json:"key_groups,omitempty"`
	// File, on a keyed state handle, names the file of an embedded
	// store's own snapshot that the handle holds; such handles follow the
	// handle of the snapshot's blob (File "") in a subtask's keyed state.
	// A file that a later checkpoint still names is not written again:
	// its handle's Path is in the earlier checkpoint's directory.
	File string `json:"file,omitempty"`
}

// SubtaskState is one operator's state in one subtask.
type SubtaskState struct {
	Keyed    []StateHandle `json:"keyed,omitempty"`
	Operator []StateHandle `json:"operator,omitempty"`
	// Watermark is the operator's event time when the snapshot was taken,
	// for operators of subtasks with inputs (a source's splits record
	// their own). Nil in checkpoints written before it was recorded.
	Watermark *int64 `json:"watermark,omitempty"`
	// InputWatermarks are the watermarks of the subtask's input channels,
	// in the order the subtask indexes them, on the first operator of its
	// chain only.
	InputWatermarks []int64 `json:"input_watermarks,omitempty"`
	// TimersPending says the snapshot was taken in the middle of firing
	// the event-time timers up to Watermark (an unaligned barrier
	// interrupted the burst): those still registered at or before it
	// fire first when the subtask is restored.
	TimersPending bool `json:"timers_pending,omitempty"`
	// InputChannels is the channel state of an unaligned checkpoint, on
	// the first operator of a chain: the records and watermarks that were
	// in flight on the subtask's input channels, replayed into them before
	// any new input on restore.
	InputChannels []StateHandle `json:"input_channels,omitempty"`
}

// Empty reports whether s holds nothing: the subtask did not acknowledge.
func (s SubtaskState) Empty() bool {
	return len(s.Keyed) == 0 && len(s.Operator) == 0 && s.Watermark == nil && len(s.InputWatermarks) == 0 && len(s.InputChannels) == 0
}

// Size is the total size of the handles.
func (s SubtaskState) Size() int64 {
	var n int64
	for _, h := range s.Keyed {
		n += h.Size
	}
	for _, h := range s.Operator {
		n += h.Size
	}
	for _, h := range s.InputChannels {
		n += h.Size
	}
	return n
}

// SubtaskStats are a subtask's measurements for one checkpoint, reported
// with its acknowledgement (Flink's per-subtask checkpoint statistics).
type SubtaskStats struct {
	// SyncDuration is how long the task was blocked taking the snapshot.
	SyncDuration time.Duration
	// AsyncDuration is how long writing the snapshot took after that.
	AsyncDuration time.Duration
	// AlignmentDuration is the time from the first to the last barrier.
	AlignmentDuration time.Duration
	// StartDelay is the time from the checkpoint's trigger to the first
	// barrier reaching the subtask.
	StartDelay time.Duration
	// ProcessedBytes is the data processed during alignment (Flink's
	// processed_data): the records the subtask processed between its
	// first barrier of the checkpoint and its snapshot, at their size as
	// their channel's codec encodes them (records of edges without a
	// codec count nothing). 0 for sources, for one input, and for a
	// snapshot taken unaligned at the first barrier.
	ProcessedBytes int64
	// PersistedBytes is in-flight data persisted (unaligned checkpoints).
	PersistedBytes int64
	// Unaligned is true when the subtask took the snapshot unaligned.
	Unaligned bool
}

// TaskAck is a subtask's acknowledgement of a checkpoint: the state of
// each operator of its chain, by operator uid, and its statistics.
type TaskAck struct {
	States map[string]SubtaskState
	Stats  SubtaskStats
}

// OperatorState is one operator's state across its subtasks.
type OperatorState struct {
	UID            string         `json:"uid"`
	Parallelism    int            `json:"parallelism"`
	MaxParallelism int            `json:"max_parallelism"`
	Subtasks       []SubtaskState `json:"subtasks"`
	// SplitAssignment is a source's split enumerator state (Flink's
	// SplitEnumerator checkpoint, kept by the job master): the splits
	// the job had discovered when the checkpoint was triggered, in the
	// order it discovered them, each with the subtask that reads it.
	// Empty for other operators, and in checkpoints written before it
	// was recorded.
	SplitAssignment []AssignedSplit `json:"split_assignment,omitempty"`
}

// AssignedSplit is a split and the source subtask it is assigned to.
type AssignedSplit struct {
	Split   string `json:"split"`
	Subtask int    `json:"subtask"`
}

// Metadata describes a completed checkpoint: what the _metadata file
// holds. It points at state; it does not contain records.
type Metadata struct {
	Version        int             `json:"version"`
	JobID          string          `json:"job_id"`
	CheckpointID   int64           `json:"checkpoint_id"`
	Kind           Kind            `json:"kind"`
	TriggerTime    time.Time       `json:"trigger_time"`
	CompletionTime time.Time       `json:"completion_time"`
	Operators      []OperatorState `json:"operators"`
}

// MetadataVersion is the version of the Metadata layout written today.
const MetadataVersion = 1

// Operator returns the state of the operator with the given uid.
func (m *Metadata) Operator(uid string) (*OperatorState, bool) {
	for i := range m.Operators {
		if m.Operators[i].UID == uid {
			return &m.Operators[i], true
		}
	}
	return nil, false
}

// Size is the total size of all state the checkpoint references.
func (m *Metadata) Size() int64 {
	var n int64
	for _, op := range m.Operators {
		for _, s := range op.Subtasks {
			n += s.Size()
		}
	}
	return n
}
