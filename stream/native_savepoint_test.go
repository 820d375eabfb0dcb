package stream_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/connector/datagen"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

// TestNativeSavepoint stops a job on the embedded LSM backend with a
// savepoint in the native format: its keyed state is the stores' files,
// every one of them in the savepoint's own directory (it names no
// checkpoint's file, so it outlives them). The job resumes from it on the
// same backend at the same parallelism (which adopts the files), at
// another parallelism, and on the heap backend; each resumed run's output
// holds every record's sum exactly once.
func TestNativeSavepoint(t *testing.T) {
	const partitions, perPartition = 2, 3000
	gen := func(p int, seq int64) rec {
		return rec{Key: fmt.Sprintf("k%d", datagen.Mix(5, p, seq)%300), Value: int64(p) + 2*seq + 1, P: p, Seq: seq}
	}
	start := func(sink *streamtest.Collector[KeyedSum], jobID string, rate float64, conf ...string) *stream.JobClient {
		conf = append([]string{"execution.checkpointing.interval=10 ms", "execution.checkpointing.dir=" + t.TempDir(),
			"execution.checkpointing.incremental=true"}, conf...)
		env, err := stream.NewEnvironment(stream.WithConfig(mustConfig(t, conf...)), stream.WithLogger(quiet), stream.WithJobID(jobID))
		if err != nil {
			t.Fatal(err)
		}
		src, _ := datagen.New(gen, datagen.Partitions(partitions), datagen.Count(perPartition), datagen.BatchSize(10), datagen.RatePerSecond(rate))
		in := stream.FromSource(env, src, "numbers", stream.NoWatermarks[rec]())
		sums := stream.Process(stream.KeyBy(in, func(r rec) string { return r.Key }), stream.KeyedProcessFunction[string, rec, KeyedSum](&runningSum{}), stream.Uid("sum"))
		stream.SinkTo(sums, sink, stream.Uid("sink"))
		c, err := env.ExecuteAsync(context.Background(), "native")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	records := recordsByKey(gen, partitions, perPartition)
	for _, conf := range [][]string{
		{"parallelism.default=2", "state.backend.type=rocksdb"},
		{"parallelism.default=3", "state.backend.type=pebble"},
		{"parallelism.default=1", "state.backend.type=hashmap"},
	} {
		t.Run(strings.Join(conf, ","), func(t *testing.T) {
			sink := streamtest.NewCollector[KeyedSum](true)
			path := stopNative(t, start(sink, "first", 2000, "parallelism.default=2", "state.backend.type=rocksdb"))
			c := start(sink, "second", 0, append(conf, "execution.state-recovery.path="+path)...)
			if err := c.Wait(); err != nil {
				t.Fatal(err)
			}
			if err := checkRunningSums(sink.Results(), records); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// stopNative stops job with a savepoint in the native format once it has
// read 1500 records, checks that the savepoint's keyed state is the
// stores' files, all in the savepoint's own directory, and returns its
// path.
func stopNative(t *testing.T, job *stream.JobClient) string {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	for job.Metrics().RecordsIn < 1500 {
		select {
		case <-job.Done():
			t.Fatalf("the first job ended before the stop (%v): make the input longer", job.Wait())
		case <-tick.C:
		}
	}
	tick.Stop()
	path, err := job.StopWithSavepoint(context.Background(), t.TempDir(), false, stream.NativeFormat())
	if err != nil {
		t.Fatalf("stop with a native savepoint: %v", err)
	}
	if err := job.Wait(); err != nil {
		t.Fatalf("the stopped job ended with %v", err)
	}
	st, err := storage.Open(context.Background(), filepath.Dir(path), "unused")
	if err != nil {
		t.Fatal(err)
	}
	md, err := st.ReadMetadata(context.Background(), path)
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	op, ok := md.Operator("sum")
	if !ok {
		t.Fatal("the savepoint has no state of sum")
	}
	files := 0
	for i, sub := range op.Subtasks {
		for _, h := range sub.Keyed {
			if h.File != "" {
				files++
			}
			if h.Path != "" && (strings.Contains(h.Path, "..") || strings.HasPrefix(h.Path, "chk-") || filepath.IsAbs(h.Path)) {
				t.Errorf("subtask %d's state %s is outside the savepoint", i, h.Path)
			}
		}
	}
	if files == 0 {
		t.Fatalf("the native savepoint's keyed state holds no file of a store: %+v", op.Subtasks)
	}
	return path
}
