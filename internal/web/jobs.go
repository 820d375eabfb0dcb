package web

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/weirstream/weir/internal/runtime"
)

// Job and task states, Flink's names.
const (
	stateRunning  = "RUNNING"
	stateFinished = "FINISHED"
	stateFailed   = "FAILED"
	stateCanceled = "CANCELED"
)

// executionStates are Flink's ExecutionState names, the keys of a
// vertex's "tasks" and a job's "status-counts".
var executionStates = []string{"CREATED", "SCHEDULED", "DEPLOYING", "RUNNING", "FINISHED", "CANCELING", "CANCELED", "FAILED", "RECONCILING", "INITIALIZING"}

// state returns the job's state. A job that ended because its context was
// canceled is CANCELED, one that ended with another error FAILED.
func (s *Server) state() string {
	if !s.ended() {
		// Until Done closes, and Err decides, a job that has ended in the
		// job master is still winding down.
		switch st, _ := s.jm.Status(); st {
		case runtime.StatusFailed:
			return string(runtime.StatusFailing)
		case runtime.StatusCanceled:
			return "CANCELLING"
		case runtime.StatusFinished, runtime.StatusCreated:
			return stateRunning
		default:
			return string(st)
		}
	}
	var err error
	if s.job.Err != nil {
		err = s.job.Err()
	}
	switch {
	case err == nil:
		return stateFinished
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return stateCanceled
	}
	return stateFailed
}

// taskState is the execution state shown for tasks while the job is in
// state: a restarting job's tasks are being canceled or wait to be
// scheduled again.
func taskState(state string) string {
	switch state {
	case string(runtime.StatusRestarting):
		return "SCHEDULED"
	case string(runtime.StatusFailing), "CANCELLING":
		return "CANCELING"
	}
	return state
}

// startTime returns when the job started running. The job master sets
// its start time on its own goroutine before it deploys the subtasks, so
// the time is read only once that is known to have happened: the job has
// ended, or subtasks are deployed (SubtaskMetrics reads them under the
// lock the deployment takes). Before that, the server's creation time
// stands in.
func (s *Server) startTime() time.Time {
	if t := s.started.Load(); t != nil {
		return *t
	}
	if !s.ended() && len(s.jm.SubtaskMetrics()) == 0 {
		return s.created
	}
	t := s.jm.Started()
	s.started.Store(&t)
	return t
}

// times returns the start time, the end time (-1 while running) and the
// duration in milliseconds, with the current time.
func (s *Server) times() (start, end, duration, now int64) {
	start = s.startTime().UnixMilli()
	s.ended()
	now = time.Now().UnixMilli()
	end = -1
	if e := s.endedAt.Load(); e != 0 {
		end = e
	}
	duration = now - start
	if end >= 0 {
		duration = end - start
	}
	return start, end, max(duration, 0), now
}

// overviewInfo is Flink's ClusterOverview. A weir job runs in one process:
// one task manager whose slots are shared by the vertices, so the job
// takes as many slots as its largest parallelism.
type overviewInfo struct {
	TaskManagers   int `json:"taskmanagers"`
	SlotsTotal     int `json:"slots-total"`
	SlotsAvailable int `json:"slots-available"`
	JobsRunning    int `json:"jobs-running"`
	JobsFinished   int `json:"jobs-finished"`
	JobsCancelled  int `json:"jobs-cancelled"`
	JobsFailed     int `json:"jobs-failed"`
}

func (s *Server) slots() int {
	n := 0
	for _, v := range s.jm.Graph().Vertices {
		n = max(n, v.Parallelism)
	}
	return n
}

func (s *Server) overview(w http.ResponseWriter) {
	writeJSON(w, http.StatusOK, s.overviewInfo())
}

// overviewInfo is the job's cluster: one task manager, its slots and the
// job.
func (s *Server) overviewInfo() overviewInfo {
	o := overviewInfo{TaskManagers: 1, SlotsTotal: s.slots()}
	if !o.count(s.state()) {
		o.SlotsAvailable = o.SlotsTotal
	}
	return o
}

// count adds a job in state to the overview's counts and reports whether
// it is running.
func (o *overviewInfo) count(state string) (running bool) {
	switch state {
	case stateFinished:
		o.JobsFinished++
	case stateCanceled:
		o.JobsCancelled++
	case stateFailed:
		o.JobsFailed++
	default: // RUNNING, RESTARTING, FAILING, CANCELLING: not yet ended
		o.JobsRunning++
		return true
	}
	return false
}

// jobIDs is Flink's JobIdsWithStatusOverview.
type jobIDs struct {
	Jobs []jobIDStatus `json:"jobs"`
}

type jobIDStatus struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

