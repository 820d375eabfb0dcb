package stream_test

import (
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connector/datagen"
	"github.com/weirstream/weir/mini"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

// rec is a generated record: a key and a value unique within the key, so
// that an output sum identifies exactly which records it includes.
type rec struct {
	Key   string
	Value int64
	P     int
	Seq   int64
}

// KeyedSum is the process function's output.
type KeyedSum struct {
	Key string
	Sum int64
	// Last is the record that produced this sum.
	P   int
	Seq int64
}

type runningSum struct {
	sum stateValue
}

type stateValue interface {
	Value() (int64, bool)
	Update(int64)
}

func (f *runningSum) Open(rc *stream.RuntimeContext[string]) error {
	s, err := stream.ValueState[int64](rc, "sum")
	f.sum = s
	return err
}

func (f *runningSum) ProcessElement(ctx *stream.Context[string, KeyedSum], r rec) error {
	s, _ := f.sum.Value()
	s += r.Value
	f.sum.Update(s)
	return ctx.Emit(KeyedSum{Key: r.Key, Sum: s, P: r.P, Seq: r.Seq})
}

// keyedKinds are the faults the keyed-sum suite draws from: all of them,
// partition changes included.
var keyedKinds = append(slices.Clone(faultKinds), kindPartitionChange)

// TestDifferentialKeyedSum runs a keyed running sum over seeded random
// input with aligned exactly-once checkpoints (or at-least-once ones, see
// below), under a seeded schedule of faults of every kind (errors
// between batches, in Open, in restores, in a source's NewReader, in a
// sink's commit before and after it took effect, hung and slow subtasks, failures and delays in a checkpoint's
// synchronous and asynchronous phases, failing and slow checkpoint
// storage, partitions added to the source while it runs) and seeded
// engine options (batch size, channel capacity, chaining, concurrent
// checkpoints, failover strategy, checkpoint storage, retention). Two
// thirds of the seeds add a second source of a thousand short splits,
// whose position state (above the 20 KiB inline threshold, so a file) is
// final within milliseconds while the first source runs on: a finished
// subtask with large state. Its records join the first source's, or go
// through a pipeline of their own, so that region failover restarts the
// running pipeline without the finished one.
//
// A seed that draws a partition change reads from a growingSource,
// unbounded, that lists more partitions once it has read a drawn number
// of records; half of those seeds pass the records through forward
// edges only (source, map and sink at the same parallelism), so that
// with region failover each source subtask is a region of its own and
// restarts while the others run on, as in Kafka's partition discovery
// with region failover. Each transactional sink's output is checked
// against the mini oracle (see verifySums), or record by record for the
// pass-through pipeline (verifyPassThrough).
//
// A third of the seeds (drawAtLeastOnce) checkpoint at least once
// (execution.checkpointing.mode=AT_LEAST_ONCE): barriers are not
// aligned, a restore may replay records the restored state already
// counts, and the sums are checked with verifySumsAtLeastOnce, the
// pass-through output for every record at least once. A keyed sum over
// a growing source, which is canceled rather than finishing, keeps
// exactly-once checkpoints (see verifySumsAtLeastOnce's last rule).
//
// The exactly-once seeds draw how barriers align (drawAlignment): aligned,
// unaligned, or aligned until a timeout of a few milliseconds; unaligned
// checkpoints persist the records in flight, and a restore replays them
// before any new input. The suite fails if no seed restored such channel
// state. Half the seeds, whatever their mode, debloat buffers
// (drawDebloat): their input channels' in-flight limits move while they
// run.
func TestDifferentialKeyedSum(t *testing.T) {
	seeds := diffSeedList(300)
	var tally kindTally
	var largeFinished, passThrough, atLeastOnce, inexact, replayed, onPebble, onHeapIncremental, leakChecked atomic.Int64
	forEachSeed(t, seeds, func(t *testing.T, seed uint64) {
		r := rand.New(rand.NewPCG(seed, 99))
		partitions := 1 + r.IntN(4)
		perPartition := int64(200 + r.IntN(1300))
		keys := 1 + r.IntN(40)
		par := 1 + r.IntN(3)
		early := []string{"none", "joined", "separate"}[r.IntN(3)]
		const earlySplits, earlyPerSplit = 1000, 2
		eng := drawEngine(r)
		eng.drawHeapIncremental(seed)
		if eng.pebble {
			onPebble.Add(1)
		} else if eng.incremental {
			onHeapIncremental.Add(1)
		}
		kinds := drawKinds(r, 4, keyedKinds)
		grow := slices.Contains(kinds, kindPartitionChange)
		var initial int
		var forward bool
		if grow {
			partitions = max(partitions, 2)
			initial = 1 + r.IntN(partitions-1)
			if forward = r.IntN(2) == 0; forward && early == "joined" {
				early = "separate"
			}
		}
		total := partitions + earlySplits
		gen := func(p int, seq int64) rec {
			k := datagen.Mix(seed, p, seq) % uint64(keys)
			return rec{Key: fmt.Sprintf("k%02d", k), Value: int64(p) + int64(total)*seq + 1, P: p, Seq: seq}
		}
		genEarly := func(p int, seq int64) rec { return gen(partitions+p, seq) }
		if early != "none" {
			eng.memStorage = true
		}
		needsEngine(&eng, kinds)
		// At-least-once checkpoints for a share of the seeds, but not
		// for a keyed sum over a growing source: it is canceled once the
		// output holds every record, when its last sums need not yet
		// count the records a restore replays.
		if !grow || forward {
			eng.atLeastOnce = drawAtLeastOnce(seed)
		}
		eng.drawAlignment(seed)
		eng.drawDebloat(seed)
		if eng.corruptible {
			eng.dir = t.TempDir()
		}

		var ev streamtest.Events
		eng.ev = &ev
		faults := streamtest.NewFaults()
		env, err := stream.NewEnvironment(append(eng.options(),
			stream.WithConfig(mustConfig(t, eng.config(fmt.Sprintf("parallelism.default=%d", par))...)),
			stream.WithLogger(quiet), faults.Option())...)
		if err != nil {
			t.Fatal(err)
		}
		var src connector.Source[rec]
		var growing *growingSource
		if grow {
			after := 1 + r.Int64N(int64(initial)*perPartition)
			growing, err = newGrowingSource(gen, initial, partitions, perPartition, after, time.Duration(5+r.IntN(25))*time.Millisecond)
			src = growing
		} else {
			src, err = datagen.New(gen, datagen.Partitions(partitions), datagen.Count(perPartition), datagen.BatchSize(64), datagen.RatePerSecond(60_000))
		}
		if err != nil {
			t.Fatal(err)
		}
		key := func(r rec) string { return r.Key }
		in := stream.FromSource(env, src, "numbers", stream.NoWatermarks[rec]())
		sources, operators, sinks := []string{"numbers"}, []string{"numbers", "sink"}, []string{"sink"}
		var earlySink *streamtest.Collector[KeyedSum]
		if early != "none" {
			esrc, err := datagen.New(genEarly, datagen.Partitions(earlySplits), datagen.Count(earlyPerSplit), datagen.BatchSize(earlyPerSplit))
			if err != nil {
				t.Fatal(err)
			}
			e := stream.FromSource(env, esrc, "early", stream.NoWatermarks[rec](), stream.Parallelism(1))
			sources, operators = append(sources, "early"), append(operators, "early")
			if early == "joined" {
				in = stream.Union(in, e)
			} else {
				sums := stream.Process(stream.KeyBy(e, key), stream.KeyedProcessFunction[string, rec, KeyedSum](&runningSum{}), eng.op(stream.Uid("early-sum"))...)
				earlySink = newSink[KeyedSum](eng)
				stream.SinkTo(sums, earlySink, eng.op(stream.Uid("early-sink"), stream.Parallelism(1))...)
				operators, sinks = append(operators, "early-sum", "early-sink"), append(sinks, "early-sink")
			}
		}
		sink := newSink[KeyedSum](eng)
		if forward {
			passThrough.Add(1)
			pass := stream.Map(in, func(r rec) KeyedSum { return KeyedSum{Key: r.Key, Sum: r.Value, P: r.P, Seq: r.Seq} }, eng.op(stream.Uid("pass"))...)
			stream.SinkTo(pass, sink, eng.op(stream.Uid("sink"), stream.Parallelism(par))...)
			operators = append(operators, "pass")
		} else {
			sums := stream.Process(stream.KeyBy(in, key), stream.KeyedProcessFunction[string, rec, KeyedSum](&runningSum{}), eng.op(stream.Uid("sum"))...)
			stream.SinkTo(sums, sink, eng.op(stream.Uid("sink"), stream.Parallelism(1))...)
			operators = append(operators, "sum")
		}

		nrecords := int64(partitions) * perPartition
		shape := jobShape(t, env, sources, operators, sinks, max(nrecords/int64(par), 1))
		shape.ev = &ev
		for _, op := range operators {
			if strings.HasSuffix(op, "sum") {
				shape.keyed = append(shape.keyed, op)
			}
		}
		if len(shape.keyed) > 0 {
			kinds = drawStateStore(r, eng, kinds)
		}
		if growing != nil {
			shape.grown = growing.grown.Load
		}
		sched := drawSchedule(r, faults, shape, kinds)
		// Observes the finished source's state being written as a file.
		earlyFile := faults.Add(stream.FaultStorageWrite, streamtest.Delay(0), streamtest.OnPath("early-0-op"), streamtest.Always())
		// Observes a restore that replays an unaligned checkpoint's
		// channel state.
		replay := faults.Add(stream.FaultRestoreChannels, streamtest.Delay(0), streamtest.Always())
		name := fmt.Sprintf("seed=%d partitions=%d records=%d keys=%d parallelism=%d early=%s engine: %s",
			seed, partitions, perPartition, keys, par, early, eng)
		if grow {
			name += fmt.Sprintf(" growing from %d partitions after %d records, pass-through=%v", initial, growing.after, forward)
		}

		generate := func(gen func(int, int64) rec, splits int, count int64) []rec {
			var out []rec
			for p := range splits {
				for seq := range count {
					out = append(out, gen(p, seq))
				}
			}
			return out
		}
		numbers, earlyRecs := generate(gen, partitions, perPartition), generate(genEarly, earlySplits, earlyPerSplit)
		// The early source's records reach a joined sum through a union
		// with a source of other parallelism, which rebalances them:
		// their order is not kept.
		ordered := func(p int) bool { return p < partitions }
		// check checks the output against the oracle, exactly once or
		// at least once.
		check := func(atLeastOnce bool) error {
			sums := verifySums
			if atLeastOnce {
				sums = verifySumsAtLeastOnce
			}
			var err error
			switch {
			case forward:
				err = verifyPassThrough(sink.Results(), numbers, atLeastOnce)
			case early == "joined":
				err = sums(sink.Results(), append(slices.Clone(numbers), earlyRecs...), ordered)
			default:
				err = sums(sink.Results(), numbers, ordered)
			}
			if err == nil && early == "separate" {
				if err = sums(earlySink.Results(), earlyRecs, func(int) bool { return true }); err != nil {
					err = fmt.Errorf("the early pipeline: %w", err)
				}
			}
			return err
		}
		verify := func() error { return check(eng.atLeastOnce) }

		if grow {
			want := len(numbers)
			if early == "joined" {
				want += len(earlyRecs)
			}
			// With at-least-once checkpoints a record may be written more
			// than once: the output is complete once it holds every record.
			distinct := func(out []KeyedSum) int {
				if !eng.atLeastOnce {
					return len(out)
				}
				seen := map[[2]int64]bool{}
				for _, s := range out {
					seen[[2]int64{int64(s.P), s.Seq}] = true
				}
				return len(seen)
			}
			complete := func() bool {
				return distinct(sink.Results()) >= want && (earlySink == nil || distinct(earlySink.Results()) >= len(earlyRecs))
			}
			executeUntilComplete(t, env, &ev, complete, name+"; faults: "+sched.String(), verify)
			tally.add(sched)
		} else {
			runErr := executeJob(t, env, "differential", func() string { return name + "; faults: " + sched.String() })
			tally.add(sched)
			if runErr != nil {
				t.Fatalf("%s; faults: %s: %v", name, sched, runErr)
			}
		}
		if earlyFile.Fired() {
			largeFinished.Add(1)
		}
		if replay.Fired() {
			replayed.Add(1)
		}
		name += "; faults: " + sched.String()
		if err := verify(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if eng.corruptible && !grow {
			// The job finished after its failures, restores, aborted,
			// subsumed and damaged checkpoints: its directory holds what
			// its retained checkpoints name, and no more of them.
			if n := len(checkOnlyRetained(t, eng.dir, diffJobID)[diffJobID]); n > eng.retained {
				t.Fatalf("%s: %d complete checkpoints left, more than the %d retained", name, n, eng.retained)
			}
			leakChecked.Add(1)
		}
		if eng.atLeastOnce {
			atLeastOnce.Add(1)
			if check(false) != nil {
				inexact.Add(1)
			}
		}
		// The cancellation that ends an unbounded job may come between
		// restarts and their restores.
		restarting, restored := ev.Count(stream.EventRestarting), ev.Count(stream.EventRestored)
		if restored > restarting || (!grow && restored != restarting) {
			t.Fatalf("%s: %d restarts but %d restores", name, restarting, restored)
		}
	})
	tally.check(t, len(seeds), append(slices.Clone(keyedKinds), kindStateStore))
	if len(seeds) >= 20 && largeFinished.Load() == 0 {
		t.Error("no seed wrote the finished source's state as a file: the suite proves nothing about finished subtasks with large state")
	}
	t.Logf("%d seeds checkpointed at least once, %d of them with output that is not exactly once", atLeastOnce.Load(), inexact.Load())
	if len(seeds) >= 200 && inexact.Load() == 0 {
		t.Error("no seed with at-least-once checkpoints wrote output that is not exactly once: the suite proves nothing about the at-least-once oracle")
	}
	t.Logf("%d seeds restored the channel state of an unaligned checkpoint", replayed.Load())
	if len(seeds) >= 60 && replayed.Load() == 0 {
		t.Error("no seed restored an unaligned checkpoint's channel state: the suite proves nothing about replaying records in flight")
	}
	checkPebbleSeeds(t, len(seeds), onPebble.Load(), onHeapIncremental.Load())
	t.Logf("%d seeds counted the files left in their checkpoint directory", leakChecked.Load())
	if len(seeds) >= 100 && leakChecked.Load() == 0 {
		t.Error("no finished seed checkpointed to a directory: the suite proves nothing about files left behind")
	}
	if len(seeds) >= 100 && passThrough.Load() == 0 {
		t.Error("no seed ran the pass-through pipeline: the suite proves nothing about partition changes under region failover")
	}
}

// verifySums checks a keyed running sum's output against its input with
// the mini oracle: every record's sum appears exactly once, each key's
// sums are the prefix sums of its records, in an order that keeps the
// order of every partition for which ordered is true, and the last sum of
// each key is the fold.
func verifySums(out []KeyedSum, input []rec, ordered func(p int) bool) error {
	all := make([]mini.Element, len(input))
	records := map[[2]int64]rec{}
	for i, x := range input {
		all[i] = mini.Event{Key: x.Key, Value: x.Value}
		records[[2]int64{int64(x.P), x.Seq}] = x
	}
	want := mini.Fold(all, mini.ByKey, len(all))
	if len(out) != len(all) {
		return fmt.Errorf("%d sums for %d records", len(out), len(all))
	}
	byKey := map[string][]KeyedSum{}
	for _, s := range out {
		byKey[s.Key] = append(byKey[s.Key], s)
	}
	got := map[string]int64{}
	for k, ss := range byKey {
		slices.SortFunc(ss, func(a, b KeyedSum) int { return cmp.Compare(a.Sum, b.Sum) })
		lastSeq := map[int]int64{}
		prev := int64(0)
		for _, s := range ss {
			x := records[[2]int64{int64(s.P), s.Seq}]
			if x.Key != k || s.Sum-prev != x.Value {
				return fmt.Errorf("key %s: sum %d after %d does not add record %d/%d (value %d)", k, s.Sum, prev, s.P, s.Seq, x.Value)
			}
			if last, ok := lastSeq[s.P]; ok && s.Seq <= last && ordered(s.P) {
				return fmt.Errorf("key %s: record %d/%d summed after %d/%d", k, s.P, s.Seq, s.P, last)
			}
			lastSeq[s.P], prev = s.Seq, s.Sum
		}
		got[k] = prev
	}
	if !maps.Equal(got, want) {
		return fmt.Errorf("final sums %v, oracle %v", got, want)
	}
	return nil
}

// verifySumsAtLeastOnce checks a keyed running sum's output against its
// input where checkpoints are at least once: a snapshot may hold records
// that came after its barrier on some inputs, and a restore replays them,
// so a key's state, and the sums it emits, may count a record more than
// once. What still holds, and is checked:
//
//   - every sum names a record of the input, of its key, and every
//     record of the input has at least one sum;
//   - every sum is the sum of a multiset of its key's records: the
//     state before the record (the sum less the record's value) is 0 or
//     another sum of the key, the state it was restored to or the one
//     before it in its run (a restored state is one the job emitted
//     before its snapshot, so its sum is in the output, as the
//     checkpoint's transaction committed it);
//   - in a partition whose order the job keeps (ordered), a sum counts
//     every earlier record of its key in that partition at least once,
//     so it is at least the record's value plus theirs;
//   - for every key, some sum counts every one of its records at least
//     once: the job's final state, once the bounded input has ended,
//     does, and the last sum it emitted is that state.
//
// A record the job dropped, a contribution lost from the state, or a sum
// that is no multiset of the key's records fails one of them.
func verifySumsAtLeastOnce(out []KeyedSum, input []rec, ordered func(p int) bool) error {
	type pos = [2]int64
	records := make(map[pos]rec, len(input))
	byKey := map[string][]rec{}
	for _, x := range input {
		records[pos{int64(x.P), x.Seq}] = x
		byKey[x.Key] = append(byKey[x.Key], x)
	}
	// before[p] is, for each record, the sum of the values of the earlier
	// records of its key in its partition.
	before := make(map[pos]int64, len(input))
	for _, xs := range byKey {
		acc := map[int]int64{}
		for _, x := range xs { // input is in per-partition order
			before[pos{int64(x.P), x.Seq}] = acc[x.P]
			acc[x.P] += x.Value
		}
	}
	seen := make(map[pos]bool, len(input))
	outByKey := map[string][]int{} // indices into out, in output order
	for i, s := range out {
		if x, ok := records[pos{int64(s.P), s.Seq}]; !ok || x.Key != s.Key {
			return fmt.Errorf("sum %s=%d names record %d/%d, which is not a record of the input of that key", s.Key, s.Sum, s.P, s.Seq)
		}
		seen[pos{int64(s.P), s.Seq}] = true
		outByKey[s.Key] = append(outByKey[s.Key], i)
	}
	var missing []string
	for _, x := range input {
		if !seen[pos{int64(x.P), x.Seq}] {
			missing = append(missing, fmt.Sprintf("%d/%d", x.P, x.Seq))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%d of %d records have no sum (first %v)", len(missing), len(input), missing[:min(len(missing), 5)])
	}
	for _, s := range out {
		x := records[pos{int64(s.P), s.Seq}]
		if b := before[pos{int64(s.P), s.Seq}]; ordered(s.P) && s.Sum < x.Value+b {
			return fmt.Errorf("key %s: sum %d for record %d/%d is less than the record's value %d and those of the key's earlier records in its partition, %d: a contribution was lost",
				s.Key, s.Sum, s.P, s.Seq, x.Value, b)
		}
	}
	for k, idx := range outByKey {
		// parent[j] is the output whose sum is the state before output j
		// (-1: the empty state): of those with that sum, the latest
		// before j, or, if none is before it, the latest after it
		// (transactions of a run may commit after those of the run they
		// restored, and sums strictly decrease along parents, so there is
		// no cycle).
		latest := map[int64][]int{} // sum → positions in idx, ascending
		for j, i := range idx {
			latest[out[i].Sum] = append(latest[out[i].Sum], j)
		}
		parent := make([]int, len(idx))
		for j, i := range idx {
			s := out[i]
			pre := s.Sum - records[pos{int64(s.P), s.Seq}].Value
			if pre == 0 {
				parent[j] = -1
				continue
			}
			cands := latest[pre]
			if len(cands) == 0 {
				return fmt.Errorf("key %s: sum %d for record %d/%d (value %d) follows a state of %d, which is neither empty nor any sum of the key",
					k, s.Sum, s.P, s.Seq, s.Sum-pre, pre)
			}
			c := sort.SearchInts(cands, j) - 1
			if c < 0 {
				c = len(cands) - 1
			}
			parent[j] = cands[c]
		}
		// covers reports whether the multiset of output j counts every
		// record of k.
		all := byKey[k]
		covers := func(j int) bool {
			in := make(map[pos]bool, len(all))
			for ; j >= 0; j = parent[j] {
				s := out[idx[j]]
				in[pos{int64(s.P), s.Seq}] = true
			}
			for _, x := range all {
				if !in[pos{int64(x.P), x.Seq}] {
					return false
				}
			}
			return true
		}
		// The last sum in output order is the final state's but for
		// commit orders the job does not fix: try it first, then the
		// others, largest first.
		order := slices.Clone(idx)
		slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(out[b].Sum, out[a].Sum) })
		at := map[int]int{} // index into out → position in idx
		for j, i := range idx {
			at[i] = j
		}
		found := covers(len(idx) - 1)
		for _, i := range order {
			if found {
				break
			}
			found = covers(at[i])
		}
		if !found {
			return fmt.Errorf("key %s: no sum counts every one of its %d records: a contribution was lost", k, len(all))
		}
	}
	return nil
}
