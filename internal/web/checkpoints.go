package web

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/checkpoint/coordinator"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/objstore"
)

// queryTimeout bounds a wait for the job master's statistics.
const queryTimeout = 10 * time.Second

// notExternalized is Flink's external_path of a checkpoint kept in the job
// manager's memory.
const notExternalized = "<checkpoint-not-externalized>"

// stats returns the checkpoint statistics, or a 404 when the job takes no
// checkpoints (Flink's answer).
func (s *Server) stats(ctx context.Context) (coordinator.Snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	snap, ok, err := s.jm.CheckpointStats(ctx)
	if err != nil {
		return snap, err
	}
	if !ok {
		return snap, notFoundf("checkpointing is not enabled for job %s (execution.checkpointing.interval is not set)", s.jm.JobID())
	}
	return snap, nil
}

// checkpointDir returns the job's checkpoint directory, "" when
// checkpoints are kept in memory.
func (s *Server) checkpointDir() string {
	cp, err := s.cfg.Checkpointing()
	if err != nil {
		return ""
	}
	return cp.Dir
}

// storage opens the job's checkpoint storage once, for reading retained
// checkpoints; nil when checkpoints are kept in memory.
func (s *Server) storage(ctx context.Context) (*storage.Storage, error) {
	dir := s.checkpointDir()
	if dir == "" {
		return nil, nil
	}
	s.storeOnce.Do(func() {
		s.store, s.storeErr = storage.Open(context.WithoutCancel(ctx), dir, s.jm.JobID(), storage.URLMux(objstore.URLMux(s.cfg)))
	})
	return s.store, s.storeErr
}

// externalPath returns where completed checkpoint id lives: its directory
// in checkpoint storage, or Flink's marker for a checkpoint in memory.
func (s *Server) externalPath(ctx context.Context, id int64) string {
	st, err := s.storage(ctx)
	if err != nil || st == nil {
		return notExternalized
	}
	return st.CheckpointPath(id)
}

// withPath fills in the external path of a completed checkpoint.
func (s *Server) withPath(ctx context.Context, c coordinator.CheckpointStats) coordinator.CheckpointStats {
	if c.Status == coordinator.StatusCompleted && c.ExternalPath == "" {
		c.ExternalPath = s.externalPath(ctx, c.ID)
	}
	return c
}

// checkpointJSON writes a checkpoint as Flink does: a completed one always
// has "discarded", false included.
type checkpointJSON struct{ coordinator.CheckpointStats }

func (c checkpointJSON) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(c.CheckpointStats)
	if err != nil || c.Status != coordinator.StatusCompleted || c.Discarded {
		return b, err
	}
	return append(b[:len(b)-1], `,"discarded":false}`...), nil
}

// checkpointsInfo is Flink's CheckpointingStatistics.
type checkpointsInfo struct {
	Counts  coordinator.Counts  `json:"counts"`
	Summary coordinator.Summary `json:"summary"`
	Latest  latestInfo          `json:"latest"`
	History []checkpointJSON    `json:"history"`
}

type latestInfo struct {
	Completed *checkpointJSON            `json:"completed"`
	Savepoint *checkpointJSON            `json:"savepoint"`
	Failed    *checkpointJSON            `json:"failed"`
	Restored  *coordinator.RestoredStats `json:"restored"`
}

// listed is a checkpoint as Flink's list shows it: without per-task
// statistics.
func (s *Server) listed(ctx context.Context, c *coordinator.CheckpointStats) *checkpointJSON {
	if c == nil {
		return nil
	}
	l := s.withPath(ctx, *c)
	l.Tasks = map[string]coordinator.TaskStats{}
	return &checkpointJSON{l}
}

func (s *Server) checkpoints(ctx context.Context) (checkpointsInfo, error) {
	snap, err := s.stats(ctx)
	if err != nil {
		return checkpointsInfo{}, err
	}
	info := checkpointsInfo{
		Counts:  snap.Counts,
		Summary: snap.Summary,
		History: make([]checkpointJSON, 0, len(snap.History)),
		Latest: latestInfo{
			Completed: s.listed(ctx, snap.Latest.Completed),
			Savepoint: s.listed(ctx, snap.Latest.Savepoint),
			Failed:    s.listed(ctx, snap.Latest.Failed),
			Restored:  snap.Latest.Restored,
		},
	}
	for i := range snap.History {
		info.History = append(info.History, *s.listed(ctx, &snap.History[i]))
	}
	return info, nil
}

// find returns checkpoint id from the history or the latest of each
// outcome.
func find(snap coordinator.Snapshot, id int64) (coordinator.CheckpointStats, bool) {
	for _, c := range snap.History {
		if c.ID == id {
			return c, true
		}
	}
	for _, c := range []*coordinator.CheckpointStats{snap.Latest.Completed, snap.Latest.Savepoint, snap.Latest.Failed} {
		if c != nil && c.ID == id {
			return *c, true
		}
	}
	return coordinator.CheckpointStats{}, false
}