func (s *Server) jobs(w http.ResponseWriter) {
	writeJSON(w, http.StatusOK, jobIDs{Jobs: []jobIDStatus{{ID: s.jm.JobID(), Status: s.state()}}})
}

// jobsOverviewInfo is Flink's MultipleJobsDetails.
type jobsOverviewInfo struct {
	Jobs []jobOverview `json:"jobs"`
}

// jobOverview is one entry of Flink's MultipleJobsDetails.
type jobOverview struct {
	JID              string         `json:"jid"`
	Name             string         `json:"name"`
	State            string         `json:"state"`
	StartTime        int64          `json:"start-time"`
	EndTime          int64          `json:"end-time"`
	Duration         int64          `json:"duration"`
	LastModification int64          `json:"last-modification"`
	Tasks            map[string]int `json:"tasks"`
}

func (s *Server) jobsOverview(w http.ResponseWriter) {
	writeJSON(w, http.StatusOK, jobsOverviewInfo{Jobs: []jobOverview{s.overviewEntry()}})
}

// overviewEntry is the job's line in /jobs/overview.
func (s *Server) overviewEntry() jobOverview {
	start, end, dur, now := s.times()
	state := s.state()
	tasks := map[string]int{"total": 0}
	for _, st := range executionStates {
		tasks[st] = 0
	}
	for _, v := range s.jm.Graph().Vertices {
		tasks["total"] += v.Parallelism
		tasks[taskState(state)] += v.Parallelism
	}
	last := now
	if end >= 0 {
		last = end
	}
	return jobOverview{JID: s.jm.JobID(), Name: s.jm.Graph().Name, State: state, StartTime: start, EndTime: end, Duration: dur, LastModification: last, Tasks: tasks}
}

// jobDetailsInfo is Flink's JobDetailsInfo.
type jobDetailsInfo struct {
	JID            string           `json:"jid"`
	Name           string           `json:"name"`
	IsStoppable    bool             `json:"isStoppable"`
	State          string           `json:"state"`
	JobType        string           `json:"job-type"`
	StartTime      int64            `json:"start-time"`
	EndTime        int64            `json:"end-time"`
	Duration       int64            `json:"duration"`
	MaxParallelism int              `json:"maxParallelism"`
	Now            int64            `json:"now"`
	Timestamps     map[string]int64 `json:"timestamps"`
	Vertices       []vertexInfo     `json:"vertices"`
	StatusCounts   map[string]int   `json:"status-counts"`
	Plan           planInfo         `json:"plan"`
}

// vertexInfo is Flink's JobVertexDetailsInfo as listed in a job.
type vertexInfo struct {
	ID string `json:"id"`
	// UID is weir's: the uid of the vertex's head operator, the key of
	// its state in checkpoints.
	UID            string         `json:"uid"`
	Name           string         `json:"name"`
	MaxParallelism int            `json:"maxParallelism"`
	Parallelism    int            `json:"parallelism"`
	Status         string         `json:"status"`
	StartTime      int64          `json:"start-time"`
	EndTime        int64          `json:"end-time"`
	Duration       int64          `json:"duration"`
	Tasks          map[string]int `json:"tasks"`
	Metrics        ioMetrics      `json:"metrics"`
}

// ioMetrics is Flink's IOMetricsInfo, as far as weir counts: records,
// bytes and backpressured time (not idle and busy time).
//
// A vertex's read-records are the records it received on its input
// channels (0 for a source, as in Flink). Its write-records are the
// records it sent on its output channels: for a source, the records it
// emitted; for a vertex without outputs, 0. Otherwise they are counted
// where the consumers receive them, which is possible when every output
// edge is a hash, rebalance or forward edge into a vertex with no other
// input (for one subtask: forward edges only); records still in the
// channels are then not counted yet, and write-records-complete is false.
// Where it is not possible, write-records is omitted. Counters start
// again from zero when a subtask is redeployed.
//
// read-bytes and write-bytes are the bytes received and sent on channels
// that cross processes (frame headers included). A channel within one
// process hands records over in memory, unserialized, and counts no
// bytes, so the counts are complete only when every input (output)
// channel of every subtask crosses processes; a source reads 0 bytes and
// a vertex without outputs writes 0, as in Flink.
type ioMetrics struct {
	ReadBytes            int64  `json:"read-bytes"`
	ReadBytesComplete    bool   `json:"read-bytes-complete"`
	WriteBytes           int64  `json:"write-bytes"`
	WriteBytesComplete   bool   `json:"write-bytes-complete"`
	ReadRecords          int64  `json:"read-records"`
	ReadRecordsComplete  bool   `json:"read-records-complete"`
	WriteRecords         *int64 `json:"write-records,omitempty"`
	WriteRecordsComplete bool   `json:"write-records-complete"`
	// AccumulatedBackpressuredTime is the milliseconds the subtasks
	// waited for room in their output channels, summed.
	AccumulatedBackpressuredTime int64 `json:"accumulated-backpressured-time"`
}

