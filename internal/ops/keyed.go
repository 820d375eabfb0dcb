package ops

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/runtime"
	"github.com/weirstream/weir/state"
)

// TimeDomain says which clock a timer follows.
type TimeDomain uint8

const (
	EventTime TimeDomain = iota
	ProcessingTime
)

func (d TimeDomain) String() string {
	if d == ProcessingTime {
		return "processing-time"
	}
	return "event-time"
}

// Keyed is what every keyed operator shares: the keyed state backend of the
// subtask's key groups, restored from the checkpoint when recovering, and
// event-time and processing-time timers kept with it (so they are
// checkpointed per key group too). N is the timers' namespace type:
// state.VoidNamespace for process functions, the window for windows.
type Keyed[K, N comparable] struct {
	KeyCodec codec.Codec[K]
	Hasher   func(K) uint32
	NSCodec  codec.Codec[N]
	// OnTimer is called for every timer that fires, with its key as the
	// backend's current key.
	OnTimer func(t state.Timer[K, N], d TimeDomain) error

	Ctx     *runtime.OperatorContext
	Backend *state.KeyedBackend[K]
	event   *state.Timers[K, N]
	proc    *state.Timers[K, N]

	watermark   int64
	procWakeup  int64 // processing time the next wake-up is scheduled for
	procPending bool

	// uploads holds, for the latest checkpoints, the handles of the
	// native snapshot files written (or restored) for them, by file name:
	// what an incremental snapshot building on one of them need not write
	// again. Snapshot writers add to it on their goroutines.
	mu      sync.Mutex
	uploads map[int64]map[string]checkpoint.StateHandle
	// chains holds, for the latest checkpoints of a heap backend with
	// incremental checkpoints, the pieces of their keyed state in order
	// (a full snapshot, then deltas), each named heapPiecePrefix and the
	// checkpoint that wrote it: what a delta building on one of them
	// names before itself.
	chains map[int64][]checkpoint.StateHandle
}

// heapPiecePrefix starts the File of the handles that name the earlier
// pieces of a heap backend's incremental checkpoint: its full snapshot
// and deltas, before the handle of the piece the checkpoint wrote.
const heapPiecePrefix = "heap-"

// keptUploads is how many checkpoints' uploads Keyed remembers: enough
// for the checkpoints that may still be pending when the next triggers.
const keptUploads = 4

// Open creates the backend and restores it.
func (k *Keyed[K, N]) Open(ctx *runtime.OperatorContext) error {
	k.Ctx = ctx
	// Records at or before the restored event time are as late as they
	// were before the failure.
	k.watermark = ctx.Watermark
	kgs := ctx.KeyGroups
	opts := []state.BackendOption{state.WithKeyHasher(k.Hasher), state.WithProcessingTime(func() int64 { return ctx.Now().UnixMilli() })}
	if ks := ctx.KeyedState; ks.Backend.EmbeddedLSM() {
		po := state.PebbleOptions{Dir: ks.Dir, Memory: ks.Memory, HeapTimers: ks.HeapTimers}
		if ctx.FaultsInjected() {
			po.FS = faultyFS(ctx)
		}
		if ks.SlotErr != nil {
			return ks.SlotErr
		}
		if ks.Slot != nil {
			po.Memory, po.Slot = 0, ks.Slot
		}
		opts = append(opts, state.WithPebble(po))
	} else if ks.Incremental {
		opts = append(opts, state.WithIncrementalSnapshots())
	}
	b, err := state.NewKeyedBackend(k.KeyCodec, ctx.MaxParallelism, kgs, opts...)
	if err != nil {
		return err
	}
	k.Backend = b
	if ctx.Restored != nil {
		if err := k.restore(ctx); err != nil {
			return fmt.Errorf("restoring keyed state of checkpoint %d: %w", ctx.Restored.CheckpointID, err)
		}
	}
	if k.event, err = state.NewTimers(b, "_timers_event", k.NSCodec); err != nil {
		return err
	}
	if k.proc, err = state.NewTimers(b, "_timers_processing", k.NSCodec); err != nil {
		return err
	}
	k.scheduleProcessing()
	return nil
}

