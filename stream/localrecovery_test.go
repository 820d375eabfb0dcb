package stream_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/weirstream/weir/connector/datagen"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

// localBackends are the state backends local recovery is proven on.
var localBackends = []struct {
	name string
	kv   []string
}{
	{"hashmap", []string{"state.backend.type=hashmap"}},
	{"hashmap-incremental", []string{"state.backend.type=hashmap", "execution.checkpointing.incremental=true"}},
	{"pebble", []string{"state.backend.type=pebble", "state.backend.pebble.memory=4 mb"}},
	{"pebble-incremental", []string{"state.backend.type=pebble", "state.backend.pebble.memory=4 mb", "execution.checkpointing.incremental=true"}},
}

// stateReads counts the reads of state files (not _metadata) that reach
// checkpoint storage, around the faults a test declares.
type stateReads struct {
	faults *streamtest.Faults
	mu     sync.Mutex
	keys   []string
}

func (r *stateReads) inject(ctx context.Context, site stream.FaultSite) error {
	// Checkpoints' _metadata and the job's _latest (the newest
	// checkpoint's id) are read from checkpoint storage: not state.
	if site.Point == stream.FaultStorageRead && path.Base(site.Path) != storage.MetadataFile && path.Base(site.Path) != storage.LatestFile {
		r.mu.Lock()
		r.keys = append(r.keys, site.Path)
		r.mu.Unlock()
	}
	return r.faults.Inject(ctx, site)
}

func (r *stateReads) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.keys...)
}

// localRecoveryJob runs a keyed running sum with local recovery on, with
// the faults faults declares, and checks its output against the input.
// It returns the state files restores read from checkpoint storage.
func localRecoveryJob(t *testing.T, seed uint64, backend []string, localDir string, faults *streamtest.Faults, ev *streamtest.Events, failover string) []string {
	t.Helper()
	const partitions, perPartition = 2, 6000
	gen := func(p int, seq int64) rec {
		return rec{Key: fmt.Sprintf("k%d", datagen.Mix(seed, p, seq)%300), Value: int64(p) + 2*seq + 1, P: p, Seq: seq}
	}
	reads := &stateReads{faults: faults}
	kv := append([]string{
		"parallelism.default=2", "execution.checkpointing.interval=10 ms",
		"execution.checkpointing.dir=" + t.TempDir(), "execution.checkpointing.data-inline-threshold=0 b",
		"execution.state-recovery.from-local=true", "execution.checkpointing.local-backup.dirs=" + localDir,
		"state.backend.pebble.localdir=" + localDir,
		"jobmanager.execution.failover-strategy=" + failover,
		"restart-strategy.type=fixed-delay", "restart-strategy.fixed-delay.attempts=20", "restart-strategy.fixed-delay.delay=0 ms"}, backend...)
	env, err := stream.NewEnvironment(stream.WithConfig(mustConfig(t, kv...)),
		stream.WithLogger(quiet), stream.WithJobID("local-recovery"), stream.WithFaults(reads.inject), ev.Option())
	if err != nil {
		t.Fatal(err)
	}
	src, _ := datagen.New(gen, datagen.Partitions(partitions), datagen.Count(perPartition), datagen.BatchSize(20), datagen.RatePerSecond(3000))
	in := stream.FromSource(env, src, "numbers", stream.NoWatermarks[rec]())
	sums := stream.Process(stream.KeyBy(in, func(r rec) string { return r.Key }), stream.KeyedProcessFunction[string, rec, KeyedSum](&runningSum{}), stream.Uid("sum"))
	sink := streamtest.NewCollector[KeyedSum](true)
	stream.SinkTo(sums, sink, stream.Uid("sink"))
	if err := env.Execute(context.Background(), "local-recovery"); err != nil {
		t.Fatal(err)
	}
	if err := checkRunningSums(sink.Results(), recordsByKey(gen, partitions, perPartition)); err != nil {
		t.Fatal(err)
	}
	// Nothing is left on local disk once the job has ended.
	var left []string
	filepath.WalkDir(localDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && p != localDir {
			left = append(left, p)
		}
		return nil
	})
	if len(left) > 0 {
		t.Fatalf("local state left after the job ended: %v", left)
	}
	return reads.all()
}