// planInfo is Flink's JobPlanInfo.
type planInfo struct {
	JID   string     `json:"jid"`
	Name  string     `json:"name"`
	Type  string     `json:"type"`
	Nodes []planNode `json:"nodes"`
}

type planNode struct {
	ID                  string         `json:"id"`
	Parallelism         int            `json:"parallelism"`
	Operator            string         `json:"operator"`
	OperatorStrategy    string         `json:"operator_strategy"`
	Description         string         `json:"description"`
	Inputs              []planInput    `json:"inputs,omitempty"`
	OptimizerProperties map[string]any `json:"optimizer_properties"`
}

type planInput struct {
	Num          int    `json:"num"`
	ID           string `json:"id"`
	ShipStrategy string `json:"ship_strategy"`
	Exchange     string `json:"exchange"`
}

// subtaskIndex groups the subtask metrics by vertex uid, each sorted by
// subtask.
func subtaskIndex(ms []runtime.SubtaskMetrics) map[string][]runtime.SubtaskMetrics {
	out := map[string][]runtime.SubtaskMetrics{}
	for _, m := range ms {
		out[m.Task.Vertex] = append(out[m.Task.Vertex], m)
	}
	for _, l := range out {
		slices.SortFunc(l, func(a, b runtime.SubtaskMetrics) int { return a.Task.Subtask - b.Task.Subtask })
	}
	return out
}

// records counts what vertices and subtasks read and wrote.
type records struct {
	by map[string][]runtime.SubtaskMetrics
}

// read returns what subtask i of v received (all subtasks: i < 0).
func (r records) read(v *runtime.Vertex, i int) int64 {
	if v.Source() {
		return 0
	}
	return r.sum(v, i)
}

func (r records) sum(v *runtime.Vertex, i int) int64 {
	var n int64
	for _, m := range r.by[v.UID] {
		if i < 0 || m.Task.Subtask == i {
			n += m.RecordsIn
		}
	}
	return n
}

// write returns what subtask i of v (all subtasks: i < 0) sent on its
// output channels, and whether that is known (see ioMetrics).
func (r records) write(v *runtime.Vertex, i int) (int64, bool) {
	if v.Source() {
		return r.sum(v, i), true
	}
	if len(v.Outputs) == 0 {
		return 0, true
	}
	var n int64
	for _, e := range v.Outputs {
		if e.Partitioner == runtime.Broadcast || len(e.To.Inputs) != 1 {
			return 0, false
		}
		if i >= 0 && e.Partitioner != runtime.Forward {
			return 0, false // a subtask's share is not counted anywhere
		}
		n += r.sum(e.To, i)
	}
	return n, true
}

// ioFor returns the IO metrics of subtask i of v (all subtasks: i < 0).
func (r records) ioFor(v *runtime.Vertex, i int) ioMetrics {
	m := ioMetrics{ReadRecords: r.read(v, i), ReadRecordsComplete: true}
	if n, ok := r.write(v, i); ok {
		m.WriteRecords = &n
		m.WriteRecordsComplete = v.Source() || len(v.Outputs) == 0
	}
	m.ReadBytesComplete, m.WriteBytesComplete = true, true
	for _, sm := range r.by[v.UID] {
		if i < 0 || sm.Task.Subtask == i {
			m.AccumulatedBackpressuredTime += sm.OutBackpressuredNanos / int64(time.Millisecond)
			m.ReadBytes += sm.NetBytesIn
			m.WriteBytes += sm.NetBytesOut
			m.ReadBytesComplete = m.ReadBytesComplete && sm.NetInAll
			m.WriteBytesComplete = m.WriteBytesComplete && sm.NetOutAll
		}
	}
	return m
}

func (s *Server) jobDetails() jobDetailsInfo {
	g := s.jm.Graph()
	start, end, dur, now := s.times()
	state := s.state()
	recs := records{by: subtaskIndex(s.jm.SubtaskMetrics())}
	d := jobDetailsInfo{
		JID: s.jm.JobID(), Name: g.Name, State: state, JobType: "STREAMING",
		StartTime: start, EndTime: end, Duration: dur, MaxParallelism: -1, Now: now,
		Timestamps:   map[string]int64{stateRunning: start},
		StatusCounts: map[string]int{},
		Vertices:     []vertexInfo{},
	}
	if end >= 0 {
		d.Timestamps[state] = end
	}
	for _, st := range executionStates {
		d.StatusCounts[st] = 0
	}
	for _, v := range g.Vertices {
		id := s.ids[v]
		tasks := map[string]int{}
		for _, st := range executionStates {
			tasks[st] = 0
		}
		tasks[taskState(state)] = v.Parallelism
		d.StatusCounts[taskState(state)]++
		d.Vertices = append(d.Vertices, vertexInfo{
			ID: id, UID: v.UID, Name: v.Name, MaxParallelism: v.MaxParallelism, Parallelism: v.Parallelism,
			Status: taskState(state), StartTime: start, EndTime: end, Duration: dur, Tasks: tasks,
			Metrics: recs.ioFor(v, -1),
		})
	}
	d.Plan = s.plan()
	return d
}

