package launch_test

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/connector/datagen"
	"github.com/weirstream/weir/internal/launch"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

var quiet = slog.New(slog.DiscardHandler)

// numbers builds a bounded job of n records per partition into two
// collectors, one of which cannot reconcile on restore.
func numbers(t *testing.T, n int64) (*stream.Environment, *streamtest.Collector[int64]) {
	t.Helper()
	cfg, err := config.ParseDynamic([]string{"parallelism.default=2"})
	if err != nil {
		t.Fatal(err)
	}
	env, err := stream.NewEnvironment(stream.WithConfig(cfg), stream.WithLogger(quiet), stream.WithJobID("launch-test"))
	if err != nil {
		t.Fatal(err)
	}
	src, err := datagen.New(func(p int, seq int64) int64 { return int64(p)*1_000 + seq }, datagen.Partitions(2), datagen.Count(n))
	if err != nil {
		t.Fatal(err)
	}
	nums := stream.FromSource(env, src, "numbers", stream.NoWatermarks[int64]())
	out := streamtest.NewCollector[int64](false)
	stream.SinkTo(nums, out, stream.Uid("plain"))
	stream.SinkTo(nums, streamtest.NewReconcilingCollector[int64](), stream.Uid("reconciling"))
	return env, out
}

// TestDescribeStart: launch describes a stream environment the way its
// Execute does, and runs the description to its end.
func TestDescribeStart(t *testing.T) {
	env, out := numbers(t, 50)
	j, err := launch.Describe(env, "numbers")
	if err != nil {
		t.Fatal(err)
	}
	if j.Name != "numbers" || j.JobID != "launch-test" || j.Graph == nil || j.Config != env.Config() {
		t.Fatalf("description: name %q, job id %q, graph %v, config %p (want %p)", j.Name, j.JobID, j.Graph != nil, j.Config, env.Config())
	}
	if !slices.Equal(j.Unreconciled, []string{"plain"}) {
		t.Errorf("unreconciled sinks %v, want [plain]", j.Unreconciled)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h, err := launch.Start(ctx, j)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Wait(); err != nil {
		t.Fatalf("job: %v", err)
	}
	<-h.Done()
	if got := len(out.Results()); got != 100 {
		t.Errorf("sink got %d records, want 100", got)
	}
	if m := h.Master().Metrics(); !m.Status.Terminal() {
		t.Errorf("status %s after the end", m.Status)
	}
}

// TestHandleOf: a job client started by Execute carries its handle; other
// values do not.
func TestHandleOf(t *testing.T) {
	env, _ := numbers(t, 10)
	c, err := env.ExecuteAsync(context.Background(), "numbers")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(); err != nil {
		t.Fatal(err)
	}
	h, ok := launch.HandleOf(c)
	if !ok || h == nil || launch.MasterOf(c) != h.Master() || h.Master().JobID() != env.JobID() {
		t.Fatalf("HandleOf(job client) = %v, %v", h, ok)
	}
	if got := c.Metrics().Status; got != stream.StatusFinished {
		t.Errorf("JobClient.Metrics().Status = %s, want %s", got, stream.StatusFinished)
	}
	if _, ok := launch.HandleOf("not a client"); ok {
		t.Error("HandleOf(a string) = ok")
	}
	if _, ok := launch.HandleOf((*stream.JobClient)(nil)); ok {
		t.Error("HandleOf(nil job client) = ok")
	}
	if _, ok := launch.HandleOf(&stream.JobClient{}); ok {
		t.Error("HandleOf(a job client ExecuteAsync did not return) = ok")
	}
	if m := launch.MasterOf(42); m != nil {
		t.Error("MasterOf(42) != nil")
	}
	if _, err := launch.Describe("not an environment", "x"); err == nil {
		t.Error("Describe(a string) succeeded")
	}
}
