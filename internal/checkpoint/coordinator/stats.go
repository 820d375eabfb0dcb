package coordinator

import (
	"slices"
	"time"

	"github.com/weirstream/weir/internal/checkpoint"
)

// The statistics follow Flink's REST API (GET /jobs/:jobid/checkpoints and
// the checkpoint and subtask detail endpoints): the JSON field names are
// Flink's, timestamps are milliseconds since the Unix epoch and durations
// are milliseconds. A value that is not known yet is -1, as in Flink.
// These are the only statistics types; what the REST API serves beyond
// their plain JSON encoding (which parts each endpoint shows, how a
// pending subtask is written) is shaped by package web.

// Status is the status of a checkpoint in the statistics.
type Status string

const (
	StatusInProgress Status = "IN_PROGRESS"
	StatusCompleted  Status = "COMPLETED"
	StatusFailed     Status = "FAILED"
)

// Checkpoint types as the REST API names them in checkpoint_type.
const (
	TypeCheckpoint          = "CHECKPOINT"
	TypeUnalignedCheckpoint = "UNALIGNED_CHECKPOINT"
	TypeSavepoint           = "SAVEPOINT"
)

// Snapshot is a copy of the coordinator's statistics. Marshalled as JSON it
// is the body of GET /jobs/:jobid/checkpoints, except that Flink serves the
// checkpoints there with empty tasks: the per-vertex statistics belong to
// GET /jobs/:jobid/checkpoints/details/:checkpointid (the TaskStats without
// Summary and Subtasks) and .../subtasks/:vertexid (a whole TaskStats).
type Snapshot struct {
	Counts  Counts            `json:"counts"`
	Summary Summary           `json:"summary"`
	Latest  Latest            `json:"latest"`
	History []CheckpointStats `json:"history"`
	// Config is the configuration the coordinator runs with; the REST
	// API shows it as GET /jobs/:jobid/checkpoints/config.
	Config Config `json:"-"`
}

// Counts counts checkpoints since the coordinator was created.
type Counts struct {
	Restored int64 `json:"restored"`
	// Total counts every triggered checkpoint: in progress, completed and
	// failed.
	Total      int64 `json:"total"`
	InProgress int   `json:"in_progress"`
	Completed  int64 `json:"completed"`
	Failed     int64 `json:"failed"`
}

// Summary summarizes the completed checkpoints and savepoints.
type Summary struct {
	CheckpointedSize StatsSummary `json:"checkpointed_size"`
	StateSize        StatsSummary `json:"state_size"`
	EndToEndDuration StatsSummary `json:"end_to_end_duration"`
	// AlignmentBuffered is always zero: Flink keeps the field for old
	// clients and reports in-flight data as ProcessedData and
	// PersistedData.
	AlignmentBuffered StatsSummary `json:"alignment_buffered"`
	ProcessedData     StatsSummary `json:"processed_data"`
	PersistedData     StatsSummary `json:"persisted_data"`
}

// Latest holds the most recent checkpoint of each outcome, kept even after
// it leaves the history.
type Latest struct {
	Completed *CheckpointStats `json:"completed"`
	Savepoint *CheckpointStats `json:"savepoint"`
	Failed    *CheckpointStats `json:"failed"`
	Restored  *RestoredStats   `json:"restored"`
}

// RestoredStats describes the checkpoint the job last restored from.
type RestoredStats struct {
	ID               int64 `json:"id"`
	RestoreTimestamp int64 `json:"restore_timestamp"`
	// IsSavepoint is false: a restored savepoint is taken over as a
	// checkpoint (Flink 2.x's CLAIM and NO_CLAIM modes).
	IsSavepoint  bool   `json:"is_savepoint"`
	ExternalPath string `json:"external_path"`
}

