package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/ha"
	"github.com/weirstream/weir/internal/netio"
	"github.com/weirstream/weir/internal/procstat"
	"github.com/weirstream/weir/internal/runtime"
)

// TaskManager offers slots to a job manager and runs the subtasks it is
// given. It keeps trying to register, so it may start before the job
// manager; when its session ends (the job manager went away or declared it
// lost) it cancels its subtasks and registers again.
type TaskManager struct {
	id     string
	jmAddr string
	slots  int
	jobs   Jobs
	peers  *netio.Peers
	log    *slog.Logger
	dial   []DialOption
	// leaders, if set, reports the cluster's leading job manager (high
	// availability): the task manager registers with it, and with each
	// new one.
	leaders func(ctx context.Context) <-chan ha.LeaderInfo
	// epoch is the newest leader epoch seen: messages of an older
	// leader are ignored.
	epoch atomic.Int64
}

// FollowLeader makes the task manager register with the leading job
// manager that leaders reports, and with each new leader as soon as it
// is reported, rather than with a fixed address; it must be called before
// Run. Each new leader's epoch fences the old one: the task manager
// ignores any command of a job manager with an older epoch.
func (tm *TaskManager) FollowLeader(leaders func(ctx context.Context) <-chan ha.LeaderInfo) {
	tm.leaders = leaders
}

// NewTaskManager returns a task manager with the given id and slots that
// registers at the job manager jmAddr, connecting with opts (WithToken if
// the job manager requires one), and exchanges records with other task
// managers through peers.
func NewTaskManager(id, jmAddr string, slots int, jobs Jobs, peers *netio.Peers, log *slog.Logger, opts ...DialOption) *TaskManager {
	if log == nil {
		log = slog.Default()
	}
	return &TaskManager{id: id, jmAddr: jmAddr, slots: slots, jobs: jobs, peers: peers, log: log.With("task_manager", id), dial: opts}
}

// ID returns the task manager's id.
func (tm *TaskManager) ID() string { return tm.id }

