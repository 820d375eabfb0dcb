package stream_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirstream/weir/connector/datagen"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

// TestSavepointResumesExactly takes a savepoint of a running job (a
// keyed running sum into an exactly-once sink) at a seeded point of its
// input, cancels the job, and resumes a new job from the savepoint. The
// first job completes no checkpoint (its interval is an hour), so
// whatever reaches the sink's committed output was in the savepoint: a
// savepoint commits nothing itself, its restore commits what it held
// pending, and the second job, at a seeded parallelism, goes on from its
// positions and keyed state.
// The output must hold every record's sum exactly once; the savepoint
// must be self-contained (it is moved before the resume) and outlive
// both jobs. Each job keeps its state on a seeded backend, so a savepoint
// moves state from the heap to the pebble backend and back; the pebble
// backend must leave nothing in its directory once a job has ended.
func TestSavepointResumesExactly(t *testing.T) {
	const partitions, perPartition = 2, 3000
	for _, seed := range diffSeedList(4) {
		r := rand.New(rand.NewPCG(seed, 77))
		after := int64(300 + r.IntN(2500)) // records read before the savepoint
		explicit := r.IntN(2) == 0         // name the directory, or take the configured one
		unaligned := r.IntN(2) == 0        // a savepoint is aligned all the same
		parallelism := 1 + r.IntN(3)       // of the resumed job
		backends := [2]string{[]string{"hashmap", "pebble"}[r.IntN(2)], []string{"hashmap", "pebble"}[r.IntN(2)]}
		name := fmt.Sprintf("seed=%d after=%d explicit-dir=%t unaligned=%t resumed-parallelism=%d backends=%s,%s", seed, after, explicit, unaligned, parallelism, backends[0], backends[1])
		localDir := t.TempDir()
		gen := func(p int, seq int64) rec {
			return rec{Key: fmt.Sprintf("k%d", datagen.Mix(seed, p, seq)%4000), Value: int64(p) + 2*seq + 1, P: p, Seq: seq}
		}
		ckDir, spDir := t.TempDir(), t.TempDir()
		sink := streamtest.NewCollector[KeyedSum](true)
		start := func(ctx context.Context, jobID string, rate float64, extra ...string) *stream.JobClient {
			conf := []string{"parallelism.default=2", "execution.checkpointing.interval=1 h", "state.backend.pebble.localdir=" + localDir,
				"execution.checkpointing.dir=" + ckDir, "execution.checkpointing.savepoint-dir=" + spDir,
				"execution.checkpointing.data-inline-threshold=0 b"} // state in files, not inline
			if unaligned {
				conf = append(conf, "execution.checkpointing.unaligned.enabled=true")
			}
			env, err := stream.NewEnvironment(stream.WithConfig(mustConfig(t, append(conf, extra...)...)), stream.WithLogger(quiet), stream.WithJobID(jobID))
			if err != nil {
				t.Fatal(err)
			}
			src, _ := datagen.New(gen, datagen.Partitions(partitions), datagen.Count(perPartition), datagen.BatchSize(10), datagen.RatePerSecond(rate))
			in := stream.FromSource(env, src, "numbers", stream.NoWatermarks[rec]())
			sums := stream.Process(stream.KeyBy(in, func(r rec) string { return r.Key }), stream.KeyedProcessFunction[string, rec, KeyedSum](&runningSum{}), stream.Uid("sum"))
			stream.SinkTo(sums, sink, stream.Uid("sink"))
			c, err := env.ExecuteAsync(ctx, "savepoint")
			if err != nil {
				t.Fatal(err)
			}
			return c
		}

		ctx, cancel := context.WithCancel(context.Background())
		first := start(ctx, "first", 1500, "state.backend.type="+backends[0])
		tick := time.NewTicker(time.Millisecond)
		for first.Metrics().RecordsIn < after {
			select {
			case <-first.Done():
				t.Fatalf("%s: the first job ended before the savepoint (%v): make the input longer", name, first.Wait())
			case <-tick.C:
			}
		}
		tick.Stop()
		dir := ""
		if explicit {
			dir = filepath.Join(spDir, "named")
		}
		path, err := first.TriggerSavepoint(context.Background(), dir)
		if err != nil {
			t.Fatalf("%s: savepoint: %v", name, err)
		}
		want := spDir
		if explicit {
			want = dir
		}
		if filepath.Dir(path) != want || !strings.HasPrefix(filepath.Base(path), "savepoint-") {
			t.Fatalf("%s: savepoint at %s, want a savepoint-* directory in %s", name, path, want)
		}
		cancel()
		<-first.Done()
		if got := sink.Results(); len(got) != 0 {
			t.Fatalf("%s: the first job committed %d results: without a completed checkpoint it must commit none (a savepoint commits nothing)", name, len(got))
		}

		// A savepoint can be moved: its state paths are its own.
		moved := filepath.Join(t.TempDir(), "moved-"+filepath.Base(path))
		if err := os.Rename(path, moved); err != nil {
			t.Fatal(err)
		}
		path = moved
		second := start(context.Background(), "second", 0, "execution.state-recovery.path="+path, fmt.Sprintf("parallelism.default=%d", parallelism), "state.backend.type="+backends[1])
		if err := second.Wait(); err != nil {
			t.Fatalf("%s: the job resumed from the savepoint: %v", name, err)
		}
		records := recordsByKey(gen, partitions, perPartition)
		if err := checkRunningSums(sink.Results(), records); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if left, err := os.ReadDir(localDir); err != nil || len(left) > 0 {
			t.Fatalf("%s: the pebble backend's directory holds %v after the jobs ended (%v)", name, left, err)
		}
		t.Logf("%s: resumed exactly", name)
		// Self-contained: every file the savepoint needs is in its
		// directory, which both jobs left in place.
		entries, err := os.ReadDir(path)
		if err != nil {
			t.Fatalf("%s: the savepoint is gone after the jobs ended: %v", name, err)
		}
		var files []string
		for _, e := range entries {
			files = append(files, e.Name())
		}
		if all := strings.Join(files, " "); !strings.Contains(all, "_metadata") || !strings.Contains(all, "sum-0-keyed") || !strings.Contains(all, "sum-1-keyed") {
			t.Fatalf("%s: savepoint directory holds %v, want _metadata and the keyed state files of both sum subtasks", name, files)
		}
	}
}

