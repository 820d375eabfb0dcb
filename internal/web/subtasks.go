package web

import (
	"strconv"

	"github.com/weirstream/weir/internal/runtime"
)

// A vertex's subtasks one by one, as Flink's REST API serves them:
//
//	GET /jobs/:jobid/vertices/:vertexid/subtasktimes
//	GET /jobs/:jobid/vertices/:vertexid/subtasks/:subtaskindex
//	GET /jobs/:jobid/vertices/:vertexid/subtasks/:subtaskindex/accumulators
//	GET /jobs/:jobid/vertices/:vertexid/subtasks/:subtaskindex/attempts/:attempt
//	GET /jobs/:jobid/vertices/:vertexid/subtasks/:subtaskindex/attempts/:attempt/accumulators
//
// weir records one instant of a subtask's life, when its current attempt
// was deployed (it runs from then on), and keeps nothing of earlier
// attempts: an earlier attempt is not found.

// taskManagerOf is the id of the task manager subtask m runs in: the one
// its task manager reported, or this process's.
func taskManagerOf(m runtime.SubtaskMetrics) string {
	if m.TaskManager != "" {
		return m.TaskManager
	}
	return processID()
}

// subtaskTimesInfo is Flink's SubtasksTimesInfo.
type subtaskTimesInfo struct {
	ID       string        `json:"id"`
	Name     string        `json:"name"`
	Now      int64         `json:"now"`
	Subtasks []subtaskTime `json:"subtasks"`
}

// subtaskTime is Flink's SubtaskTimeInfo. timestamps holds every
// execution state, 0 for those the subtask has not been in: DEPLOYING,
// INITIALIZING and RUNNING are the attempt's deployment (weir's subtasks
// initialize and run as soon as they are deployed), and the job's end
// state its end. duration is from the deployment to the end, or to now.
type subtaskTime struct {
	Subtask    int              `json:"subtask"`
	Host       string           `json:"host"`
	Endpoint   string           `json:"endpoint"`
	Duration   int64            `json:"duration"`
	Timestamps map[string]int64 `json:"timestamps"`
}

func (s *Server) subtaskTimes(vid string) (any, error) {
	v, err := s.vertex(vid)
	if err != nil {
		return nil, err
	}
	_, end, _, now := s.times()
	state := taskState(s.state())
	out := subtaskTimesInfo{ID: s.ids[v], Name: v.Name, Now: now, Subtasks: []subtaskTime{}}
	for _, m := range subtaskIndex(s.jm.SubtaskMetrics())[v.UID] {
		ts := map[string]int64{}
		for _, st := range executionStates {
			ts[st] = 0
		}
		for _, st := range []string{"DEPLOYING", "INITIALIZING", "RUNNING"} {
			ts[st] = m.Deployed
		}
		last := now
		if end >= 0 {
			ts[state] = end
			last = end
		}
		tm := taskManagerOf(m)
		out.Subtasks = append(out.Subtasks, subtaskTime{Subtask: m.Task.Subtask, Host: tm, Endpoint: tm,
			Duration: max(last-m.Deployed, 0), Timestamps: ts})
	}
	return out, nil
}

// subtaskAttemptInfo is Flink's SubtaskExecutionAttemptDetailsInfo.
// status-duration gives each execution state's time in milliseconds as
// subtasktimes' timestamps imply; other-concurrent-attempts is empty
// (weir runs no speculative attempts).
type subtaskAttemptInfo struct {
	Subtask                 int              `json:"subtask"`
	Status                  string           `json:"status"`
	Attempt                 int              `json:"attempt"`
	Endpoint                string           `json:"endpoint"`
	Host                    string           `json:"host"`
	StartTime               int64            `json:"start-time"`
	EndTime                 int64            `json:"end-time"`
	Duration                int64            `json:"duration"`
	Metrics                 ioMetrics        `json:"metrics"`
	TaskManagerID           string           `json:"taskmanager-id"`
	StatusDuration          map[string]int64 `json:"status-duration"`
	OtherConcurrentAttempts []any            `json:"other-concurrent-attempts"`
}

// subtask finds subtask idx of vertex vid.
func (s *Server) subtask(vid, idx string) (*runtime.Vertex, runtime.SubtaskMetrics, error) {
	v, err := s.vertex(vid)
	if err != nil {
		return nil, runtime.SubtaskMetrics{}, err
	}
	i, err := strconv.Atoi(idx)
	if err != nil || i < 0 {
		return nil, runtime.SubtaskMetrics{}, badRequest("malformed subtask index %q: want a non-negative integer", echo(idx))
	}
	if i >= v.Parallelism {
		return nil, runtime.SubtaskMetrics{}, notFoundf("vertex %s has %d subtasks: there is no subtask %d", s.ids[v], v.Parallelism, i)
	}
	for _, m := range subtaskIndex(s.jm.SubtaskMetrics())[v.UID] {
		if m.Task.Subtask == i {
			return v, m, nil
		}
	}
	return nil, runtime.SubtaskMetrics{}, notFoundf("subtask %d of vertex %s has not been deployed", i, s.ids[v])
}

// subtaskAttempt is subtask idx's current attempt, or, with attempt not
// "", that attempt if it is the current one.
func (s *Server) subtaskAttempt(vid, idx, attempt string) (any, error) {
	v, m, err := s.subtask(vid, idx)
	if err != nil {
		return nil, err
	}
	if attempt != "" {
		a, err := strconv.Atoi(attempt)
		if err != nil || a < 0 {
			return nil, badRequest("malformed attempt %q: want a non-negative integer", echo(attempt))
		}
		if a != m.Attempt {
			return nil, notFoundf("subtask %d of vertex %s runs attempt %d; weir keeps nothing of other attempts", m.Task.Subtask, s.ids[v], m.Attempt)
		}
	}
	_, end, _, now := s.times()
	state := taskState(s.state())
	last := now
	if end >= 0 {
		last = end
	}
	recs := records{by: subtaskIndex(s.jm.SubtaskMetrics())}
	durs := map[string]int64{}
	for _, st := range executionStates {
		durs[st] = 0
	}
	durs[stateRunning] = max(last-m.Deployed, 0)
	tm := taskManagerOf(m)
	return subtaskAttemptInfo{
		Subtask: m.Task.Subtask, Status: state, Attempt: m.Attempt, Endpoint: tm, Host: tm,
		StartTime: m.Deployed, EndTime: end, Duration: max(last-m.Deployed, 0),
		Metrics: recs.ioFor(v, m.Task.Subtask), TaskManagerID: tm,
		StatusDuration: durs, OtherConcurrentAttempts: []any{},
	}, nil
}

// subtaskAccumulatorsInfo is Flink's SubtaskExecutionAttemptAccumulatorsInfo:
// weir has no accumulators.
type subtaskAccumulatorsInfo struct {
	Subtask          int    `json:"subtask"`
	Attempt          int    `json:"attempt"`
	ID               string `json:"id"`
	UserAccumulators []any  `json:"user-accumulators"`
}

func (s *Server) subtaskAccumulators(vid, idx, attempt string) (any, error) {
	if _, err := s.subtaskAttempt(vid, idx, attempt); err != nil {
		return nil, err
	}
	_, m, err := s.subtask(vid, idx)
	if err != nil {
		return nil, err
	}
	return subtaskAccumulatorsInfo{Subtask: m.Task.Subtask, Attempt: m.Attempt, ID: m.Task.String(), UserAccumulators: []any{}}, nil
}
