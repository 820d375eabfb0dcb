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
// config.KeyJobManagerProcessSize), with nothing taken off, and returns
// a function that puts the limit it replaced back unless another has
// been set since. With the key unset it does nothing; with GOMEMLIMIT
// set in the environment (getenv; nil is os.Getenv) it leaves the limit
// the Go runtime took from it and logs that GOMEMLIMIT wins.
func MemoryLimit(cfg *config.Configuration, key string, getenv func(string) string, logger *slog.Logger) (restore func()) {
	nop := func() {}
	if _, ok := cfg.Get(key); !ok {
		return nop
	}
	size := cfg.MemorySize(key)
	if getenv == nil {
		getenv = os.Getenv
	}
	if env := getenv("GOMEMLIMIT"); env != "" {
		logger.Info(fmt.Sprintf("GOMEMLIMIT in the environment wins over %s: the Go runtime's soft memory limit stays GOMEMLIMIT's", key),
			"GOMEMLIMIT", env, key, config.FormatMemorySize(size), "limit", limitString(debug.SetMemoryLimit(-1)))
		return nop
	}
	prev := debug.SetMemoryLimit(size)
	logger.Info(fmt.Sprintf("the Go runtime's soft memory limit is %s", key), "limit", config.FormatMemorySize(size), "was", limitString(prev))
	return func() {
		// Put the previous limit back only if it is still ours: a job
		// that started since set its own.
		if debug.SetMemoryLimit(-1) == size {
			debug.SetMemoryLimit(prev)
		}
	}
}

// limitString formats a soft memory limit, "none" for the Go runtime's
// default (no limit).
func limitString(n int64) string {
	if n == math.MaxInt64 {
		return "none"
	}
	return config.FormatMemorySize(n)
}
