package web

// The vertex paths of Flink's dashboard that weir has little or nothing
// for: accumulators (weir has none: the lists are empty), the task
// managers a vertex runs on (the embedded one), and the flame graph
// (weir samples no stacks: Flink's answer when rest.flamegraph.enabled is
// false).

// vertexAccumulatorsInfo is Flink's JobVertexAccumulatorsInfo.
type vertexAccumulatorsInfo struct {
	ID               string `json:"id"`
	UserAccumulators []any  `json:"user-accumulators"`
}

// subtasksAccumulatorsInfo is Flink's SubtasksAllAccumulatorsInfo.
type subtasksAccumulatorsInfo struct {
	ID          string                `json:"id"`
	Parallelism int                   `json:"parallelism"`
	Subtasks    []subtaskAccumulators `json:"subtasks"`
}

type subtaskAccumulators struct {
	Subtask          int    `json:"subtask"`
	Attempt          int    `json:"attempt"`
	Endpoint         string `json:"endpoint"`
	UserAccumulators []any  `json:"user-accumulators"`
}

func (s *Server) vertexAccumulators(vid string) (any, error) {
	v, err := s.vertex(vid)
	if err != nil {
		return nil, err
	}
	return vertexAccumulatorsInfo{ID: s.ids[v], UserAccumulators: []any{}}, nil
}

func (s *Server) subtasksAccumulators(vid string) (any, error) {
	v, err := s.vertex(vid)
	if err != nil {
		return nil, err
	}
	out := subtasksAccumulatorsInfo{ID: s.ids[v], Parallelism: v.Parallelism, Subtasks: []subtaskAccumulators{}}
	for _, m := range subtaskIndex(s.jm.SubtaskMetrics())[v.UID] {
		out.Subtasks = append(out.Subtasks, subtaskAccumulators{Subtask: m.Task.Subtask, Attempt: m.Attempt, Endpoint: processID(), UserAccumulators: []any{}})
	}
	return out, nil
}

// vertexTaskManagersInfo is Flink's JobVertexTaskManagersInfo: the
// vertex's subtasks grouped by the task manager they run on, here the
// embedded one. Flink's "aggregated" statistics are left out (the
// dashboard shows none without them).
type vertexTaskManagersInfo struct {
	ID           string              `json:"id"`
	Name         string              `json:"name"`
	Now          int64               `json:"now"`
	TaskManagers []vertexTaskManager `json:"taskmanagers"`
}

type vertexTaskManager struct {
	Endpoint      string         `json:"endpoint"`
	Status        string         `json:"status"`
	StartTime     int64          `json:"start-time"`
	EndTime       int64          `json:"end-time"`
	Duration      int64          `json:"duration"`
	Metrics       ioMetrics      `json:"metrics"`
	StatusCounts  map[string]int `json:"status-counts"`
	TaskManagerID string         `json:"taskmanager-id"`
}

func (s *Server) vertexTaskManagers(vid string) (any, error) {
	v, err := s.vertex(vid)
	if err != nil {
		return nil, err
	}
	start, end, dur, now := s.times()
	state := taskState(s.state())
	counts := map[string]int{}
	for _, st := range executionStates {
		counts[st] = 0
	}
	counts[state] = v.Parallelism
	recs := records{by: subtaskIndex(s.jm.SubtaskMetrics())}
	return vertexTaskManagersInfo{ID: s.ids[v], Name: v.Name, Now: now, TaskManagers: []vertexTaskManager{{
		Endpoint: processID(), Status: state, StartTime: start, EndTime: end, Duration: dur,
		Metrics: recs.ioFor(v, -1), StatusCounts: counts, TaskManagerID: processID(),
	}}}, nil
}

// flameGraphInfo is Flink's VertexFlameGraph without data: endTimestamp
// -2 is Flink's mark of the feature disabled, which the dashboard
// explains.
type flameGraphInfo struct {
	EndTimestamp int64 `json:"endTimestamp"`
}

// flameGraphDisabled is VertexFlameGraph.disabled().
const flameGraphDisabled = -2

func (s *Server) flameGraph(vid string) (any, error) {
	if _, err := s.vertex(vid); err != nil {
		return nil, err
	}
	return flameGraphInfo{EndTimestamp: flameGraphDisabled}, nil
}
