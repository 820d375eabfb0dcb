package stream_test

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
	_ "gocloud.dev/blob/memblob" // mem:// checkpoint storage
)

var (
	diffSeed     = flag.Uint64("diff.seed", 0, "run the differential tests for this seed only")
	diffSeeds    = flag.Int("diff.seeds", 0, "number of seeds the differential tests run (0: each test's default; raise for a soak)")
	diffParallel = flag.Int("diff.parallel", 4, "number of seeds the differential tests run at once")
)

// diffSeedList returns the seeds a differential test runs: -diff.seed
// alone, or the first -diff.seeds, or the first def (a quarter of them,
// at least 6, under the race detector).
func diffSeedList(def int) []uint64 {
	if *diffSeed != 0 {
		return []uint64{*diffSeed}
	}
	n := def
	if raceEnabled {
		n = max(min(def, 6), def/4)
	}
	if *diffSeeds > 0 {
		n = *diffSeeds
	}
	s := make([]uint64, n)
	for i := range s {
		s[i] = uint64(i + 1)
	}
	return s
}

// rerun says how to run one seed of test again. The seed fixes the input,
// the engine options and the fault schedule; where the faults strike
// relative to checkpoints depends on timing too, so a seed that failed
// once may need -count to fail again.
func rerun(test string, seed uint64) string {
	return fmt.Sprintf("rerun this seed alone with: go test ./stream -run '^%s$' -diff.seed=%d -v", test, seed)
}

// forEachSeed runs f for every seed as a subtest named seed=N, a few at a
// time (-diff.parallel): the jobs spend most of their time waiting on
// rate-limited sources and checkpoint intervals, so a few of them share
// two cores well. It stops starting seeds after the first failure.
func forEachSeed(t *testing.T, seeds []uint64, f func(t *testing.T, seed uint64)) {
	next := make(chan uint64)
	var wg sync.WaitGroup
	for range max(1, min(*diffParallel, len(seeds))) {
		wg.Go(func() {
			for seed := range next {
				t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
					t.Cleanup(func() {
						if t.Failed() {
							t.Log(rerun(strings.Split(t.Name(), "/")[0], seed))
						}
					})
					f(t, seed)
				})
			}
		})
	}
	for _, seed := range seeds {
		if t.Failed() {
			break
		}
		next <- seed
	}
	close(next)
	wg.Wait()
}

// engine is a per-seed choice of engine options, in the manner of
// pebble's metamorphic tests: the same job and input must give the same
// output whatever they are.
type engine struct {
	batchSize, channelCapacity int // 0: the default
	chaining                   bool
	maxConcurrent              int
	failover                   string
	tolerable                  int
	retained                   int
	memStorage                 bool // checkpoint to mem:// rather than the job master's memory
	pebble                     bool // keyed state in the embedded LSM backend (state.backend.type=pebble)
	incremental                bool // its checkpoints incremental (execution.checkpointing.incremental)
	heapTimers                 bool // its timers on the heap (state.backend.rocksdb.timer-service.factory=HEAP), not in the store
	// timeout is execution.checkpointing.timeout: 10 s unless a hang
	// needs it shorter. Not Flink's 10 min: aligned barriers can stall
	// under backpressure when a source is blocked in the middle of a send
	// and so cannot take its trigger (a subtask's full output channel
	// leads, through aligning subtasks, back to it); the checkpoint then
	// waits for its timeout, and the failed checkpoint goes through the
	// tolerable-failure and restart path like any other. The suites prove
	// exactly-once through that path; stalls show in the log as expired
	// checkpoints. Unaligned barriers do not stall: a blocked source takes
	// an unaligned trigger, and the barrier overtakes the full channels.
	timeout string
	// corruptible checkpoints to dir, a local directory, every state a
	// file of its own, for kindStorageCorrupt to damage them; the job's
	// id is diffJobID, and its sinks undo what a checkpoint the job
	// falls back past committed.
	corruptible bool
	dir         string
	// atLeastOnce checkpoints without aligning barriers
	// (execution.checkpointing.mode=AT_LEAST_ONCE): a snapshot may hold
	// records that arrived after the barrier on inputs whose barrier came
	// first, and a restore replays them. Only suites whose oracle allows
	// for the duplicates that makes set it (see drawAtLeastOnce).
	atLeastOnce bool
	// unaligned enables unaligned checkpoints, starting each aligned for
	// alignedTimeout first when it is set (see drawAlignment); one
	// checkpoint at a time.
	unaligned      bool
	alignedTimeout string
	// debloatTarget, if set, enables buffer debloating with that target
	// and debloatSamples samples of 5 ms (see drawDebloat).
	debloatTarget  string
	debloatSamples int
	// ev records the job's events (options installs it).
	ev *streamtest.Events
}

