package streamtest_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirstream/weir/connector/datagen"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

// TestEventsWaitFor wakes a waiter at the event that meets its condition,
// from another goroutine, and fails a wait whose context ends first with
// the events it saw.
func TestEventsWaitFor(t *testing.T) {
	var ev streamtest.Events
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range 50 {
			ev.Record(stream.JobEvent{Kind: stream.EventCheckpointCompleted, Checkpoint: int64(i + 1)})
		}
		ev.Record(stream.JobEvent{Kind: stream.EventTaskFailed, Task: stream.TaskInfo{Vertex: "sum", Subtask: 1}, Err: errors.New("boom")})
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ev.WaitCount(ctx, stream.EventTaskFailed, 1); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if n := ev.Count(stream.EventCheckpointCompleted); n != 50 {
		t.Fatalf("%d completed checkpoints recorded, want 50", n)
	}
	if last, ok := ev.Last(stream.EventCheckpointCompleted); !ok || last.Checkpoint != 50 {
		t.Fatalf("last completed checkpoint %+v, want 50", last)
	}
	if got := ev.Of(stream.EventTaskFailed); len(got) != 1 || got[0].Task.Vertex != "sum" {
		t.Fatalf("task failures %+v", got)
	}

	ev.Record(stream.JobEvent{Kind: stream.EventRestored})
	ev.Record(stream.JobEvent{Kind: stream.EventRestored, Checkpoint: 7})
	if r := ev.Restores(); len(r) != 1 || r[0].Checkpoint != 7 {
		t.Fatalf("restores from a checkpoint %+v, want only checkpoint 7's", r)
	}

	short, cancelShort := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancelShort()
	err := ev.WaitCount(short, stream.EventFinished, 1)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "50 CHECKPOINT_COMPLETED") ||
		!strings.Contains(err.Error(), "TASK_FAILED sum[1]: boom") {
		t.Fatalf("a wait that times out: %v, want the deadline and the events so far", err)
	}
}

// TestRunResumes stops a keyed count after three checkpoints, retained on
// cancellation, and resumes it from them: the sink, which outlives both
// runs, holds every count exactly once.
func TestRunResumes(t *testing.T) {
	sink := streamtest.NewCollector[int64](true)
	build := func(env *stream.Environment) {
		src, err := datagen.New(func(int, int64) int64 { return 1 }, datagen.Partitions(2), datagen.Count(total/2), datagen.BatchSize(10), datagen.RatePerSecond(20_000))
		if err != nil {
			t.Fatal(err)
		}
		in := stream.FromSource(env, src, "src", stream.NoWatermarks[int64]())
		counts := stream.Process(stream.KeyBy(in, func(int64) int { return 0 }), stream.KeyedProcessFunction[int, int64, int64](&count{}), stream.Uid("count"), stream.Parallelism(1))
		stream.SinkTo(counts, sink, stream.Uid("sink"), stream.Parallelism(1))
	}
	conf := streamtest.Config("parallelism.default=2", "execution.checkpointing.interval=10 ms")
	first := streamtest.Run(t, build, conf, streamtest.UntilCheckpoints(3))
	if !first.Canceled || first.Err == nil {
		t.Fatalf("the first run was not canceled after three checkpoints: canceled %v, %v", first.Canceled, first.Err)
	}
	ids := first.Checkpoints()
	if len(ids) == 0 || first.Events.Count(stream.EventCheckpointCompleted) < 3 {
		t.Fatalf("retained checkpoints %v after events %s", ids, first.Events)
	}
	if n := len(sink.Results()); n == 0 || n >= total {
		t.Fatalf("the first run wrote %d of %d counts: nothing to resume", n, total)
	}

	second := streamtest.Run(t, build, conf, streamtest.ResumeFrom(first), streamtest.JobID("second"))
	if second.Err != nil || second.Canceled {
		t.Fatalf("the resumed run: %v (canceled %v); events: %s", second.Err, second.Canceled, second.Events)
	}
	restored, ok := second.Events.Last(stream.EventRestored)
	if !ok || restored.Checkpoint != ids[len(ids)-1] {
		t.Fatalf("restored %+v, want the latest retained checkpoint of %v", restored, ids)
	}
	got := sink.Results()
	slices.Sort(got)
	for i, v := range got {
		if v != int64(i+1) {
			t.Fatalf("count %d of %d is %d, want %d: lost or duplicated", i, len(got), v, i+1)
		}
	}
	if len(got) != total {
		t.Fatalf("%d counts, want %d", len(got), total)
	}
}

