package web

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/checkpoint/coordinator"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/ops"
	"github.com/weirstream/weir/internal/runtime"
)

// The cut of checkpoint k is what a restore from k starts from, as data to
// draw (exercise 7.4 of the lab): each source's position S_k per split,
// every operator's state, and every channel with the barrier timing of the
// subtask that consumes it. An aligned subtask received its first barrier
// start_delay after the trigger and its last alignment_duration after
// that, then snapshotted; records behind the barrier on the channels that
// delivered it early were held back, not part of the state. Which channel
// brought the first barrier is not recorded: the timing is per consuming
// subtask, repeated on each of its channels.

// cutInfo is the body of GET /jobs/:jobid/checkpoints/:checkpointid/cut.
type cutInfo struct {
	JID          string `json:"jid"`
	CheckpointID int64  `json:"checkpoint_id"`
	// Status, the timestamps and sizes come from the checkpoint
	// statistics; they are -1 (status "") when the checkpoint is no longer
	// in them and only its metadata is known.
	Status             string `json:"status"`
	TriggerTimestamp   int64  `json:"trigger_timestamp"`
	LatestAckTimestamp int64  `json:"latest_ack_timestamp"`
	EndToEndDuration   int64  `json:"end_to_end_duration"`
	StateSize          int64  `json:"state_size"`
	CheckpointedSize   int64  `json:"checkpointed_size"`

	Metadata  cutMetadata   `json:"metadata"`
	Sources   []cutSource   `json:"sources"`
	Operators []cutOperator `json:"operators"`
	Vertices  []cutVertex   `json:"vertices"`
	Channels  []cutChannel  `json:"channels"`
}