// diffJobID is the job id of the differential suites' jobs.
const diffJobID = "differential"

func drawEngine(r *rand.Rand) engine {
	e := engine{
		timeout:         "10 s",
		batchSize:       []int{0, 1, 1024, 7}[r.IntN(4)],
		channelCapacity: []int{0, 1}[r.IntN(2)],
		chaining:        r.IntN(3) > 0,
		maxConcurrent:   1 + r.IntN(2),
		failover:        []string{"region", "full"}[r.IntN(2)],
		tolerable:       []int{0, 0, 3}[r.IntN(3)],
		retained:        1 + r.IntN(3),
		memStorage:      r.IntN(2) == 0,
		pebble:          r.IntN(3) == 0,
	}
	e.incremental = e.pebble && r.IntN(3) > 0
	e.heapTimers = e.pebble && r.IntN(4) == 0
	return e
}

// drawDebloat draws buffer debloating for half the seeds, from a
// generator of its own as drawAtLeastOnce: a target of 1 ms (the limit
// stays near the floor), 5 ms or 50 ms, recomputed every 5 ms over 1 or 3
// samples, so that the limits move while the short jobs run.
func (e *engine) drawDebloat(seed uint64) {
	r := rand.New(rand.NewPCG(seed, 0xdeb))
	if r.IntN(2) == 0 {
		return
	}
	e.debloatTarget = []string{"1 ms", "5 ms", "50 ms"}[r.IntN(3)]
	e.debloatSamples = []int{1, 3}[r.IntN(2)]
}

// drawHeapIncremental draws, for half the seeds whose keyed state is on
// the heap, incremental checkpoints (deltas over the earlier checkpoints'
// keyed state), from a generator of its own as drawAtLeastOnce.
func (e *engine) drawHeapIncremental(seed uint64) {
	if !e.pebble {
		e.incremental = rand.New(rand.NewPCG(seed, 0xde17a)).IntN(2) == 0
	}
}

// drawAtLeastOnce draws, for a third of the seeds, at-least-once
// checkpoints, from a generator of its own: the seed's other draws, and
// so its input, engine and faults, are those it had before the mode was
// drawn.
func drawAtLeastOnce(seed uint64) bool {
	return rand.New(rand.NewPCG(seed, 0xa10)).IntN(3) == 0
}

// drawAlignment draws how an exactly-once seed's checkpoints align, from a
// generator of its own as drawAtLeastOnce: a third aligned, a third
// unaligned from the start, a third aligned until an aligned-checkpoint
// timeout (of 0, unaligned from the trigger on, or of a few milliseconds)
// and then unaligned.
func (e *engine) drawAlignment(seed uint64) {
	if e.atLeastOnce {
		return
	}
	r := rand.New(rand.NewPCG(seed, 0x0a1))
	switch r.IntN(3) {
	case 1:
		e.unaligned = true
	case 2:
		e.unaligned, e.alignedTimeout = true, []string{"0 ms", "1 ms", "3 ms", "8 ms"}[r.IntN(4)]
	}
}

func (e engine) String() string {
	concurrent := e.maxConcurrent
	if e.unaligned {
		concurrent = 1
	}
	s := fmt.Sprintf("batch=%d channel=%d chaining=%v max-concurrent=%d failover=%s tolerable=%d retained=%d",
		e.batchSize, e.channelCapacity, e.chaining, concurrent, e.failover, e.tolerable, e.retained)
	if e.memStorage {
		s += " storage=mem://"
	}
	if e.pebble {
		s += " state=pebble"
	}
	if e.incremental {
		s += " incremental"
	}
	if e.heapTimers {
		s += " timers=heap"
	}
	if e.timeout != "" {
		s += " timeout=" + e.timeout
	}
	if e.corruptible {
		s += " storage=dir inline-threshold=0"
	}
	if e.atLeastOnce {
		s += " mode=AT_LEAST_ONCE"
	}
	if e.unaligned {
		s += " unaligned"
		if e.alignedTimeout != "" {
			s += " aligned-timeout=" + e.alignedTimeout
		}
	}
	if e.debloatTarget != "" {
		s += fmt.Sprintf(" debloat-target=%s debloat-samples=%d", e.debloatTarget, e.debloatSamples)
	}
	return s
}