// faultyFS returns the operating system's file system with every
// operation asking the job's fault injector first (FaultStateStore).
func faultyFS(ctx *runtime.OperatorContext) vfs.FS {
	return errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		step := 0
		if op.Kind.ReadOrWrite() == errorfs.OpIsWrite {
			step = 1
		}
		return ctx.InjectFault(runtime.FaultSite{Point: runtime.FaultStateStore, Path: op.Path, Step: step})
	}))
}

// restore loads the keyed state of the restored checkpoint's subtasks
// whose key groups overlap this one's: each is a snapshot in weir's
// format, or a native snapshot (its blob's handle followed by one handle
// per file of the store's snapshot). Every file is streamed, never held
// whole: a snapshot's blocks go into the backend as they are read, a
// native snapshot's files to disk.
func (k *Keyed[K, N]) restore(ctx *runtime.OperatorContext) error {
	r := ctx.Restored
	hs := r.KeyedHandles(ctx.KeyGroups)
	for i := 0; i < len(hs); {
		blob, files := hs[i], []checkpoint.StateHandle(nil)
		for i++; i < len(hs) && hs[i].File != ""; i++ {
			files = append(files, hs[i])
		}
		if blob.File != "" {
			return fmt.Errorf("file %s of a native snapshot without its blob", blob.File)
		}
		if len(files) == 0 {
			if err := streamState(ctx, r.Store, []checkpoint.StateHandle{blob}, func(rs []io.Reader) error {
				return k.Backend.RestoreKeyGroups(rs[0], ctx.KeyGroups)
			}); err != nil {
				return err
			}
			continue
		}
		if strings.HasPrefix(files[0].File, heapPiecePrefix) {
			// A heap backend's incremental checkpoint: the pieces its
			// delta builds on, then the delta.
			for _, f := range files {
				if !strings.HasPrefix(f.File, heapPiecePrefix) {
					return fmt.Errorf("file %s among the pieces of a heap backend's incremental checkpoint", f.File)
				}
			}
			if err := streamState(ctx, r.Store, append(slices.Clone(files), blob), func(rs []io.Reader) error {
				return k.Backend.RestoreChain(rs, ctx.KeyGroups)
			}); err != nil {
				return err
			}
			continue
		}
		// The first native snapshot into an empty Pebble backend becomes
		// its store: its files are this subtask's uploads too.
		adopts := i == len(files)+1 && k.Backend.Storage() == "pebble"
		dir, err := k.Backend.NativeDir()
		if err != nil {
			return err
		}
		for _, f := range files {
			if f.File != filepath.Base(f.File) || f.File == "." || f.File == ".." {
				err = fmt.Errorf("a native snapshot's file is named %q", f.File)
			} else {
				err = copyState(ctx, r.Store, f, filepath.Join(dir, f.File))
			}
			if err != nil {
				_ = os.RemoveAll(dir)
				return fmt.Errorf("native snapshot file %s: %w", f.File, err)
			}
		}
		if err := streamState(ctx, r.Store, []checkpoint.StateHandle{blob}, func(rs []io.Reader) error {
			return k.Backend.RestoreNative(rs[0], dir, ctx.KeyGroups)
		}); err != nil {
			return err
		}
		if adopts && r.Own {
			k.recordUploads(r.CheckpointID, files)
		}
	}
	return nil
}

// streamState opens the state files hs and calls load with a reader of
// each, which it must read to the end: checkpoint storage verifies a
// file's size and checksum as its reader reaches the end. When load
// fails, the rest of every file is read, so that a file that does not
// verify is reported as one (an error matching storage.ErrCorrupt, which
// lets the job fall back to an older checkpoint) whatever load made of
// its bytes first.
func streamState(ctx context.Context, store runtime.StateReader, hs []checkpoint.StateHandle, load func([]io.Reader) error) error {
	rs := make([]io.Reader, 0, len(hs))
	defer func() {
		for _, r := range rs {
			_ = r.(io.Closer).Close()
		}
	}()
	for _, h := range hs {
		rc, err := store.OpenState(ctx, h)
		if err != nil {
			return err
		}
		rs = append(rs, rc)
	}
	err := load(rs)
	if err == nil || errors.Is(err, storage.ErrCorrupt) {
		return err
	}
	for _, r := range rs {
		if _, derr := io.Copy(io.Discard, r); errors.Is(derr, storage.ErrCorrupt) {
			return fmt.Errorf("%w (restoring: %w)", derr, err)
		}
	}
	return err
}

