package web

import (
	"bytes"
	"net/http"
	"runtime/pprof"
	"strconv"

	"github.com/weirstream/weir/internal/procstat"
)

// The paths of a Flink process (the job manager or a task manager) that
// weir serves for its own process, or answers as Flink does when the
// feature is disabled: its logs, stdout, thread dump and profiler, and the
// Go runtime's memory as Flink's JVM metrics.

// noLogFile is the text of /log and /stdout: weir writes its log to the
// standard error of its process and keeps no file of it.
const noLogFile = "weir keeps no log file: it writes its log (log/slog) to the standard error of the process, and prints to its standard output, " +
	"wherever the process was started with them.\n"

// logListInfo is Flink's LogListInfo: empty, as Flink's without a log
// directory.
type logListInfo struct {
	Logs []any `json:"logs"`
}

// threadDumpInfo is Flink's ThreadDumpInfo; weir's threads are the
// process's goroutines, one entry per goroutine with its stack.
type threadDumpInfo struct {
	ThreadInfos []threadInfo `json:"threadInfos"`
}

type threadInfo struct {
	ThreadName            string `json:"threadName"`
	StringifiedThreadInfo string `json:"stringifiedThreadInfo"`
}

// profilingList is Flink's ProfilingInfoList: empty, as weir has no
// profiler (Flink's rest.profiling.enabled); a request for one is 501.
type profilingList struct {
	ProfilingList []any `json:"profilingList"`
}

// errNoProfiler is the answer to a request for a profile.
const errNoProfiler = "weir has no profiler yet (Flink's rest.profiling.enabled)"

// profilerRequest answers a POST of Flink's profiler paths
// (/jobmanager/profiler, /taskmanagers/:id/profiler), which asks for a
// profile, with 501, and reports whether r was one.
func profilerRequest(w http.ResponseWriter, r *http.Request, seg []string) bool {
	n := len(seg)
	if r.Method != http.MethodPost || n < 2 || seg[n-1] != "profiler" ||
		!(n == 2 && seg[0] == "jobmanager" || n == 3 && seg[0] == "taskmanagers") {
		return false
	}
	writeError(w, http.StatusNotImplemented, errNoProfiler)
	return true
}

// threadDump lists the process's goroutines with their stacks, as Go's
// goroutine profile (debug=2) writes them.
func threadDump() threadDumpInfo {
	var b bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&b, 2) // writes to memory: no error
	out := threadDumpInfo{ThreadInfos: []threadInfo{}}
	for _, g := range bytes.Split(b.Bytes(), []byte("\n\n")) {
		g = bytes.TrimSpace(g)
		if len(g) == 0 {
			continue
		}
		name, _, _ := bytes.Cut(g, []byte("\n"))
		out.ThreadInfos = append(out.ThreadInfos, threadInfo{ThreadName: string(name), StringifiedThreadInfo: string(g) + "\n\n"})
	}
	return out
}

// serveProcess answers the process paths under a job manager's or task
// manager's prefix (rest: the segments after it): logs, log, stdout,
// thread-dump and profiler. local says whether the process is this one:
// another's thread dump is empty. It reports whether rest was one of
// them.
func serveProcess(w http.ResponseWriter, r *http.Request, rest []string, local bool) bool {
	if len(rest) == 0 {
		return false
	}
	switch {
	case len(rest) == 1 && rest[0] == "logs":
		writeJSON(w, http.StatusOK, logListInfo{Logs: []any{}})
	case len(rest) == 2 && rest[0] == "logs":
		writeError(w, http.StatusNotFound, "there is no log file "+echo(rest[1])+": "+noLogFile)
	case len(rest) == 1 && (rest[0] == "log" || rest[0] == "stdout"):
		w.Header().Set("Content-Type", "text/plain; charset=UTF-8")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write([]byte(noLogFile))
	case len(rest) == 1 && rest[0] == "thread-dump" && local:
		writeJSON(w, http.StatusOK, threadDump())
	case len(rest) == 1 && rest[0] == "thread-dump":
		writeJSON(w, http.StatusOK, threadDumpInfo{ThreadInfos: []threadInfo{}})
	case len(rest) == 1 && rest[0] == "profiler":
		writeJSON(w, http.StatusOK, profilingList{ProfilingList: []any{}})
	case rest[0] == "profiler":
		writeError(w, http.StatusNotFound, errNoProfiler)
	default:
		return false
	}
	return true
}

