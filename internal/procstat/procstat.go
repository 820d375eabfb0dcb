// Package procstat reads a weir process's hardware and Go runtime figures:
// its CPU cores, the machine's memory, the Go heap and garbage collector.
// The REST API reports them under the names of Flink's task manager and
// JVM metrics; a task manager sends its own to the job manager with each
// heartbeat, so that the job manager's REST API reports each task
// manager's figures, not its own.
package procstat

import (
	"bufio"
	"math"
	"os"
	goruntime "runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Stats are a process's figures at one moment. Sizes are in bytes, -1
// where not known.
type Stats struct {
	// CPUCores is the number of logical CPUs the process may use
	// (runtime.NumCPU); MaxProcs is GOMAXPROCS, how many of them run Go
	// code at once.
	CPUCores int `json:"cpu_cores"`
	MaxProcs int `json:"max_procs"`
	// PhysicalMemory is the machine's memory (MemTotal of /proc/meminfo).
	PhysicalMemory int64 `json:"physical_memory"`
	// MemoryLimit is the Go runtime's soft memory limit (GOMEMLIMIT), -1
	// without one.
	MemoryLimit int64 `json:"memory_limit"`
	// HeapUsed is the bytes of live and unswept heap objects (HeapAlloc);
	// HeapCommitted the heap's spans in use or idle but not returned to
	// the system (HeapSys - HeapReleased).
	HeapUsed      int64 `json:"heap_used"`
	HeapCommitted int64 `json:"heap_committed"`
	// RuntimeMemory is the runtime's own memory: stacks, span and cache
	// structures, GC metadata, profiling buckets and the rest.
	RuntimeMemory int64 `json:"runtime_memory"`
	// GCCycles counts completed garbage collections; GCPauseMillis is the
	// total of their stop-the-world pauses.
	GCCycles      int64 `json:"gc_cycles"`
	GCPauseMillis int64 `json:"gc_pause_millis"`
	// Goroutines is the number of goroutines.
	Goroutines int64 `json:"goroutines"`
}

// Read returns this process's figures. It reads the runtime's memory
// statistics, which stops the world for a moment: call it about once a
// second at most.
func Read() Stats {
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	return Stats{
		CPUCores:       goruntime.NumCPU(),
		MaxProcs:       goruntime.GOMAXPROCS(0),
		PhysicalMemory: physicalMemory(),
		MemoryLimit:    MemoryLimit(),
		HeapUsed:       int64(ms.HeapAlloc),
		HeapCommitted:  int64(ms.HeapSys - ms.HeapReleased),
		RuntimeMemory:  int64(ms.StackSys + ms.MSpanSys + ms.MCacheSys + ms.GCSys + ms.BuckHashSys + ms.OtherSys),
		GCCycles:       int64(ms.NumGC),
		GCPauseMillis:  time.Duration(ms.PauseTotalNs).Milliseconds(),
		Goroutines:     int64(goruntime.NumGoroutine()),
	}
}

// MemoryLimit is the Go runtime's soft memory limit, or -1 without one.
func MemoryLimit() int64 {
	if l := debug.SetMemoryLimit(-1); l != math.MaxInt64 {
		return l
	}
	return -1
}

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