// checkpointDetail is Flink's CheckpointStatistics for one checkpoint:
// its tasks, by vertex id, without their summary and subtasks.
type checkpointDetail struct {
	coordinator.CheckpointStats
	Tasks map[string]taskCheckpoint `json:"tasks"`
	// Discarded is written on every completed checkpoint, as in Flink.
	Discarded *bool `json:"discarded,omitempty"`
}

// taskCheckpoint is Flink's TaskCheckpointStatistics: a vertex's
// statistics without their summary and subtasks, which the outer fields
// hide.
type taskCheckpoint struct {
	coordinator.TaskStats
	Summary  *struct{} `json:"summary,omitempty"`
	Subtasks *struct{} `json:"subtasks,omitempty"`
}

// taskSubtasks is Flink's TaskCheckpointStatisticsWithSubtaskDetails.
type taskSubtasks struct {
	coordinator.TaskStats
	Subtasks []subtaskJSON `json:"subtasks"`
}

// subtaskJSON writes a subtask that has not acknowledged as Flink does:
// only its index and status.
type subtaskJSON struct{ coordinator.SubtaskStats }

func (s subtaskJSON) MarshalJSON() ([]byte, error) {
	if s.Status == coordinator.SubtaskPending {
		return json.Marshal(struct {
			Index  int    `json:"index"`
			Status string `json:"status"`
		}{s.Index, s.Status})
	}
	return json.Marshal(s.SubtaskStats)
}

func (s *Server) lookup(ctx context.Context, cid string) (coordinator.CheckpointStats, error) {
	id, err := checkpointID(cid)
	if err != nil {
		return coordinator.CheckpointStats{}, err
	}
	snap, err := s.stats(ctx)
	if err != nil {
		return coordinator.CheckpointStats{}, err
	}
	c, ok := find(snap, id)
	if !ok {
		if c, ok := s.seen.get(id); ok {
			return c, nil
		}
		return c, notFoundf("checkpoint %d not found: it is not in the statistics of the last %d checkpoints (web.checkpoints.history), nor among those last asked for", id, len(snap.History))
	}
	c = s.withPath(ctx, c)
	if c.Status != coordinator.StatusInProgress {
		s.seen.put(c, s.cfg.Int(config.KeyCheckpointHistory))
	}
	return c, nil
}

// seenCheckpoints keeps the statistics of the checkpoints last asked for
// (their details, subtasks or cut) that have completed or failed, as
// Flink's CheckpointStatsCache does: a page that shows a checkpoint can
// then show its subtasks after newer checkpoints have pushed it out of
// the history. It keeps as many as the history
// (web.checkpoints.history).
type seenCheckpoints struct {
	mu    sync.Mutex
	stats map[int64]coordinator.CheckpointStats
	order []int64 // ids, least recently asked for first
}

func (c *seenCheckpoints) get(id int64) (coordinator.CheckpointStats, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.stats[id]
	if ok {
		c.touch(id)
	}
	return st, ok
}

// put keeps st, forgetting the least recently asked for beyond size.
func (c *seenCheckpoints) put(st coordinator.CheckpointStats, size int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stats == nil {
		c.stats = map[int64]coordinator.CheckpointStats{}
	}
	if _, ok := c.stats[st.ID]; ok {
		c.touch(st.ID)
	} else {
		c.order = append(c.order, st.ID)
	}
	c.stats[st.ID] = st
	for len(c.order) > size {
		delete(c.stats, c.order[0])
		c.order = c.order[1:]
	}
}

// touch makes id the most recently asked for.
func (c *seenCheckpoints) touch(id int64) {
	if i := slices.Index(c.order, id); i >= 0 {
		c.order = append(append(c.order[:i:i], c.order[i+1:]...), id)
	}
}

func (s *Server) checkpointDetails(ctx context.Context, cid string) (checkpointDetail, error) {
	c, err := s.lookup(ctx, cid)
	if err != nil {
		return checkpointDetail{}, err
	}
	d := checkpointDetail{CheckpointStats: c, Tasks: map[string]taskCheckpoint{}}
	if c.Status == coordinator.StatusCompleted {
		d.Discarded = &c.Discarded
	}
	for uid, t := range c.Tasks {
		d.Tasks[VertexID(uid)] = taskCheckpoint{TaskStats: t}
	}
	return d, nil
}

func (s *Server) checkpointSubtasks(ctx context.Context, cid, vid string) (taskSubtasks, error) {
	if _, err := checkpointID(cid); err != nil {
		return taskSubtasks{}, err
	}
	v, err := s.vertex(vid)
	if err != nil {
		return taskSubtasks{}, err
	}
	c, err := s.lookup(ctx, cid)
	if err != nil {
		return taskSubtasks{}, err
	}
	t, ok := c.Tasks[v.UID]
	if !ok {
		return taskSubtasks{}, notFoundf("checkpoint %d has no statistics for vertex %s (%s)", c.ID, vid, v.Name)
	}
	out := taskSubtasks{TaskStats: t, Subtasks: make([]subtaskJSON, len(t.Subtasks))}
	for i, st := range t.Subtasks {
		out.Subtasks[i] = subtaskJSON{st}
	}
	return out, nil
}