// goMetrics are a process's figures st under the names of Flink's JVM
// metrics (Status.JVM.*), for its /metrics:
//
//   - Heap.Used is the bytes of live and unswept heap objects
//     (HeapAlloc), Heap.Committed the heap's spans in use and idle but
//     not returned to the system (HeapSys - HeapReleased), Heap.Max the
//     soft memory limit (GOMEMLIMIT; -1 without one, as a JVM without
//     -Xmx would say if it could).
//   - NonHeap.Used and NonHeap.Committed are the runtime's own memory
//     (stacks, span and cache structures, GC metadata, profiling buckets,
//     the rest), NonHeap.Max -1.
//   - Direct and Mapped buffers, Metaspace, Flink's managed memory and
//     Netty's shuffle memory are 0: Go has none of them.
//   - GarbageCollector.Go.Count is the number of completed GC cycles,
//     GarbageCollector.Go.Time their stop-the-world pauses in ms.
//   - Threads.Count is the number of goroutines.
//   - Status.JVM.CPU.Load is absent: weir does not measure it.
func goMetrics(st procstat.Stats) ([]string, map[string]string) {
	vals := map[string]int64{
		"Status.JVM.Memory.Heap.Used":            st.HeapUsed,
		"Status.JVM.Memory.Heap.Committed":       st.HeapCommitted,
		"Status.JVM.Memory.Heap.Max":             st.MemoryLimit,
		"Status.JVM.Memory.NonHeap.Used":         st.RuntimeMemory,
		"Status.JVM.Memory.NonHeap.Committed":    st.RuntimeMemory,
		"Status.JVM.Memory.NonHeap.Max":          -1,
		"Status.JVM.Memory.Metaspace.Used":       0,
		"Status.JVM.Memory.Metaspace.Max":        0,
		"Status.JVM.Memory.Direct.Count":         0,
		"Status.JVM.Memory.Direct.MemoryUsed":    0,
		"Status.JVM.Memory.Direct.TotalCapacity": 0,
		"Status.JVM.Memory.Mapped.Count":         0,
		"Status.JVM.Memory.Mapped.MemoryUsed":    0,
		"Status.JVM.Memory.Mapped.TotalCapacity": 0,
		"Status.Flink.Memory.Managed.Used":       0,
		"Status.Flink.Memory.Managed.Total":      0,
		"Status.Shuffle.Netty.UsedMemory":        0,
		"Status.Shuffle.Netty.TotalMemory":       0,
		"Status.JVM.GarbageCollector.Go.Count":   st.GCCycles,
		"Status.JVM.GarbageCollector.Go.Time":    st.GCPauseMillis,
		"Status.JVM.Threads.Count":               st.Goroutines,
	}
	ids := make([]string, 0, len(vals))
	out := make(map[string]string, len(vals))
	for _, id := range goMetricNames {
		ids = append(ids, id)
		out[id] = strconv.FormatInt(vals[id], 10)
	}
	return ids, out
}

// goMetricNames are goMetrics' names in the order they are listed.
var goMetricNames = []string{
	"Status.JVM.Memory.Heap.Used", "Status.JVM.Memory.Heap.Committed", "Status.JVM.Memory.Heap.Max",
	"Status.JVM.Memory.NonHeap.Used", "Status.JVM.Memory.NonHeap.Committed", "Status.JVM.Memory.NonHeap.Max",
	"Status.JVM.Memory.Metaspace.Used", "Status.JVM.Memory.Metaspace.Max",
	"Status.JVM.Memory.Direct.Count", "Status.JVM.Memory.Direct.MemoryUsed", "Status.JVM.Memory.Direct.TotalCapacity",
	"Status.JVM.Memory.Mapped.Count", "Status.JVM.Memory.Mapped.MemoryUsed", "Status.JVM.Memory.Mapped.TotalCapacity",
	"Status.Flink.Memory.Managed.Used", "Status.Flink.Memory.Managed.Total",
	"Status.Shuffle.Netty.UsedMemory", "Status.Shuffle.Netty.TotalMemory",
	"Status.JVM.GarbageCollector.Go.Count", "Status.JVM.GarbageCollector.Go.Time",
	"Status.JVM.Threads.Count",
}
