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
	if files := storeFiles(t, path, "sum"); files == 0 {
		t.Fatal("the native savepoint's keyed state holds no file of a store")
	}
	return path
}

// storeFiles returns how many of the keyed state handles of operator uid
// in the savepoint at path are a store's files, and fails t if any lies
// outside the savepoint's directory.
func storeFiles(t *testing.T, path, uid string) int {
	t.Helper()
	st, err := storage.Open(context.Background(), filepath.Dir(path), "unused")
	if err != nil {
		t.Fatal(err)
	}
	md, err := st.ReadMetadata(context.Background(), path)
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	op, ok := md.Operator(uid)
	if !ok {
		t.Fatalf("the savepoint has no state of %s", uid)
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
	return files
}

// TestSavepointFormatConfig: execution.savepoint.format is the format of
// a savepoint whose request names none, and a request naming one
// overrides it.
func TestSavepointFormatConfig(t *testing.T) {
	for _, tc := range []struct {
		conf   string
		opts   []stream.SavepointOption
		native bool
	}{
		{"execution.savepoint.format=NATIVE", nil, true},
		{"execution.savepoint.format=native", []stream.SavepointOption{stream.CanonicalFormat()}, false},
		{"execution.savepoint.format=CANONICAL", nil, false},
		{"execution.savepoint.format=CANONICAL", []stream.SavepointOption{stream.NativeFormat()}, true},
	} {
		t.Run(fmt.Sprintf("%s,%d options", tc.conf, len(tc.opts)), func(t *testing.T) {
			env, err := stream.NewEnvironment(stream.WithConfig(mustConfig(t, "execution.checkpointing.interval=10 ms",
				"execution.checkpointing.dir="+t.TempDir(), "state.backend.type=rocksdb", "parallelism.default=2", tc.conf)), stream.WithLogger(quiet))
			if err != nil {
				t.Fatal(err)
			}
			gen := func(p int, seq int64) rec { return rec{Key: fmt.Sprintf("k%d", seq%100), Value: 1, P: p, Seq: seq} }
			src, _ := datagen.New(gen, datagen.Partitions(2), datagen.BatchSize(10), datagen.RatePerSecond(2000))
			in := stream.FromSource(env, src, "numbers", stream.NoWatermarks[rec]())
			sums := stream.Process(stream.KeyBy(in, func(r rec) string { return r.Key }), stream.KeyedProcessFunction[string, rec, KeyedSum](&runningSum{}), stream.Uid("sum"))
			stream.SinkTo(sums, streamtest.NewCollector[KeyedSum](true), stream.Uid("sink"))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			job, err := env.ExecuteAsync(ctx, "format")
			if err != nil {
				t.Fatal(err)
			}
			tick := time.NewTicker(time.Millisecond)
			for job.Metrics().RecordsIn < 200 {
				select {
				case <-job.Done():
					t.Fatalf("the job ended before the savepoint: %v", job.Wait())
				case <-tick.C:
				}
			}
			tick.Stop()
			path, err := job.TriggerSavepoint(context.Background(), t.TempDir(), tc.opts...)
			cancel()
			<-job.Done()
			if err != nil {
				t.Fatalf("savepoint: %v", err)
			}
			if files := storeFiles(t, path, "sum"); (files > 0) != tc.native {
				t.Fatalf("the savepoint's keyed state holds %d files of a store; want native %v", files, tc.native)
			}
		})
	}
}
