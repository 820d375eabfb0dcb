// Package launch starts the jobs that package stream describes, in this
// process (Environment.Execute) or on a cluster (the job manager's job
// master and the task managers' workers, internal/clustercli): it builds
// the runtime's options from the job's configuration (checkpoint
// coordinator and storage, the checkpoint to restore, falling back past
// damaged ones, restart strategy, failover), runs the job master, applies
// the checkpoint retention when the job ends, and makes a task manager's
// worker.
//
// Package stream keeps the typed job API and hands its jobs over as a
// Job, through the hooks it registers at init (Register), so that it
// exports none of the runtime's types.
package launch

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/runtime"
)

// Job is what launching needs of a job: its graph and configuration, and
// what its environment sets besides.
type Job struct {
	// Name is the job's name; Graph its job graph (nil when only its
	// checkpoints are looked at, as by InspectRestore).
	Name  string
	Graph *runtime.JobGraph
	// WithoutUID are the uids made for operators that may hold state but
	// were given none; a job that checkpoints is warned of them when it
	// starts.
	WithoutUID []string
	// Config is the job's configuration; JobID names its checkpoints.
	Config *config.Configuration
	JobID  string
	Logger *slog.Logger
	// Clock is the processing-time clock; nil is the wall clock.
	Clock runtime.Clock
	// Faults, if set, is asked at the runtime's fault points (tests).
	Faults runtime.FaultInjector
	// StorageFaults, if set, is asked before every operation on the
	// job's checkpoint storage (tests).
	StorageFaults func(ctx context.Context, op storage.Op, key string) error
	// BatchSize and ChannelCapacity tune the data plane; 0 keeps the
	// runtime's defaults.
	BatchSize, ChannelCapacity int
	// Events, if set, receives the job's events.
	Events func(runtime.Event)
	// Unreconciled are the uids of the job's sinks that cannot undo, on
	// a restore, what the transactions of a newer checkpoint committed:
	// the job does not fall back past a completed checkpoint that does
	// not verify while it has one, unless duplicates are allowed
	// (state-recovery.allow-duplicate-output).
	Unreconciled []string
	// FirstCheckpointID, if above 0, is the least id of the job's next
	// checkpoint (high availability: above every id a deposed leader
	// reserved).
	FirstCheckpointID int64
	// NewExecutor, if set, makes the executor of the job's subtasks (a
	// cluster's task managers); by default they run in this process.
	NewExecutor func(g *runtime.JobGraph, l runtime.Listener) (runtime.Executor, error)
}

var (
	describe func(env any, name string) (Job, error)
	handleOf func(client any) (*Handle, bool)
)

// Register installs package stream's hooks: d describes the job name of
// an environment (a *stream.Environment), h returns the handle of a job
// client (a *stream.JobClient). Package stream calls it at init.
func Register(d func(env any, name string) (Job, error), h func(client any) (*Handle, bool)) {
	describe, handleOf = d, h
}

// Describe returns the job name of env, a *stream.Environment, built the
// way its Execute would.
func Describe(env any, name string) (Job, error) {
	if describe == nil {
		return Job{}, fmt.Errorf("launch: package stream is not linked in")
	}
	return describe(env, name)
}

// HandleOf returns the handle of the job client c, a *stream.JobClient,
// and false if c is not one.
func HandleOf(c any) (*Handle, bool) {
	if handleOf == nil {
		return nil, false
	}
	return handleOf(c)
}

// MasterOf returns the job master of the job client c, a
// *stream.JobClient, or nil if c is not one.
func MasterOf(c any) *runtime.JobMaster {
	h, ok := HandleOf(c)
	if !ok {
		return nil
	}
	return h.Master()
}

// errorf makes the errors of launching a job. They reach programs
// through package stream's Execute, whose errors they have always been.
func errorf(format string, args ...any) error { return fmt.Errorf("stream: "+format, args...) }