// cutMetadata says whether the checkpoint's _metadata could be read, and
// from where or why not. Without it, sources and operators are empty.
type cutMetadata struct {
	Available bool   `json:"available"`
	Path      string `json:"path,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

// cutSource is a source vertex and its recorded positions.
type cutSource struct {
	Vertex string     `json:"vertex"`
	UID    string     `json:"uid"`
	Name   string     `json:"name"`
	Splits []cutSplit `json:"splits"`
	// Error says why the positions could not be read.
	Error string `json:"error,omitempty"`
}

// cutSplit is one split's position in the cut. Offset is where a restore
// resumes (the next record's offset; -1: the source's configured start).
// CurrentOffset is where the source is now, when the job reports it;
// OffsetsToReplay is then how far after the cut a restore would read again,
// in the source's own offsets: records for Kafka and datagen, bytes for
// files and the generated live trace.
type cutSplit struct {
	Split           string `json:"split"`
	Subtask         int    `json:"subtask"`
	Offset          int64  `json:"offset"`
	Ended           bool   `json:"ended"`
	CurrentOffset   *int64 `json:"current_offset,omitempty"`
	OffsetsToReplay *int64 `json:"offsets_to_replay,omitempty"`
}

// cutOperator is one operator's state in the checkpoint, per subtask of
// the run that took it.
type cutOperator struct {
	UID string `json:"uid"`
	// Vertex is the id of the vertex the operator heads; omitted for an
	// operator chained behind the head.
	Vertex         string               `json:"vertex,omitempty"`
	Parallelism    int                  `json:"parallelism"`
	MaxParallelism int                  `json:"max_parallelism"`
	StateSize      int64                `json:"state_size"`
	Subtasks       []cutOperatorSubtask `json:"subtasks"`
}

type cutOperatorSubtask struct {
	Index        int                       `json:"index"`
	StateSize    int64                     `json:"state_size"`
	KeyedSize    int64                     `json:"keyed_state_size"`
	OperatorSize int64                     `json:"operator_state_size"`
	KeyGroups    *checkpoint.KeyGroupRange `json:"key_groups,omitempty"`
}

// cutVertex is a vertex and its subtasks' part in the checkpoint.
type cutVertex struct {
	ID          string          `json:"id"`
	UID         string          `json:"uid"`
	Name        string          `json:"name"`
	Parallelism int             `json:"parallelism"`
	Subtasks    []cutSubtaskRef `json:"subtasks"`
}

// cutSubtaskRef is a subtask's timing: Flink's subtask checkpoint
// statistics placed on the time line. Timestamps are Unix milliseconds,
// durations milliseconds.
type cutSubtaskRef struct {
	Index  int    `json:"index"`
	Status string `json:"status"`
	// Finished marks a subtask that had finished before the trigger: it
	// took no part, and counts as acknowledged.
	Finished              bool  `json:"finished,omitempty"`
	StateSize             int64 `json:"state_size"`
	StartDelay            int64 `json:"start_delay"`
	AlignmentDuration     int64 `json:"alignment_duration"`
	FirstBarrierTimestamp int64 `json:"first_barrier_timestamp"`
	LastBarrierTimestamp  int64 `json:"last_barrier_timestamp"`
	SyncDuration          int64 `json:"sync_duration"`
	AsyncDuration         int64 `json:"async_duration"`
	AckTimestamp          int64 `json:"ack_timestamp"`
}

// cutChannel is one channel: producer subtask to consumer subtask of an
// edge, with the consumer's barrier timing (omitted when the statistics
// do not have it).
type cutChannel struct {
	Edge              int    `json:"edge"`
	From              string `json:"from"`
	FromSubtask       int    `json:"from_subtask"`
	To                string `json:"to"`
	ToSubtask         int    `json:"to_subtask"`
	Input             int    `json:"input"`
	ShipStrategy      string `json:"ship_strategy"`
	StartDelay        *int64 `json:"start_delay,omitempty"`
	AlignmentDuration *int64 `json:"alignment_duration,omitempty"`
	// InFlightRecords, InFlightWatermarks and InFlightBytes are the
	// channel's records and watermarks an unaligned checkpoint persisted
	// (its channel state), replayed into the channel on restore.
	InFlightRecords    int `json:"in_flight_records,omitempty"`
	InFlightWatermarks int `json:"in_flight_watermarks,omitempty"`
	InFlightBytes      int `json:"in_flight_bytes,omitempty"`
}

// metadata finds checkpoint id's metadata and a reader of its state: the
// job master's latest completed checkpoint (in memory or in storage) or a
// checkpoint still retained in the checkpoint directory.
func (s *Server) metadata(ctx context.Context, id int64) (*checkpoint.Metadata, runtime.StateReader, cutMetadata) {
	if l := s.jm.Latest(); l != nil && l.Metadata != nil && l.Metadata.CheckpointID == id {
		info := cutMetadata{Available: true, Path: l.Path}
		if info.Path == "" {
			info.Path = notExternalized
		}
		return l.Metadata, l.Store, info
	}
	st, err := s.storage(ctx)
	switch {
	case err != nil:
		return nil, nil, cutMetadata{Reason: fmt.Sprintf("opening checkpoint storage %s: %v", s.checkpointDir(), err)}
	case st == nil:
		return nil, nil, cutMetadata{Reason: "checkpoints are kept in the job master's memory (execution.checkpointing.dir is not set), which holds only the latest completed checkpoint's metadata"}
	}
	dir := st.CheckpointPath(id)
	md, err := st.ReadMetadata(ctx, dir)
	if err != nil {
		return nil, nil, cutMetadata{Path: dir, Reason: fmt.Sprintf("reading the metadata (retention keeps execution.checkpointing.num-retained checkpoints): %v", err)}
	}
	return md, st, cutMetadata{Available: true, Path: dir + "/" + storage.MetadataFile}
}

func (s *Server) cut(ctx context.Context, cid string) (cutInfo, error) {
	id, err := checkpointID(cid)
	if err != nil {
		return cutInfo{}, err
	}
	snap, err := s.stats(ctx)
	if err != nil {
		return cutInfo{}, err
	}
	c, inStats := find(snap, id)
	switch {
	case inStats && c.Status == coordinator.StatusCompleted:
		s.seen.put(s.withPath(ctx, c), s.cfg.Int(config.KeyCheckpointHistory))
	case !inStats:
		c, inStats = s.seen.get(id)
	}
	if inStats && c.Status != coordinator.StatusCompleted {
		return cutInfo{}, notFoundf("checkpoint %d is %s: only a completed checkpoint has a cut", id, c.Status)
	}
	md, store, mdInfo := s.metadata(ctx, id)
	if !inStats && md == nil {
		return cutInfo{}, notFoundf("checkpoint %d not found: not in the statistics and no metadata (%s)", id, mdInfo.Reason)
	}
	out := cutInfo{
		JID: s.jm.JobID(), CheckpointID: id, Metadata: mdInfo,
		TriggerTimestamp: -1, LatestAckTimestamp: -1, EndToEndDuration: -1, StateSize: -1, CheckpointedSize: -1,
		Sources: []cutSource{}, Operators: []cutOperator{}, Vertices: []cutVertex{}, Channels: []cutChannel{},
	}
	if inStats {
		out.Status = string(c.Status)
		out.TriggerTimestamp, out.LatestAckTimestamp, out.EndToEndDuration = c.TriggerTimestamp, c.LatestAckTimestamp, c.EndToEndDuration
		out.StateSize, out.CheckpointedSize = c.StateSize, c.CheckpointedSize
	} else if md != nil {
		out.TriggerTimestamp = md.TriggerTime.UnixMilli()
		if !md.CompletionTime.IsZero() {
			out.LatestAckTimestamp = md.CompletionTime.UnixMilli()
			out.EndToEndDuration = md.CompletionTime.Sub(md.TriggerTime).Milliseconds()
		}
		out.StateSize = md.Size()
	}
	g := s.jm.Graph()
	if md != nil {
		var current map[string]map[string]int64
		if s.job.Positions != nil {
			current = s.job.Positions()
		}
		for _, v := range g.Vertices {
			if v.Source() {
				out.Sources = append(out.Sources, s.cutSource(ctx, v, md, store, current[v.UID]))
			}
		}
		for _, op := range md.Operators {
			out.Operators = append(out.Operators, s.cutOperator(op))
		}
	}
	timing := map[checkpoint.TaskID]coordinator.SubtaskStats{}
	for _, v := range g.Vertices {
		cv := cutVertex{ID: s.ids[v], UID: v.UID, Name: v.Name, Parallelism: v.Parallelism, Subtasks: []cutSubtaskRef{}}
		if t, ok := c.Tasks[v.UID]; ok && inStats {
			for _, st := range t.Subtasks {
				ref := cutSubtaskRef{Index: st.Index, Status: st.Status}
				if st.Status == coordinator.SubtaskCompleted {
					timing[checkpoint.TaskID{Vertex: v.UID, Subtask: st.Index}] = st
					first := c.TriggerTimestamp + st.StartDelay
					ref = cutSubtaskRef{
						Index: st.Index, Status: st.Status, Finished: st.Finished, StateSize: st.StateSize,
						StartDelay: st.StartDelay, AlignmentDuration: st.Alignment.Duration,
						FirstBarrierTimestamp: first, LastBarrierTimestamp: first + st.Alignment.Duration,
						SyncDuration: st.Checkpoint.Sync, AsyncDuration: st.Checkpoint.Async, AckTimestamp: st.AckTimestamp,
					}
				}
				cv.Subtasks = append(cv.Subtasks, ref)
			}
		}
		out.Vertices = append(out.Vertices, cv)
	}
	inFlight := s.cutInFlight(ctx, md, store)
	for c := range g.Channels() {
		e := c.Edge
		ch := cutChannel{
			Edge: e.ID, From: s.ids[e.From], FromSubtask: c.From, To: s.ids[e.To], ToSubtask: c.To,
			Input: e.Input, ShipStrategy: e.Partitioner.String(),
		}
		if st, timed := timing[checkpoint.TaskID{Vertex: e.To.UID, Subtask: c.To}]; timed && !st.Finished {
			ch.StartDelay, ch.AlignmentDuration = ptr(st.StartDelay), ptr(st.Alignment.Duration)
		}
		if f, ok := inFlight[runtime.ChannelKey{Edge: e.ID, From: c.From, To: c.To}]; ok {
			ch.InFlightRecords, ch.InFlightWatermarks, ch.InFlightBytes = f.Records, f.Watermarks, f.Bytes
		}
		out.Channels = append(out.Channels, ch)
	}
	return out, nil
}

// cutInFlight reads the channel state an unaligned checkpoint persisted,
// per channel of the job's graph. Channel state of a vertex whose
// parallelism has changed since is left out: its channels are not these.
func (s *Server) cutInFlight(ctx context.Context, md *checkpoint.Metadata, store runtime.StateReader) map[runtime.ChannelKey]runtime.ChannelStateSummary {
	out := map[runtime.ChannelKey]runtime.ChannelStateSummary{}
	if md == nil || store == nil {
		return out
	}
	g := s.jm.Graph()
	for _, v := range g.Vertices {
		op, ok := md.Operator(v.UID)
		if !ok || op.Parallelism != v.Parallelism {
			continue
		}
		for i, st := range op.Subtasks {
			chans := g.InputChannels(v, i)
			for _, h := range st.InputChannels {
				b, err := store.ReadState(ctx, h)
				if err != nil {
					continue
				}
				sums, err := runtime.SummarizeChannelState(b)
				if err != nil {
					continue
				}
				for _, sm := range sums {
					if sm.Channel >= len(chans) {
						continue
					}
					gc := chans[sm.Channel]
					out[runtime.ChannelKey{Edge: gc.Edge.ID, From: gc.From, To: gc.To}] = sm
				}
			}
		}
	}
	return out
}

func ptr(v int64) *int64 { return &v }

// cutSource reads a source's recorded positions from its operator state.
func (s *Server) cutSource(ctx context.Context, v *runtime.Vertex, md *checkpoint.Metadata, store runtime.StateReader, current map[string]int64) cutSource {
	src := cutSource{Vertex: s.ids[v], UID: v.UID, Name: v.Name, Splits: []cutSplit{}}
	op, ok := md.Operator(v.UID)
	if !ok {
		src.Error = fmt.Sprintf("the checkpoint holds no state of operator %s", v.UID)
		return src
	}
	var errs []string
	for i, st := range op.Subtasks {
		for _, h := range st.Operator {
			b, err := store.ReadState(ctx, h)
			if err != nil {
				errs = append(errs, fmt.Sprintf("subtask %d: %v", i, err))
				continue
			}
			m, ok := ops.DecodeSourceState(b)
			if !ok {
				errs = append(errs, fmt.Sprintf("subtask %d: its state is not a source's split positions", i))
				continue
			}
			for split, p := range m {
				cs := cutSplit{Split: split, Subtask: i, Offset: p.Offset, Ended: p.Ended}
				if cur, ok := current[split]; ok {
					cs.CurrentOffset = ptr(cur)
					if p.Offset >= 0 && cur >= p.Offset {
						cs.OffsetsToReplay = ptr(cur - p.Offset)
					}
				}
				src.Splits = append(src.Splits, cs)
			}
		}
	}
	slices.SortFunc(src.Splits, func(a, b cutSplit) int { return strings.Compare(a.Split, b.Split) })
	src.Error = strings.Join(errs, "; ")
	return src
}

func (s *Server) cutOperator(op checkpoint.OperatorState) cutOperator {
	co := cutOperator{UID: op.UID, Parallelism: op.Parallelism, MaxParallelism: op.MaxParallelism, Subtasks: []cutOperatorSubtask{}}
	for _, v := range s.jm.Graph().Vertices {
		if v.UID == op.UID {
			co.Vertex = s.ids[v]
		}
	}
	for i, st := range op.Subtasks {
		sub := cutOperatorSubtask{Index: i}
		for _, h := range st.Keyed {
			sub.KeyedSize += h.Size
			if kg := h.KeyGroups; kg != nil {
				if sub.KeyGroups == nil {
					r := *kg
					sub.KeyGroups = &r
				} else {
					sub.KeyGroups.Start = min(sub.KeyGroups.Start, kg.Start)
					sub.KeyGroups.End = max(sub.KeyGroups.End, kg.End)
				}
			}
		}
		for _, h := range st.Operator {
			sub.OperatorSize += h.Size
		}
		sub.StateSize = sub.KeyedSize + sub.OperatorSize
		co.StateSize += sub.StateSize
		co.Subtasks = append(co.Subtasks, sub)
	}
	return co
}
