package cluster

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/procstat"
	"github.com/weirstream/weir/internal/runtime"
)

// Jobs builds the jobs a cluster runs. A Go binary cannot load code at run
// time, so every process of a cluster is the same binary, and builds a
// job's graph from its Submission the same way.
type Jobs interface {
	// Start starts the submitted job on the job manager; its subtasks run
	// on the executor newExec makes.
	Start(ctx context.Context, sub Submission, newExec func(*runtime.JobGraph, runtime.Listener) (runtime.Executor, error)) (Job, error)
	// Worker makes a task manager's side of the job: the executor of the
	// subtasks it is given.
	Worker(ctx context.Context, sub Submission, peers runtime.Peers, l runtime.Listener) (Worker, error)
}

// Job is a job running on the job manager.
type Job interface {
	Master() *runtime.JobMaster
	Done() <-chan struct{}
	Wait() error
}

// Worker is a task manager's side of a job.
type Worker interface {
	runtime.Executor
	// Shutdown cancels the subtasks still running with cause and waits
	// for them to exit.
	Shutdown(cause error)
	Close() error
}

// JobManagerOption configures a JobManager.
type JobManagerOption func(*JobManager)

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) JobManagerOption { return func(m *JobManager) { m.log = l } }

// WithHeartbeat sets how often heartbeats go both ways and after how long
// without one a peer is declared lost (heartbeat.interval and
// heartbeat.timeout; defaults 10 s and 50 s, as in Flink).
func WithHeartbeat(interval, timeout time.Duration) JobManagerOption {
	return func(m *JobManager) { m.hbInterval, m.hbTimeout = interval, timeout }
}

// WithJobStarted calls f with each job once it is started, for the REST
// API.
func WithJobStarted(f func(Submission, Job)) JobManagerOption {
	return func(m *JobManager) { m.onJob = f }
}

// WithAuthToken makes the job manager require the cluster's shared secret
// (cluster.auth-token) of every call and session: task managers and
// clients must dial with WithToken(tok). A refused call is logged, without
// any secret, and answered Unauthenticated. Default: no token; then Serve
// accepts only a loopback listener.
func WithAuthToken(tok string) JobManagerOption { return func(m *JobManager) { m.token = tok } }

// JobManager schedules jobs on the slots of registered task managers and
// runs their job masters (checkpoint coordination, restarts).
type JobManager struct {
	jobs       Jobs
	log        *slog.Logger
	hbInterval time.Duration
	hbTimeout  time.Duration
	onJob      func(Submission, Job)
	token      string
	srv        *grpc.Server
	ctx        context.Context
	stop       context.CancelFunc
	// standby, if set, names the leader while this job manager waits
	// for its leadership (Lead); until then it refuses every call.
	standby func() string
	lead    atomic.Pointer[leading]
	// serving is closed once Serve has set ctx.
	serving  chan struct{}
	recorded func(jobID string, id int64)

	mu      sync.Mutex
	tms     map[string]*tmConn
	running map[string]*jobRun
	order   []string
	nextCh  uint32
	// wake signals the scheduler that slots may have become free.
	wake chan struct{}
}

// tmConn is a registered task manager.
type tmConn struct {
	info  TaskManagerInfo
	since time.Time
	// guarded by JobManager.mu
	lastHeartbeat time.Time
	// process is the figures of its latest heartbeat (nil: none yet).
	process *procstat.Stats
	lost    bool
	reports map[string]jobReport
	slots   []string // job id using each slot, "" if free
	end     context.CancelCauseFunc
	// epoch is the job manager's leader epoch, stamped on every message.
	epoch int64

	qmu    sync.Mutex
	queue  []*jmMessage
	signal chan struct{}
}

func (t *tmConn) send(m *jmMessage) {
	m.Epoch = t.epoch
	t.qmu.Lock()
	t.queue = append(t.queue, m)
	t.qmu.Unlock()
	select {
	case t.signal <- struct{}{}:
	default:
	}
}

type jobRun struct {
	sub     Submission
	job     Job
	cancel  context.CancelFunc
	started time.Time
	exec    *clusterExecutor
	// guarded by JobManager.mu
	state string
	err   error
}