// copyState writes the state file h to path, streaming it.
func copyState(ctx context.Context, store runtime.StateReader, h checkpoint.StateHandle, path string) error {
	rc, err := store.OpenState(ctx, h)
	if err != nil {
		return err
	}
	defer rc.Close()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, rc)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// recordUploads remembers the native snapshot files of checkpoint id.
func (k *Keyed[K, N]) recordUploads(id int64, files []checkpoint.StateHandle) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.uploads == nil {
		k.uploads = map[int64]map[string]checkpoint.StateHandle{}
	}
	m := make(map[string]checkpoint.StateHandle, len(files))
	for _, f := range files {
		if f.File != "" {
			m[f.File] = f
		}
	}
	k.uploads[id] = m
	for len(k.uploads) > keptUploads {
		delete(k.uploads, slices.Min(slices.Collect(maps.Keys(k.uploads))))
	}
}

// uploadsOf returns the native snapshot files of checkpoint id.
func (k *Keyed[K, N]) uploadsOf(id int64) map[string]checkpoint.StateHandle {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.uploads[id]
}

// Close releases the backend: the embedded LSM store's database and
// working directory.
func (k *Keyed[K, N]) Close() error {
	if k.Backend == nil {
		return nil
	}
	return k.Backend.Close()
}

// SetKey makes k the current key.
func (k *Keyed[K, N]) SetKey(key K) { k.Backend.SetCurrentKeyWithHash(key, k.Hasher(key)) }

// Watermark returns the operator's current event time.
func (k *Keyed[K, N]) Watermark() int64 { return k.watermark }

// RegisterEventTimer adds an event-time timer for the current key.
func (k *Keyed[K, N]) RegisterEventTimer(ns N, ts int64) { k.event.Register(ns, ts) }

// DeleteEventTimer removes an event-time timer of the current key.
func (k *Keyed[K, N]) DeleteEventTimer(ns N, ts int64) { k.event.Delete(ns, ts) }

// RegisterProcessingTimer adds a processing-time timer (Unix ms) for the
// current key.
func (k *Keyed[K, N]) RegisterProcessingTimer(ns N, ts int64) {
	k.proc.Register(ns, ts)
	if !k.procPending || ts < k.procWakeup {
		k.scheduleProcessing()
	}
}

// DeleteProcessingTimer removes a processing-time timer of the current key.
func (k *Keyed[K, N]) DeleteProcessingTimer(ns N, ts int64) { k.proc.Delete(ns, ts) }

// AdvanceWatermark fires the event-time timers up to wm. When an
// unaligned snapshot waits (runtime.OperatorContext.Interrupted) it stops
// between two timers and returns runtime.ErrInterrupted: the caller
// returns it without forwarding wm, and is called again with wm after the
// snapshot, when it fires the rest.
func (k *Keyed[K, N]) AdvanceWatermark(wm int64) error {
	k.watermark = wm
	for {
		if k.Ctx.Interrupted() {
			return runtime.ErrInterrupted
		}
		t, ok := k.event.Pop(wm)
		if !ok {
			return nil
		}
		if err := k.OnTimer(t, EventTime); err != nil {
			return err
		}
	}
}

func (k *Keyed[K, N]) scheduleProcessing() {
	t, ok := k.proc.Peek()
	if !ok {
		return
	}
	k.procPending, k.procWakeup = true, t.Timestamp
	k.Ctx.AtProcessingTime(time.UnixMilli(t.Timestamp), func() error {
		if k.procWakeup != t.Timestamp {
			return nil // superseded by an earlier wake-up
		}
		k.procPending = false
		now := k.Ctx.Now().UnixMilli()
		for {
			if k.Ctx.Interrupted() {
				// A snapshot waits: the timers still due fire in a
				// wake-up of their own, after it.
				break
			}
			tm, ok := k.proc.Pop(now)
			if !ok {
				break
			}
			if err := k.OnTimer(tm, ProcessingTime); err != nil {
				return err
			}
		}
		k.scheduleProcessing()
		return nil
	})
}