// TestStopWithSavepoint stops a job with a savepoint while it
// checkpoints every 10 ms into an exactly-once sink that
// cannot undo a commit, then resumes a new job from the savepoint. The
// stopped job must finish (not fail, not be canceled) with what the
// savepoint holds committed and nothing after it: a checkpoint that
// completed after the savepoint, or a commit of records after it, would
// show as records whose sums appear twice once the resumed job has run;
// a commit missing would show as records with none. Seeds vary where the
// stop comes and the alignment of the job's checkpoints.
func TestStopWithSavepoint(t *testing.T) {
	const partitions, perPartition = 2, 3000
	for _, seed := range diffSeedList(6) {
		r := rand.New(rand.NewPCG(seed, 78))
		after := int64(300 + r.IntN(2500))
		unaligned := r.IntN(2) == 0
		name := fmt.Sprintf("seed=%d after=%d unaligned=%t", seed, after, unaligned)
		gen := func(p int, seq int64) rec {
			return rec{Key: fmt.Sprintf("k%d", datagen.Mix(seed, p, seq)%50), Value: int64(p) + 2*seq + 1, P: p, Seq: seq}
		}
		spDir := t.TempDir()
		sink := streamtest.NewCollector[KeyedSum](true)
		var events streamtest.Events
		start := func(jobID string, rate float64, extra ...string) *stream.JobClient {
			conf := []string{"parallelism.default=2", "execution.checkpointing.interval=10 ms",
				"execution.checkpointing.dir=" + t.TempDir(), "execution.checkpointing.savepoint-dir=" + spDir}
			if unaligned {
				conf = append(conf, "execution.checkpointing.unaligned.enabled=true")
			}
			env, err := stream.NewEnvironment(stream.WithConfig(mustConfig(t, append(conf, extra...)...)), stream.WithLogger(quiet),
				stream.WithJobID(jobID), stream.WithEvents(events.Record))
			if err != nil {
				t.Fatal(err)
			}
			src, _ := datagen.New(gen, datagen.Partitions(partitions), datagen.Count(perPartition), datagen.BatchSize(10), datagen.RatePerSecond(rate))
			in := stream.FromSource(env, src, "numbers", stream.NoWatermarks[rec]())
			sums := stream.Process(stream.KeyBy(in, func(r rec) string { return r.Key }), stream.KeyedProcessFunction[string, rec, KeyedSum](&runningSum{}), stream.Uid("sum"))
			stream.SinkTo(sums, sink, stream.Uid("sink"))
			c, err := env.ExecuteAsync(context.Background(), "stop")
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
		first := start("first", 1500)
		tick := time.NewTicker(time.Millisecond)
		for first.Metrics().RecordsIn < after {
			select {
			case <-first.Done():
				t.Fatalf("%s: the first job ended before the stop (%v): make the input longer", name, first.Wait())
			case <-tick.C:
			}
		}
		tick.Stop()
		path, err := first.StopWithSavepoint(context.Background(), "", false)
		if err != nil {
			t.Fatalf("%s: stop with a savepoint: %v", name, err)
		}
		if err := first.Wait(); err != nil {
			t.Fatalf("%s: the stopped job ended with %v, want it finished", name, err)
		}
		if m := first.Metrics(); m.Status != stream.StatusFinished {
			t.Fatalf("%s: the stopped job is %s, want FINISHED", name, m.Status)
		}
		if n := len(events.Of(stream.EventCheckpointCompleted)); n == 0 {
			t.Fatalf("%s: no checkpoint completed before the stop: the test shows nothing about checkpoints after a stop's savepoint", name)
		}
		committed := len(sink.Results())
		second := start("second", 0, "execution.state-recovery.path="+path)
		if err := second.Wait(); err != nil {
			t.Fatalf("%s: the job resumed from the stop's savepoint: %v", name, err)
		}
		records := recordsByKey(gen, partitions, perPartition)
		if err := checkRunningSums(sink.Results(), records); err != nil {
			t.Fatalf("%s: %d results committed by the stopped job: %v", name, committed, err)
		}
	}
}

// TestRestoreRefusesUnclaimedState resumes a job from a checkpoint that
// holds the state of an operator the new job no longer has (its uid
// changed): the resume is refused, naming the operator and the option,
// unless execution.state-recovery.ignore-unclaimed-state drops that state.
func TestRestoreRefusesUnclaimedState(t *testing.T) {
	sink := streamtest.NewCollector[KeyedSum](true) // outlives the jobs, as an external system does
	build := func(uid string) func(env *stream.Environment) {
		return func(env *stream.Environment) {
			src, _ := datagen.New(func(p int, seq int64) rec { return rec{Key: fmt.Sprintf("k%d", seq%7), Value: seq, P: p, Seq: seq} },
				datagen.Partitions(2), datagen.BatchSize(10), datagen.RatePerSecond(2000))
			in := stream.FromSource(env, src, "numbers", stream.NoWatermarks[rec]())
			sums := stream.Process(stream.KeyBy(in, func(r rec) string { return r.Key }), stream.KeyedProcessFunction[string, rec, KeyedSum](&runningSum{}), stream.Uid(uid))
			stream.SinkTo(sums, sink, stream.Uid("sink"))
		}
	}
	conf := streamtest.Config("parallelism.default=2", "execution.checkpointing.interval=10 ms")
	first := streamtest.Run(t, build("sum"), conf, streamtest.JobID("first"), streamtest.UntilCheckpoints(2))
	if !first.Canceled {
		t.Fatalf("the first job ended before two checkpoints: %v", first.Err)
	}
	renamed := streamtest.Run(t, build("sum-v2"), conf, streamtest.JobID("renamed"), streamtest.ResumeFrom(first), streamtest.UntilCheckpoints(1))
	if err := renamed.Err; err == nil || !strings.Contains(err.Error(), "operators that the job does not have: sum (by uid)") ||
		!strings.Contains(err.Error(), "execution.state-recovery.ignore-unclaimed-state") {
		t.Fatalf("resuming with the sum's uid changed: %v, want a refusal naming sum and the option", err)
	}
	dropped := streamtest.Run(t, build("sum-v2"), conf, streamtest.JobID("dropped"), streamtest.ResumeFrom(first),
		streamtest.Config("execution.state-recovery.ignore-unclaimed-state=true"), streamtest.UntilCheckpoints(1))
	if !dropped.Canceled {
		t.Fatalf("resuming with ignore-unclaimed-state: %v, want it to run", dropped.Err)
	}
	if r := dropped.Events.Of(stream.EventRestored); len(r) == 0 || r[0].Checkpoint == 0 {
		t.Fatalf("the job that dropped the unclaimed state restored %+v, want the first job's checkpoint", r)
	}
}

// TestStopWithSavepointDrain stops a job of hour-long event-time windows
// that none of its input closes, once with drain and once without. With
// drain the sources end event time before the savepoint: every window
// fires, and the stopped job has committed each key's window once,
// counting every record it read. Without drain no window fires: the
// stopped job has committed nothing, and its windows are in the
// savepoint.
func TestStopWithSavepointDrain(t *testing.T) {
	for _, drain := range []bool{true, false} {
		sink := streamtest.NewCollector[WindowSum](true)
		env, err := stream.NewEnvironment(stream.WithConfig(mustConfig(t, "parallelism.default=2", "execution.checkpointing.interval=10 ms",
			"execution.checkpointing.dir="+t.TempDir(), "execution.checkpointing.savepoint-dir="+t.TempDir())), stream.WithLogger(quiet))
		if err != nil {
			t.Fatal(err)
		}
		src, _ := datagen.New(func(p int, seq int64) tsRec {
			return tsRec{Key: fmt.Sprintf("k%d", seq%5), Value: seq, Ts: 1_000_000 + seq}
		},
			datagen.Partitions(2), datagen.BatchSize(10), datagen.RatePerSecond(2000))
		wm := stream.BoundedOutOfOrderness[tsRec](0).WithTimestamps(func(v tsRec, _ int64) int64 { return v.Ts })
		ws := stream.Windowed(stream.KeyBy(stream.FromSource(env, src, "events", wm), func(v tsRec) string { return v.Key }), stream.TumblingEventTimeWindows(time.Hour))
		sums := stream.Aggregate(ws, stream.AggregateFunction[tsRec, [2]int64, [2]int64](sumAgg{}), windowSum, stream.Uid("windows"))
		stream.SinkTo(sums, sink, stream.Uid("sink"))
		client, err := env.ExecuteAsync(context.Background(), "drain")
		if err != nil {
			t.Fatal(err)
		}
		for client.Metrics().LastCheckpoint.ID < 3 {
			select {
			case <-client.Done():
				t.Fatalf("drain=%t: the job ended: %v", drain, client.Wait())
			case <-time.After(time.Millisecond):
			}
		}
		if _, err := client.StopWithSavepoint(context.Background(), "", drain); err != nil {
			t.Fatalf("drain=%t: stop: %v", drain, err)
		}
		if err := client.Wait(); err != nil {
			t.Fatalf("drain=%t: the stopped job ended with %v", drain, err)
		}
		read := client.Metrics().RecordsIn
		got := sink.Results()
		if !drain {
			if len(got) != 0 {
				t.Fatalf("without drain the stopped job committed %d window results, want none: no window closed", len(got))
			}
			continue
		}
		seen := map[string]bool{}
		var counted int64
		for _, w := range got {
			if seen[w.Key] {
				t.Fatalf("drain: window of %s committed twice: %v", w.Key, got)
			}
			seen[w.Key] = true
			counted += w.Count
		}
		if len(seen) != 5 || counted != read || read == 0 {
			t.Fatalf("drain: the stopped job committed %v, counting %d records over %d keys; it read %d over 5 keys", got, counted, len(seen), read)
		}
	}
}

// TestTriggerCheckpoint takes checkpoints on demand from a job whose
// interval is an hour: three asked for at once all complete, one at a
// time (unaligned checkpoints allow no concurrent ones), each with its
// own id, and the job's latest completed checkpoint is the newest.
func TestTriggerCheckpoint(t *testing.T) {
	env, err := stream.NewEnvironment(stream.WithConfig(mustConfig(t, "parallelism.default=2", "execution.checkpointing.interval=1 h",
		"execution.checkpointing.unaligned.enabled=true", "execution.checkpointing.dir="+t.TempDir())), stream.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	src, _ := datagen.New(func(p int, seq int64) rec { return rec{Key: fmt.Sprintf("k%d", seq%7), Value: seq, P: p, Seq: seq} },
		datagen.Partitions(2), datagen.BatchSize(10), datagen.RatePerSecond(5000))
	sums := stream.Process(stream.KeyBy(stream.FromSource(env, src, "numbers", stream.NoWatermarks[rec]()), func(r rec) string { return r.Key }),
		stream.KeyedProcessFunction[string, rec, KeyedSum](&runningSum{}), stream.Uid("sum"))
	stream.SinkTo(sums, streamtest.NewCollector[KeyedSum](true), stream.Uid("sink"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client, err := env.ExecuteAsync(ctx, "manual")
	if err != nil {
		t.Fatal(err)
	}
	ids := make(chan int64, 3)
	errs := make(chan error, 3)
	for range 3 {
		go func() {
			id, err := client.TriggerCheckpoint(context.Background())
			ids <- id
			errs <- err
		}()
	}
	seen := map[int64]bool{}
	var newest int64
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatalf("manual checkpoint: %v", err)
		}
		id := <-ids
		if id < 1 || seen[id] {
			t.Fatalf("manual checkpoints returned ids %v and %d", seen, id)
		}
		seen[id] = true
		newest = max(newest, id)
	}
	if got := client.Metrics().LastCheckpoint.ID; got != newest {
		t.Fatalf("the latest completed checkpoint is %d, want %d, the newest asked for", got, newest)
	}
	cancel()
	<-client.Done()
}

// TestWarnsOfStatefulOperatorsWithoutUID: a job that checkpoints is
// warned, when it is submitted, of the operators that may hold state and
// have no uid of their own; one whose stateful operators all have uids,
// or that does not checkpoint, is not.
func TestWarnsOfStatefulOperatorsWithoutUID(t *testing.T) {
	run := func(sumUID string, conf ...string) string {
		var logs strings.Builder
		var mu sync.Mutex
		logger := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
			mu.Lock()
			defer mu.Unlock()
			return logs.Write(p)
		}), nil))
		env, err := stream.NewEnvironment(stream.WithConfig(mustConfig(t, append([]string{"parallelism.default=1"}, conf...)...)), stream.WithLogger(logger))
		if err != nil {
			t.Fatal(err)
		}
		src, _ := datagen.New(func(p int, seq int64) rec { return rec{Key: "k", Value: seq, P: p, Seq: seq} }, datagen.Partitions(1), datagen.Count(10))
		in := stream.Map(stream.FromSource(env, src, "numbers", stream.NoWatermarks[rec](), stream.Uid("numbers")), func(r rec) rec { return r })
		var opts []stream.OpOption
		if sumUID != "" {
			opts = append(opts, stream.Uid(sumUID))
		}
		sums := stream.Process(stream.KeyBy(in, func(r rec) string { return r.Key }), stream.KeyedProcessFunction[string, rec, KeyedSum](&runningSum{}), opts...)
		stream.SinkTo(sums, streamtest.NewCollector[KeyedSum](false), stream.Uid("sink"))
		if err := env.Execute(context.Background(), "uids"); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		return logs.String()
	}
	if out := run("", "execution.checkpointing.interval=10 ms"); !strings.Contains(out, "have no uid") || !strings.Contains(out, "process-") || strings.Contains(out, "map-") {
		t.Errorf("a checkpointing job with an unnamed process function logged:\n%s\nwant a warning naming it (and not the stateless map)", out)
	}
	if out := run("sum", "execution.checkpointing.interval=10 ms"); strings.Contains(out, "have no uid") {
		t.Errorf("a job whose stateful operators all have uids was warned:\n%s", out)
	}
	if out := run(""); strings.Contains(out, "have no uid") {
		t.Errorf("a job that does not checkpoint was warned:\n%s", out)
	}
}

