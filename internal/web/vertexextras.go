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
		out.Subtasks = append(out.Subtasks, subtaskAccumulators{Subtask: m.Task.Subtask, Attempt: m.Attempt, Endpoint: taskManagerOf(m), UserAccumulators: []any{}})
	}
	return out, nil
}

// vertexTaskManagersInfo is Flink's JobVertexTaskManagersInfo: the
// vertex's subtasks grouped by the task manager they run on (the job's own
// process when it runs embedded). Flink's "aggregated" statistics are left
// out (the dashboard shows none without them).
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
	_, end, _, now := s.times()
	state := taskState(s.state())
	recs := records{by: subtaskIndex(s.jm.SubtaskMetrics())}
	out := vertexTaskManagersInfo{ID: s.ids[v], Name: v.Name, Now: now, TaskManagers: []vertexTaskManager{}}
	at := map[string]int{}    // task manager → index in out.TaskManagers
	unknown := map[int]bool{} // whose write-records are not known
	for _, m := range recs.by[v.UID] {
		tm := taskManagerOf(m)
		i, ok := at[tm]
		if !ok {
			counts := map[string]int{}
			for _, st := range executionStates {
				counts[st] = 0
			}
			i = len(out.TaskManagers)
			at[tm] = i
			out.TaskManagers = append(out.TaskManagers, vertexTaskManager{Endpoint: tm, Status: state, StartTime: m.Deployed,
				EndTime: end, StatusCounts: counts, TaskManagerID: tm, Metrics: ioMetrics{ReadRecordsComplete: true, WriteRecordsComplete: true}})
		}
		g := &out.TaskManagers[i]
		g.StatusCounts[state]++
		g.StartTime = min(g.StartTime, m.Deployed)
		io := recs.ioFor(v, m.Task.Subtask)
		g.Metrics.ReadRecords += io.ReadRecords
		g.Metrics.AccumulatedBackpressuredTime += io.AccumulatedBackpressuredTime
		switch {
		case io.WriteRecords == nil:
			unknown[i] = true
		case g.Metrics.WriteRecords == nil:
			n := *io.WriteRecords
			g.Metrics.WriteRecords = &n
		default:
			*g.Metrics.WriteRecords += *io.WriteRecords
		}
		g.Metrics.WriteRecordsComplete = g.Metrics.WriteRecordsComplete && io.WriteRecordsComplete
	}
	for i := range out.TaskManagers {
		g := &out.TaskManagers[i]
		last := now
		if end >= 0 {
			last = end
		}
		g.Duration = max(last-g.StartTime, 0)
		if unknown[i] {
			g.Metrics.WriteRecords = nil
		}
	}
	return out, nil
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
