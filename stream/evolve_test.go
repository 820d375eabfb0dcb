package stream_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/connector/datagen"
	"github.com/weirstream/weir/state"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

// tenantV1 and tenantV2 are the state of one job in two versions: V2
// reorders the fields, drops Note, adds Region and Count.
type tenantV1 struct {
	Tenant int64
	Cents  int64
	Note   string
}

type tenantV2 struct {
	Count  int64
	Cents  int64
	Region string
	Tenant int64
}

// tenantBad changes the type of Cents.
type tenantBad struct {
	Tenant int64
	Cents  string
}

type keyedCents struct{ Key, Cents int64 }

// totalFn keeps a running total per key in a value state of type S,
// through get and set, and emits it.
type totalFn[S any] struct {
	st  state.ValueState[S]
	add func(s S, key, v int64) (S, int64)
}

func (f *totalFn[S]) Open(rc *stream.RuntimeContext[int64]) error {
	var err error
	f.st, err = stream.ValueState[S](rc, "total")
	return err
}

func (f *totalFn[S]) ProcessElement(ctx *stream.Context[int64, keyedCents], v int64) error {
	s, _ := f.st.Value()
	s, total := f.add(s, ctx.Key(), v)
	f.st.Update(s)
	return ctx.Emit(keyedCents{ctx.Key(), total})
}

// TestStateSchemaEvolution runs a job whose keyed state is a tenantV1,
// cancels it after checkpoints, and resumes its checkpoint with the job's
// next version, whose state is a tenantV2: the totals go on from where
// they were, every record counted exactly once. A third version, which
// changed a field's type, fails at once, without restarting, with an
// error that names the operator, the state and the field.
func TestStateSchemaEvolution(t *testing.T) {
	for _, backend := range [][]string{
		{"state.backend.type=hashmap"},
		{"state.backend.type=pebble"},
		{"state.backend.type=rocksdb", "execution.checkpointing.incremental=true"},
	} {
		t.Run(strings.Join(backend, ","), func(t *testing.T) { testStateSchemaEvolution(t, backend, backend, nil) })
	}
}

// TestStateSchemaEvolutionThroughSavepoints is TestStateSchemaEvolution
// with the first version stopped with a savepoint, which the next versions
// resume: a canonical one taken on the heap backend and resumed on pebble
// (a new version of the code and a new backend at once), and a native one
// of rocksdb with incremental checkpoints.
func TestStateSchemaEvolutionThroughSavepoints(t *testing.T) {
	for _, tc := range []struct {
		name        string
		first, next []string
		format      stream.SavepointOption
	}{
		{"canonical,hashmap-to-pebble", []string{"state.backend.type=hashmap"}, []string{"state.backend.type=pebble"}, stream.CanonicalFormat()},
		{"native,rocksdb", []string{"state.backend.type=rocksdb", "execution.checkpointing.incremental=true"},
			[]string{"state.backend.type=rocksdb", "execution.checkpointing.incremental=true"}, stream.NativeFormat()},
	} {
		t.Run(tc.name, func(t *testing.T) { testStateSchemaEvolution(t, tc.first, tc.next, tc.format) })
	}
}