// plan is the job's plan: a node per vertex, with its inputs.
func (s *Server) plan() planInfo {
	g := s.jm.Graph()
	p := planInfo{JID: s.jm.JobID(), Name: g.Name, Type: "STREAMING", Nodes: []planNode{}}
	for _, v := range g.Vertices {
		node := planNode{ID: s.ids[v], Parallelism: v.Parallelism, Description: v.Name, OptimizerProperties: map[string]any{}}
		for k, e := range v.Inputs {
			node.Inputs = append(node.Inputs, planInput{Num: k, ID: s.ids[e.From], ShipStrategy: e.Partitioner.String(), Exchange: "pipelined_bounded"})
		}
		p.Nodes = append(p.Nodes, node)
	}
	return p
}

// jobPlanInfo is Flink's JobPlanInfo, GET /jobs/:jobid/plan.
type jobPlanInfo struct {
	Plan planInfo `json:"plan"`
}

// vertexDetailsInfo is Flink's JobVertexDetailsInfo.
type vertexDetailsInfo struct {
	ID             string        `json:"id"`
	UID            string        `json:"uid"`
	Name           string        `json:"name"`
	Parallelism    int           `json:"parallelism"`
	MaxParallelism int           `json:"maxParallelism"`
	Now            int64         `json:"now"`
	Subtasks       []subtaskInfo `json:"subtasks"`
}

// subtaskInfo is Flink's SubtaskExecutionAttemptDetailsInfo, with weir's
// watermark and last checkpoint.
type subtaskInfo struct {
	Subtask int       `json:"subtask"`
	Status  string    `json:"status"`
	Attempt int       `json:"attempt"`
	Metrics ioMetrics `json:"metrics"`
	// Watermark is the subtask's event time in Unix milliseconds, omitted
	// before its first watermark.
	Watermark *int64 `json:"watermark,omitempty"`
	// LastCheckpoint is the newest checkpoint the subtask snapshotted (0:
	// none yet in this attempt).
	LastCheckpoint int64 `json:"last-checkpoint"`
}

func (s *Server) vertexDetails(vid string) (vertexDetailsInfo, error) {
	v, err := s.vertex(vid)
	if err != nil {
		return vertexDetailsInfo{}, err
	}
	_, _, _, now := s.times()
	state := s.state()
	recs := records{by: subtaskIndex(s.jm.SubtaskMetrics())}
	d := vertexDetailsInfo{ID: s.ids[v], UID: v.UID, Name: v.Name, Parallelism: v.Parallelism, MaxParallelism: v.MaxParallelism, Now: now, Subtasks: []subtaskInfo{}}
	for _, m := range recs.by[v.UID] {
		d.Subtasks = append(d.Subtasks, subtaskInfo{
			Subtask: m.Task.Subtask, Status: taskState(state), Attempt: m.Attempt,
			Metrics:        recs.ioFor(v, m.Task.Subtask),
			Watermark:      watermark(m.Watermark),
			LastCheckpoint: m.LastCheckpoint,
		})
	}
	return d, nil
}

// watermark returns wm, or nil when there is none yet.
func watermark(wm int64) *int64 {
	if wm == runtime.MinWatermark {
		return nil
	}
	return &wm
}

// watermarkInfo is one entry of Flink's /watermarks: a metric id and its
// value as a string.
type watermarkInfo struct {
	ID    string `json:"id"`
	Value string `json:"value"`
}

// watermarks serves Flink's per-subtask currentInputWatermark, with
// Long.MIN_VALUE for a subtask without a watermark, as Flink does.
func (s *Server) watermarks(vid string) ([]watermarkInfo, error) {
	v, err := s.vertex(vid)
	if err != nil {
		return nil, err
	}
	out := []watermarkInfo{}
	for _, m := range subtaskIndex(s.jm.SubtaskMetrics())[v.UID] {
		out = append(out, watermarkInfo{ID: strconv.Itoa(m.Task.Subtask) + ".currentInputWatermark", Value: strconv.FormatInt(m.Watermark, 10)})
	}
	return out, nil
}