// NewJobManager returns a job manager for jobs.
func NewJobManager(jobs Jobs, opts ...JobManagerOption) *JobManager {
	var seed [4]byte
	_, _ = rand.Read(seed[:])
	m := &JobManager{
		// Channel ids start at a random point so that a restarted job
		// manager does not reuse ids its predecessor handed out.
		nextCh:     binary.BigEndian.Uint32(seed[:]),
		jobs:       jobs,
		log:        slog.Default(),
		hbInterval: 10 * time.Second,
		hbTimeout:  50 * time.Second,
		tms:        make(map[string]*tmConn),
		running:    make(map[string]*jobRun),
		wake:       make(chan struct{}, 1),
		serving:    make(chan struct{}),
	}
	for _, o := range opts {
		o(m)
	}
	return m
}

// Serve accepts task managers and clients on ln until ctx is done or
// Close is called. Without a token (WithAuthToken) it refuses, and closes,
// a listener that is not on a loopback address (CheckListen).
func (m *JobManager) Serve(ctx context.Context, ln net.Listener) error {
	if err := CheckListen(ln.Addr(), m.token); err != nil {
		ln.Close()
		return fmt.Errorf("cluster: the job manager's listener: %w", err)
	}
	m.ctx, m.stop = context.WithCancel(ctx)
	close(m.serving)
	opts := []grpc.ServerOption{grpc.ForceServerCodecV2(jsonCodec{}),
		grpc.MaxRecvMsgSize(maxMessage), grpc.MaxSendMsgSize(maxMessage)}
	var unary []grpc.UnaryServerInterceptor
	var streams []grpc.StreamServerInterceptor
	if m.token != "" {
		a := newAuthenticator(m.token, m.log)
		unary, streams = append(unary, a.unary), append(streams, a.stream)
	}
	if m.standby != nil {
		unary, streams = append(unary, m.leaderOnlyUnary), append(streams, m.leaderOnlyStream)
	}
	opts = append(opts, grpc.ChainUnaryInterceptor(unary...), grpc.ChainStreamInterceptor(streams...))
	m.srv = grpc.NewServer(opts...)
	m.srv.RegisterService(serviceDesc(), m)
	go m.heartbeats()
	go func() {
		<-m.ctx.Done()
		m.srv.Stop()
	}()
	m.log.Info("job manager listening", "addr", ln.Addr().String(), "auth", m.token != "")
	err := m.srv.Serve(ln)
	if errors.Is(err, grpc.ErrServerStopped) {
		err = nil
	}
	return err
}

// Close cancels the running jobs and stops serving.
func (m *JobManager) Close() {
	if m.stop != nil {
		m.stop()
	}
}

// heartbeats sends a heartbeat to every task manager each interval and
// declares lost those not heard from for the timeout.
func (m *JobManager) heartbeats() {
	t := time.NewTicker(m.hbInterval)
	defer t.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		var late []*tmConn
		m.mu.Lock()
		for _, tm := range m.tms {
			if now.Sub(tm.lastHeartbeat) > m.hbTimeout {
				late = append(late, tm)
				continue
			}
			tm.send(&jmMessage{Heartbeat: &struct{}{}})
		}
		m.mu.Unlock()
		for _, tm := range late {
			m.lose(tm, fmt.Errorf("no heartbeat for %s (heartbeat.timeout)", m.hbTimeout))
		}
	}
}

// session serves one task manager's registration for as long as it lasts.
func (m *JobManager) session(stream grpc.ServerStream) error {
	var first tmMessage
	if err := stream.RecvMsg(&first); err != nil {
		return err
	}
	if first.Register == nil || first.Register.ID == "" || first.Register.Slots <= 0 {
		return status.Error(codes.InvalidArgument, "the first message of a session must register a task manager with an id and at least one slot")
	}
	info := *first.Register
	ctx, end := context.WithCancelCause(stream.Context())
	tm := &tmConn{info: info, since: time.Now(), lastHeartbeat: time.Now(), reports: map[string]jobReport{},
		slots: make([]string, info.Slots), end: end, signal: make(chan struct{}, 1), epoch: m.epoch()}
	// Registered goes first: it is queued before anything else can see the
	// task manager.
	tm.send(&jmMessage{Registered: &registeredMsg{HeartbeatInterval: m.hbInterval, HeartbeatTimeout: m.hbTimeout, Epoch: tm.epoch}})
	m.mu.Lock()
	if old := m.tms[info.ID]; old != nil {
		m.mu.Unlock()
		return status.Errorf(codes.AlreadyExists, "task manager %s is already registered", info.ID)
	}
	m.tms[info.ID] = tm
	m.mu.Unlock()
	m.log.Info("task manager registered", "task_manager", info.ID, "slots", info.Slots, "data_addr", info.DataAddr)

	sendErr := make(chan error, 1)
	go func() { sendErr <- tm.sender(ctx, stream) }()
	recvErr := make(chan error, 1)
	go func() {
		for {
			var msg tmMessage
			if err := stream.RecvMsg(&msg); err != nil {
				recvErr <- err
				return
			}
			m.handle(tm, &msg)
		}
	}()
	m.schedule()
	var err error
	sent := false
	select {
	case err = <-recvErr:
		err = fmt.Errorf("session ended: %w", err)
	case err = <-sendErr:
		err, sent = fmt.Errorf("sending: %w", err), true
	case <-ctx.Done():
		err = context.Cause(ctx)
	}
	m.lose(tm, err)
	// The stream must not be used once the handler returns: the sender
	// stops with ctx, which lose ended. The receiver's RecvMsg returns
	// when the stream ends.
	if !sent {
		<-sendErr
	}
	return nil
}