// config returns the engine's configuration, with kv added.
func (e engine) config(kv ...string) []string {
	concurrent := e.maxConcurrent
	if e.unaligned {
		concurrent = 1
	}
	out := []string{"execution.checkpointing.interval=10 ms",
		fmt.Sprintf("execution.checkpointing.max-concurrent-checkpoints=%d", concurrent),
		fmt.Sprintf("execution.checkpointing.tolerable-failed-checkpoints=%d", e.tolerable),
		fmt.Sprintf("execution.checkpointing.num-retained=%d", e.retained),
		"jobmanager.execution.failover-strategy=" + e.failover,
		"restart-strategy.type=fixed-delay", "restart-strategy.fixed-delay.attempts=60", "restart-strategy.fixed-delay.delay=0 ms"}
	if e.memStorage {
		out = append(out, "execution.checkpointing.dir=mem://")
	}
	if e.pebble {
		out = append(out, config.KeyStateBackend+"=pebble", config.KeyPebbleMemory+"=4 mb")
	}
	if e.incremental {
		out = append(out, config.KeyCheckpointingIncremental+"=true")
	}
	if e.heapTimers {
		out = append(out, config.KeyTimerService+"=HEAP")
	}
	if e.timeout != "" {
		out = append(out, "execution.checkpointing.timeout="+e.timeout)
	}
	if e.corruptible {
		out = append(out, "execution.checkpointing.dir="+e.dir, "execution.checkpointing.data-inline-threshold=0")
	}
	if e.atLeastOnce {
		out = append(out, config.KeyCheckpointingMode+"=AT_LEAST_ONCE")
	}
	if e.unaligned {
		out = append(out, config.KeyCheckpointingUnaligned+"=true")
		if e.alignedTimeout != "" {
			out = append(out, config.KeyCheckpointingAlignedTimeout+"="+e.alignedTimeout)
		}
	}
	if e.debloatTarget != "" {
		out = append(out, config.KeyBufferDebloatEnabled+"=true", config.KeyBufferDebloatTarget+"="+e.debloatTarget,
			config.KeyBufferDebloatPeriod+"=5 ms", fmt.Sprintf("%s=%d", config.KeyBufferDebloatSamples, e.debloatSamples))
	}
	return append(out, kv...)
}

// options returns the engine's environment options.
func (e engine) options() []stream.Option {
	opts := []stream.Option{stream.WithJobID(diffJobID)}
	if e.ev != nil {
		opts = append(opts, e.ev.Option())
	}
	if e.batchSize > 0 {
		opts = append(opts, stream.WithBatchSize(e.batchSize))
	}
	if e.channelCapacity > 0 {
		opts = append(opts, stream.WithChannelCapacity(e.channelCapacity))
	}
	return opts
}

// op returns opts, with chaining disabled if the engine runs without.
func (e engine) op(opts ...stream.OpOption) []stream.OpOption {
	if !e.chaining {
		opts = append(opts, stream.DisableChaining())
	}
	return opts
}

