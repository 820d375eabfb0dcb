package streamtest_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/connector/datagen"
	"github.com/weirstream/weir/state"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
	_ "gocloud.dev/blob/memblob"
)

// count emits, for every record, how many records its key has seen.
type count struct{ n state.ValueState[int64] }

func (c *count) Open(rc *stream.RuntimeContext[int]) error {
	var err error
	c.n, err = stream.ValueState[int64](rc, "n")
	return err
}

func (c *count) ProcessElement(ctx *stream.Context[int, int64], _ int64) error {
	n, _ := c.n.Value()
	c.n.Update(n + 1)
	return ctx.Emit(n + 1)
}

const total = 4000

// runCount runs src (two splits of total/2 records) → keyBy one key →
// count → an exactly-once sink, with checkpoints every 10 ms, faults fs
// and the options kv, and checks that the sink holds the counts 1 to
// total exactly once. It returns how many times the job restarted.
func runCount(t *testing.T, fs *streamtest.Faults, kv ...string) int {
	t.Helper()
	cfg, err := config.ParseDynamic(append([]string{"parallelism.default=2", "execution.checkpointing.interval=10 ms",
		"restart-strategy.type=fixed-delay", "restart-strategy.fixed-delay.attempts=10", "restart-strategy.fixed-delay.delay=0 ms"}, kv...))
	if err != nil {
		t.Fatal(err)
	}
	restarts := make(chan struct{}, 100)
	env, err := stream.NewEnvironment(stream.WithConfig(cfg), stream.WithLogger(slog.New(slog.DiscardHandler)), fs.Option(),
		stream.WithEvents(func(e stream.JobEvent) {
			if e.Kind == stream.EventRestarting {
				restarts <- struct{}{}
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	src, err := datagen.New(func(int, int64) int64 { return 1 }, datagen.Partitions(2), datagen.Count(total/2), datagen.BatchSize(10), datagen.RatePerSecond(20_000))
	if err != nil {
		t.Fatal(err)
	}
	in := stream.FromSource(env, src, "src", stream.NoWatermarks[int64]())
	counts := stream.Process(stream.KeyBy(in, func(int64) int { return 0 }), stream.KeyedProcessFunction[int, int64, int64](&count{}), stream.Uid("count"), stream.Parallelism(1))
	sink := streamtest.NewCollector[int64](true)
	stream.SinkTo(counts, sink, stream.Uid("sink"), stream.Parallelism(1), stream.DisableChaining())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := env.Execute(ctx, "count"); err != nil {
		t.Fatalf("faults %s: %v", fs, err)
	}
	got := sink.Results()
	slices.Sort(got)
	for i, v := range got {
		if v != int64(i+1) {
			t.Fatalf("faults %s: output %d of %d is %d, want %d: lost or duplicated", fs, i, len(got), v, i+1)
		}
	}
	if len(got) != total {
		t.Fatalf("faults %s: %d outputs, want %d", fs, len(got), total)
	}
	return len(restarts)
}

// afterCheckpoint holds a fault back until the job has completed a
// checkpoint, so that a failure restores state.
func afterCheckpoint(fs *streamtest.Faults) streamtest.FaultOption {
	done := fs.Add(stream.FaultCommitted, streamtest.Delay(0), streamtest.Always())
	return streamtest.When(func(stream.FaultSite) bool { return done.Fired() })
}

// TestFaultsReachAJob declares a fault of each kind, runs a real job with
// it, and checks that it struck and that the job's exactly-once output
// is intact.
func TestFaultsReachAJob(t *testing.T) {
	fail := streamtest.Fail(nil)
	for _, tc := range []struct {
		name string
		// add declares the faults; those it returns must strike.
		add func(fs *streamtest.Faults) []*streamtest.Fault
		kv  []string
		// restarts is the least number of restarts the faults cause.
		restarts int
	}{
		{name: "batch", restarts: 1, add: func(fs *streamtest.Faults) []*streamtest.Fault {
			return []*streamtest.Fault{fs.Add(stream.FaultBatch, fail, streamtest.OnVertex("count"), streamtest.AfterRecords(total/2), afterCheckpoint(fs))}
		}},
		{name: "open", restarts: 2, add: func(fs *streamtest.Faults) []*streamtest.Fault {
			return []*streamtest.Fault{
				fs.Add(stream.FaultOpen, fail, streamtest.OnOperator("sink"), streamtest.AtStep(0), streamtest.InAttempt(0)),
				fs.Add(stream.FaultBatch, fail, streamtest.OnVertex("src"), streamtest.OnSubtask(1), streamtest.AfterRecords(total/4), afterCheckpoint(fs)),
				fs.Add(stream.FaultOpen, fail, streamtest.OnOperator("count"), streamtest.AtStep(1), streamtest.AfterRestore()),
			}
		}},
		{name: "restore", restarts: 2, add: func(fs *streamtest.Faults) []*streamtest.Fault {
			return []*streamtest.Fault{
				fs.Add(stream.FaultBatch, fail, streamtest.OnVertex("count"), streamtest.AfterRecords(total/3), afterCheckpoint(fs)),
				fs.Add(stream.FaultRestore, fail, streamtest.OnOperator("count")),
			}
		}},
		{name: "new-reader", restarts: 2, add: func(fs *streamtest.Faults) []*streamtest.Fault {
			return []*streamtest.Fault{fs.Add(stream.FaultNewReader, fail, streamtest.OnSubtask(1), streamtest.Times(2))}
		}},
		{name: "new-reader-hang", restarts: 1, kv: []string{"execution.checkpointing.timeout=300 ms"}, add: func(fs *streamtest.Faults) []*streamtest.Fault {
			return []*streamtest.Fault{fs.Add(stream.FaultNewReader, streamtest.Hang(), streamtest.OnSubtask(0))}
		}},
		{name: "commit-before", restarts: 1, add: func(fs *streamtest.Faults) []*streamtest.Fault {
			return []*streamtest.Fault{fs.Add(stream.FaultCommit, fail, streamtest.OnOperator("sink"), streamtest.OnCall(3))}
		}},
		{name: "commit-after", restarts: 2, add: func(fs *streamtest.Faults) []*streamtest.Fault {
			return []*streamtest.Fault{
				fs.Add(stream.FaultCommitted, fail, streamtest.OnOperator("sink"), streamtest.OnCall(3)),
				// The commit of the restored checkpoint's transactions
				// in Open, which already took effect before the failure.
				fs.Add(stream.FaultCommitted, fail, streamtest.OnOperator("sink"), streamtest.AfterRestore()),
			}
		}},
		{name: "hang", restarts: 1, kv: []string{"execution.checkpointing.timeout=300 ms"}, add: func(fs *streamtest.Faults) []*streamtest.Fault {
			return []*streamtest.Fault{fs.Add(stream.FaultBatch, streamtest.Hang(), streamtest.OnVertex("count"), streamtest.AfterRecords(total/2))}
		}},
		{name: "delay", add: func(fs *streamtest.Faults) []*streamtest.Fault {
			return []*streamtest.Fault{fs.Add(stream.FaultBatch, streamtest.Delay(5*time.Millisecond), streamtest.OnVertex("sink"), streamtest.Times(20))}
		}},
		{name: "sync", restarts: 3, add: func(fs *streamtest.Faults) []*streamtest.Fault {
			var out []*streamtest.Fault
			for step := range 3 {
				out = append(out, fs.Add(stream.FaultSync, fail, streamtest.OnVertex("count"), streamtest.AtStep(step), streamtest.OnCall(2+step)))
			}
			return out
		}},
		{name: "async", restarts: 3, add: func(fs *streamtest.Faults) []*streamtest.Fault {
			var out []*streamtest.Fault
			for step := range 3 {
				out = append(out, fs.Add(stream.FaultAsync, fail, streamtest.OnVertex("count"), streamtest.AtStep(step), streamtest.OnCall(2+step)))
			}
			return out
		}},
		{name: "async-after-the-end", restarts: 1, add: func(fs *streamtest.Faults) []*streamtest.Fault {
			// A source subtask that has read all its records fails
			// after acknowledging a checkpoint: it may have ended
			// already, or wait for its final checkpoint.
			return []*streamtest.Fault{fs.Add(stream.FaultAsync, fail, streamtest.OnVertex("src"), streamtest.OnSubtask(0), streamtest.AfterRecords(total/2),
				streamtest.When(func(s stream.FaultSite) bool { return s.Step == s.Steps-1 }))}
		}},
		{name: "storage-write", restarts: 1, kv: []string{"execution.checkpointing.dir=mem://"}, add: func(fs *streamtest.Faults) []*streamtest.Fault {
			return []*streamtest.Fault{fs.Add(stream.FaultStorageWrite, fail, streamtest.OnPath("_metadata"), streamtest.OnCall(3))}
		}},
		{name: "storage-read-list-delete", kv: []string{"execution.checkpointing.dir=mem://", "execution.checkpointing.num-retained=2"}, add: func(fs *streamtest.Faults) []*streamtest.Fault {
			// Retention reads the other checkpoints' _metadata, lists
			// and deletes the discarded checkpoint's files.
			return []*streamtest.Fault{
				fs.Add(stream.FaultStorageRead, fail, streamtest.OnPath("_metadata"), streamtest.OnCall(2)),
				fs.Add(stream.FaultStorageList, fail, streamtest.OnCall(4)),
				fs.Add(stream.FaultStorageDelete, fail, streamtest.OnCall(6)),
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := streamtest.NewFaults()
			want := tc.add(fs)
			restarts := runCount(t, fs, tc.kv...)
			for _, f := range want {
				if !f.Fired() {
					t.Errorf("fault %s did not strike; faults: %s", f, fs)
				}
			}
			if restarts < tc.restarts {
				t.Errorf("%d restarts, want at least %d; faults: %s", restarts, tc.restarts, fs)
			}
		})
	}
}

// TestFaultsSelect checks which sites a fault strikes at, and how often,
// by calling Inject directly.
func TestFaultsSelect(t *testing.T) {
	ctx := context.Background()
	site := func(p stream.FaultPoint, vertex string, sub int) stream.FaultSite {
		return stream.FaultSite{Point: p, Task: stream.TaskInfo{Vertex: vertex, Subtask: sub}}
	}
	fs := streamtest.NewFaults()
	boom := errors.New("boom")
	third := fs.Add(stream.FaultBatch, streamtest.Fail(boom), streamtest.OnVertex("a"), streamtest.OnSubtask(1), streamtest.OnCall(3), streamtest.Times(2))
	meta := fs.Add(stream.FaultStorageWrite, streamtest.Fail(nil), streamtest.OnPath("chk-*/_metadata"), streamtest.Always())
	late := fs.Add(stream.FaultSync, streamtest.Fail(nil), streamtest.AfterRecords(10), streamtest.AtCheckpoint(4), streamtest.AfterRestore())
	odd := fs.Add(stream.FaultAsync, streamtest.Fail(nil), streamtest.When(func(s stream.FaultSite) bool { return s.Step%2 == 1 }), streamtest.Always())

	var errs []error
	for range 6 {
		errs = append(errs, fs.Inject(ctx, site(stream.FaultBatch, "a", 1)))
		if err := fs.Inject(ctx, site(stream.FaultBatch, "a", 0)); err != nil {
			t.Fatalf("a[0] struck: %v", err)
		}
	}
	for i, err := range errs {
		if strike := i == 2 || i == 3; strike != (err != nil) || strike && !errors.Is(err, boom) {
			t.Errorf("call %d of a[1]: %v", i+1, err)
		}
	}
	if third.Count() != 2 || len(third.Sites()) != 2 || third.Sites()[0].Task.Subtask != 1 {
		t.Errorf("third struck %d times at %v", third.Count(), third.Sites())
	}

	for _, c := range []struct {
		path   string
		strike bool
	}{{"ck/job/chk-3/_metadata", true}, {"ck/job/chk-3/sum-0-keyed", false}, {"ck/job/_metadata", false}} {
		err := fs.Inject(ctx, stream.FaultSite{Point: stream.FaultStorageWrite, Path: c.path})
		if (err != nil) != c.strike || err != nil && !errors.Is(err, streamtest.ErrInjected) {
			t.Errorf("write of %s: %v, want a strike: %v", c.path, err, c.strike)
		}
	}
	if meta.Count() != 1 {
		t.Errorf("the metadata fault struck %d times", meta.Count())
	}

	for _, c := range []struct {
		s      stream.FaultSite
		strike bool
	}{
		{stream.FaultSite{Point: stream.FaultSync, Records: 20, Checkpoint: 4}, false},              // not restored
		{stream.FaultSite{Point: stream.FaultSync, Records: 5, Checkpoint: 4, Restored: 2}, false},  // too few records
		{stream.FaultSite{Point: stream.FaultSync, Records: 20, Checkpoint: 5, Restored: 2}, false}, // another checkpoint
		{stream.FaultSite{Point: stream.FaultSync, Records: 20, Checkpoint: 4, Restored: 2}, true},
		{stream.FaultSite{Point: stream.FaultSync, Records: 20, Checkpoint: 4, Restored: 2}, false}, // once only
	} {
		if err := fs.Inject(ctx, c.s); (err != nil) != c.strike {
			t.Errorf("%+v: %v, want a strike: %v", c.s, err, c.strike)
		}
	}
	if !late.Fired() {
		t.Error("the sync fault did not strike")
	}
	for step := range 4 {
		err := fs.Inject(ctx, stream.FaultSite{Point: stream.FaultAsync, Step: step, Steps: 4})
		if (err != nil) != (step%2 == 1) {
			t.Errorf("async step %d: %v", step, err)
		}
	}
	if odd.Count() != 2 {
		t.Errorf("the async fault struck %d times, want 2", odd.Count())
	}
}

// TestFaultsHangAndDelay: a hang returns when its context is done, with
// its cause; a delay lets the call go on after it.
func TestFaultsHangAndDelay(t *testing.T) {
	fs := streamtest.NewFaults()
	fs.Add(stream.FaultOpen, streamtest.Hang())
	slow := fs.Add(stream.FaultBatch, streamtest.Delay(20*time.Millisecond))
	cause := errors.New("canceled for a restart")
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan error)
	go func() { done <- fs.Inject(ctx, stream.FaultSite{Point: stream.FaultOpen}) }()
	select {
	case err := <-done:
		t.Fatalf("the hang returned %v before its context was done", err)
	case <-time.After(20 * time.Millisecond):
	}
	cancel(cause)
	if err := <-done; !errors.Is(err, cause) {
		t.Fatalf("the hang returned %v, want its context's cause", err)
	}
	start := time.Now()
	if err := fs.Inject(context.Background(), stream.FaultSite{Point: stream.FaultBatch}); err != nil || time.Since(start) < 20*time.Millisecond {
		t.Fatalf("the delay returned %v after %v", err, time.Since(start))
	}
	if !slow.Fired() {
		t.Fatal("the delay did not count as struck")
	}
	if got := fmt.Sprint(fs); got == "" {
		t.Fatal("Faults has no description")
	}
}
