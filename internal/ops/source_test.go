package ops_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/internal/ops"
	"github.com/weirstream/weir/internal/runtime"
)

var quiet = slog.New(slog.DiscardHandler)

// discard is a source's output that drops what it gets.
type discard[T any] struct{}

func (discard[T]) Collect(T, int64) error    { return nil }
func (discard[T]) EmitWatermark(int64) error { return nil }

// openFunc is a source of one split whose NewReader is open.
type openFunc func(ctx context.Context) (connector.Reader[int64], error)

func (openFunc) Splits(context.Context) ([]string, error) { return []string{"s"}, nil }
func (openFunc) Bounded() bool                            { return true }
func (f openFunc) NewReader(ctx context.Context, _ connector.ReaderInfo, _ []connector.SplitStart) (connector.Reader[int64], error) {
	return f(ctx)
}

// sourceJob returns a job master running src alone, on one subtask,
// without restarts.
func sourceJob(t *testing.T, src connector.Source[int64]) *runtime.JobMaster {
	t.Helper()
	v := &runtime.Vertex{Name: "src", UID: "src", Parallelism: 1, MaxParallelism: 128,
		Build: func(*runtime.TaskContext) (*runtime.Chain, error) {
			s := ops.NewSource(src, ops.Watermarks[int64]{Disabled: true}, runtime.Output[int64](discard[int64]{}))
			return &runtime.Chain{Operators: []runtime.ChainedOperator{{UID: "src", Name: "src", Op: s}}, Source: s}, nil
		}}
	jm, err := runtime.NewJobMaster(&runtime.JobGraph{Name: "source", Vertices: []*runtime.Vertex{v}}, runtime.Options{JobID: "test", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return jm
}

// runWithin runs jm and returns its result, failing the test if the job
// has not ended after a minute: a subtask that never exits keeps it
// running forever.
func runWithin(t *testing.T, ctx context.Context, jm *runtime.JobMaster) error {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- jm.Run(ctx) }()
	select {
	case err := <-errc:
		return err
	case <-time.After(time.Minute):
		t.Fatal("the job has not ended after a minute: its source subtask hangs")
		return nil
	}
}

// TestSourceFailsWhenReaderDoesNotOpen: an error from NewReader fails the
// subtask, and with it the job (it has no restarts), instead of leaving
// Close waiting for a fetcher that never started.
func TestSourceFailsWhenReaderDoesNotOpen(t *testing.T) {
	unreachable := errors.New("broker unreachable")
	jm := sourceJob(t, openFunc(func(context.Context) (connector.Reader[int64], error) { return nil, unreachable }))
	if err := runWithin(t, context.Background(), jm); !errors.Is(err, unreachable) {
		t.Fatalf("job ended with %v, want the reader's error", err)
	}
}

// TestSourceCanceledInsideNewReader: a job canceled while its source is
// opening its reader ends.
func TestSourceCanceledInsideNewReader(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	jm := sourceJob(t, openFunc(func(rctx context.Context) (connector.Reader[int64], error) {
		cancel()
		<-rctx.Done()
		return nil, rctx.Err()
	}))
	if err := runWithin(t, ctx, jm); !errors.Is(err, context.Canceled) {
		t.Fatalf("job ended with %v, want its cancellation", err)
	}
}

// logOutput records what a source emits, in order.
type logOutput struct{ log *[]string }

func (o logOutput) Collect(v int64, _ int64) error {
	*o.log = append(*o.log, fmt.Sprint("record ", v))
	return nil
}
func (logOutput) EmitWatermark(int64) error { return nil }

// recyclingReader returns fetches of two records that log their Recycle.
type recyclingReader struct {
	log     *[]string
	fetches int
}

func (r *recyclingReader) Fetch(context.Context) (connector.Fetch[int64], error) {
	if r.fetches == 3 {
		return connector.Fetch[int64]{}, connector.ErrEndOfInput
	}
	r.fetches++
	n := int64(r.fetches)
	return connector.Fetch[int64]{Split: "s", Records: []int64{10*n + 1, 10*n + 2}, Next: n, EndOfSplit: n == 3,
		Recycle: func() { *r.log = append(*r.log, fmt.Sprint("recycle ", n)) }}, nil
}
func (r *recyclingReader) Close() error { return nil }

// TestSourceRecyclesEmittedFetches: a fetch's Recycle runs once, after
// every record of the fetch was emitted and before any of the next.
func TestSourceRecyclesEmittedFetches(t *testing.T) {
	var log []string
	src := openFunc(func(context.Context) (connector.Reader[int64], error) { return &recyclingReader{log: &log}, nil })
	v := &runtime.Vertex{Name: "src", UID: "src", Parallelism: 1, MaxParallelism: 128,
		Build: func(*runtime.TaskContext) (*runtime.Chain, error) {
			s := ops.NewSource(connector.Source[int64](src), ops.Watermarks[int64]{Disabled: true}, runtime.Output[int64](logOutput{&log}))
			return &runtime.Chain{Operators: []runtime.ChainedOperator{{UID: "src", Name: "src", Op: s}}, Source: s}, nil
		}}
	jm, err := runtime.NewJobMaster(&runtime.JobGraph{Name: "source", Vertices: []*runtime.Vertex{v}}, runtime.Options{JobID: "test", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := runWithin(t, context.Background(), jm); err != nil {
		t.Fatal(err)
	}
	want := []string{"record 11", "record 12", "recycle 1", "record 21", "record 22", "recycle 2", "record 31", "record 32", "recycle 3"}
	if !slices.Equal(log, want) {
		t.Fatalf("emitted %q, want %q", log, want)
	}
}
