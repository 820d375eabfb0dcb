package cluster

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/ha"
	"github.com/weirstream/weir/internal/runtime"
)

// countingJobs counts the workers task managers build: a deploy that
// gets through builds one.
type countingJobs struct {
	mu      sync.Mutex
	workers int
}

func (j *countingJobs) Start(context.Context, Submission, func(*runtime.JobGraph, runtime.Listener) (runtime.Executor, error)) (Job, error) {
	return nil, errors.New("not on a task manager")
}

func (j *countingJobs) Worker(context.Context, Submission, runtime.Peers, runtime.Listener) (Worker, error) {
	j.mu.Lock()
	j.workers++
	j.mu.Unlock()
	return nil, errors.New("counted")
}

// A task manager that has seen epoch 7 ignores a deploy stamped with
// epoch 5 and ends the session with that job manager; a deploy of epoch 7
// goes through.
func TestTaskManagerFencesOlderEpoch(t *testing.T) {
	jobs := &countingJobs{}
	tm := &TaskManager{id: "tm", jobs: jobs, log: slog.New(slog.DiscardHandler)}
	tm.seeEpoch(7)
	ctx, end := context.WithCancelCause(context.Background())
	defer end(nil)
	s := &tmSession{tm: tm, ctx: ctx, end: end, workers: map[string]Worker{}, epoch: 5}
	deploy := &deployMsg{Submission: Submission{JobID: "j", Job: "x"}, Tasks: []checkpoint.TaskID{{Vertex: "v"}}}
	s.handle(&jmMessage{Epoch: 5, Deploy: deploy})
	if jobs.workers != 0 {
		t.Fatalf("a deploy of the deposed epoch 5 built %d workers", jobs.workers)
	}
	if context.Cause(ctx) == nil {
		t.Fatal("the session with the deposed job manager goes on")
	}
	if tm.seeEpoch(6) {
		t.Error("epoch 6 counts as the newest after 7")
	}
	ctx2, end2 := context.WithCancelCause(context.Background())
	defer end2(nil)
	// The failed build reports its subtasks exited on the session's stream.
	s2 := &tmSession{tm: tm, ctx: ctx2, end: end2, workers: map[string]Worker{}, epoch: 7, stream: discardStream{}}
	s2.handle(&jmMessage{Epoch: 7, Deploy: deploy})
	if jobs.workers != 1 {
		t.Fatalf("a deploy of the current epoch built %d workers, want 1", jobs.workers)
	}
}

// fakeLeadership's checkpoint store fails every write with err.
type fakeLeadership struct {
	err  error
	lost chan struct{}
}

func (f *fakeLeadership) Epoch() int64                    { return 5 }
func (f *fakeLeadership) Lost() <-chan struct{}           { return f.lost }
func (f *fakeLeadership) Jobs() ha.JobGraphStore          { return fakeJobs{f.err} }
func (f *fakeLeadership) Checkpoints() ha.CheckpointStore { return f }
func (f *fakeLeadership) Resign(context.Context) error    { return nil }
func (f *fakeLeadership) Put(context.Context, string, ha.CompletedCheckpoint) error {
	return f.err
}
func (f *fakeLeadership) Latest(context.Context, string) (ha.CompletedCheckpoint, bool, error) {
	return ha.CompletedCheckpoint{}, false, nil
}
func (f *fakeLeadership) Remove(context.Context, string) error { return nil }
func (f *fakeLeadership) Reserve(context.Context, string, int64) error {
	return f.err
}
func (f *fakeLeadership) Reserved(context.Context, string) (int64, error) { return 0, nil }

// A leader whose record of a checkpoint is fenced off reports its
// leadership lost and never lets the checkpoint complete: the publication
// neither succeeds nor fails until the job's context ends.
func TestPublishCheckpointFencedNeverCompletes(t *testing.T) {
	m := NewJobManager(&countingJobs{}, WithLogger(slog.New(slog.DiscardHandler)))
	lost := make(chan error, 1)
	m.lead.Store(&leading{l: &fakeLeadership{err: ha.ErrNotLeader, lost: make(chan struct{})}, lost: func(err error) { lost <- err }})
	x := &clusterExecutor{m: m, sub: Submission{JobID: "j"}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- x.PublishCheckpoint(ctx, 3, "/cp/chk-3") }()
	if err := <-lost; !errors.Is(err, ha.ErrNotLeader) {
		t.Fatalf("lost with %v", err)
	}
	cancel()
	// Only the end of the job's context ends it: not success (the
	// subtasks would commit), nor an error of its own (the job master
	// would discard the checkpoint's files, which a successor may use).
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("PublishCheckpoint of a fenced leader returned %v, want the context's end", err)
	}
}

// discardStream is a session stream that drops what is sent.
type discardStream struct{ grpc.ClientStream }

func (discardStream) SendMsg(any) error            { return nil }
func (discardStream) Header() (metadata.MD, error) { return nil, nil }
func (discardStream) Context() context.Context     { return context.Background() }

// A leader that cannot reserve the ids of its next checkpoints (another
// leads) triggers nothing beyond those it reserved.
func TestTriggerBeyondReservedIDsIsFenced(t *testing.T) {
	m := NewJobManager(&countingJobs{}, WithLogger(slog.New(slog.DiscardHandler)))
	m.ctx = context.Background()
	lost := make(chan error, 1)
	m.lead.Store(&leading{l: &fakeLeadership{err: ha.ErrNotLeader, lost: make(chan struct{})}, lost: func(err error) { lost <- err }})
	x := &clusterExecutor{m: m, sub: Submission{JobID: "j"}}
	x.reserved.Store(idBlock)
	if !x.reservedFor(1) {
		t.Fatal("checkpoint 1, reserved, may not be triggered")
	}
	if x.reservedFor(idBlock + 1) {
		t.Fatal("a checkpoint beyond the reserved ids was triggered by a deposed leader")
	}
	if err := <-lost; !errors.Is(err, ha.ErrNotLeader) {
		t.Fatalf("lost with %v", err)
	}
}

// fakeJobs is a job graph store whose every write fails with err.
type fakeJobs struct{ err error }

func (f fakeJobs) Put(context.Context, string, []byte) error       { return f.err }
func (f fakeJobs) Remove(context.Context, string) error            { return f.err }
func (f fakeJobs) List(context.Context) (map[string][]byte, error) { return nil, nil }

// A deposed leader whose job ends leaves the job's checkpoints alone:
// they are its successor's.
func TestDeposedLeaderKeepsCheckpointsAtJobEnd(t *testing.T) {
	m := NewJobManager(&countingJobs{}, WithLogger(slog.New(slog.DiscardHandler)))
	lost := make(chan error, 1)
	m.lead.Store(&leading{l: &fakeLeadership{err: ha.ErrNotLeader, lost: make(chan struct{})}, lost: func(err error) { lost <- err }})
	x := &clusterExecutor{m: m, sub: Submission{JobID: "j"}}
	if x.MayDiscard(errors.New("restarts exhausted")) {
		t.Fatal("a deposed leader may discard the checkpoints of a job it lost")
	}
	if err := <-lost; !errors.Is(err, ha.ErrNotLeader) {
		t.Fatalf("lost with %v", err)
	}
	m2 := NewJobManager(&countingJobs{}, WithLogger(slog.New(slog.DiscardHandler)))
	m2.lead.Store(&leading{l: &fakeLeadership{lost: make(chan struct{})}, lost: func(error) { t.Error("lost") }})
	if !(&clusterExecutor{m: m2, sub: Submission{JobID: "j"}}).MayDiscard(nil) {
		t.Fatal("the leader may not apply the retention policy")
	}
}
