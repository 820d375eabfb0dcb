package web

import (
	"bufio"
	"fmt"
	"math"
	"os"
	goruntime "runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"
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

// physicalMemory is /proc/meminfo's MemTotal in bytes, or -1.
var physicalMemory = sync.OnceValue(func() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return -1
		}
		return kb * 1024
	}
	return -1
})

// memoryLimit is the Go runtime's soft memory limit, or -1 without one.
func memoryLimit() int64 {
	if l := debug.SetMemoryLimit(-1); l != math.MaxInt64 {
		return l
	}
	return -1
}

func (s *Server) taskManagers() taskManagersInfo {
	o := s.overviewInfo()
	total := resourceProfileInfo{CPUCores: float64(goruntime.GOMAXPROCS(0)), ExtendedResources: map[string]float64{}}
	free := resourceProfileInfo{ExtendedResources: map[string]float64{}}
	if o.SlotsAvailable == o.SlotsTotal {
		free = total
	}
	return taskManagersInfo{TaskManagers: []taskManagerInfo{{
		ID: processID(), DataPort: -1, JMXPort: -1,
		TimeSinceLastHeartbeat: time.Now().UnixMilli(),
		SlotsNumber:            o.SlotsTotal, FreeSlots: o.SlotsAvailable,
		TotalResource: total, FreeResource: free,
		Hardware: hardwareInfo{CPUCores: goruntime.NumCPU(), PhysicalMemory: physicalMemory(), FreeMemory: memoryLimit()},
	}}}
}