// TestLocalRecoveryExactlyOnce fails the keyed sum's subtasks twice
// at seeded points, on each state backend and with either failover
// strategy: every restore takes its state from the local copies of the
// checkpoint (not one state file is read from checkpoint storage), the
// output holds every record's sum exactly once, and the local directory
// is empty once the job has ended.
func TestLocalRecoveryExactlyOnce(t *testing.T) {
	for _, be := range localBackends {
		t.Run(be.name, func(t *testing.T) {
			forEachSeed(t, diffSeedList(4), func(t *testing.T, seed uint64) {
				faults := streamtest.NewFaults()
				var ev streamtest.Events
				var fired []*streamtest.Fault
				for i := range 2 {
					opts := []streamtest.FaultOption{streamtest.OnVertex("sum"), streamtest.OnSubtask(int(seed+uint64(i)) % 2),
						streamtest.AfterRecords(int64(200 + (seed*7+uint64(i)*3)%4*150)), streamtest.Times(1), streamtest.CompletedSinceDeploy(&ev)}
					if i > 0 {
						opts = append(opts, streamtest.AfterRestore())
					}
					fired = append(fired, faults.Add(stream.FaultBatch, streamtest.Fail(nil), opts...))
				}
				failover := []string{"region", "full"}[seed%2]
				remote := localRecoveryJob(t, seed, be.kv, t.TempDir(), faults, &ev, failover)
				for i, f := range fired {
					if !f.Fired() {
						t.Fatalf("fault %d did not fire: too few restores to prove anything\n%s", i, ev.String())
					}
				}
				if len(ev.Restores()) == 0 {
					t.Fatalf("no restore from a checkpoint: %s", ev.String())
				}
				if len(remote) > 0 {
					t.Fatalf("restores in place read %d state files from checkpoint storage, want none: %v", len(remote), remote)
				}
			})
		})
	}
}

// TestLocalRecoveryDamagedCopies damages the local copies (removes a
// third, truncates a third, flips a byte in the rest) after a failure,
// while the sum's subtasks restore: the restore reads those files from
// checkpoint storage instead and the output is still exact.
func TestLocalRecoveryDamagedCopies(t *testing.T) {
	for _, be := range localBackends {
		t.Run(be.name, func(t *testing.T) {
			forEachSeed(t, diffSeedList(3), func(t *testing.T, seed uint64) {
				localDir := t.TempDir()
				faults := streamtest.NewFaults()
				var ev streamtest.Events
				fail := faults.Add(stream.FaultBatch, streamtest.Fail(nil), streamtest.OnVertex("sum"),
					streamtest.AfterRecords(int64(800+seed%4*300)), streamtest.Times(1), streamtest.CompletedSinceDeploy(&ev))
				var once sync.Once
				var damaged int
				damage := faults.Add(stream.FaultOpen, streamtest.Call(func(context.Context, stream.FaultSite) error {
					once.Do(func() { damaged = damageCopies(t, localDir) })
					return nil
				}), streamtest.OnOperator("sum"), streamtest.AfterRestore())
				remote := localRecoveryJob(t, seed, be.kv, localDir, faults, &ev, "full")
				if !fail.Fired() || !damage.Fired() || len(ev.Restores()) == 0 {
					t.Fatalf("failure fired %v, damage %v, restores %d: nothing proven\n%s", fail.Fired(), damage.Fired(), len(ev.Restores()), ev.String())
				}
				if damaged == 0 || len(remote) == 0 {
					t.Fatalf("%d local copies damaged, %d state files read from checkpoint storage: the restore did not fall back", damaged, len(remote))
				}
				t.Logf("%d local copies damaged; %d state files read from checkpoint storage", damaged, len(remote))
			})
		})
	}
}

// damageCopies damages every local copy under dir and returns how many.
// It writes a damaged file under a new name and renames it over the copy:
// a copy may be a hard link of a running store's file, which must not
// change under it.
func damageCopies(t *testing.T, dir string) int {
	n := 0
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		slash := filepath.ToSlash(p)
		if err != nil || d.IsDir() || strings.HasSuffix(p, ".tmp") || !strings.Contains(slash, "/weir-local-") ||
			!strings.Contains(slash, "/chk-") && !strings.Contains(slash, "/"+storage.SharedDir+"/") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		switch n % 3 {
		case 0:
			err = os.Remove(p)
		case 1:
			err = replaceFile(p, b[:len(b)/2])
		default:
			if len(b) > 0 {
				b[len(b)/3] ^= 0x01
			} else {
				b = []byte{1}
			}
			err = replaceFile(p, b)
		}
		if err != nil {
			t.Errorf("damaging %s: %v", p, err)
		}
		n++
		return nil
	})
	return n
}

func replaceFile(p string, b []byte) error {
	tmp := p + ".damaged"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}
