package stream_test

import (
	"context"
	"sync"
	"testing"

	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connector/datagen"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

// infoSink records the WriterInfo of every writer it opens.
type infoSink struct {
	connector.Sink[int64]
	mu    sync.Mutex
	infos []connector.WriterInfo
}

func (s *infoSink) NewWriter(ctx context.Context, info connector.WriterInfo) (connector.SinkWriter[int64], error) {
	s.mu.Lock()
	s.infos = append(s.infos, info)
	s.mu.Unlock()
	return s.Sink.NewWriter(ctx, info)
}

// TestWriterInfoNamesTheJob: sink writers learn the job's id, their uid,
// subtask and parallelism.
func TestWriterInfoNamesTheJob(t *testing.T) {
	env, err := stream.NewEnvironment(stream.WithConfig(mustConfig(t, "parallelism.default=2")), stream.WithLogger(quiet), stream.WithJobID("job-7"))
	if err != nil {
		t.Fatal(err)
	}
	src, err := datagen.New(func(p int, seq int64) int64 { return seq }, datagen.Partitions(2), datagen.Count(10))
	if err != nil {
		t.Fatal(err)
	}
	sink := &infoSink{Sink: streamtest.NewCollector[int64](false)}
	stream.SinkTo(stream.FromSource(env, src, "numbers", stream.NoWatermarks[int64]()), sink, stream.Uid("out"))
	if err := env.Execute(context.Background(), "info"); err != nil {
		t.Fatal(err)
	}
	if len(sink.infos) != 2 {
		t.Fatalf("%d writers opened, want 2", len(sink.infos))
	}
	for _, in := range sink.infos {
		if in.JobID != "job-7" || in.UID != "out" || in.Parallelism != 2 {
			t.Fatalf("writer info %+v, want job-7, uid out, parallelism 2", in)
		}
	}
}

// TestEveryValueConfigAcceptsExecutes: a value the configuration accepts
// is one the job runs with, not one Execute rejects later (a backoff
// multiplier of 1 keeps the restart delay constant, as in Flink).
func TestEveryValueConfigAcceptsExecutes(t *testing.T) {
	env, err := stream.NewEnvironment(stream.WithConfig(mustConfig(t, "restart-strategy.type=exponential-delay",
		"restart-strategy.exponential-delay.backoff-multiplier=1", "execution.checkpointing.interval=50 ms")), stream.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	src, err := datagen.New(func(p int, seq int64) int64 { return seq }, datagen.Partitions(1), datagen.Count(10))
	if err != nil {
		t.Fatal(err)
	}
	stream.SinkTo(stream.FromSource(env, src, "numbers", stream.NoWatermarks[int64]()), streamtest.NewCollector[int64](false), stream.Uid("out"))
	if err := env.Execute(context.Background(), "multiplier"); err != nil {
		t.Fatal(err)
	}
}
