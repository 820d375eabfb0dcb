package web

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/weirstream/weir/internal/procstat"
)

// taskManagersInfo is Flink's TaskManagersInfo.
type taskManagersInfo struct {
	TaskManagers []taskManagerInfo `json:"taskmanagers"`
}

// taskManagerInfo is Flink's TaskManagerInfo, for the one task executor a
// job's server knows: the process the job runs in.
//
//   - id is the process's host name and process id ("host:pid"), where
//     Flink has a ResourceID.
//   - path is empty: the embedded task executor has no RPC address (Flink
//     gives its actor path).
//   - dataPort is -1: subtasks exchange records in memory, through no
//     network port; jmxPort is -1, as in Flink without JMX.
//   - timeSinceLastHeartbeat is, as in Flink despite its name, the time of
//     the last heartbeat in Unix milliseconds: the executor is in-process
//     and sends none, so it is the time of the answer.
//   - slotsNumber and freeSlots are /overview's slots (the job's largest
//     parallelism, all taken while it runs).
//   - totalResource counts GOMAXPROCS CPU cores and no memory: weir has no
//     memory budgets (0 MB of task heap, off-heap, managed and network
//     memory). freeResource is totalResource while no slot is taken, else
//     nothing.
//   - hardware: cpuCores is runtime.NumCPU, physicalMemory the MemTotal of
//     /proc/meminfo (-1 where there is none, as in Flink), freeMemory the
//     Go runtime's soft memory limit (GOMEMLIMIT; -1 without one), where
//     Flink gives the JVM's maximum heap, and managedMemory 0.
//   - memoryConfiguration is all zeros: weir configures none of Flink's
//     memory components.
type taskManagerInfo struct {
	ID                     string              `json:"id"`
	Path                   string              `json:"path"`
	DataPort               int                 `json:"dataPort"`
	JMXPort                int                 `json:"jmxPort"`
	TimeSinceLastHeartbeat int64               `json:"timeSinceLastHeartbeat"`
	SlotsNumber            int                 `json:"slotsNumber"`
	FreeSlots              int                 `json:"freeSlots"`
	TotalResource          resourceProfileInfo `json:"totalResource"`
	FreeResource           resourceProfileInfo `json:"freeResource"`
	Hardware               hardwareInfo        `json:"hardware"`
	MemoryConfiguration    memoryConfiguration `json:"memoryConfiguration"`
}

// resourceProfileInfo is Flink's ResourceProfileInfo; memory in MB.
type resourceProfileInfo struct {
	CPUCores          float64            `json:"cpuCores"`
	TaskHeapMemory    int64              `json:"taskHeapMemory"`
	TaskOffHeapMemory int64              `json:"taskOffHeapMemory"`
	ManagedMemory     int64              `json:"managedMemory"`
	NetworkMemory     int64              `json:"networkMemory"`
	ExtendedResources map[string]float64 `json:"extendedResources"`
}

// hardwareInfo is Flink's HardwareDescription; memory in bytes.
type hardwareInfo struct {
	CPUCores       int   `json:"cpuCores"`
	PhysicalMemory int64 `json:"physicalMemory"`
	FreeMemory     int64 `json:"freeMemory"`
	ManagedMemory  int64 `json:"managedMemory"`
}

// memoryConfiguration is Flink's TaskExecutorMemoryConfiguration; bytes.
type memoryConfiguration struct {
	FrameworkHeap      int64 `json:"frameworkHeap"`
	TaskHeap           int64 `json:"taskHeap"`
	FrameworkOffHeap   int64 `json:"frameworkOffHeap"`
	TaskOffHeap        int64 `json:"taskOffHeap"`
	NetworkMemory      int64 `json:"networkMemory"`
	ManagedMemory      int64 `json:"managedMemory"`
	JVMMetaspace       int64 `json:"jvmMetaspace"`
	JVMOverhead        int64 `json:"jvmOverhead"`
	TotalFlinkMemory   int64 `json:"totalFlinkMemory"`
	TotalProcessMemory int64 `json:"totalProcessMemory"`
}

// processID is the embedded task executor's id.
var processID = sync.OnceValue(func() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return fmt.Sprintf("%s:%d", host, os.Getpid())
})

// hardwareOf is Flink's HardwareDescription of a process with figures st.
func hardwareOf(st procstat.Stats) hardwareInfo {
	return hardwareInfo{CPUCores: st.CPUCores, PhysicalMemory: st.PhysicalMemory, FreeMemory: st.MemoryLimit}
}

func (s *Server) taskManagers() taskManagersInfo {
	o := s.overviewInfo()
	st := procstat.Read()
	total := resourceProfileInfo{CPUCores: float64(st.MaxProcs), ExtendedResources: map[string]float64{}}
	free := resourceProfileInfo{ExtendedResources: map[string]float64{}}
	if o.SlotsAvailable == o.SlotsTotal {
		free = total
	}
	return taskManagersInfo{TaskManagers: []taskManagerInfo{{
		ID: processID(), DataPort: -1, JMXPort: -1,
		TimeSinceLastHeartbeat: time.Now().UnixMilli(),
		SlotsNumber:            o.SlotsTotal, FreeSlots: o.SlotsAvailable,
		TotalResource: total, FreeResource: free,
		Hardware: hardwareOf(st),
	}}}
}