// testStateSchemaEvolution runs the three versions, the first on backend
// first, the others on next; with savepoint set, the first is stopped
// with a savepoint in that format, which the others resume, else it is
// canceled after checkpoints, and they resume its latest.
func testStateSchemaEvolution(t *testing.T, first, next []string, savepoint stream.SavepointOption) {
	const partitions, perPartition, keys = 2, 3000, 8
	sink := streamtest.NewCollector[keyedCents](true)
	job := func(fn stream.KeyedProcessFunction[int64, int64, keyedCents], paced bool) func(*stream.Environment) {
		return func(env *stream.Environment) {
			opts := []datagen.Option{datagen.Partitions(partitions), datagen.Count(perPartition), datagen.BatchSize(20)}
			if paced {
				opts = append(opts, datagen.RatePerSecond(2000))
			}
			src, err := datagen.New(func(p int, seq int64) int64 { return int64(p)*perPartition + seq }, opts...)
			if err != nil {
				t.Fatal(err)
			}
			in := stream.FromSource(env, src, "numbers", stream.NoWatermarks[int64]())
			totals := stream.Process(stream.KeyBy(in, func(v int64) int64 { return v % keys }), fn, stream.Uid("sum"))
			stream.SinkTo(totals, sink, stream.Uid("sink"))
		}
	}
	v1 := &totalFn[tenantV1]{add: func(s tenantV1, key, v int64) (tenantV1, int64) {
		s.Tenant, s.Cents, s.Note = key, s.Cents+v, "v1"
		return s, s.Cents
	}}
	v2 := &totalFn[tenantV2]{add: func(s tenantV2, key, v int64) (tenantV2, int64) {
		if s.Tenant != key && s.Count > 0 {
			t.Errorf("key %d holds the state of tenant %d", key, s.Tenant)
		}
		s.Tenant, s.Cents, s.Count = key, s.Cents+v, s.Count+1
		return s, s.Cents
	}}
	common := []string{"parallelism.default=2", "execution.checkpointing.interval=20 ms",
		"restart-strategy.type=fixed-delay", "restart-strategy.fixed-delay.attempts=5", "restart-strategy.fixed-delay.delay=1 ms"}
	nextConf := streamtest.Config(append(common, next...)...)
	var resume streamtest.RunOption
	if savepoint == nil {
		v1run := streamtest.Run(t, job(v1, true), streamtest.Config(append(common, first...)...), streamtest.JobID("v1"),
			streamtest.UntilCheckpoints(3), streamtest.Timeout(time.Minute))
		if !v1run.Canceled {
			t.Fatalf("the first version finished before it was canceled: %v", v1run.Err)
		}
		resume = streamtest.ResumeFrom(v1run)
	} else {
		v1job := streamtest.Start(t, job(v1, true), streamtest.Config(append(common, first...)...), streamtest.JobID("v1"), streamtest.Timeout(time.Minute))
		tick := time.NewTicker(time.Millisecond)
		for v1job.Client.Metrics().RecordsIn < 1000 {
			select {
			case <-v1job.Client.Done():
				t.Fatalf("the first version ended before its savepoint: %v", v1job.Wait().Err)
			case <-tick.C:
			}
		}
		tick.Stop()
		path, err := v1job.Client.StopWithSavepoint(context.Background(), t.TempDir(), false, savepoint)
		if err != nil {
			t.Fatalf("stop with a savepoint: %v", err)
		}
		if res := v1job.Wait(); res.Err != nil {
			t.Fatalf("the first version, stopped with a savepoint, ended with %v", res.Err)
		}
		resume = streamtest.Config("execution.state-recovery.path=" + path)
	}

	bad := &totalFn[tenantBad]{add: func(s tenantBad, _, _ int64) (tenantBad, int64) { return s, 0 }}
	third := streamtest.Run(t, job(bad, false), nextConf, resume, streamtest.JobID("bad"), streamtest.Timeout(time.Minute))
	if third.Err == nil {
		t.Fatal("a version whose state changed a field's type restored")
	}
	for _, want := range []string{"sum", `"total"`, "Cents", "int64", "string"} {
		if !strings.Contains(third.Err.Error(), want) {
			t.Errorf("the error does not name %s: %v", want, third.Err)
		}
	}
	if !errors.Is(third.Err, state.ErrIncompatibleSchema) {
		t.Errorf("the error is not ErrIncompatibleSchema: %v", third.Err)
	}
	if n := third.Events.Count(stream.EventRestarting); n != 0 {
		t.Errorf("the job restarted %d times on a permanent error", n)
	}

	second := streamtest.Run(t, job(v2, false), nextConf, resume, streamtest.JobID("v2"), streamtest.Timeout(time.Minute))
	if second.Err != nil {
		t.Fatal(second.Err)
	}
	if restored, _ := second.Events.Last(stream.EventRestored); restored.Checkpoint == 0 {
		t.Fatal("the second version did not restore a checkpoint or savepoint")
	}
	// Oracle: the total of each key over all the input, and one output
	// per record.
	want := map[int64]int64{}
	for p := range partitions {
		for seq := range int64(perPartition) {
			v := int64(p)*perPartition + seq
			want[v%keys] += v
		}
	}
	got := map[int64]int64{}
	out := sink.Results()
	for _, r := range out {
		got[r.Key] = max(got[r.Key], r.Cents)
	}
	if len(out) != partitions*perPartition {
		t.Errorf("%d outputs for %d records", len(out), partitions*perPartition)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("key %d: total %d, want %d", k, got[k], w)
		}
	}
}
