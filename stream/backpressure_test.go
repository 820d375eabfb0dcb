package stream_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connector/datagen"
	"github.com/weirstream/weir/stream"
)

// gateSink blocks in its first Write until released.
type gateSink struct {
	once     sync.Once
	entered  chan struct{}
	released chan struct{}
}

func (g *gateSink) NewWriter(context.Context, connector.WriterInfo) (connector.SinkWriter[int64], error) {
	return g, nil
}

func (g *gateSink) Write(int64, int64) error {
	g.once.Do(func() { close(g.entered) })
	<-g.released
	return nil
}

func (g *gateSink) PrepareCommit(context.Context, int64) ([][]byte, error) { return nil, nil }
func (g *gateSink) Close() error                                           { return nil }

// TestBackpressureBoundsInFlightRecords: when the sink stops consuming,
// the bounded channels fill and the unbounded source stops emitting: the
// records in flight stay bounded by the buffers, whatever the source's
// speed.
func TestBackpressureBoundsInFlightRecords(t *testing.T) {
	env, err := stream.NewEnvironment(stream.WithConfig(mustConfig(t, "parallelism.default=2")), stream.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	src, _ := datagen.New(func(_ int, seq int64) int64 { return seq }, datagen.Partitions(2), datagen.BatchSize(256))
	in := stream.FromSource(env, src, "numbers", stream.NoWatermarks[int64]())
	g := &gateSink{entered: make(chan struct{}), released: make(chan struct{})}
	stream.SinkTo(stream.Rebalance(in, stream.Parallelism(1)), g, stream.Uid("sink"), stream.Parallelism(1))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client, err := env.ExecuteAsync(ctx, "backpressure")
	if err != nil {
		t.Fatal(err)
	}
	<-g.entered
	// Wait until the sources stop: the count stays put for a while.
	var last int64 = -1
	stable := 0
	deadline := time.Now().Add(30 * time.Second)
	for stable < 5 {
		if time.Now().After(deadline) {
			t.Fatalf("the sources kept emitting against a stopped sink: %d records", last)
		}
		time.Sleep(20 * time.Millisecond)
		n := client.Metrics().RecordsIn
		if n == last {
			stable++
		} else {
			stable, last = 0, n
		}
	}
	// Two sources × one channel each into the sink: per channel 4 queued
	// batches plus one being filled and one being delivered, at most 1024
	// records a batch, plus two fetches of 256 buffered per source.
	const bound = 2 * (6*1024 + 3*256)
	if last > bound {
		t.Fatalf("%d records emitted against a stopped sink, want at most %d", last, bound)
	}
	close(g.released)
	cancel()
	client.Wait()
}