// taskManagerDetailsInfo is Flink's TaskManagerDetailsInfo:
// GET /taskmanagers/:taskmanagerid.
type taskManagerDetailsInfo struct {
	taskManagerInfo
	// AllocatedSlots holds a slot per taken one, with the job using it.
	AllocatedSlots []slotInfo             `json:"allocatedSlots"`
	Metrics        taskManagerMetricsInfo `json:"metrics"`
}

// slotInfo is Flink's SlotInfo.
type slotInfo struct {
	Resource resourceProfileInfo `json:"resource"`
	JobID    string              `json:"jobId"`
}

// taskManagerMetricsInfo is Flink's TaskManagerMetricsInfo, from the
// metrics of goMetrics; a remote task manager's are all zeros, as Flink's
// before it has fetched any.
type taskManagerMetricsInfo struct {
	HeapUsed                            int64              `json:"heapUsed"`
	HeapCommitted                       int64              `json:"heapCommitted"`
	HeapMax                             int64              `json:"heapMax"`
	NonHeapUsed                         int64              `json:"nonHeapUsed"`
	NonHeapCommitted                    int64              `json:"nonHeapCommitted"`
	NonHeapMax                          int64              `json:"nonHeapMax"`
	DirectCount                         int64              `json:"directCount"`
	DirectUsed                          int64              `json:"directUsed"`
	DirectMax                           int64              `json:"directMax"`
	MappedCount                         int64              `json:"mappedCount"`
	MappedUsed                          int64              `json:"mappedUsed"`
	MappedMax                           int64              `json:"mappedMax"`
	MemorySegmentsAvailable             int64              `json:"memorySegmentsAvailable"`
	MemorySegmentsTotal                 int64              `json:"memorySegmentsTotal"`
	NettyShuffleMemorySegmentsAvailable int64              `json:"nettyShuffleMemorySegmentsAvailable"`
	NettyShuffleMemorySegmentsUsed      int64              `json:"nettyShuffleMemorySegmentsUsed"`
	NettyShuffleMemorySegmentsTotal     int64              `json:"nettyShuffleMemorySegmentsTotal"`
	NettyShuffleMemoryAvailable         int64              `json:"nettyShuffleMemoryAvailable"`
	NettyShuffleMemoryUsed              int64              `json:"nettyShuffleMemoryUsed"`
	NettyShuffleMemoryTotal             int64              `json:"nettyShuffleMemoryTotal"`
	GarbageCollectors                   []garbageCollector `json:"garbageCollectors"`
}

// garbageCollector is Flink's GarbageCollectorInfo.
type garbageCollector struct {
	Name  string `json:"name"`
	Count int64  `json:"count"`
	Time  int64  `json:"time"`
}

// taskManagerMetricsOf is the taskManagerMetricsInfo of a process with
// figures st.
func taskManagerMetricsOf(st procstat.Stats) taskManagerMetricsInfo {
	_, vals := goMetrics(st)
	get := func(id string) int64 {
		n, _ := strconv.ParseInt(vals[id], 10, 64)
		return n
	}
	return taskManagerMetricsInfo{
		HeapUsed: get("Status.JVM.Memory.Heap.Used"), HeapCommitted: get("Status.JVM.Memory.Heap.Committed"), HeapMax: get("Status.JVM.Memory.Heap.Max"),
		NonHeapUsed: get("Status.JVM.Memory.NonHeap.Used"), NonHeapCommitted: get("Status.JVM.Memory.NonHeap.Committed"), NonHeapMax: get("Status.JVM.Memory.NonHeap.Max"),
		GarbageCollectors: []garbageCollector{{Name: "Go", Count: get("Status.JVM.GarbageCollector.Go.Count"), Time: get("Status.JVM.GarbageCollector.Go.Time")}},
	}
}

// taskManagerDetails is the embedded task executor's details: every slot
// is taken by the job while it runs.
func (s *Server) taskManagerDetails() taskManagerDetailsInfo {
	tm := s.taskManagers().TaskManagers[0]
	d := taskManagerDetailsInfo{taskManagerInfo: tm, AllocatedSlots: []slotInfo{}, Metrics: taskManagerMetricsOf(procstat.Read())}
	for range tm.SlotsNumber - tm.FreeSlots {
		d.AllocatedSlots = append(d.AllocatedSlots, slotInfo{Resource: resourceProfileInfo{ExtendedResources: map[string]float64{}}, JobID: s.jm.JobID()})
	}
	return d
}

// serveTaskManager answers /taskmanagers/:id and the paths under it for
// the embedded task executor.
func (s *Server) serveTaskManager(w http.ResponseWriter, r *http.Request, seg []string) {
	if seg[1] != processID() {
		writeError(w, http.StatusNotFound, "task manager "+echo(seg[1])+" does not exist: this job runs in task manager "+processID())
		return
	}
	switch {
	case len(seg) == 2:
		writeJSON(w, http.StatusOK, s.taskManagerDetails())
	case len(seg) == 3 && seg[2] == "metrics":
		ids, vals := goMetrics(procstat.Read())
		writeJSON(w, http.StatusOK, metricListOf(r.URL.Query(), ids, vals))
	case serveProcess(w, r, seg[2:], true):
	default:
		notFound(w, r)
	}
}
