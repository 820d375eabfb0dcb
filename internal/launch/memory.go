package launch

import (
	"fmt"
	"log/slog"
	"math"
	"os"
	"runtime/debug"

	"github.com/weirstream/weir/config"
)

// MemoryLimit sets the Go runtime's soft memory limit
// (runtime/debug.SetMemoryLimit) of this process to the process size
// that key of cfg names (config.KeyTaskManagerProcessSize or
// config.KeyJobManagerProcessSize) less offHeap, the bytes the process
// will hold outside the Go heap (OffHeapStores), and returns a function
// that puts the limit it replaced back unless another has been set
// since. With the key unset it does nothing; with GOMEMLIMIT set in the
// environment (getenv; nil is os.Getenv) it leaves the limit the Go
// runtime took from it and logs that GOMEMLIMIT wins. It fails when
// offHeap leaves less than an eighth of the process size to the heap.
func MemoryLimit(cfg *config.Configuration, key string, offHeap int64, getenv func(string) string, logger *slog.Logger) (restore func(), err error) {
	nop := func() {}
	if _, ok := cfg.Get(key); !ok {
		return nop, nil
	}
	size := cfg.MemorySize(key)
	limit := size - offHeap
	if limit < size/8 {
		return nop, &config.ConflictError{Keys: []string{key}, Reason: fmt.Sprintf(
			"%s (%s) leaves %s for the Go heap once the pebble stores' %s, which this build (cgo) allocates outside it, are taken off: "+
				"raise the process size or give the stores less memory", key, config.FormatMemorySize(size),
			config.FormatMemorySize(max(limit, 0)), config.FormatMemorySize(offHeap))}
	}
	if getenv == nil {
		getenv = os.Getenv
	}
	if env := getenv("GOMEMLIMIT"); env != "" {
		logger.Info(fmt.Sprintf("GOMEMLIMIT in the environment wins over %s: the Go runtime's soft memory limit stays GOMEMLIMIT's", key),
			"GOMEMLIMIT", env, key, config.FormatMemorySize(size), "limit", limitString(debug.SetMemoryLimit(-1)))
		return nop, nil
	}
	prev := debug.SetMemoryLimit(limit)
	if offHeap > 0 {
		logger.Info(fmt.Sprintf("the Go runtime's soft memory limit is %s less the pebble stores' memory, which this build (cgo) allocates outside the Go heap", key),
			"limit", config.FormatMemorySize(limit), key, config.FormatMemorySize(size), "stores", config.FormatMemorySize(offHeap), "was", limitString(prev))
	} else {
		logger.Info(fmt.Sprintf("the Go runtime's soft memory limit is %s", key), "limit", config.FormatMemorySize(limit), "was", limitString(prev))
	}
	return func() {
		// Put the previous limit back only if it is still ours: a job
		// that started since set its own.
		if debug.SetMemoryLimit(-1) == limit {
			debug.SetMemoryLimit(prev)
		}
	}, nil
}

// OffHeapStores returns the memory that cfg gives the pebble stores of a
// task manager with slots slots when the stores allocate outside the Go
// heap (offHeap: state.LSMMemoryOffHeap, true in a cgo build), which the
// Go runtime's memory limit must then leave out: managed memory, or
// state.backend.rocksdb.memory.fixed-per-slot times the slots. It is 0
// without cgo, with the heap backend, with a configuration that does not
// validate (the job's start reports that), and with
// state.backend.pebble.memory, which bounds each keyed subtask and so
// depends on the job.
func OffHeapStores(cfg *config.Configuration, slots int, offHeap bool) int64 {
	if !offHeap {
		return 0
	}
	p, err := cfg.Pipeline()
	if err != nil || !p.StateBackend.EmbeddedLSM() {
		return 0
	}
	switch {
	case p.PebbleSlotMemory > 0:
		return p.PebbleSlotMemory * int64(max(slots, 1))
	case p.RocksDBMemoryManaged && p.ManagedMemory > 0:
		return p.ManagedMemory
	}
	return 0
}

// limitString formats a soft memory limit, "none" for the Go runtime's
// default (no limit).
func limitString(n int64) string {
	if n == math.MaxInt64 {
		return "none"
	}
	return config.FormatMemorySize(n)
}