// checkpointConfigInfo is Flink's CheckpointConfigInfo. Flink's changelog
// settings are reduced to state_changelog_enabled: weir has no changelog
// state backend.
type checkpointConfigInfo struct {
	// Mode is exactly_once or at_least_once.
	Mode string `json:"mode"`
	// Interval is math.MaxInt64 when periodic checkpoints are disabled,
	// as in Flink.
	Interval                    int64               `json:"interval"`
	Timeout                     int64               `json:"timeout"`
	MinPause                    int64               `json:"min_pause"`
	MaxConcurrent               int                 `json:"max_concurrent"`
	Externalization             externalizationInfo `json:"externalization"`
	StateBackend                string              `json:"state_backend"`
	CheckpointStorage           string              `json:"checkpoint_storage"`
	UnalignedCheckpoints        bool                `json:"unaligned_checkpoints"`
	TolerableFailedCheckpoints  int                 `json:"tolerable_failed_checkpoints"`
	AlignedCheckpointTimeout    int64               `json:"aligned_checkpoint_timeout"`
	CheckpointsAfterTasksFinish bool                `json:"checkpoints_after_tasks_finish"`
	// weir has no changelog state backend: state_changelog_enabled is
	// false, and the changelog's settings are Flink's defaults.
	StateChangelogEnabled                    bool   `json:"state_changelog_enabled"`
	ChangelogPeriodicMaterializationInterval int64  `json:"changelog_periodic_materialization_interval"`
	ChangelogStorage                         string `json:"changelog_storage"`
}

type externalizationInfo struct {
	Enabled              bool `json:"enabled"`
	DeleteOnCancellation bool `json:"delete_on_cancellation"`
}

// Flink's class names for the state backend and checkpoint storage.
var (
	backendNames = map[config.StateBackend]string{
		config.BackendHashMap: "HashMapStateBackend",
		// rocksdb and forst run on the embedded LSM backend too: say what runs.
		config.BackendPebble: "EmbeddedPebbleStateBackend", config.BackendRocksDB: "EmbeddedPebbleStateBackend", config.BackendForSt: "EmbeddedPebbleStateBackend",
	}
	storageNames = map[config.CheckpointStorage]string{
		config.StorageJobManager: "JobManagerCheckpointStorage",
		config.StorageFilesystem: "FileSystemCheckpointStorage",
	}
)

func (s *Server) checkpointConfig(ctx context.Context) (checkpointConfigInfo, error) {
	snap, err := s.stats(ctx)
	if err != nil {
		return checkpointConfigInfo{}, err
	}
	cp, err := s.cfg.Checkpointing()
	if err != nil {
		return checkpointConfigInfo{}, fmt.Errorf("checkpoint configuration: %w", err)
	}
	c := snap.Config
	info := checkpointConfigInfo{
		Mode: "exactly_once", Interval: c.Interval.Milliseconds(), Timeout: c.Timeout.Milliseconds(),
		MinPause: c.MinPause.Milliseconds(), MaxConcurrent: c.MaxConcurrent,
		Externalization: externalizationInfo{
			Enabled:              cp.ExternalizedRetention != config.NoExternalizedCheckpoints,
			DeleteOnCancellation: cp.ExternalizedRetention == config.DeleteOnCancellation,
		},
		StateBackend:               string(config.StateBackend(s.cfg.String(config.KeyStateBackend))),
		CheckpointStorage:          string(cp.Storage),
		UnalignedCheckpoints:       c.Unaligned,
		TolerableFailedCheckpoints: c.TolerableFailed,
		AlignedCheckpointTimeout:   cp.AlignedTimeout.Milliseconds(),
		// Checkpoints go on after some subtasks have finished; the finished
		// subtasks' source positions are carried into them.
		CheckpointsAfterTasksFinish: true,
		// Flink's state.changelog.periodic-materialize.interval and
		// state.changelog.storage defaults.
		ChangelogPeriodicMaterializationInterval: (10 * time.Minute).Milliseconds(),
		ChangelogStorage:                         "memory",
	}
	if c.Mode == config.AtLeastOnce {
		info.Mode = "at_least_once"
	}
	if c.Interval == 0 {
		// Periodic checkpoints are disabled: Flink shows the longest
		// interval.
		info.Interval = math.MaxInt64
	}
	if n, ok := backendNames[config.StateBackend(info.StateBackend)]; ok {
		info.StateBackend = n
	}
	if n, ok := storageNames[cp.Storage]; ok {
		info.CheckpointStorage = n
	}
	return info, nil
}