// CheckpointStats is one checkpoint: Flink's CheckpointStatistics, with
// its per-vertex details.
type CheckpointStats struct {
	// Class is Flink's @class tag: completed, failed or in_progress.
	Class              string `json:"@class"`
	ID                 int64  `json:"id"`
	Status             Status `json:"status"`
	IsSavepoint        bool   `json:"is_savepoint"`
	TriggerTimestamp   int64  `json:"trigger_timestamp"`
	LatestAckTimestamp int64  `json:"latest_ack_timestamp"`
	// CheckpointedSize is the data this checkpoint wrote: state handles
	// referenced by a retained checkpoint before (incremental state in
	// shared/) are left out.
	CheckpointedSize int64 `json:"checkpointed_size"`
	// StateSize is the full size of the state the checkpoint references.
	StateSize int64 `json:"state_size"`
	// EndToEndDuration runs from the trigger to the latest acknowledgement
	// (to the failure for a failed checkpoint).
	EndToEndDuration        int64  `json:"end_to_end_duration"`
	AlignmentBuffered       int64  `json:"alignment_buffered"`
	ProcessedData           int64  `json:"processed_data"`
	PersistedData           int64  `json:"persisted_data"`
	NumSubtasks             int    `json:"num_subtasks"`
	NumAcknowledgedSubtasks int    `json:"num_acknowledged_subtasks"`
	CheckpointType          string `json:"checkpoint_type"`
	// Tasks holds the statistics of each vertex, by vertex name.
	Tasks map[string]TaskStats `json:"tasks"`

	// Discarded is set on a completed checkpoint once it was discarded for
	// retention.
	Discarded bool `json:"discarded,omitempty"`
	// ExternalPath is left for the caller, who knows where the metadata
	// went.
	ExternalPath string `json:"external_path,omitempty"`

	FailureTimestamp int64  `json:"failure_timestamp,omitempty"`
	FailureMessage   string `json:"failure_message,omitempty"`
}

// TaskStats is one vertex's part of a checkpoint: Flink's
// TaskCheckpointStatisticsWithSubtaskDetails.
type TaskStats struct {
	ID                      int64          `json:"id"`
	Status                  Status         `json:"status"`
	LatestAckTimestamp      int64          `json:"latest_ack_timestamp"`
	CheckpointedSize        int64          `json:"checkpointed_size"`
	StateSize               int64          `json:"state_size"`
	EndToEndDuration        int64          `json:"end_to_end_duration"`
	AlignmentBuffered       int64          `json:"alignment_buffered"`
	ProcessedData           int64          `json:"processed_data"`
	PersistedData           int64          `json:"persisted_data"`
	NumSubtasks             int            `json:"num_subtasks"`
	NumAcknowledgedSubtasks int            `json:"num_acknowledged_subtasks"`
	Summary                 TaskSummary    `json:"summary"`
	Subtasks                []SubtaskStats `json:"subtasks"`
}

// TaskSummary summarizes a vertex's acknowledged subtasks.
type TaskSummary struct {
	CheckpointedSize   StatsSummary     `json:"checkpointed_size"`
	StateSize          StatsSummary     `json:"state_size"`
	EndToEndDuration   StatsSummary     `json:"end_to_end_duration"`
	CheckpointDuration DurationSummary  `json:"checkpoint_duration"`
	Alignment          AlignmentSummary `json:"alignment"`
	StartDelay         StatsSummary     `json:"start_delay"`
}

// DurationSummary summarizes the synchronous and asynchronous snapshot
// phases.
type DurationSummary struct {
	Sync  StatsSummary `json:"sync"`
	Async StatsSummary `json:"async"`
}

// AlignmentSummary summarizes alignment.
type AlignmentSummary struct {
	Buffered  StatsSummary `json:"buffered"`
	Processed StatsSummary `json:"processed"`
	Persisted StatsSummary `json:"persisted"`
	Duration  StatsSummary `json:"duration"`
}

// Subtask statuses. The REST API writes a pending subtask with its index
// and status only.
const (
	SubtaskCompleted = "completed"
	SubtaskPending   = "pending_or_failed"
)