// The kinds of fault a schedule draws from.
const (
	kindBatchError     = "batch-error"
	kindOpenError      = "open-error"
	kindRestoreError   = "restore-error"
	kindNewReaderError = "new-reader-error"
	kindNewReaderHang  = "new-reader-hang"
	kindCommitBefore   = "commit-before"
	kindCommitAfter    = "commit-after"
	kindHang           = "hang"
	kindSlow           = "slow"
	kindSyncError      = "sync-error"
	kindSyncSlow       = "sync-slow"
	kindCommitSlow     = "commit-slow"
	kindAsyncError     = "async-error"
	kindAsyncSlow      = "async-slow"
	kindStorageWrite   = "storage-write"
	kindStorageRead    = "storage-read"
	kindStorageList    = "storage-list"
	kindStorageDelete  = "storage-delete"
	kindStorageSlow    = "storage-slow"
	// kindStorageCorrupt flips a byte in every state file of the
	// checkpoint a restore reads, as it reads it, after a failure halfway
	// through the input: the job must fall back to an older one.
	kindStorageCorrupt = "storage-corrupt"
	// kindStateStore fails operations on the files of a keyed operator's
	// embedded LSM store, as a failing local disk would: reads, or writes
	// (creating, writing, syncing files, on the subtask's goroutine or in
	// the store's flushes and compactions), from a drawn operation on, a
	// few times. Only engines with keyed state in the store draw it (see
	// drawStateStore).
	kindStateStore = "state-store"
	// kindPartitionChange adds partitions to a source while the job runs
	// (see growingSource); only jobs built for it draw it.
	kindPartitionChange = "partition-change"
)

var faultKinds = []string{kindBatchError, kindOpenError, kindRestoreError, kindNewReaderError, kindNewReaderHang,
	kindCommitBefore, kindCommitAfter, kindCommitSlow, kindHang, kindSlow, kindSyncError, kindSyncSlow, kindAsyncError, kindAsyncSlow,
	kindStorageWrite, kindStorageRead, kindStorageList, kindStorageDelete, kindStorageSlow, kindStorageCorrupt}

// shape is what a schedule needs to know of a job to aim its faults.
type shape struct {
	vertices  []stream.VertexInfo
	sources   []string // uids of the source operators
	operators []string // uids of every operator, sources and sinks included
	sinks     []string // uids of the exactly-once sinks
	// records bounds the records a subtask takes in, for AfterRecords.
	records int64
	// grown says whether the job's growing source has listed its added
	// partitions, for kindPartitionChange.
	grown func() bool
	// dir is the job's checkpoint directory, and ev its events, for
	// kindStorageCorrupt.
	dir string
	ev  *streamtest.Events
	// keyed are the uids of the keyed operators, for kindStateStore.
	keyed []string
}

func jobShape(t *testing.T, env *stream.Environment, sources, operators, sinks []string, records int64) shape {
	t.Helper()
	vs, err := env.Plan("plan")
	if err != nil {
		t.Fatal(err)
	}
	sh := shape{vertices: vs, sources: sources, operators: operators, sinks: sinks, records: records}
	if d := env.Config().String(config.KeyCheckpointingDir); !strings.Contains(d, "://") {
		sh.dir = d
	}
	return sh
}

func (s shape) vertex(r *rand.Rand) (string, int) {
	v := s.vertices[r.IntN(len(s.vertices))]
	return v.UID, r.IntN(v.Parallelism)
}

// schedule is a seeded set of faults of drawn kinds.
type schedule struct {
	faults *streamtest.Faults
	drawn  []drawnFault
}

type drawnFault struct {
	kind  string
	fault *streamtest.Fault // nil for kindPartitionChange
	// struck, if set, says whether the fault did what it is for (the
	// source grew, a file was flipped), which its striking may not.
	struck func() bool
}

func (d drawnFault) fired() bool {
	if d.struck != nil {
		return d.struck()
	}
	return d.fault.Fired()
}

func (s *schedule) String() string {
	var b strings.Builder
	for i, d := range s.drawn {
		if i > 0 {
			b.WriteString("; ")
		}
		if d.fault == nil {
			fmt.Fprintf(&b, "%s (struck: %v)", d.kind, d.struck())
			continue
		}
		fmt.Fprintf(&b, "%s: %s (struck %d)", d.kind, d.fault, d.fault.Count())
	}
	return b.String()
}

// needsEngine adjusts e to what a schedule of kinds needs: storage faults
// need a checkpoint directory, and hangs a checkpoint timeout short
// enough to fail the hung subtask over.
func needsEngine(e *engine, kinds []string) {
	for _, k := range kinds {
		switch k {
		case kindStorageWrite, kindStorageRead, kindStorageList, kindStorageDelete, kindStorageSlow:
			e.memStorage = true
		case kindHang, kindNewReaderHang:
			// Short enough to fail a hung subtask over soon, long enough
			// for a checkpoint to complete on a loaded machine under the
			// race detector.
			e.timeout, e.tolerable = "3 s", 0
		case kindStorageCorrupt:
			e.corruptible, e.retained = true, max(e.retained, 2)
		}
	}
	if e.corruptible {
		e.memStorage = false
	}
}

