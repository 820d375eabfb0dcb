package cluster_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/cluster"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

var (
	clusterSeed  = flag.Uint64("cluster.seed", 0, "run TestClusterDifferentialTaskManagerLoss with this seed only")
	clusterSeeds = flag.Int("cluster.seeds", 0, "run TestClusterDifferentialTaskManagerLoss with seeds 1..N (default 8, 4 under -race)")
)

// alignments are the ways the differential test's checkpoints align.
var alignments = []struct {
	name string
	cfg  []string
}{
	{"aligned", nil},
	{"unaligned", []string{"execution.checkpointing.unaligned.enabled=true"}},
	{"timeout-0", []string{"execution.checkpointing.unaligned.enabled=true", "execution.checkpointing.aligned-checkpoint-timeout=0 ms"}},
	{"timeout-ms", []string{"execution.checkpointing.unaligned.enabled=true"}}, // plus a drawn timeout
}

// TestClusterDifferentialTaskManagerLoss runs the keyed sum across task
// managers that exchange records over the network, under a seeded draw:
// how checkpoints align (aligned, unaligned, aligned with a timeout of 0
// or of a few milliseconds, seeds cycling through the four), the
// parallelism, the input size, how slow the sums are (so that the
// channels between the processes fill up), the checkpoint interval, and
// when a task manager is lost: once a drawn checkpoint has completed, or
// — with unaligned checkpoints — the moment a sum subtask starts writing
// its channel state file (the write then never ends). The lost task
// manager's subtasks die with it, a replacement registers, and the job
// restores the latest completed checkpoint, records in flight between the
// processes included. The output must equal the oracle's exactly: one
// sum per record and every key's last sum the total of its records.
// A failing seed is printed; -cluster.seed=N reruns it.
func TestClusterDifferentialTaskManagerLoss(t *testing.T) {
	seeds := *clusterSeeds
	if seeds == 0 {
		seeds = 8
		if raceEnabled {
			seeds = 4
		}
	}
	list := make([]uint64, seeds)
	for i := range list {
		list[i] = uint64(i + 1)
	}
	if *clusterSeed != 0 {
		list = []uint64{*clusterSeed}
	}
	var midWrite, replayed int
	for _, seed := range list {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("rerun this seed alone with: go test ./internal/cluster -run '^TestClusterDifferentialTaskManagerLoss$' -cluster.seed=%d -v", seed)
				}
			})
			mid, replay := testClusterDifferential(t, seed)
			if mid {
				midWrite++
			}
			if replay {
				replayed++
			}
		})
	}
	if len(list) >= len(alignments) && midWrite == 0 && !t.Failed() {
		t.Error("no seed lost a task manager while channel state was being written")
	}
	if len(list) >= len(alignments) && replayed == 0 && !t.Failed() {
		t.Error("no seed restored channel state: the restores show nothing about records in flight")
	}
}