// SubtaskStats is one subtask's part of a checkpoint. With the trigger
// timestamp it places the subtask on a time line: the first barrier came
// at trigger+StartDelay, the last at that plus Alignment.Duration, the
// synchronous snapshot took Checkpoint.Sync, and the acknowledgement
// arrived at AckTimestamp.
type SubtaskStats struct {
	Index  int    `json:"index"`
	Status string `json:"status"`
	// AckTimestamp is when the acknowledgement arrived; for a finished
	// subtask, the trigger time.
	AckTimestamp        int64            `json:"ack_timestamp"`
	EndToEndDuration    int64            `json:"end_to_end_duration"`
	StateSize           int64            `json:"state_size"`
	CheckpointedSize    int64            `json:"checkpointed_size"`
	Checkpoint          SubtaskDurations `json:"checkpoint"`
	Alignment           SubtaskAlignment `json:"alignment"`
	StartDelay          int64            `json:"start_delay"`
	UnalignedCheckpoint bool             `json:"unaligned_checkpoint"`
	// Aborted marks an acknowledgement that arrived after the checkpoint
	// had failed.
	Aborted bool `json:"aborted"`
	// Finished marks a subtask that had finished when the checkpoint was
	// triggered; it counts as acknowledged and contributes no state.
	Finished bool `json:"finished,omitempty"`
}

// SubtaskDurations are the snapshot phases of a subtask.
type SubtaskDurations struct {
	Sync  int64 `json:"sync"`
	Async int64 `json:"async"`
}

// SubtaskAlignment is a subtask's alignment. Buffered is always zero (see
// Summary.AlignmentBuffered).
type SubtaskAlignment struct {
	Buffered  int64 `json:"buffered"`
	Processed int64 `json:"processed"`
	Persisted int64 `json:"persisted"`
	Duration  int64 `json:"duration"`
}

// tracker keeps the statistics: counts, the summary over completed
// checkpoints, a bounded history (newest first) and the latest of each
// outcome.
type tracker struct {
	historySize int
	config      Config
	counts      Counts

	checkpointed, stateSize, duration, processed, persisted summarizer

	history                                  []*record
	latestCompleted, latestSavepoint, failed *record
	restored                                 *RestoredStats
}

// record holds one checkpoint's statistics while it is pending and after.
type record struct {
	id          int64
	kind        checkpoint.Kind
	status      Status
	trigger     time.Time
	failure     time.Time
	failureMsg  string
	discarded   bool
	vertices    []string // in the order of Tasks.All
	subtasks    map[string][]subtaskRecord
	numSubtasks int
}

type subtaskRecord struct {
	acked                       bool
	ack                         time.Time
	stats                       checkpoint.SubtaskStats
	stateSize, checkpointedSize int64
	finished, aborted           bool
}

func newTracker(cfg Config) *tracker {
	return &tracker{
		historySize:  cfg.HistorySize,
		config:       cfg,
		checkpointed: newSummarizer(summaryWindow),
		stateSize:    newSummarizer(summaryWindow),
		duration:     newSummarizer(summaryWindow),
		processed:    newSummarizer(summaryWindow),
		persisted:    newSummarizer(summaryWindow),
	}
}

// pending records a triggered checkpoint. Subtasks that had finished count
// as acknowledged at the trigger time, as in Flink.
func (t *tracker) pending(id int64, kind checkpoint.Kind, now time.Time, g *graph, finished []bool) *record {
	t.counts.Total++
	t.counts.InProgress++
	r := &record{
		id:          id,
		kind:        kind,
		status:      StatusInProgress,
		trigger:     now,
		subtasks:    map[string][]subtaskRecord{},
		numSubtasks: len(g.all),
	}
	for i, task := range g.all {
		subs, ok := r.subtasks[task.Vertex]
		if !ok {
			r.vertices = append(r.vertices, task.Vertex)
			subs = make([]subtaskRecord, g.parallelism[task.Vertex])
			r.subtasks[task.Vertex] = subs
		}
		if finished[i] {
			subs[task.Subtask] = subtaskRecord{acked: true, ack: now, finished: true}
		}
	}
	if t.historySize > 0 {
		t.history = slices.Insert(t.history, 0, r)
		if len(t.history) > t.historySize {
			t.history = t.history[:t.historySize]
		}
	}
	return r
}

func (r *record) ack(task checkpoint.TaskID, now time.Time, ack checkpoint.TaskAck, checkpointed int64, aborted bool) {
	var size int64
	for _, s := range ack.States {
		size += s.Size()
	}
	r.subtasks[task.Vertex][task.Subtask] = subtaskRecord{
		acked:            true,
		ack:              now,
		stats:            ack.Stats,
		stateSize:        size,
		checkpointedSize: checkpointed,
		aborted:          aborted,
	}
}