// newSink returns a transactional collector for a job on engine e: one
// that reconciles if the job's checkpoints may be damaged.
func newSink[T any](e engine) *streamtest.Collector[T] {
	if e.corruptible {
		return streamtest.NewReconcilingCollector[T]()
	}
	return streamtest.NewCollector[T](true)
}

// drawStateStore adds, for half the engines that keep keyed state in the
// embedded LSM store, a kindStateStore fault to kinds.
func drawStateStore(r *rand.Rand, e engine, kinds []string) []string {
	if e.pebble && r.IntN(2) == 0 {
		kinds = append(kinds, kindStateStore)
	}
	return kinds
}

// drawKinds draws the kinds of 1 to max faults.
func drawKinds(r *rand.Rand, max int, allowed []string) []string {
	kinds := make([]string, 1+r.IntN(max))
	for i := range kinds {
		kinds[i] = allowed[r.IntN(len(allowed))]
	}
	return kinds
}

// drawSchedule adds to fs a fault of each kind, aimed at the job s.
func drawSchedule(r *rand.Rand, fs *streamtest.Faults, s shape, kinds []string) *schedule {
	sc := &schedule{faults: fs}
	pickOp := func(from []string) string { return from[r.IntN(len(from))] }
	for _, kind := range kinds {
		var f *streamtest.Fault
		switch kind {
		case kindBatchError:
			v, sub := s.vertex(r)
			f = fs.Add(stream.FaultBatch, streamtest.Fail(nil), streamtest.OnVertex(v), streamtest.OnSubtask(sub), streamtest.AfterRecords(1+r.Int64N(s.records)))
		case kindOpenError:
			opts := []streamtest.FaultOption{streamtest.OnOperator(pickOp(s.operators)), streamtest.AtStep(r.IntN(2))}
			if r.IntN(2) == 0 {
				opts = append(opts, streamtest.AfterRestore())
			}
			f = fs.Add(stream.FaultOpen, streamtest.Fail(nil), opts...)
		case kindRestoreError:
			// A restore reads state only after a failure: one strikes
			// halfway through the input or later, when checkpoints have
			// completed.
			v, sub := s.vertex(r)
			trigger := fs.Add(stream.FaultBatch, streamtest.Fail(nil), streamtest.OnVertex(v), streamtest.OnSubtask(sub), streamtest.AfterRecords(s.records/2+1+r.Int64N(s.records/2+1)))
			sc.drawn = append(sc.drawn, drawnFault{kind: "restore-trigger", fault: trigger})
			f = fs.Add(stream.FaultRestore, streamtest.Fail(nil), streamtest.OnOperator(pickOp(s.operators)), streamtest.OnCall(1+r.IntN(2)))
		case kindNewReaderError:
			f = fs.Add(stream.FaultNewReader, streamtest.Fail(nil), streamtest.OnOperator(pickOp(s.sources)), streamtest.OnCall(1+r.IntN(3)))
		case kindNewReaderHang:
			f = fs.Add(stream.FaultNewReader, streamtest.Hang(), streamtest.OnOperator(pickOp(s.sources)), streamtest.OnCall(1+r.IntN(3)))
		case kindCommitBefore:
			f = fs.Add(stream.FaultCommit, streamtest.Fail(nil), streamtest.OnOperator(pickOp(s.sinks)), streamtest.OnCall(1+r.IntN(6)))
		case kindCommitAfter:
			f = fs.Add(stream.FaultCommitted, streamtest.Fail(nil), streamtest.OnOperator(pickOp(s.sinks)), streamtest.OnCall(1+r.IntN(6)))
		case kindHang:
			v, sub := s.vertex(r)
			f = fs.Add(stream.FaultBatch, streamtest.Hang(), streamtest.OnVertex(v), streamtest.OnSubtask(sub), streamtest.AfterRecords(1+r.Int64N(s.records)))
		case kindSlow:
			v, sub := s.vertex(r)
			f = fs.Add(stream.FaultBatch, streamtest.Delay(time.Duration(1+r.IntN(20))*time.Millisecond), streamtest.OnVertex(v), streamtest.OnSubtask(sub),
				streamtest.AfterRecords(1+r.Int64N(s.records)), streamtest.Times(1+r.IntN(20)))
		case kindSyncError:
			v, sub := s.vertex(r)
			f = fs.Add(stream.FaultSync, streamtest.Fail(nil), streamtest.OnVertex(v), streamtest.OnSubtask(sub),
				atFraction(r.Float64()), streamtest.OnCall(1+r.IntN(8)))
		case kindSyncSlow:
			v, sub := s.vertex(r)
			f = fs.Add(stream.FaultSync, streamtest.Delay(time.Duration(1+r.IntN(20))*time.Millisecond), streamtest.OnVertex(v), streamtest.OnSubtask(sub),
				atFraction(r.Float64()), streamtest.OnCall(1+r.IntN(5)), streamtest.Times(1+r.IntN(4)))
		case kindCommitSlow:
			f = fs.Add(stream.FaultCommit, streamtest.Delay(time.Duration(5+r.IntN(40))*time.Millisecond), streamtest.OnOperator(pickOp(s.sinks)),
				streamtest.OnCall(1+r.IntN(4)), streamtest.Times(1+r.IntN(4)))
		case kindAsyncError:
			v, sub := s.vertex(r)
			f = fs.Add(stream.FaultAsync, streamtest.Fail(nil), streamtest.OnVertex(v), streamtest.OnSubtask(sub),
				atFraction(r.Float64()), streamtest.OnCall(1+r.IntN(8)))
		case kindAsyncSlow:
			v, sub := s.vertex(r)
			f = fs.Add(stream.FaultAsync, streamtest.Delay(time.Duration(5+r.IntN(40))*time.Millisecond), streamtest.OnVertex(v), streamtest.OnSubtask(sub),
				atFraction(r.Float64()), streamtest.OnCall(1+r.IntN(5)), streamtest.Times(1+r.IntN(4)))
		case kindStorageWrite:
			opts := []streamtest.FaultOption{streamtest.OnCall(1 + r.IntN(12))}
			if r.IntN(2) == 0 {
				opts = append(opts, streamtest.OnPath("_metadata"))
			}
			f = fs.Add(stream.FaultStorageWrite, streamtest.Fail(nil), opts...)
		case kindStorageRead:
			f = fs.Add(stream.FaultStorageRead, streamtest.Fail(nil), streamtest.OnCall(1+r.IntN(6)))
		case kindStorageList:
			f = fs.Add(stream.FaultStorageList, streamtest.Fail(nil), streamtest.OnCall(1+r.IntN(6)))
		case kindStorageDelete:
			f = fs.Add(stream.FaultStorageDelete, streamtest.Fail(nil), streamtest.OnCall(1+r.IntN(12)))
		case kindStorageSlow:
			f = fs.Add(stream.FaultStorageWrite, streamtest.Delay(time.Duration(1+r.IntN(30))*time.Millisecond), streamtest.OnCall(1+r.IntN(8)), streamtest.Times(1+r.IntN(5)))
		case kindStorageCorrupt:
			if s.dir == "" {
				panic("a storage-corrupt fault needs a job that checkpoints to a directory")
			}
			v, sub := s.vertex(r)
			trigger := fs.Add(stream.FaultBatch, streamtest.Fail(nil), streamtest.OnVertex(v), streamtest.OnSubtask(sub), streamtest.AfterRecords(s.records/2+1+r.Int64N(s.records/2+1)))
			sc.drawn = append(sc.drawn, drawnFault{kind: "corrupt-trigger", fault: trigger})
			dir, ev := s.dir, s.ev
			if ev == nil {
				panic("a storage-corrupt fault needs the job's events")
			}
			var flipped atomic.Bool
			f = fs.Add(stream.FaultRestore, streamtest.Call(func(_ context.Context, site stream.FaultSite) error {
				// With nothing older to fall back to the job fails, as
				// TestRunningJobFallsBackPastAFlippedStateFile shows: the
				// schedule damages only a checkpoint that has one.
				if flipped.Load() || !completedBefore(ev, site.Checkpoint) {
					return nil
				}
				n, err := flipStateFiles(dir, diffJobID, site.Checkpoint)
				if n > 0 {
					flipped.Store(true)
				}
				return err
			}), streamtest.Always())
			sc.drawn = append(sc.drawn, drawnFault{kind: kind, fault: f, struck: flipped.Load})
			continue
		case kindStateStore:
			if len(s.keyed) == 0 {
				panic("a state-store fault needs a job with keyed operators")
			}
			step := r.IntN(2) // a read or a write
			f = fs.Add(stream.FaultStateStore, streamtest.Fail(nil), streamtest.OnOperator(pickOp(s.keyed)),
				streamtest.When(func(site stream.FaultSite) bool { return site.Step == step }),
				streamtest.OnCall(1+r.IntN(60)), streamtest.Times(1+r.IntN(3)))
		case kindPartitionChange:
			if s.grown == nil {
				panic("a partition-change fault needs a job with a growing source")
			}
			sc.drawn = append(sc.drawn, drawnFault{kind: kind, struck: s.grown})
			continue
		default:
			panic("unknown fault kind " + kind)
		}
		sc.drawn = append(sc.drawn, drawnFault{kind: kind, fault: f})
	}
	return sc
}

