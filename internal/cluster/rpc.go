// Package cluster runs weir as a cluster of processes: a job manager that
// schedules jobs and coordinates their checkpoints, and task managers that
// offer slots and run subtasks. They talk over gRPC (the control plane:
// registration, deployment, checkpoint triggers and acknowledgements,
// heartbeats both ways); subtasks on different task managers exchange
// records over internal/netio (the data plane).
//
// The control plane is one gRPC service, weir.cluster.v1.JobManager, whose
// messages are Go structs encoded as JSON (the codec is forced on both
// ends, so nothing is registered globally): Session is a bidirectional
// stream a task manager keeps open for as long as it is registered;
// Submit, List and Cancel serve the CLI.
package cluster

import (
	"context"
	"encoding/json"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/procstat"
	"github.com/weirstream/weir/internal/runtime"
)

const serviceName = "weir.cluster.v1.JobManager"

// maxMessage bounds a control-plane message. Without a checkpoint
// directory, acknowledgements carry state and deployments the restored
// checkpoint inline, beyond gRPC's default of 4 MiB.
const maxMessage = 512 << 20

// jsonCodec encodes control-plane messages as JSON.
type jsonCodec struct{}

func (jsonCodec) Marshal(v any) (mem.BufferSlice, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

func (jsonCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return json.Unmarshal(data.Materialize(), v)
}

func (jsonCodec) Name() string { return "json" }

// Submission is a job as the CLI submits it: the job's name in the binary
// (every process of the cluster builds the same graph from it) and its
// arguments, which only the job's builder reads.
type Submission struct {
	JobID string          `json:"job_id"`
	Job   string          `json:"job"`
	Args  json.RawMessage `json:"args,omitempty"`
	// RecoverFrom is the checkpoint a job resumes from when a new leading
	// job manager recovers it (high availability); clients leave it
	// empty. It overrides execution.state-recovery.path.
	RecoverFrom string `json:"recover_from,omitempty"`
	// FirstCheckpointID, if above 0, is the least id of the job's next
	// checkpoint; set by the job manager with high availability.
	FirstCheckpointID int64 `json:"first_checkpoint_id,omitempty"`
}

// JobStatus is a job as List reports it.
type JobStatus struct {
	JobID    string    `json:"job_id"`
	Job      string    `json:"job"`
	State    string    `json:"state"` // RUNNING, RESTARTING, FAILING, FINISHED, FAILED, CANCELED
	Started  time.Time `json:"started"`
	Restarts int       `json:"restarts"`
	// LastCheckpoint is the latest completed checkpoint's id (0: none).
	LastCheckpoint int64  `json:"last_checkpoint"`
	Error          string `json:"error,omitempty"`
	// LastFailure is the cause of the job's newest failure while it runs.
	LastFailure string `json:"last_failure,omitempty"`
}

// Ended reports whether the job has ended: FINISHED, FAILED or CANCELED.
func (s JobStatus) Ended() bool {
	return s.State == "FINISHED" || s.State == "FAILED" || s.State == "CANCELED"
}

type submitResponse struct {
	JobID string `json:"job_id"`
}

type listRequest struct{}

type listResponse struct {
	Jobs          []JobStatus       `json:"jobs"`
	TaskManagers  []TaskManagerInfo `json:"task_managers"`
	RESTAddr      string            `json:"rest_addr,omitempty"`
	SlotsTotal    int               `json:"slots_total"`
	SlotsOccupied int               `json:"slots_occupied"`
}

type cancelRequest struct {
	JobID string `json:"job_id"`
}

type cancelResponse struct{}

type savepointRequest struct {
	JobID string `json:"job_id"`
	// Dir is where the savepoint goes; "" means the job's
	// execution.checkpointing.savepoint-dir.
	Dir string `json:"dir,omitempty"`
	// Cancel cancels the job once the savepoint is complete.
	Cancel bool `json:"cancel,omitempty"`
	// Stop stops the job with the savepoint (stop-with-savepoint); the
	// call returns once the job has ended.
	Stop bool `json:"stop,omitempty"`
	// Drain, with Stop, ends the job's event time before the savepoint.
	Drain bool `json:"drain,omitempty"`
	// Format is the savepoint's format, CANONICAL ("") or NATIVE.
	Format string `json:"format,omitempty"`
}

type savepointResponse struct {
	Path string `json:"path"`
}

// TaskManagerInfo is what a task manager registers with.
type TaskManagerInfo struct {
	ID string `json:"id"`
	// DataAddr is where its data plane listens.
	DataAddr string `json:"data_addr"`
	Slots    int    `json:"slots"`
}

// tmMessage is what a task manager sends on its session; exactly one field
// is set.
type tmMessage struct {
	Register  *TaskManagerInfo `json:"register,omitempty"`
	Heartbeat *tmHeartbeat     `json:"heartbeat,omitempty"`
	Ack       *ackMsg          `json:"ack,omitempty"`
	Decline   *declineMsg      `json:"decline,omitempty"`
	EndOfData *taskMsg         `json:"end_of_data,omitempty"`
	Watermark *watermarkMsg    `json:"watermark,omitempty"`
	Exited    *exitedMsg       `json:"exited,omitempty"`
}

// tmHeartbeat carries the task manager's subtasks' counters, by job, and
// its process's figures (hardware, memory, garbage collection), which the
// job manager's REST API reports as the task manager's.
type tmHeartbeat struct {
	Jobs    map[string]jobReport `json:"jobs,omitempty"`
	Process *procstat.Stats      `json:"process,omitempty"`
}

type jobReport struct {
	Metrics   []runtime.SubtaskMetrics `json:"metrics,omitempty"`
	Positions []taskPositions          `json:"positions,omitempty"`
}

type taskPositions struct {
	Task      checkpoint.TaskID `json:"task"`
	Positions map[string]int64  `json:"positions"`
}

type taskMsg struct {
	JobID string          `json:"job_id"`
	Ref   runtime.TaskRef `json:"ref"`
}

type ackMsg struct {
	taskMsg
	Checkpoint int64              `json:"checkpoint"`
	Ack        checkpoint.TaskAck `json:"ack"`
}

type declineMsg struct {
	taskMsg
	Checkpoint int64                 `json:"checkpoint"`
	Reason     runtime.DeclineReason `json:"reason"`
	Err        string                `json:"err"`
}

type exitedMsg struct {
	taskMsg
	// Err is empty when the subtask finished.
	Err string `json:"err,omitempty"`
	// Permanent and Corrupt carry across the wire what the job master
	// asks of a failure: whether a restart cannot cure it
	// (connector.IsPermanent), and whether it was a damaged checkpoint
	// (storage.ErrCorrupt), which the job falls back from.
	Permanent bool `json:"permanent,omitempty"`
	Corrupt   bool `json:"corrupt,omitempty"`
}

// remoteError is a subtask's failure as a task manager reported it.
type remoteError struct {
	msg                string
	permanent, corrupt bool
}

func (e *remoteError) Error() string   { return e.msg }
func (e *remoteError) Permanent() bool { return e.permanent }
func (e *remoteError) Is(target error) bool {
	return e.corrupt && target == storage.ErrCorrupt
}

// jmMessage is what the job manager sends on a session; exactly one field
// is set.
type jmMessage struct {
	// Epoch is the leading job manager's fencing token (0 without high
	// availability): a task manager ignores a message whose epoch is
	// below the newest it has seen.
	Epoch      int64          `json:"epoch,omitempty"`
	Registered *registeredMsg `json:"registered,omitempty"`
	Heartbeat  *struct{}      `json:"heartbeat,omitempty"`
	Deploy     *deployMsg     `json:"deploy,omitempty"`
	Cancel     *cancelMsg     `json:"cancel,omitempty"`
	Trigger    *triggerMsg    `json:"trigger,omitempty"`
	Complete   *notifyMsg     `json:"complete,omitempty"`
	Abort      *notifyMsg     `json:"abort,omitempty"`
	Assign     *assignMsg     `json:"assign,omitempty"`
	Align      *alignMsg      `json:"align,omitempty"`
	Release    *releaseMsg    `json:"release,omitempty"`
}

type registeredMsg struct {
	HeartbeatInterval time.Duration `json:"heartbeat_interval"`
	HeartbeatTimeout  time.Duration `json:"heartbeat_timeout"`
	// Epoch is the job manager's leader epoch (0 without high
	// availability).
	Epoch int64 `json:"epoch,omitempty"`
}

type deployMsg struct {
	Submission Submission          `json:"submission"`
	Attempt    int                 `json:"attempt"`
	Tasks      []checkpoint.TaskID `json:"tasks"`
	// RestorePath and Restore are the checkpoint to restore from (nil:
	// none). The task manager reads state files through the path.
	RestorePath string               `json:"restore_path,omitempty"`
	Restore     *checkpoint.Metadata `json:"restore,omitempty"`
	Remote      []remoteChannel      `json:"remote,omitempty"`
	// Splits are the source subtasks' splits (runtime.Deployment.Splits).
	Splits []taskSplits `json:"splits,omitempty"`
}

type taskSplits struct {
	Task       checkpoint.TaskID       `json:"task"`
	Assignment runtime.SplitAssignment `json:"assignment"`
}

type remoteChannel struct {
	Key     runtime.ChannelKey    `json:"key"`
	Channel runtime.RemoteChannel `json:"channel"`
}

type cancelMsg struct {
	JobID string            `json:"job_id"`
	Refs  []runtime.TaskRef `json:"refs"`
	Cause string            `json:"cause"`
}

type triggerMsg struct {
	taskMsg
	Barrier runtime.Barrier `json:"barrier"`
}

type notifyMsg struct {
	taskMsg
	Checkpoint int64  `json:"checkpoint"`
	Reason     string `json:"reason,omitempty"`
}

// assignMsg: more splits for a running source subtask.
type assignMsg struct {
	taskMsg
	Splits []string `json:"splits"`
	Late   []string `json:"late,omitempty"`
}

// watermarkMsg: a source subtask's watermark, for watermark alignment.
type watermarkMsg struct {
	taskMsg
	Watermark int64 `json:"watermark"`
}

// alignMsg: the maximal watermark of a source subtask's alignment group.
type alignMsg struct {
	taskMsg
	MaxAllowed int64 `json:"max_allowed"`
}

// releaseMsg: the job ended; the task manager drops what it holds for it.
type releaseMsg struct {
	JobID string `json:"job_id"`
}

// service is the job manager's side of the service.
type service interface {
	submit(ctx context.Context, s *Submission) (*submitResponse, error)
	list(ctx context.Context, r *listRequest) (*listResponse, error)
	cancel(ctx context.Context, r *cancelRequest) (*cancelResponse, error)
	savepoint(ctx context.Context, r *savepointRequest) (*savepointResponse, error)
	session(stream grpc.ServerStream) error
}

func unary[Req, Resp any](name string, call func(service, context.Context, *Req) (*Resp, error)) grpc.MethodDesc {
	return grpc.MethodDesc{
		MethodName: name,
		Handler: func(srv any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
			req := new(Req)
			if err := dec(req); err != nil {
				return nil, err
			}
			h := func(ctx context.Context, r any) (any, error) { return call(srv.(service), ctx, r.(*Req)) }
			if icpt == nil {
				return h(ctx, req)
			}
			return icpt(ctx, req, &grpc.UnaryServerInfo{Server: srv, FullMethod: "/" + serviceName + "/" + name}, h)
		},
	}
}

var sessionDesc = grpc.StreamDesc{
	StreamName:    "Session",
	ServerStreams: true,
	ClientStreams: true,
	Handler: func(srv any, stream grpc.ServerStream) error {
		return srv.(service).session(stream)
	},
}

func serviceDesc() *grpc.ServiceDesc {
	return &grpc.ServiceDesc{
		ServiceName: serviceName,
		HandlerType: (*service)(nil),
		Methods: []grpc.MethodDesc{
			unary("Submit", service.submit),
			unary("List", service.list),
			unary("Cancel", service.cancel),
			unary("Savepoint", service.savepoint),
		},
		Streams:  []grpc.StreamDesc{sessionDesc},
		Metadata: "weir/cluster.go",
	}
}

func method(name string) string { return "/" + serviceName + "/" + name }