func (t *tmConn) sender(ctx context.Context, stream grpc.ServerStream) error {
	for {
		select {
		case <-t.signal:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		t.qmu.Lock()
		q := t.queue
		t.queue = nil
		t.qmu.Unlock()
		for _, msg := range q {
			if err := stream.SendMsg(msg); err != nil {
				return err
			}
		}
	}
}

// lose declares tm lost: its subtasks are reported failed to their job
// masters, whose restart and failover strategies take over.
func (m *JobManager) lose(tm *tmConn, cause error) {
	m.mu.Lock()
	if tm.lost {
		m.mu.Unlock()
		return
	}
	tm.lost = true
	delete(m.tms, tm.info.ID)
	var exits []func()
	for _, r := range m.running {
		exits = append(exits, r.exec.lostLocked(tm, cause)...)
	}
	m.mu.Unlock()
	tm.end(cause)
	m.log.Warn("task manager lost", "task_manager", tm.info.ID, "err", cause)
	for _, f := range exits {
		f()
	}
}

func (m *JobManager) handle(tm *tmConn, msg *tmMessage) {
	m.mu.Lock()
	tm.lastHeartbeat = time.Now()
	var job *jobRun
	var jobID string
	switch {
	case msg.Ack != nil:
		jobID = msg.Ack.JobID
	case msg.Decline != nil:
		jobID = msg.Decline.JobID
	case msg.EndOfData != nil:
		jobID = msg.EndOfData.JobID
	case msg.Watermark != nil:
		jobID = msg.Watermark.JobID
	case msg.Exited != nil:
		jobID = msg.Exited.JobID
	case msg.Heartbeat != nil:
		tm.reports = msg.Heartbeat.Jobs
		if msg.Heartbeat.Process != nil {
			tm.process = msg.Heartbeat.Process
		}
		if tm.reports == nil {
			tm.reports = map[string]jobReport{}
		}
	}
	if jobID != "" {
		job = m.running[jobID]
	}
	if job != nil && msg.Exited != nil {
		delete(job.exec.where, msg.Exited.Ref)
	}
	m.mu.Unlock()
	if job == nil {
		return
	}
	l := job.exec.l
	switch {
	case msg.Ack != nil:
		l.Acknowledge(msg.Ack.Ref, msg.Ack.Checkpoint, msg.Ack.Ack)
	case msg.Decline != nil:
		l.Decline(msg.Decline.Ref, msg.Decline.Checkpoint, msg.Decline.Reason, errors.New(msg.Decline.Err))
	case msg.EndOfData != nil:
		l.EndOfData(msg.EndOfData.Ref)
	case msg.Watermark != nil:
		l.SourceWatermark(msg.Watermark.Ref, msg.Watermark.Watermark)
	case msg.Exited != nil:
		var err error
		if msg.Exited.Err != "" {
			err = &remoteError{msg: fmt.Sprintf("on task manager %s: %s", tm.info.ID, msg.Exited.Err),
				permanent: msg.Exited.Permanent, corrupt: msg.Exited.Corrupt}
		}
		l.Exited(msg.Exited.Ref, err)
	}
}

// submit starts a job. With high availability the job is recorded in
// the job graph store first: a successor recovers every job whose
// submission was acknowledged.
func (m *JobManager) submit(ctx context.Context, sub *Submission) (*submitResponse, error) {
	if sub.JobID == "" {
		return nil, status.Error(codes.InvalidArgument, "a submission needs a job id")
	}
	sub.RecoverFrom, sub.FirstCheckpointID = "", 0
	return m.start(ctx, sub, true)
}

// start starts sub; record says whether it is recorded in the job graph
// store first (not when it is recovered from there).
func (m *JobManager) start(ctx context.Context, sub *Submission, record bool) (*submitResponse, error) {
	m.mu.Lock()
	_, dup := m.running[sub.JobID]
	m.mu.Unlock()
	if dup {
		return nil, status.Errorf(codes.AlreadyExists, "job %s exists", sub.JobID)
	}
	if record {
		if err := m.recordJob(ctx, sub); err != nil {
			return nil, err
		}
	}
	m.mu.Lock()
	if _, dup := m.running[sub.JobID]; dup {
		m.mu.Unlock()
		return nil, status.Errorf(codes.AlreadyExists, "job %s exists", sub.JobID)
	}
	ctx, cancel := context.WithCancel(m.ctx)
	r := &jobRun{sub: *sub, started: time.Now(), state: "RUNNING", cancel: cancel}
	r.exec = &clusterExecutor{m: m, sub: *sub, where: map[runtime.TaskRef]string{}, placement: map[int]slotRef{}}
	m.running[sub.JobID] = r
	m.order = append(m.order, sub.JobID)
	m.mu.Unlock()

	var job Job
	var err error
	if ld := m.lead.Load(); ld != nil {
		// The first block of checkpoint ids, before any is used.
		err = r.exec.reserveIDs(ctx, ld, max(sub.FirstCheckpointID, 1)+idBlock-1)
	}
	if err == nil {
		job, err = m.jobs.Start(ctx, *sub, func(g *runtime.JobGraph, l runtime.Listener) (runtime.Executor, error) {
			r.exec.g, r.exec.l = g, l
			return r.exec, nil
		})
	}
	if err != nil {
		cancel()
		m.mu.Lock()
		delete(m.running, sub.JobID)
		m.order = slices.DeleteFunc(m.order, func(id string) bool { return id == sub.JobID })
		m.mu.Unlock()
		if record {
			// A recovered job stays recorded: the next leader tries again.
			m.forgetJob(sub.JobID)
		}
		return nil, status.Errorf(codes.InvalidArgument, "starting job %s: %v", sub.Job, err)
	}
	m.mu.Lock()
	r.job = job
	m.mu.Unlock()
	m.log.Info("job submitted", "job", sub.Job, "job_id", sub.JobID)
	if m.onJob != nil {
		m.onJob(*sub, job)
	}
	go func() {
		err := job.Wait()
		m.mu.Lock()
		switch {
		case err == nil:
			r.state = "FINISHED"
		case ctx.Err() != nil:
			r.state = "CANCELED"
		default:
			r.state, r.err = "FAILED", err
		}
		r.exec.releaseLocked()
		m.mu.Unlock()
		cancel()
		m.log.Info("job ended", "job_id", sub.JobID, "state", r.state, "err", err)
		m.forgetJob(sub.JobID)
		m.schedule()
	}()
	return &submitResponse{JobID: sub.JobID}, nil
}

func (m *JobManager) list(context.Context, *listRequest) (*listResponse, error) {
	m.mu.Lock()
	resp := &listResponse{}
	var masters []*runtime.JobMaster
	for _, id := range m.order {
		r := m.running[id]
		js := JobStatus{JobID: id, Job: r.sub.Job, State: r.state, Started: r.started}
		if r.err != nil {
			js.Error = r.err.Error()
		}
		var jm *runtime.JobMaster
		if r.job != nil {
			jm = r.job.Master()
		}
		masters = append(masters, jm)
		resp.Jobs = append(resp.Jobs, js)
	}
	ids := make([]string, 0, len(m.tms))
	for id := range m.tms {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		tm := m.tms[id]
		resp.TaskManagers = append(resp.TaskManagers, tm.info)
		resp.SlotsTotal += len(tm.slots)
		for _, s := range tm.slots {
			if s != "" {
				resp.SlotsOccupied++
			}
		}
	}
	m.mu.Unlock()
	// Metrics read the task managers' reports under m.mu.
	for i, jm := range masters {
		if jm != nil {
			mt := jm.Metrics()
			resp.Jobs[i].Restarts, resp.Jobs[i].LastCheckpoint = mt.Restarts, mt.LastCheckpoint.ID
			// While the job runs, the job master knows whether it is
			// restarting or failing; its end is decided when Wait returns.
			if resp.Jobs[i].State == "RUNNING" && (mt.Status == runtime.StatusRestarting || mt.Status == runtime.StatusFailing) {
				resp.Jobs[i].State = string(mt.Status)
			}
			if f := mt.LastFailure; f != nil && resp.Jobs[i].Error == "" {
				resp.Jobs[i].LastFailure = f.Err.Error()
			}
		}
	}
	return resp, nil
}

// runningJob returns job jobID and its entry while it runs, or the error
// a client is answered with: not found, still starting, or ended.
func (m *JobManager) runningJob(jobID string) (*jobRun, Job, error) {
	m.mu.Lock()
	r := m.running[jobID]
	var job Job
	if r != nil {
		job = r.job
	}
	m.mu.Unlock()
	switch {
	case r == nil:
		return nil, nil, status.Errorf(codes.NotFound, "no job %s", jobID)
	case job == nil:
		return nil, nil, status.Errorf(codes.Unavailable, "job %s is still starting", jobID)
	}
	select {
	case <-job.Done():
		return nil, nil, ended(jobID, job.Wait(), "has already")
	default:
	}
	return r, job, nil
}

func (m *JobManager) cancel(ctx context.Context, req *cancelRequest) (*cancelResponse, error) {
	r, job, err := m.runningJob(req.JobID)
	if err != nil {
		return nil, err
	}
	r.cancel()
	select {
	case <-job.Done():
		if err := job.Wait(); err == nil || !errors.Is(err, context.Canceled) {
			return nil, ended(req.JobID, err, "had")
		}
		return &cancelResponse{}, nil
	case <-ctx.Done():
		return nil, status.Errorf(codes.DeadlineExceeded, "job %s is still stopping", req.JobID)
	}
}

func (m *JobManager) savepoint(ctx context.Context, req *savepointRequest) (*savepointResponse, error) {
	r, job, err := m.runningJob(req.JobID)
	if err != nil {
		return nil, err
	}
	format, err := checkpoint.ParseSavepointFormat(req.Format)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "savepoint of job %s: %v", req.JobID, err)
	}
	m.log.Info("taking a savepoint, as a client asks", "job_id", req.JobID, "dir", req.Dir, "cancel", req.Cancel, "stop", req.Stop, "drain", req.Drain, "format", format)
	take := job.Master().TriggerSavepoint
	if req.Stop {
		take = func(ctx context.Context, dir string, format checkpoint.SavepointFormat) (string, error) {
			return job.Master().StopWithSavepoint(ctx, dir, req.Drain, format)
		}
	}
	path, err := take(ctx, req.Dir, format)
	if err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "savepoint of job %s: %v", req.JobID, err)
	}
	if req.Cancel {
		r.cancel()
	}
	return &savepointResponse{Path: path}, nil
}