func (t *tracker) completed(r *record) {
	t.counts.InProgress--
	t.counts.Completed++
	r.status = StatusCompleted
	cs := r.export()
	t.checkpointed.add(cs.CheckpointedSize)
	t.stateSize.add(cs.StateSize)
	t.duration.add(cs.EndToEndDuration)
	t.processed.add(cs.ProcessedData)
	t.persisted.add(cs.PersistedData)
	if r.kind == checkpoint.KindSavepoint {
		t.latestSavepoint = r
	} else {
		t.latestCompleted = r
	}
}

func (t *tracker) failedAt(r *record, now time.Time, msg string) {
	t.counts.InProgress--
	t.counts.Failed++
	r.status = StatusFailed
	r.failure = now
	r.failureMsg = msg
	t.failed = r
}

// find returns the record of checkpoint id if it is still in the history.
func (t *tracker) find(id int64) *record {
	for _, r := range t.history {
		if r.id == id {
			return r
		}
	}
	if r := t.latestCompleted; r != nil && r.id == id {
		return r
	}
	return nil
}

func (t *tracker) discarded(id int64) {
	if r := t.find(id); r != nil {
		r.discarded = true
	}
}

// late records the measurements of an acknowledgement that arrived after
// its checkpoint failed, marked aborted (Flink's reportIncompleteStats).
func (t *tracker) late(id int64, task checkpoint.TaskID, now time.Time, ack checkpoint.TaskAck) {
	r := t.find(id)
	if r == nil || r.status != StatusFailed {
		return
	}
	subs, ok := r.subtasks[task.Vertex]
	if !ok || task.Subtask < 0 || task.Subtask >= len(subs) || subs[task.Subtask].acked {
		return
	}
	r.ack(task, now, ack, 0, true)
}

func (t *tracker) restore(id int64, now time.Time, external string) {
	t.counts.Restored++
	t.restored = &RestoredStats{ID: id, RestoreTimestamp: now.UnixMilli(), ExternalPath: external}
}

func (t *tracker) snapshot() Snapshot {
	s := Snapshot{
		Counts: t.counts,
		Summary: Summary{
			CheckpointedSize: t.checkpointed.summary(),
			StateSize:        t.stateSize.summary(),
			EndToEndDuration: t.duration.summary(),
			ProcessedData:    t.processed.summary(),
			PersistedData:    t.persisted.summary(),
		},
		History: make([]CheckpointStats, 0, len(t.history)),
		Config:  t.config,
	}
	for _, r := range t.history {
		s.History = append(s.History, r.export())
	}
	exp := func(r *record) *CheckpointStats {
		if r == nil {
			return nil
		}
		cs := r.export()
		return &cs
	}
	s.Latest.Completed = exp(t.latestCompleted)
	s.Latest.Savepoint = exp(t.latestSavepoint)
	s.Latest.Failed = exp(t.failed)
	if t.restored != nil {
		rs := *t.restored
		s.Latest.Restored = &rs
	}
	return s
}

func millis(t time.Time) int64 { return t.UnixMilli() }

// export converts a record to its REST form.
func (r *record) export() CheckpointStats {
	cs := CheckpointStats{
		ID:                 r.id,
		Status:             r.status,
		IsSavepoint:        r.kind == checkpoint.KindSavepoint,
		TriggerTimestamp:   millis(r.trigger),
		LatestAckTimestamp: -1,
		NumSubtasks:        r.numSubtasks,
		Tasks:              make(map[string]TaskStats, len(r.vertices)),
		Discarded:          r.discarded,
	}
	unaligned := false
	var latest time.Time
	for _, v := range r.vertices {
		ts := r.exportTask(v)
		cs.Tasks[v] = ts
		cs.CheckpointedSize += ts.CheckpointedSize
		cs.StateSize += ts.StateSize
		cs.ProcessedData += ts.ProcessedData
		cs.PersistedData += ts.PersistedData
		cs.NumAcknowledgedSubtasks += ts.NumAcknowledgedSubtasks
		for _, s := range r.subtasks[v] {
			if s.acked && !s.aborted {
				if s.ack.After(latest) {
					latest = s.ack
				}
				unaligned = unaligned || s.stats.Unaligned
			}
		}
	}
	if !latest.IsZero() {
		cs.LatestAckTimestamp = millis(latest)
	}
	switch r.status {
	case StatusCompleted:
		cs.Class = "completed"
		cs.EndToEndDuration = max(0, latest.Sub(r.trigger).Milliseconds())
	case StatusFailed:
		cs.Class = "failed"
		cs.EndToEndDuration = max(0, r.failure.Sub(r.trigger).Milliseconds())
		cs.FailureTimestamp = millis(r.failure)
		cs.FailureMessage = r.failureMsg
	default:
		cs.Class = "in_progress"
		cs.EndToEndDuration = -1
		if !latest.IsZero() {
			cs.EndToEndDuration = max(0, latest.Sub(r.trigger).Milliseconds())
		}
	}
	switch {
	case r.kind == checkpoint.KindSavepoint:
		cs.CheckpointType = TypeSavepoint
	case unaligned:
		cs.CheckpointType = TypeUnalignedCheckpoint
	default:
		cs.CheckpointType = TypeCheckpoint
	}
	return cs
}