// Snapshot takes the backend's snapshot: copy-on-write on the heap, a
// Pebble snapshot in the embedded store, or, for an incremental checkpoint
// of the embedded store, a native snapshot whose files the checkpoint it
// builds on already holds are named, not written again. A savepoint is
// always in weir's format.
func (k *Keyed[K, N]) Snapshot(id int64) (runtime.Snapshot, error) {
	savepoint, base := k.Ctx.Snapshotting()
	// The store's own files: for incremental checkpoints, and for
	// savepoints in the native format, which name no checkpoint's file.
	native := k.Ctx.SnapshottingNative() || !savepoint && k.Ctx.KeyedState.Incremental
	if !savepoint && k.Ctx.KeyedState.Incremental && k.Backend.Storage() == "heap" {
		return k.heapIncremental(id, base), nil
	}
	if !native || k.Backend.Storage() != "pebble" {
		s := k.Backend.Snapshot(id)
		return runtime.Snapshot{Keyed: s, KeyGroups: s.KeyGroups(), Release: s.Release}, nil
	}
	ns, err := k.Backend.NativeSnapshot(id)
	if err != nil {
		return runtime.Snapshot{}, err
	}
	if savepoint {
		files := make([]runtime.KeyedFile, len(ns.Files))
		for i, f := range ns.Files {
			files[i] = runtime.KeyedFile{Name: f.Name, Path: filepath.Join(ns.Dir, f.Name)}
		}
		return runtime.Snapshot{Keyed: ns, KeyGroups: ns.KeyGroups(), KeyedFiles: files, Release: ns.Release}, nil
	}
	// The store's immutable files go to the job's shared/ directory:
	// later checkpoints name them instead of writing them again.
	prev := k.uploadsOf(base)
	files := make([]runtime.KeyedFile, len(ns.Files))
	for i, f := range ns.Files {
		files[i] = runtime.KeyedFile{Name: f.Name, Path: filepath.Join(ns.Dir, f.Name), Shared: f.Immutable}
		if h, ok := prev[f.Name]; ok && f.Immutable && h.Size == f.Size {
			files[i].Reuse = &h
		}
	}
	return runtime.Snapshot{Keyed: ns, KeyGroups: ns.KeyGroups(), KeyedFiles: files, Release: ns.Release,
		Written: func(hs []checkpoint.StateHandle) { k.recordUploads(id, hs) }}, nil
}

// heapIncremental takes a heap backend's snapshot for an incremental
// checkpoint: a delta over the keyed state of checkpoint base, naming
// the pieces of base's chain before itself, or a full snapshot when base
// is not one of this subtask's recent checkpoints (the first checkpoint
// after a start or a restore) or when its deltas already outweigh its
// full snapshot, so that a restore reads at most about twice the state.
func (k *Keyed[K, N]) heapIncremental(id, base int64) runtime.Snapshot {
	chain := k.chainOf(base)
	var deltas int64
	for _, h := range chain[min(1, len(chain)):] {
		deltas += h.Size
	}
	full := len(chain) == 0 || deltas > chain[0].Size
	s := k.Backend.IncrementalSnapshot(id, base, full)
	var files []runtime.KeyedFile
	if _, ok := s.Delta(); ok {
		files = make([]runtime.KeyedFile, len(chain))
		for i := range chain {
			files[i] = runtime.KeyedFile{Name: chain[i].File, Reuse: &chain[i]}
		}
	}
	// Every piece, the full snapshot too, may be named by the deltas
	// after it: it goes to the job's shared/ directory.
	return runtime.Snapshot{Keyed: s, KeyGroups: s.KeyGroups(), KeyedShared: true, KeyedFiles: files, Release: s.Release,
		Written: func(hs []checkpoint.StateHandle) { k.recordChain(id, hs) }}
}

// recordChain remembers the chain of checkpoint id's keyed state from its
// handles: the piece it wrote, then those it named.
func (k *Keyed[K, N]) recordChain(id int64, hs []checkpoint.StateHandle) {
	if len(hs) == 0 {
		return
	}
	piece := hs[0]
	piece.File = fmt.Sprintf("%s%d", heapPiecePrefix, id)
	chain := append(slices.Clone(hs[1:]), piece)
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.chains == nil {
		k.chains = map[int64][]checkpoint.StateHandle{}
	}
	k.chains[id] = chain
	for len(k.chains) > keptUploads {
		delete(k.chains, slices.Min(slices.Collect(maps.Keys(k.chains))))
	}
}

// chainOf returns the chain of checkpoint id's keyed state (nil if
// unknown).
func (k *Keyed[K, N]) chainOf(id int64) []checkpoint.StateHandle {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.chains[id])
}