// CancelJob asks the job jobID to stop, as a client's Cancel does, and
// returns at once: its state turns CANCELED when it has stopped. It is
// for the REST API, which answers before the job stops; a job that is
// unknown or has ended is left alone.
func (m *JobManager) CancelJob(jobID string) {
	m.mu.Lock()
	r := m.running[jobID]
	m.mu.Unlock()
	if r != nil {
		r.cancel()
	}
}

// ended is the answer to a cancel of a job that ended by itself, with err
// (nil: it finished).
func ended(jobID string, err error, had string) error {
	switch {
	case err == nil:
		return status.Errorf(codes.FailedPrecondition, "job %s %s finished", jobID, had)
	case errors.Is(err, context.Canceled):
		return status.Errorf(codes.FailedPrecondition, "job %s %s been canceled", jobID, had)
	}
	return status.Errorf(codes.FailedPrecondition, "job %s %s failed: %v", jobID, had, err)
}

// Slots reports the registered task managers and their slots, in total
// and free.
func (m *JobManager) Slots() (taskManagers, total, free int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, tm := range m.tms {
		total += len(tm.slots)
		for _, s := range tm.slots {
			if s == "" {
				free++
			}
		}
	}
	return len(m.tms), total, free
}

// TaskManagerState is a registered task manager as the job manager sees
// it.
type TaskManagerState struct {
	TaskManagerInfo
	// Jobs holds the id of the job using each slot, "" for a free one.
	Jobs []string
	// LastHeartbeat is when the job manager last heard from it.
	LastHeartbeat time.Time
	// Process is its process's figures as of its latest heartbeat (nil:
	// none yet).
	Process *procstat.Stats
}