func (r *record) exportTask(vertex string) TaskStats {
	subs := r.subtasks[vertex]
	ts := TaskStats{
		ID:                 r.id,
		Status:             r.status,
		LatestAckTimestamp: -1,
		EndToEndDuration:   -1,
		NumSubtasks:        len(subs),
		Subtasks:           make([]SubtaskStats, len(subs)),
	}
	var (
		latest                                                    time.Time
		checkpointed, size, e2e, syncs, asyncs, procs, pers, durs []int64
		delays                                                    []int64
	)
	for i, s := range subs {
		if !s.acked {
			ts.Subtasks[i] = SubtaskStats{Index: i, Status: SubtaskPending}
			continue
		}
		e := max(0, s.ack.Sub(r.trigger).Milliseconds())
		ts.Subtasks[i] = SubtaskStats{
			Index:            i,
			Status:           SubtaskCompleted,
			AckTimestamp:     millis(s.ack),
			EndToEndDuration: e,
			StateSize:        s.stateSize,
			CheckpointedSize: s.checkpointedSize,
			Checkpoint: SubtaskDurations{
				Sync:  s.stats.SyncDuration.Milliseconds(),
				Async: s.stats.AsyncDuration.Milliseconds(),
			},
			Alignment: SubtaskAlignment{
				Processed: s.stats.ProcessedBytes,
				Persisted: s.stats.PersistedBytes,
				Duration:  s.stats.AlignmentDuration.Milliseconds(),
			},
			StartDelay:          s.stats.StartDelay.Milliseconds(),
			UnalignedCheckpoint: s.stats.Unaligned,
			Aborted:             s.aborted,
			Finished:            s.finished,
		}
		if s.aborted {
			continue
		}
		ts.NumAcknowledgedSubtasks++
		if s.ack.After(latest) {
			latest = s.ack
		}
		ts.CheckpointedSize += s.checkpointedSize
		ts.StateSize += s.stateSize
		ts.ProcessedData += s.stats.ProcessedBytes
		ts.PersistedData += s.stats.PersistedBytes
		if s.finished {
			continue
		}
		sub := ts.Subtasks[i]
		checkpointed = append(checkpointed, sub.CheckpointedSize)
		size = append(size, sub.StateSize)
		e2e = append(e2e, sub.EndToEndDuration)
		syncs = append(syncs, sub.Checkpoint.Sync)
		asyncs = append(asyncs, sub.Checkpoint.Async)
		procs = append(procs, sub.Alignment.Processed)
		pers = append(pers, sub.Alignment.Persisted)
		durs = append(durs, sub.Alignment.Duration)
		delays = append(delays, sub.StartDelay)
	}
	if !latest.IsZero() {
		ts.LatestAckTimestamp = millis(latest)
		ts.EndToEndDuration = max(0, latest.Sub(r.trigger).Milliseconds())
	}
	ts.Summary = TaskSummary{
		CheckpointedSize: summarize(checkpointed),
		StateSize:        summarize(size),
		EndToEndDuration: summarize(e2e),
		CheckpointDuration: DurationSummary{
			Sync:  summarize(syncs),
			Async: summarize(asyncs),
		},
		Alignment: AlignmentSummary{
			Processed: summarize(procs),
			Persisted: summarize(pers),
			Duration:  summarize(durs),
		},
		StartDelay: summarize(delays),
	}
	return ts
}