// completedBefore says whether the job completed a checkpoint older than
// id: the job master keeps it (the suites retain at least two), so the job
// has one to fall back to. Files on storage do not say so: a checkpoint
// the job dropped keeps its _metadata until its queued discard has run.
func completedBefore(ev *streamtest.Events, id int64) bool {
	for _, e := range ev.Of(stream.EventCheckpointCompleted) {
		if e.Checkpoint < id {
			return true
		}
	}
	return false
}

// atFraction strikes at the step a fraction x through its point's steps,
// whatever their number.
func atFraction(x float64) streamtest.FaultOption {
	return streamtest.When(func(s stream.FaultSite) bool {
		return s.Steps > 0 && s.Step == min(int(x*float64(s.Steps)), s.Steps-1)
	})
}

// kindTally counts, over a test's seeds, how often each kind of fault was
// drawn and struck.
type kindTally struct {
	mu            sync.Mutex
	drawn, struck map[string]int
}

func (k *kindTally) add(s *schedule) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.drawn == nil {
		k.drawn, k.struck = map[string]int{}, map[string]int{}
	}
	for _, d := range s.drawn {
		k.drawn[d.kind]++
		if d.fired() {
			k.struck[d.kind]++
		}
	}
}

// check fails the test if, over enough seeds for every kind to be drawn
// many times, a kind never struck: its faults would test nothing.
func (k *kindTally) check(t *testing.T, seeds int, kinds []string) {
	t.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	var b strings.Builder
	for _, kind := range slices.Sorted(maps.Keys(k.drawn)) {
		fmt.Fprintf(&b, " %s %d/%d", kind, k.struck[kind], k.drawn[kind])
	}
	t.Logf("faults struck/drawn by kind over %d seeds:%s", seeds, b.String())
	if seeds < 100 {
		return // too few seeds for every kind to have had its chance
	}
	for _, kind := range kinds {
		if k.struck[kind] == 0 {
			t.Errorf("no fault of kind %s struck in %d seeds (drawn %d times): it tests nothing", kind, seeds, k.drawn[kind])
		}
	}
}

// executeJob runs env's job and returns its result, failing the test if
// it has not ended after two minutes: a subtask that never exits keeps a
// job running, and its cancellation waiting, forever.
func executeJob(t *testing.T, env *stream.Environment, name string, describe func() string) error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- env.Execute(ctx, name) }()
	select {
	case err := <-errc:
		return err
	case <-time.After(2 * time.Minute):
		dump := dumpGoroutines(t)
		cancel()
		t.Fatalf("%s: the job has not ended after two minutes: a subtask hangs (goroutines: %s)", describe(), dump)
		return nil
	}
}

// dumpGoroutines writes every goroutine's stack to a file that outlives
// the test, for a hang to be diagnosed, and returns its name.
func dumpGoroutines(t *testing.T) string {
	f, err := os.CreateTemp("", "weir-hang-*.txt")
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	fmt.Fprintf(f, "%s\n\n", t.Name())
	if err := pprof.Lookup("goroutine").WriteTo(f, 2); err != nil {
		return err.Error()
	}
	return f.Name()
}