// TaskManagers returns the registered task managers, by id.
func (m *JobManager) TaskManagers() []TaskManagerState {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]TaskManagerState, 0, len(m.tms))
	for _, tm := range m.tms {
		out = append(out, TaskManagerState{TaskManagerInfo: tm.info, Jobs: slices.Clone(tm.slots), LastHeartbeat: tm.lastHeartbeat, Process: tm.process})
	}
	slices.SortFunc(out, func(a, b TaskManagerState) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// schedule retries the deployments waiting for slots.
func (m *JobManager) schedule() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, id := range m.order {
		m.running[id].exec.retryLocked()
	}
}

// slotRef is a slot of a task manager.
type slotRef struct {
	tm   string
	slot int
}

// clusterExecutor places one job's subtasks on task managers' slots and
// relays the job master's commands and the subtasks' reports. Subtask i of
// every vertex shares slot i (Flink's slot sharing), so a job needs as many
// slots as its highest parallelism, and forward channels stay local.
type clusterExecutor struct {
	m   *JobManager
	sub Submission
	g   *runtime.JobGraph
	l   runtime.Listener

	// guarded by m.mu
	// reserved is the highest checkpoint id reserved in the
	// completed-checkpoint store (high availability), reserving whether a
	// reservation is under way.
	reserved  atomic.Int64
	reserving atomic.Bool

	placement map[int]slotRef
	where     map[runtime.TaskRef]string
	pending   []runtime.Deployment
	released  bool
}