// testClusterDifferential runs one seed and reports whether the task
// manager was lost while a channel state file was being written, and
// whether a restore replayed channel state.
func testClusterDifferential(t *testing.T, seed uint64) (midWriteLoss, replayed bool) {
	r := rand.New(rand.NewPCG(seed, 0xc1))
	mode := alignments[(seed-1)%uint64(len(alignments))]
	cfg := append([]string{}, mode.cfg...)
	if mode.name == "timeout-ms" {
		cfg = append(cfg, fmt.Sprintf("execution.checkpointing.aligned-checkpoint-timeout=%d ms", 1+r.IntN(8)))
	}
	unaligned := mode.name != "aligned"
	par := 2 + r.IntN(3)
	count := int64(800 + r.IntN(1200))
	slowBy := []time.Duration{2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond}[r.IntN(3)]
	interval := 15 + r.IntN(30)
	victim := r.IntN(2)
	afterCheckpoint := 1 + r.IntN(3)
	// Unaligned seeds lose the task manager mid-write every other time.
	midWrite := unaligned && r.IntN(2) == 0
	t.Logf("seed %d: %s %v parallelism=%d records=%d×%d sums slowed %s per batch, interval %d ms, lose tm-%d %s",
		seed, mode.name, cfg, par, partitions, count, slowBy, interval, victim, map[bool]string{
			true:  "while a sum subtask writes its channel state",
			false: fmt.Sprintf("after checkpoint %d completes", afterCheckpoint)}[midWrite])

	ev := newEvents()
	faults := streamtest.NewFaults()
	faults.Add(stream.FaultBatch, streamtest.Delay(slowBy), streamtest.OnVertex("sum"), streamtest.Always())
	replay := faults.Add(stream.FaultRestoreChannels, streamtest.Delay(0), streamtest.Always())
	var (
		mu      sync.Mutex
		tms     []*taskManager
		lost    = make(chan struct{})
		lostOne sync.Once
	)
	loseVictim := func() {
		lostOne.Do(func() {
			mu.Lock()
			x := tms[victim]
			mu.Unlock()
			go func() { x.stop(); close(lost) }()
		})
	}
	var writing *streamtest.Fault
	if midWrite {
		// The first channel state file of a sum subtask written after a
		// checkpoint completed: the task manager goes, and this write
		// never ends (the subtask is canceled, with its task manager or
		// by the failover).
		writing = faults.Add(stream.FaultStorageWrite, streamtest.Call(func(ctx context.Context, _ stream.FaultSite) error {
			loseVictim()
			<-ctx.Done()
			return ctx.Err()
		}), streamtest.OnPath("*/sum-*-channels"), streamtest.InAttempt(0),
			streamtest.When(func(stream.FaultSite) bool { return ev.Count(stream.EventCheckpointCompleted) >= 1 }))
	}
	sj := &sumJobs{sink: streamtest.NewCollector[keyedSum](true),
		cfg: append([]string{fmt.Sprintf("parallelism.default=%d", par), fmt.Sprintf("execution.checkpointing.interval=%d ms", interval),
			"execution.checkpointing.dir=" + t.TempDir(), "execution.checkpointing.data-inline-threshold=0 b",
			"restart-strategy.type=fixed-delay", "restart-strategy.fixed-delay.attempts=10", "restart-strategy.fixed-delay.delay=50 ms"}, cfg...)}
	jobs := newEnvJobs(sj.env, stream.WithEvents(ev.Record), faults.Option())
	_, addr := startJobManager(t, jobs)
	for i := range 2 {
		x := startTaskManager(t, fmt.Sprintf("tm-%d", i), addr, 2, jobs)
		mu.Lock()
		tms = append(tms, x)
		mu.Unlock()
	}
	c, err := cluster.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitTaskManagers(t, c, 2)
	// Each partition's records over some two seconds.
	args, _ := json.Marshal(sumArgs{Rate: float64(count) / 2, Count: count})
	id, err := c.Submit(context.Background(), cluster.Submission{JobID: fmt.Sprintf("diff-%d", seed), Job: "sum", Args: args})
	if err != nil {
		t.Fatal(err)
	}
	if !midWrite {
		ev.waitFor(t, stream.EventCheckpointCompleted, func(e stream.JobEvent) bool { return e.Checkpoint >= int64(afterCheckpoint) })
		loseVictim()
	}
	select {
	case <-lost:
	case <-time.After(60 * time.Second):
		t.Fatalf("no task manager was lost within 60 s (%d checkpoints completed)", ev.Count(stream.EventCheckpointCompleted))
	}
	startTaskManager(t, "tm-2", addr, 2, jobs)
	st := waitJob(t, c, id)
	if st.State != "FINISHED" {
		t.Fatalf("job ended %s: %s", st.State, st.Error)
	}
	if st.Restarts == 0 {
		t.Fatal("the job did not restart after losing a task manager")
	}
	if midWrite && !writing.Fired() {
		t.Fatal("no channel state write was under way when the task manager was lost")
	}
	checkSums(t, sj.sink.Results(), count)
	var restored []int64
	for _, e := range ev.Of(stream.EventRestored) {
		restored = append(restored, e.Checkpoint)
	}
	t.Logf("restored from %v, %d restarts, %d channel state files replayed; output exact", restored, st.Restarts, replay.Count())
	return midWrite, replay.Fired()
}

// checkSums is check for count records per partition, and also requires
// every key's sums to be distinct (the values are positive, so a key's
// running sums strictly increase): a duplicate would show.
func checkSums(t *testing.T, out []keyedSum, count int64) {
	t.Helper()
	want := map[string]int{}
	total := map[string]int64{}
	for p := range partitions {
		for seq := range count {
			r := gen(p, seq)
			want[r.Key]++
			total[r.Key] += r.Value
		}
	}
	seen := map[keyedSum]bool{}
	got := map[string]int{}
	last := map[string]int64{}
	for _, s := range out {
		if seen[s] {
			t.Errorf("key %s: sum %d emitted twice", s.Key, s.Sum)
		}
		seen[s] = true
		got[s.Key]++
		last[s.Key] = max(last[s.Key], s.Sum)
	}
	for k := range want {
		if got[k] != want[k] || last[k] != total[k] {
			t.Errorf("key %s: %d sums (want %d), last %d (want %d)", k, got[k], want[k], last[k], total[k])
		}
	}
	if n := int64(len(out)); n != partitions*count {
		t.Errorf("%d sums for %d records", n, partitions*count)
	}
}