// writerFunc is an io.Writer of a function.
type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestStopThatFailsGoesOn fails a stop's savepoint (a subtask's write of
// its state into the savepoint fails): the stop reports the failure,
// the job goes on reading and checkpointing, a second stop succeeds, and
// the job resumed from its savepoint gives every record's sum exactly
// once.
func TestStopThatFailsGoesOn(t *testing.T) {
	const partitions, perPartition = 2, 3000
	gen := func(p int, seq int64) rec {
		return rec{Key: fmt.Sprintf("k%d", datagen.Mix(9, p, seq)%40), Value: int64(p) + 2*seq + 1, P: p, Seq: seq}
	}
	sink := streamtest.NewCollector[KeyedSum](true)
	spDir := t.TempDir()
	faults := streamtest.NewFaults()
	broken := faults.Add(stream.FaultStorageWrite, streamtest.Fail(nil), streamtest.OnPath("savepoint-*/sum-0-keyed"), streamtest.Times(1))
	var events streamtest.Events
	start := func(jobID string, rate float64, extra ...string) *stream.JobClient {
		conf := append([]string{"parallelism.default=2", "execution.checkpointing.interval=10 ms",
			"execution.checkpointing.dir=" + t.TempDir(), "execution.checkpointing.savepoint-dir=" + spDir,
			"execution.checkpointing.data-inline-threshold=0 b"}, extra...)
		env, err := stream.NewEnvironment(stream.WithConfig(mustConfig(t, conf...)), stream.WithLogger(quiet), stream.WithJobID(jobID),
			stream.WithEvents(events.Record), faults.Option())
		if err != nil {
			t.Fatal(err)
		}
		src, _ := datagen.New(gen, datagen.Partitions(partitions), datagen.Count(perPartition), datagen.BatchSize(10), datagen.RatePerSecond(rate))
		in := stream.FromSource(env, src, "numbers", stream.NoWatermarks[rec]())
		sums := stream.Process(stream.KeyBy(in, func(r rec) string { return r.Key }), stream.KeyedProcessFunction[string, rec, KeyedSum](&runningSum{}), stream.Uid("sum"))
		stream.SinkTo(sums, sink, stream.Uid("sink"))
		c, err := env.ExecuteAsync(context.Background(), "stop")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	first := start("first", 1000)
	waitRecords := func(n int64) {
		t.Helper()
		for first.Metrics().RecordsIn < n {
			select {
			case <-first.Done():
				t.Fatalf("the job ended (%v) before reading %d records: make the input longer", first.Wait(), n)
			case <-time.After(time.Millisecond):
			}
		}
	}
	waitRecords(500)
	if _, err := first.StopWithSavepoint(context.Background(), "", false); err == nil {
		t.Fatal("a stop whose savepoint could not be written succeeded")
	}
	if !broken.Fired() {
		t.Fatal("the savepoint's write never failed: the test shows nothing")
	}
	// The job goes on: it reads on and completes checkpoints again.
	completed := len(events.Of(stream.EventCheckpointCompleted))
	read := first.Metrics().RecordsIn
	waitRecords(read + 200)
	for len(events.Of(stream.EventCheckpointCompleted)) <= completed {
		select {
		case <-first.Done():
			t.Fatalf("the job ended after its failed stop: %v", first.Wait())
		case <-time.After(time.Millisecond):
		}
	}
	path, err := first.StopWithSavepoint(context.Background(), "", false)
	if err != nil {
		t.Fatalf("the second stop: %v", err)
	}
	if err := first.Wait(); err != nil {
		t.Fatalf("the stopped job ended with %v", err)
	}
	second := start("second", 0, "execution.state-recovery.path="+path)
	if err := second.Wait(); err != nil {
		t.Fatalf("the job resumed from the second stop's savepoint: %v", err)
	}
	records := recordsByKey(gen, partitions, perPartition)
	if err := checkRunningSums(sink.Results(), records); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(spDir); len(entries) != 1 {
		t.Fatalf("the savepoint directory holds %d savepoints, want only the second stop's (the failed one is deleted)", len(entries))
	}
}

// recordsByKey is the input checkRunningSums checks a running sum's
// output against: every record of partitions×perPartition made by gen,
// by key and (partition, sequence number).
func recordsByKey(gen func(p int, seq int64) rec, partitions int, perPartition int64) map[string]map[[2]int64]rec {
	records := map[string]map[[2]int64]rec{}
	for p := range partitions {
		for seq := range perPartition {
			x := gen(p, seq)
			if records[x.Key] == nil {
				records[x.Key] = map[[2]int64]rec{}
			}
			records[x.Key][[2]int64{int64(p), seq}] = x
		}
	}
	return records
}

// TestSavepointFaults fails a savepoint in each of the ways it can fail —
// a subtask's write of its state into the savepoint, the savepoint's
// _metadata, a subtask failing in the savepoint's synchronous part, one
// failing while it writes — on each state backend. The savepoint must be
// reported failed and leave nothing behind, the job must go on (restarting
// the failed subtasks), a second savepoint must succeed, and the job
// resumed from it must give every record's sum exactly once.
func TestSavepointFaults(t *testing.T) {
	const partitions, perPartition = 2, 3000
	gen := func(p int, seq int64) rec {
		return rec{Key: fmt.Sprintf("k%d", datagen.Mix(13, p, seq)%300), Value: int64(p) + 2*seq + 1, P: p, Seq: seq}
	}
	for _, tc := range []struct {
		name  string
		point stream.FaultPoint
		opts  []streamtest.FaultOption
	}{
		{"state-write", stream.FaultStorageWrite, []streamtest.FaultOption{streamtest.OnPath("savepoint-*/sum-1-keyed")}},
		{"metadata-write", stream.FaultStorageWrite, []streamtest.FaultOption{streamtest.OnPath("savepoint-*/_metadata")}},
		{"sync-failure", stream.FaultSync, []streamtest.FaultOption{streamtest.OnVertex("sum"), streamtest.OnSubtask(0)}},
		{"async-failure", stream.FaultAsync, []streamtest.FaultOption{streamtest.OnVertex("sum"), streamtest.OnSubtask(1)}},
	} {
		for _, backend := range []string{"hashmap", "pebble"} {
			t.Run(tc.name+"/"+backend, func(t *testing.T) {
				sink := streamtest.NewCollector[KeyedSum](true)
				spDir, local := t.TempDir(), t.TempDir()
				faults := streamtest.NewFaults()
				// Checkpoints every hour: the savepoint is the only
				// snapshot the faults can hit.
				broken := faults.Add(tc.point, streamtest.Fail(nil), append(tc.opts, streamtest.Times(1))...)
				start := func(ctx context.Context, jobID string, rate float64, extra ...string) *stream.JobClient {
					conf := append([]string{"parallelism.default=2", "execution.checkpointing.interval=1 h",
						"execution.checkpointing.dir=" + t.TempDir(), "execution.checkpointing.savepoint-dir=" + spDir,
						"execution.checkpointing.data-inline-threshold=0 b", "state.backend.type=" + backend,
						"state.backend.pebble.localdir=" + local,
						"restart-strategy.type=fixed-delay", "restart-strategy.fixed-delay.attempts=5", "restart-strategy.fixed-delay.delay=0 ms"}, extra...)
					env, err := stream.NewEnvironment(stream.WithConfig(mustConfig(t, conf...)), stream.WithLogger(quiet), stream.WithJobID(jobID), faults.Option())
					if err != nil {
						t.Fatal(err)
					}
					src, _ := datagen.New(gen, datagen.Partitions(partitions), datagen.Count(perPartition), datagen.BatchSize(10), datagen.RatePerSecond(rate))
					in := stream.FromSource(env, src, "numbers", stream.NoWatermarks[rec]())
					sums := stream.Process(stream.KeyBy(in, func(r rec) string { return r.Key }), stream.KeyedProcessFunction[string, rec, KeyedSum](&runningSum{}), stream.Uid("sum"))
					stream.SinkTo(sums, sink, stream.Uid("sink"))
					c, err := env.ExecuteAsync(ctx, "savepoint-faults")
					if err != nil {
						t.Fatal(err)
					}
					return c
				}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				first := start(ctx, "first", 1500)
				waitRecords := func(n int64) {
					t.Helper()
					for first.Metrics().RecordsIn < n {
						select {
						case <-first.Done():
							t.Fatalf("the job ended (%v) before reading %d records: make the input longer", first.Wait(), n)
						case <-time.After(time.Millisecond):
						}
					}
				}
				waitRecords(400)
				if _, err := first.TriggerSavepoint(context.Background(), ""); err == nil {
					t.Fatal("a savepoint that could not be taken succeeded")
				}
				if !broken.Fired() {
					t.Fatal("the fault never fired: the test shows nothing")
				}
				// The job goes on, after restarting the failed subtasks
				// (from the start: it has no checkpoint); a savepoint is
				// refused while it restarts.
				var path string
				for deadline := time.Now().Add(time.Minute); ; {
					p, err := first.TriggerSavepoint(context.Background(), "")
					if err == nil {
						path = p
						break
					}
					if !strings.Contains(err.Error(), "not all subtasks are running") || time.Now().After(deadline) {
						t.Fatalf("the second savepoint: %v", err)
					}
					time.Sleep(5 * time.Millisecond)
				}
				cancel()
				<-first.Done()
				if entries, _ := os.ReadDir(spDir); len(entries) != 1 {
					var names []string
					for _, e := range entries {
						files, _ := os.ReadDir(filepath.Join(spDir, e.Name()))
						names = append(names, fmt.Sprintf("%s (%d files, e.g. %v)", e.Name(), len(files), files[:min(len(files), 3)]))
					}
					t.Fatalf("the savepoint directory holds %v, want only the second savepoint (the failed one is deleted)", names)
				}
				second := start(context.Background(), "second", 0, "execution.state-recovery.path="+path)
				if err := second.Wait(); err != nil {
					t.Fatalf("the job resumed from the second savepoint: %v", err)
				}
				if err := checkRunningSums(sink.Results(), recordsByKey(gen, partitions, perPartition)); err != nil {
					t.Fatal(err)
				}
				if left, err := os.ReadDir(local); err != nil || len(left) > 0 {
					t.Fatalf("the pebble backend's directory holds %v after the jobs ended (%v)", left, err)
				}
			})
		}
	}
}