// Deploy implements runtime.Executor: the deployment goes out at once if
// there are slots for it, else when task managers offer them.
func (x *clusterExecutor) Deploy(_ context.Context, d runtime.Deployment) {
	x.m.mu.Lock()
	defer x.m.mu.Unlock()
	x.pending = append(x.pending, d)
	x.retryLocked()
}

// retryLocked sends the pending deployments that have slots now, in
// order.
func (x *clusterExecutor) retryLocked() {
	for len(x.pending) > 0 && !x.released && x.placeLocked(x.pending[0]) {
		x.pending = x.pending[1:]
	}
}

// placeLocked assigns slots to d's subtasks and queues its deploy
// messages, or reports false if there are not enough free slots.
func (x *clusterExecutor) placeLocked(d runtime.Deployment) bool {
	m := x.m
	need := map[int]bool{}
	for _, id := range d.Tasks {
		need[id.Subtask] = true
	}
	var missing []int
	for i := range need {
		if s, ok := x.placement[i]; !ok || m.tms[s.tm] == nil {
			delete(x.placement, i)
			missing = append(missing, i)
		}
	}
	sort.Ints(missing)
	type free struct {
		tm   *tmConn
		slot int
	}
	var frees []free
	for _, tm := range m.tms {
		for i, s := range tm.slots {
			if s == "" {
				frees = append(frees, free{tm, i})
			}
		}
	}
	if len(frees) < len(missing) {
		total := 0
		for _, tm := range m.tms {
			total += len(tm.slots)
		}
		m.log.Warn("waiting for task slots", "job_id", x.sub.JobID, "needed", len(missing), "free", len(frees), "registered", total)
		return false
	}
	// Spread over task managers: take from the one with the most free
	// slots each time, ties by id.
	for _, i := range missing {
		count := map[string]int{}
		for _, f := range frees {
			count[f.tm.info.ID]++
		}
		best := -1
		for k, f := range frees {
			if best < 0 || count[f.tm.info.ID] > count[frees[best].tm.info.ID] ||
				(count[f.tm.info.ID] == count[frees[best].tm.info.ID] && f.tm.info.ID < frees[best].tm.info.ID) {
				best = k
			}
		}
		f := frees[best]
		frees = slices.Delete(frees, best, best+1)
		f.tm.slots[f.slot] = x.sub.JobID
		x.placement[i] = slotRef{tm: f.tm.info.ID, slot: f.slot}
	}
	msgs := map[string]*deployMsg{}
	tmOf := func(id checkpoint.TaskID) *tmConn { return m.tms[x.placement[id.Subtask].tm] }
	in := map[checkpoint.TaskID]bool{}
	for _, id := range d.Tasks {
		in[id] = true
		tm := tmOf(id)
		msg := msgs[tm.info.ID]
		if msg == nil {
			msg = &deployMsg{Submission: x.sub, Attempt: d.Attempt}
			if d.Restore != nil {
				msg.Restore, msg.RestorePath = d.Restore.Metadata, d.Restore.Path
			}
			msgs[tm.info.ID] = msg
		}
		msg.Tasks = append(msg.Tasks, id)
		if a := d.Splits[id]; a != nil {
			msg.Splits = append(msg.Splits, taskSplits{Task: id, Assignment: *a})
		}
		x.where[runtime.TaskRef{ID: id, Attempt: d.Attempt}] = tm.info.ID
	}
	for c := range x.g.Channels() {
		from := checkpoint.TaskID{Vertex: c.Edge.From.UID, Subtask: c.From}
		to := checkpoint.TaskID{Vertex: c.Edge.To.UID, Subtask: c.To}
		if !in[from] || !in[to] {
			continue
		}
		a, b := tmOf(from), tmOf(to)
		if a == b {
			continue
		}
		m.nextCh++
		key := runtime.ChannelKey{Edge: c.Edge.ID, From: c.From, To: c.To}
		msgs[a.info.ID].Remote = append(msgs[a.info.ID].Remote, remoteChannel{Key: key, Channel: runtime.RemoteChannel{ID: m.nextCh, Peer: b.info.ID, Addr: b.info.DataAddr}})
		msgs[b.info.ID].Remote = append(msgs[b.info.ID].Remote, remoteChannel{Key: key, Channel: runtime.RemoteChannel{ID: m.nextCh, Peer: a.info.ID, Addr: a.info.DataAddr}})
	}
	// Queue the deploy messages now, under m.mu: a Cancel, which also
	// holds it, must not overtake them.
	for id, msg := range msgs {
		m.log.Info("deploying", "job_id", x.sub.JobID, "task_manager", id, "attempt", d.Attempt, "subtasks", len(msg.Tasks), "remote_channels", len(msg.Remote))
		m.tms[id].send(&jmMessage{Deploy: msg})
	}
	return true
}

