package web

import (
	"fmt"
	"strconv"
)

// Flink's JobExceptionsInfoWithHistory: GET /jobs/:id/exceptions. Its
// fields before exceptionHistory are the ones Flink 1.x has and Flink 2
// dropped: root-exception and timestamp are the newest failure's (null
// without one), all-exceptions lists the failures of subtasks.
type exceptionsInfo struct {
	RootException *string              `json:"root-exception"`
	Timestamp     *int64               `json:"timestamp"`
	AllExceptions []executionException `json:"all-exceptions"`
	Truncated     bool                 `json:"truncated"`
	History       exceptionHistory     `json:"exceptionHistory"`
}

// executionException is Flink 1.x's ExecutionExceptionInfo. weir does
// not say where a subtask ran: location and endpoint are "(unassigned)",
// Flink's words for a task not deployed.
type executionException struct {
	Exception     string `json:"exception"`
	Task          string `json:"task"`
	Location      string `json:"location"`
	Endpoint      string `json:"endpoint"`
	Timestamp     int64  `json:"timestamp"`
	TaskManagerID string `json:"taskManagerId"`
}

// unassigned is Flink's location of a task that is not deployed.
const unassigned = "(unassigned)"

type exceptionHistory struct {
	Entries   []rootExceptionInfo `json:"entries"`
	Truncated bool                `json:"truncated"`
}

type rootExceptionInfo struct {
	ExceptionName        string            `json:"exceptionName"`
	Stacktrace           string            `json:"stacktrace"`
	Timestamp            int64             `json:"timestamp"`
	TaskName             string            `json:"taskName,omitempty"`
	Endpoint             string            `json:"endpoint,omitempty"`
	TaskManagerID        string            `json:"taskManagerId,omitempty"`
	FailureLabels        map[string]string `json:"failureLabels"`
	ConcurrentExceptions []any             `json:"concurrentExceptions"`
}

// exceptions lists the job's latest failures, newest first, as Flink's
// exception history does; maxExceptions (Flink's query parameter) caps
// how many.
func (s *Server) exceptions(maxParam string) (any, error) {
	limit := -1
	if maxParam != "" {
		n, err := strconv.Atoi(maxParam)
		if err != nil || n < 0 {
			return nil, badRequest("maxExceptions must be a non-negative integer, got %q", echo(maxParam))
		}
		limit = n
	}
	fs, total := s.jm.Failures()
	out := exceptionsInfo{AllExceptions: []executionException{}, History: exceptionHistory{Entries: []rootExceptionInfo{}, Truncated: total > len(fs)}}
	if len(fs) > 0 {
		msg, ts := fs[0].Err.Error(), fs[0].Time.UnixMilli()
		out.RootException, out.Timestamp = &msg, &ts
	}
	for i, f := range fs {
		if limit >= 0 && i >= limit {
			out.History.Truncated = true
			break
		}
		e := rootExceptionInfo{
			ExceptionName:        "TaskFailure",
			Stacktrace:           f.Err.Error(),
			Timestamp:            f.Time.UnixMilli(),
			FailureLabels:        map[string]string{"restarted": strconv.FormatBool(f.Restarted)},
			ConcurrentExceptions: []any{},
		}
		if f.Task.Vertex == "" {
			e.ExceptionName = "JobFailure"
		} else {
			e.TaskName = fmt.Sprintf("%s (%d/%d)", s.vertexName(f.Task.Vertex), f.Task.Subtask+1, s.vertexParallelism(f.Task.Vertex))
			out.AllExceptions = append(out.AllExceptions, executionException{
				Exception: e.Stacktrace, Task: e.TaskName, Location: unassigned, Endpoint: unassigned, Timestamp: e.Timestamp,
			})
		}
		out.History.Entries = append(out.History.Entries, e)
	}
	out.Truncated = out.History.Truncated
	return out, nil
}

func (s *Server) vertexName(uid string) string {
	for _, v := range s.jm.Graph().Vertices {
		if v.UID == uid {
			return v.Name
		}
	}
	return uid
}

func (s *Server) vertexParallelism(uid string) int {
	for _, v := range s.jm.Graph().Vertices {
		if v.UID == uid {
			return v.Parallelism
		}
	}
	return 0
}