// TestRunTimeout fails a test whose job outlives its timeout, and says
// so, rather than hanging.
func TestRunTimeout(t *testing.T) {
	ft := &fakeTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		streamtest.Run(ft, func(env *stream.Environment) {
			src, _ := datagen.New(func(int, int64) int64 { return 1 }, datagen.Count(1<<40), datagen.RatePerSecond(1000))
			stream.SinkTo(stream.FromSource(env, src, "src", stream.NoWatermarks[int64]()), streamtest.NewCollector[int64](false), stream.Uid("sink"))
		}, streamtest.Timeout(200*time.Millisecond))
	}()
	<-done
	if !strings.Contains(ft.fatal, "had not ended after 200ms") {
		t.Fatalf("a job that outlives its timeout: %q, want a failure that says so", ft.fatal)
	}
}

// fakeTB records a Fatalf and ends the goroutine, as testing.T does.
type fakeTB struct {
	testing.TB
	fatal string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// TestStartStopsWithASavepoint starts a keyed count without waiting for
// it, stops it with a savepoint through its client while it runs, and
// resumes it from the savepoint: Wait reports the stopped job finished,
// not canceled, and the sink, which outlives both runs, holds every count
// exactly once.
func TestStartStopsWithASavepoint(t *testing.T) {
	sink := streamtest.NewCollector[int64](true)
	build := func(env *stream.Environment) {
		src, err := datagen.New(func(int, int64) int64 { return 1 }, datagen.Partitions(2), datagen.Count(total/2), datagen.BatchSize(10), datagen.RatePerSecond(20_000))
		if err != nil {
			t.Fatal(err)
		}
		in := stream.FromSource(env, src, "src", stream.NoWatermarks[int64]())
		counts := stream.Process(stream.KeyBy(in, func(int64) int { return 0 }), stream.KeyedProcessFunction[int, int64, int64](&count{}), stream.Uid("count"), stream.Parallelism(1))
		stream.SinkTo(counts, sink, stream.Uid("sink"), stream.Parallelism(1))
	}
	conf := streamtest.Config("parallelism.default=2", "execution.checkpointing.interval=10 ms",
		"execution.checkpointing.savepoint-dir="+t.TempDir())
	job := streamtest.Start(t, build, conf)
	if job.Client == nil {
		t.Fatalf("the job did not start: %v", job.Wait().Err)
	}
	if _, err := job.Client.TriggerCheckpoint(context.Background()); err != nil {
		t.Fatalf("a checkpoint of the running job: %v", err)
	}
	path, err := job.Client.StopWithSavepoint(context.Background(), "", false)
	if err != nil {
		t.Fatalf("stop with a savepoint: %v", err)
	}
	if res := job.Wait(); res.Err != nil || res.Canceled {
		t.Fatalf("the stopped job: %v (canceled %v)", res.Err, res.Canceled)
	}
	if n := len(sink.Results()); n >= total {
		t.Fatalf("the stopped job wrote all %d counts: nothing to resume", n)
	}
	second := streamtest.Run(t, build, conf, streamtest.Config("execution.state-recovery.path="+path), streamtest.JobID("second"))
	if second.Err != nil {
		t.Fatalf("the resumed run: %v; events: %s", second.Err, second.Events)
	}
	got := sink.Results()
	slices.Sort(got)
	for i, v := range got {
		if v != int64(i+1) {
			t.Fatalf("count %d of %d is %d, want %d: lost or duplicated", i, len(got), v, i+1)
		}
	}
	if len(got) != total {
		t.Fatalf("%d counts, want %d", len(got), total)
	}
}