// lostLocked forgets the task manager tm: its slots and placements go,
// and every subtask deployed on it is reported as exited with cause.
func (x *clusterExecutor) lostLocked(tm *tmConn, cause error) []func() {
	for i, s := range x.placement {
		if s.tm == tm.info.ID {
			delete(x.placement, i)
		}
	}
	var out []func()
	for ref, id := range x.where {
		if id != tm.info.ID {
			continue
		}
		delete(x.where, ref)
		err := fmt.Errorf("task manager %s lost: %w", id, cause)
		out = append(out, func() { x.l.Exited(ref, err) })
	}
	return out
}

// releaseLocked frees the job's slots once it has ended and tells the task
// managers to drop what they hold for it.
func (x *clusterExecutor) releaseLocked() {
	x.released = true
	x.pending = nil
	for _, tm := range x.m.tms {
		used := false
		for i, s := range tm.slots {
			if s == x.sub.JobID {
				tm.slots[i], used = "", true
			}
		}
		if used {
			tm.send(&jmMessage{Release: &releaseMsg{JobID: x.sub.JobID}})
		}
	}
}

// Cancel implements runtime.Executor.
func (x *clusterExecutor) Cancel(refs []runtime.TaskRef, cause error) {
	m := x.m
	m.mu.Lock()
	byTM := map[string][]runtime.TaskRef{}
	var gone []runtime.TaskRef
	for _, ref := range refs {
		if id, ok := x.where[ref]; ok && m.tms[id] != nil {
			byTM[id] = append(byTM[id], ref)
			continue
		}
		delete(x.where, ref)
		gone = append(gone, ref)
	}
	// Pending deployments lose the canceled subtasks.
	for k := range x.pending {
		x.pending[k].Tasks = slices.DeleteFunc(slices.Clone(x.pending[k].Tasks), func(id checkpoint.TaskID) bool {
			return slices.Contains(gone, runtime.TaskRef{ID: id, Attempt: x.pending[k].Attempt})
		})
	}
	x.pending = slices.DeleteFunc(x.pending, func(d runtime.Deployment) bool { return len(d.Tasks) == 0 })
	for id, rs := range byTM {
		m.tms[id].send(&jmMessage{Cancel: &cancelMsg{JobID: x.sub.JobID, Refs: rs, Cause: cause.Error()}})
	}
	m.mu.Unlock()
	for _, ref := range gone {
		x.l.Exited(ref, cause)
	}
}

