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

	restore, _ := launch.MemoryLimit(cfg, config.KeyTaskManagerProcessSize, 0, noEnv, logger)
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("with %s unset the limit became %d, want it left at %d", config.KeyTaskManagerProcessSize, got, before)
	}
	restore()

	restore, _ = launch.MemoryLimit(cfg, config.KeyJobManagerProcessSize, 0, noEnv, logger)
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
	restore, _ = launch.MemoryLimit(cfg, config.KeyJobManagerProcessSize, 0, env, logger)
	defer restore()
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("with GOMEMLIMIT set the limit became %d, want it left at %d", got, before)
	}
	if !strings.Contains(logs.String(), "GOMEMLIMIT in the environment wins over "+config.KeyJobManagerProcessSize) {
		t.Errorf("no log line says GOMEMLIMIT wins: %q", logs.String())
	}
}

// TestMemoryLimitOffHeap: where the pebble stores allocate outside the Go
// heap (a cgo build), the soft memory limit is the process size less
// what the stores are given — managed memory, or fixed-per-slot times
// the slots — and a process size that leaves too little for the heap is
// refused, naming the key. Without cgo, or with the heap backend,
// nothing is taken off.
func TestMemoryLimitOffHeap(t *testing.T) {
	keepMemoryLimit(t)
	parse := func(kv ...string) *config.Configuration {
		t.Helper()
		cfg, err := config.ParseDynamic(kv)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	tm := config.KeyTaskManagerProcessSize
	for _, tc := range []struct {
		name    string
		cfg     *config.Configuration
		slots   int
		offHeap bool
		want    int64
	}{
		{"managed fraction", parse(tm+"=1 gb", config.KeyStateBackend+"=rocksdb"), 2, true, 410 << 20},
		{"managed size", parse(tm+"=1 gb", config.KeyStateBackend+"=pebble", config.KeyRocksDBMemoryManaged+"=true", config.KeyManagedMemorySize+"=256 mb"), 2, true, 256 << 20},
		{"fixed per slot", parse(tm+"=1 gb", config.KeyStateBackend+"=pebble", config.KeyRocksDBMemoryFixedPerSlot+"=100 mb"), 3, true, 300 << 20},
		{"without cgo", parse(tm+"=1 gb", config.KeyStateBackend+"=rocksdb"), 2, false, 0},
		{"heap backend", parse(tm + "=1 gb"), 2, true, 0},
		{"per subtask", parse(config.KeyStateBackend+"=pebble", config.KeyPebbleMemory+"=64 mb"), 2, true, 0},
	} {
		got := launch.OffHeapStores(tc.cfg, tc.slots, tc.offHeap)
		// The fraction's product is rounded down to a byte.
		if d := got - tc.want; d < -(1<<20) || d > 1<<20 {
			t.Errorf("%s: off-heap stores %d, want about %d", tc.name, got, tc.want)
		}
	}
	noEnv := func(string) string { return "" }
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	cfg := parse(tm+"=1 gb", config.KeyStateBackend+"=rocksdb")
	restore, err := launch.MemoryLimit(cfg, tm, 400<<20, noEnv, logger)
	if err != nil {
		t.Fatal(err)
	}
	if got := debug.SetMemoryLimit(-1); got != 1<<30-400<<20 {
		t.Errorf("limit %d, want the process size less the stores' %d", got, 1<<30-400<<20)
	}
	if !strings.Contains(logs.String(), "outside the Go heap") {
		t.Errorf("no log line says the stores' memory is taken off: %q", logs.String())
	}
	restore()
	if _, err := launch.MemoryLimit(parse(tm+"=1 gb", config.KeyStateBackend+"=pebble", config.KeyRocksDBMemoryFixedPerSlot+"=300 mb"), tm, 3*300<<20, noEnv, logger); err == nil ||
		!strings.Contains(err.Error(), tm) {
		t.Errorf("stores of 900 MiB outside a 1 GiB process: err %v, want a conflict naming %s", err, tm)
	}
}