// Run registers and serves sessions until ctx is done. It returns an
// error wrapping ErrAuth if the job manager refuses its credentials, or
// cannot prove it shares the token: trying again would not help.
func (tm *TaskManager) Run(ctx context.Context) error {
	if tm.leaders != nil {
		return tm.runFollowing(ctx)
	}
	conn, err := dial(tm.jmAddr, tm.dial)
	if err != nil {
		return err
	}
	defer conn.Close()
	backoff := 100 * time.Millisecond
	for {
		start := time.Now()
		err := tm.session(ctx, conn, tm.jmAddr)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, ErrAuth) {
			tm.log.Error("the job manager refused to register this task manager", "job_manager", tm.jmAddr, "err", err)
			return err
		}
		if time.Since(start) > 10*time.Second {
			backoff = 100 * time.Millisecond
		}
		tm.log.Warn("not registered with the job manager; retrying", "job_manager", tm.jmAddr, "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// tmSession is one registration: the stream and the jobs' workers.
type tmSession struct {
	tm     *TaskManager
	stream grpc.ClientStream
	ctx    context.Context
	end    context.CancelCauseFunc

	sendMu sync.Mutex

	mu      sync.Mutex
	workers map[string]Worker
	lastJM  time.Time
	// epoch is the job manager's leader epoch.
	epoch int64
	// fenced counts the messages ignored for an older epoch.
	fenced int
}

func (s *tmSession) send(m *tmMessage) {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	if err := s.stream.SendMsg(m); err != nil && !errors.Is(err, io.EOF) {
		s.end(fmt.Errorf("sending to the job manager: %w", err))
	}
	// io.EOF: the job manager ended the stream, and the receiver's RecvMsg
	// returns why (a refused registration, say).
}

func (tm *TaskManager) session(ctx context.Context, conn *grpc.ClientConn, jmAddr string) error {
	sctx, end := context.WithCancelCause(ctx)
	defer end(nil)
	stream, err := conn.NewStream(sctx, &sessionDesc, method("Session"), grpc.WaitForReady(false))
	if err != nil {
		return err
	}
	s := &tmSession{tm: tm, stream: stream, ctx: sctx, end: end, workers: map[string]Worker{}, lastJM: time.Now()}
	defer func() {
		// The subtasks belonged to this session: stop them, then drop the
		// data connections they used, so that the next session's channels
		// start on fresh connections.
		s.shutdown(errors.New("the session with the job manager ended"))
		tm.peers.Reset()
	}()
	s.send(&tmMessage{Register: &TaskManagerInfo{ID: tm.id, DataAddr: tm.peers.Addr(), Slots: tm.slots}})
	var first jmMessage
	if err := stream.RecvMsg(&first); err != nil {
		return fmt.Errorf("registering: %w", authError(jmAddr, err))
	}
	if first.Registered == nil {
		return errors.New("registering: the job manager did not confirm")
	}
	hb := *first.Registered
	if !tm.seeEpoch(hb.Epoch) {
		return fmt.Errorf("registering: the job manager at %s leads with epoch %d, older than %d: it was deposed", jmAddr, hb.Epoch, tm.epoch.Load())
	}
	s.epoch = hb.Epoch
	tm.log.Info("registered with the job manager", "job_manager", jmAddr, "slots", tm.slots, "data_addr", tm.peers.Addr(), "epoch", hb.Epoch)
	go s.heartbeats(hb.HeartbeatInterval, hb.HeartbeatTimeout)
	recvErr := make(chan error, 1)
	go func() {
		for {
			var msg jmMessage
			if err := stream.RecvMsg(&msg); err != nil {
				recvErr <- err
				return
			}
			s.mu.Lock()
			s.lastJM = time.Now()
			s.mu.Unlock()
			s.handle(&msg)
		}
	}()
	select {
	case err := <-recvErr:
		return err
	case <-sctx.Done():
		// Wait for the receiver (the stream ends with sctx), so that no
		// deploy runs while the session shuts down.
		<-recvErr
		return context.Cause(sctx)
	}
}

// heartbeats reports the subtasks' counters each interval, at least once
// a second so that the REST API's metrics stay fresh, and ends the
// session if the job manager has been silent for the timeout.
func (s *tmSession) heartbeats(interval, timeout time.Duration) {
	if interval <= 0 || interval > time.Second {
		interval = time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		silent := time.Since(s.lastJM)
		reports := make(map[string]jobReport, len(s.workers))
		for id, w := range s.workers {
			r := jobReport{Metrics: w.SubtaskMetrics()}
			for task, ps := range w.SourcePositions() {
				r.Positions = append(r.Positions, taskPositions{Task: task, Positions: ps})
			}
			reports[id] = r
		}
		s.mu.Unlock()
		if timeout > 0 && silent > timeout {
			s.end(fmt.Errorf("no heartbeat from the job manager for %s (heartbeat.timeout)", timeout))
			return
		}
		proc := procstat.Read()
		s.send(&tmMessage{Heartbeat: &tmHeartbeat{Jobs: reports, Process: &proc}})
	}
}

// shutdown cancels every subtask of the session and releases the workers.
func (s *tmSession) shutdown(cause error) {
	s.mu.Lock()
	ws := s.workers
	s.workers = map[string]Worker{}
	s.mu.Unlock()
	for id, w := range ws {
		w.Shutdown(cause)
		if err := w.Close(); err != nil {
			s.tm.log.Warn("closing job", "job_id", id, "err", err)
		}
	}
}

func (s *tmSession) worker(jobID string) Worker {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.workers[jobID]
}

func (s *tmSession) handle(m *jmMessage) {
	if newest := s.tm.epoch.Load(); m.Epoch < newest {
		// A deposed leader: it must not deploy, trigger or commit.
		if s.fenced++; s.fenced == 1 {
			s.tm.log.Warn("ignoring the commands of a deposed job manager", "epoch", m.Epoch, "newest_epoch", newest)
		}
		s.end(fmt.Errorf("the job manager's epoch %d is older than %d: it was deposed", m.Epoch, newest))
		return
	}
	switch {
	case m.Heartbeat != nil:
	case m.Deploy != nil:
		s.deploy(m.Deploy)
	case m.Cancel != nil:
		if w := s.worker(m.Cancel.JobID); w != nil {
			w.Cancel(m.Cancel.Refs, errors.New(m.Cancel.Cause))
		}
	case m.Trigger != nil:
		if w := s.worker(m.Trigger.JobID); w != nil {
			w.Trigger(m.Trigger.Ref, m.Trigger.Barrier)
		}
	case m.Complete != nil:
		if w := s.worker(m.Complete.JobID); w != nil {
			w.NotifyComplete(m.Complete.Ref, m.Complete.Checkpoint)
		}
	case m.Abort != nil:
		if w := s.worker(m.Abort.JobID); w != nil {
			w.NotifyAbort(m.Abort.Ref, m.Abort.Checkpoint, m.Abort.Reason)
		}
	case m.Assign != nil:
		if w := s.worker(m.Assign.JobID); w != nil {
			w.AssignSplits(m.Assign.Ref, m.Assign.Splits, m.Assign.Late)
		}
	case m.Align != nil:
		if w := s.worker(m.Align.JobID); w != nil {
			w.AlignWatermarks(m.Align.Ref, m.Align.MaxAllowed)
		}
	case m.Release != nil:
		s.mu.Lock()
		w := s.workers[m.Release.JobID]
		delete(s.workers, m.Release.JobID)
		s.mu.Unlock()
		if w != nil {
			go func() {
				w.Shutdown(errors.New("the job ended"))
				if err := w.Close(); err != nil {
					s.tm.log.Warn("closing job", "job_id", m.Release.JobID, "err", err)
				}
			}()
		}
	}
}

func (s *tmSession) deploy(d *deployMsg) {
	jobID := d.Submission.JobID
	s.mu.Lock()
	w := s.workers[jobID]
	s.mu.Unlock()
	l := sessionListener{s: s, jobID: jobID}
	if w == nil {
		var err error
		w, err = s.tm.jobs.Worker(s.ctx, d.Submission, s.tm.peers, l)
		if err != nil {
			for _, id := range d.Tasks {
				l.Exited(runtime.TaskRef{ID: id, Attempt: d.Attempt}, fmt.Errorf("building job %s: %w", d.Submission.Job, err))
			}
			return
		}
		s.mu.Lock()
		s.workers[jobID] = w
		s.mu.Unlock()
	}
	rd := runtime.Deployment{Attempt: d.Attempt, Tasks: d.Tasks, Remote: map[runtime.ChannelKey]runtime.RemoteChannel{}}
	if d.Restore != nil {
		rd.Restore = &runtime.Restore{Metadata: d.Restore, Path: d.RestorePath}
	}
	for _, rc := range d.Remote {
		rd.Remote[rc.Key] = rc.Channel
	}
	if len(d.Splits) > 0 {
		rd.Splits = make(map[checkpoint.TaskID]*runtime.SplitAssignment, len(d.Splits))
		for _, ts := range d.Splits {
			rd.Splits[ts.Task] = &ts.Assignment
		}
	}
	s.tm.log.Info("deploying subtasks", "job_id", jobID, "attempt", d.Attempt, "subtasks", len(d.Tasks), "remote_channels", len(d.Remote))
	w.Deploy(s.ctx, rd)
}

// sessionListener reports a job's subtasks to the job manager.
type sessionListener struct {
	s     *tmSession
	jobID string
}

func (l sessionListener) msg(ref runtime.TaskRef) taskMsg { return taskMsg{JobID: l.jobID, Ref: ref} }

func (l sessionListener) Acknowledge(ref runtime.TaskRef, id int64, ack checkpoint.TaskAck) {
	l.s.send(&tmMessage{Ack: &ackMsg{taskMsg: l.msg(ref), Checkpoint: id, Ack: ack}})
}

func (l sessionListener) Decline(ref runtime.TaskRef, id int64, why runtime.DeclineReason, err error) {
	l.s.send(&tmMessage{Decline: &declineMsg{taskMsg: l.msg(ref), Checkpoint: id, Reason: why, Err: err.Error()}})
}

func (l sessionListener) EndOfData(ref runtime.TaskRef) {
	t := l.msg(ref)
	l.s.send(&tmMessage{EndOfData: &t})
}

func (l sessionListener) SourceWatermark(ref runtime.TaskRef, wm int64) {
	l.s.send(&tmMessage{Watermark: &watermarkMsg{taskMsg: l.msg(ref), Watermark: wm}})
}

func (l sessionListener) Exited(ref runtime.TaskRef, err error) {
	m := &exitedMsg{taskMsg: l.msg(ref)}
	if err != nil {
		m.Err = err.Error()
		m.Permanent, m.Corrupt = connector.IsPermanent(err), errors.Is(err, storage.ErrCorrupt)
	}
	l.s.send(&tmMessage{Exited: m})
}

// seeEpoch records epoch as seen and reports whether it is the newest.
func (tm *TaskManager) seeEpoch(epoch int64) bool {
	for {
		cur := tm.epoch.Load()
		if epoch < cur {
			return false
		}
		if epoch == cur || tm.epoch.CompareAndSwap(cur, epoch) {
			return true
		}
	}
}

// runFollowing registers with each leader the leader retrieval reports,
// until ctx is done. A new leader ends the session with the old one (its
// subtasks are canceled) before the task manager registers again.
func (tm *TaskManager) runFollowing(ctx context.Context) error {
	var (
		mu       sync.Mutex
		leader   ha.LeaderInfo
		known    = make(chan struct{}, 1)
		endCur   context.CancelCauseFunc
		curEpoch int64
	)
	go func() {
		for info := range tm.leaders(ctx) {
			tm.seeEpoch(info.Epoch)
			mu.Lock()
			leader = info
			if endCur != nil && curEpoch < info.Epoch {
				endCur(fmt.Errorf("a new leader was elected: %s with epoch %d", info.Addr, info.Epoch))
			}
			mu.Unlock()
			tm.log.Info("leading job manager", "job_manager", info.Addr, "epoch", info.Epoch)
			select {
			case known <- struct{}{}:
			default:
			}
		}
	}()
	var conn *grpc.ClientConn
	connAddr := ""
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	backoff := 100 * time.Millisecond
	for {
		mu.Lock()
		target := leader
		mu.Unlock()
		if target.Addr == "" {
			select {
			case <-ctx.Done():
				return nil
			case <-known:
				continue
			}
		}
		if conn == nil || connAddr != target.Addr {
			if conn != nil {
				conn.Close()
			}
			c, err := dial(target.Addr, tm.dial)
			if err != nil {
				return err
			}
			conn, connAddr = c, target.Addr
		}
		sctx, end := context.WithCancelCause(ctx)
		mu.Lock()
		endCur, curEpoch = end, target.Epoch
		mu.Unlock()
		start := time.Now()
		err := tm.session(sctx, conn, target.Addr)
		mu.Lock()
		endCur = nil
		changed := leader.Epoch != target.Epoch
		mu.Unlock()
		end(nil)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, ErrAuth) {
			tm.log.Error("the job manager refused to register this task manager", "job_manager", target.Addr, "err", err)
			return err
		}
		if changed || time.Since(start) > 10*time.Second {
			backoff = 100 * time.Millisecond
		}
		tm.log.Warn("not registered with the leading job manager; retrying", "job_manager", target.Addr, "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-known:
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}