// route sends msg to the task manager running ref and reports whether
// there is one.
func (x *clusterExecutor) route(ref runtime.TaskRef, msg *jmMessage) bool {
	x.m.mu.Lock()
	defer x.m.mu.Unlock()
	tm := x.m.tms[x.where[ref]]
	if tm != nil {
		tm.send(msg)
	}
	return tm != nil
}

func (x *clusterExecutor) taskMsg(ref runtime.TaskRef) taskMsg {
	return taskMsg{JobID: x.sub.JobID, Ref: ref}
}

// Trigger implements runtime.Executor. A subtask that is not deployed
// (it waits for a slot) declines at once, which does not count as a
// failure: the checkpoint would otherwise wait for it until it expires.
func (x *clusterExecutor) Trigger(ref runtime.TaskRef, b runtime.Barrier) {
	if !x.reservedFor(b.ID) {
		return
	}
	if !x.route(ref, &jmMessage{Trigger: &triggerMsg{taskMsg: x.taskMsg(ref), Barrier: b}}) {
		x.l.Decline(ref, b.ID, runtime.DeclineTaskNotReady, fmt.Errorf("%v is not deployed: it waits for a task slot", ref.ID))
	}
}

// NotifyComplete implements runtime.Executor.
func (x *clusterExecutor) NotifyComplete(ref runtime.TaskRef, id int64) {
	x.route(ref, &jmMessage{Complete: &notifyMsg{taskMsg: x.taskMsg(ref), Checkpoint: id}})
}

// NotifyAbort implements runtime.Executor.
func (x *clusterExecutor) NotifyAbort(ref runtime.TaskRef, id int64, reason string) {
	x.route(ref, &jmMessage{Abort: &notifyMsg{taskMsg: x.taskMsg(ref), Checkpoint: id, Reason: reason}})
}

// AlignWatermarks implements runtime.Executor. The job master tells only
// subtasks that have reported their watermark, so they are deployed.
func (x *clusterExecutor) AlignWatermarks(ref runtime.TaskRef, maxAllowed int64) {
	x.route(ref, &jmMessage{Align: &alignMsg{taskMsg: x.taskMsg(ref), MaxAllowed: maxAllowed}})
}

// AssignSplits implements runtime.Executor. The splits of a subtask whose
// deployment waits for a slot join its deployment.
func (x *clusterExecutor) AssignSplits(ref runtime.TaskRef, splits, late []string) {
	x.m.mu.Lock()
	defer x.m.mu.Unlock()
	if tm := x.m.tms[x.where[ref]]; tm != nil {
		tm.send(&jmMessage{Assign: &assignMsg{taskMsg: x.taskMsg(ref), Splits: splits, Late: late}})
		return
	}
	for _, d := range x.pending {
		if a := d.Splits[ref.ID]; a != nil && d.Attempt == ref.Attempt && slices.Contains(d.Tasks, ref.ID) {
			a.Splits = append(a.Splits, splits...)
			a.Late = append(a.Late, late...)
			return
		}
	}
}

// SubtaskMetrics implements runtime.Executor, from the task managers'
// latest heartbeats.
func (x *clusterExecutor) SubtaskMetrics() []runtime.SubtaskMetrics {
	x.m.mu.Lock()
	defer x.m.mu.Unlock()
	var out []runtime.SubtaskMetrics
	for _, tm := range x.m.tms {
		for _, sm := range tm.reports[x.sub.JobID].Metrics {
			sm.TaskManager = tm.info.ID
			out = append(out, sm)
		}
	}
	return out
}

// SourcePositions implements runtime.Executor, from the task managers'
// latest heartbeats.
func (x *clusterExecutor) SourcePositions() map[checkpoint.TaskID]map[string]int64 {
	x.m.mu.Lock()
	defer x.m.mu.Unlock()
	out := map[checkpoint.TaskID]map[string]int64{}
	for _, tm := range x.m.tms {
		for _, p := range tm.reports[x.sub.JobID].Positions {
			out[p.Task] = p.Positions
		}
	}
	return out
}
