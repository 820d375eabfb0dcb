package launch_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/connector/datagen"
	"github.com/weirstream/weir/internal/launch"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

// keepMemoryLimit puts the process's soft memory limit back when the
// test ends.
func keepMemoryLimit(t *testing.T) int64 {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	return prev
}

// TestStartAppliesProcessSize: an embedded run makes
// taskmanager.memory.process.size the Go runtime's soft memory limit
// while the job runs, and puts the one it replaced back when it ends.
func TestStartAppliesProcessSize(t *testing.T) {
	before := keepMemoryLimit(t)
	cfg, err := config.ParseDynamic([]string{config.KeyTaskManagerProcessSize + "=300 mb"})
	if err != nil {
		t.Fatal(err)
	}
	env, err := stream.NewEnvironment(stream.WithConfig(cfg), stream.WithLogger(quiet), stream.WithJobID("memory-test"))
	if err != nil {
		t.Fatal(err)
	}
	src, err := datagen.New(func(p int, seq int64) int64 { return seq }) // unbounded
	if err != nil {
		t.Fatal(err)
	}
	stream.SinkTo(stream.FromSource(env, src, "numbers", stream.NoWatermarks[int64]()), streamtest.NewCollector[int64](false), stream.Uid("out"))
	j, err := launch.Describe(env, "numbers")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h, err := launch.Start(ctx, j)
	if err != nil {
		t.Fatal(err)
	}
	if got := debug.SetMemoryLimit(-1); got != 300<<20 {
		t.Errorf("while the job runs, the soft memory limit is %d, want %d (300 mb)", got, 300<<20)
	}
	cancel()
	if err := h.Wait(); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("job: %v", err)
	}
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("after the job, the soft memory limit is %d, want the earlier %d", got, before)
	}
}

// TestMemoryLimit: the process size becomes the soft memory limit with
// nothing taken off; unset, the limit is left alone; GOMEMLIMIT in the
// environment wins, and a log line says so.
func TestMemoryLimit(t *testing.T) {
	before := keepMemoryLimit(t)
	cfg, err := config.ParseDynamic([]string{config.KeyJobManagerProcessSize + "=1 gb"})
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	noEnv := func(string) string { return "" }

	restore := launch.MemoryLimit(cfg, config.KeyTaskManagerProcessSize, noEnv, logger)
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("with %s unset the limit became %d, want it left at %d", config.KeyTaskManagerProcessSize, got, before)
	}
	restore()

	restore = launch.MemoryLimit(cfg, config.KeyJobManagerProcessSize, noEnv, logger)
	if got := debug.SetMemoryLimit(-1); got != 1<<30 {
		t.Errorf("limit %d, want %d (%s=1 gb)", got, 1<<30, config.KeyJobManagerProcessSize)
	}
	restore()
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("restored limit %d, want %d", got, before)
	}

	logs.Reset()
	env := func(k string) string {
		if k == "GOMEMLIMIT" {
			return "640MiB"
		}
		return ""
	}
	restore = launch.MemoryLimit(cfg, config.KeyJobManagerProcessSize, env, logger)
	defer restore()
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("with GOMEMLIMIT set the limit became %d, want it left at %d", got, before)
	}
	if !strings.Contains(logs.String(), "GOMEMLIMIT in the environment wins over "+config.KeyJobManagerProcessSize) {
		t.Errorf("no log line says GOMEMLIMIT wins: %q", logs.String())
	}
}
