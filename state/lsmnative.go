package state

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/weirstream/weir/internal/workdir"
)

// Native snapshots: a checkpoint of a backend created WithPebble in the
// embedded store's own files, for incremental checkpoints. At the barrier
// the store flushes its memtables and makes a Pebble checkpoint (hard
// links of its immutable SST files and a copy of its manifest) in a
// directory beside its own; the files are then written to checkpoint
// storage asynchronously, and a file that an earlier checkpoint already
// wrote under the same name need not be written again: SST and blob files
// never change under their names. A blob in weir's format goes with them,
// naming every state (those in the store marked so) and holding the
// entries of the states kept on the heap, the timers.
//
// A native snapshot restores in one of two ways. Into an empty Pebble
// backend, the snapshot's directory becomes the backend's database, and
// the key groups outside the backend's range are deleted by range; this
// is how a subtask recovers its own state without rewriting it. Into
// anything else (a heap backend, a backend that already holds state, the
// second snapshot of a rescale), the rows are read out of the snapshot's
// database and loaded as a snapshot in weir's format would be.

// stagedSuffix starts the name of a native snapshot's directory, beside
// the store's own.
const stagedSuffix = ".snapshot-"

// NativeSnapshot is a native snapshot of a Pebble backend (see above).
// The embedded KeyedSnapshot writes its blob in weir's format; Dir holds
// the store's files, Files names them. Release (on the backend's
// goroutine, once the files are written or the checkpoint is aborted)
// removes Dir.
type NativeSnapshot struct {
	*KeyedSnapshot
	Dir   string
	Files []NativeFile
}

// NativeFile is a file of a native snapshot.
type NativeFile struct {
	Name string
	Size int64
	// Immutable marks an SST or blob file, which never changes under its
	// name: a checkpoint may name the copy of it an earlier checkpoint
	// of the same store wrote.
	Immutable bool
}

// NativeSnapshot takes a native snapshot of a backend created WithPebble.
// It flushes the store's memtables first, so it takes as long as writing
// them out; a store without a write since its last flush is not flushed.
func (b *KeyedBackend[K]) NativeSnapshot(checkpointID int64) (*NativeSnapshot, error) {
	if b.lsm == nil {
		return nil, fmt.Errorf("state: a native snapshot needs a backend created WithPebble")
	}
	if err := b.lsm.tryFlushCaches(false); err != nil {
		return nil, fmt.Errorf("state: native snapshot of checkpoint %d: %w", checkpointID, err)
	}
	if err := b.lsm.flush(); err != nil {
		return nil, fmt.Errorf("state: native snapshot of checkpoint %d: flushing: %w", checkpointID, err)
	}
	b.lsm.staged++
	dir := fmt.Sprintf("%s%s%d-%d", b.lsm.dir, stagedSuffix, checkpointID, b.lsm.staged)
	if err := b.lsm.db.Checkpoint(dir); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("state: native snapshot of checkpoint %d: %w", checkpointID, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("state: native snapshot of checkpoint %d: %w", checkpointID, err)
	}
	ns := &NativeSnapshot{KeyedSnapshot: b.snapshot(checkpointID, true), Dir: dir}
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil || !fi.Mode().IsRegular() {
			ns.Release()
			return nil, fmt.Errorf("state: native snapshot of checkpoint %d: %s is not a regular file (%v)", checkpointID, e.Name(), err)
		}
		name := e.Name()
		ns.Files = append(ns.Files, NativeFile{Name: name, Size: fi.Size(),
			Immutable: strings.HasSuffix(name, ".sst") || strings.HasSuffix(name, ".blob")})
	}
	return ns, nil
}

// Release releases the snapshot and removes its directory.
func (s *NativeSnapshot) Release() {
	s.KeyedSnapshot.Release()
	_ = os.RemoveAll(s.Dir)
}

// RestoreNative restores the key groups of kgs (within the backend's)
// from a native snapshot: blob is its blob in weir's format, dir a
// directory holding its files, which RestoreNative takes over (it becomes
// the backend's database, or is removed). As with Restore, it runs before
// any record, each key group may be restored once, and a backend whose
// restore failed must be discarded.
func (b *KeyedBackend[K]) RestoreNative(blob io.Reader, dir string, kgs KeyGroupRange) error {
	if err := b.restoreNative(blob, dir, kgs.Intersect(b.kgs)); err != nil {
		return fmt.Errorf("state: restoring a native keyed snapshot: %w", err)
	}
	return nil
}

func (b *KeyedBackend[K]) restoreNative(blob io.Reader, dir string, want KeyGroupRange) error {
	h, blocks, err := b.parse(blob, want)
	if err != nil {
		b.removeNativeDir(dir)
		return err
	}
	mem, fs := int64(DefaultPebbleMemory), vfs.Default
	if b.lsm != nil {
		mem, fs = b.lsm.mem, b.lsm.fs
	}
	// A database the backend adopts uses its block cache: its slot's,
	// if it shares one. One only read has a cache of its own.
	adopting := b.lsm != nil && len(b.states) == 0 && !slices.Contains(b.restored, true)
	var cache *pebble.Cache
	if adopting && b.lsm.slot != nil {
		cache = b.lsm.slot.blockCache()
	} else {
		cache = pebble.NewCache(blockCacheOf(mem))
		defer cache.Unref()
	}
	broken := newBGFailure()
	src, err := openPebble(dir, mem, cache, fs, broken)
	if err != nil {
		if adopting && b.lsm.slot != nil {
			b.lsm.slot.releaseCache()
		}
		b.removeNativeDir(dir)
		return err
	}
	if adopting {
		return b.adopt(h, blocks, src, broken, dir, want)
	}
	defer func() {
		_ = src.Close()
		b.removeNativeDir(dir)
	}()
	targets, evs, err := b.load(h, blocks, false)
	if err != nil {
		return err
	}
	for i, in := range h.inLSM {
		if !in {
			continue
		}
		v := &lsmView{r: src, id: uint16(i), kgStart: b.kgs.Start, isMap: h.infos[i].kind == kindMap, timers: h.infos[i].kind == kindTimers, kg: -1}
		for kg := want.Start; kg <= want.End; kg++ {
			kgIdx := kg - b.kgs.Start
			if n := v.groupLen(kgIdx); n > 0 {
				// A heap backend's placeholder keeps the entries
				// until its state is registered: give it bytes of
				// its own.
				seg := rawSegment{n: n, data: slices.Clone(v.buf)}
				if evs[i] != nil {
					if seg, err = evs[i].segment(seg); err != nil {
						return fmt.Errorf("key group %d: %w", kg, err)
					}
				}
				if err := targets[i].restoreGroup(kgIdx, seg.n, seg.data); err != nil {
					return fmt.Errorf("%v, key group %d: %w", h.infos[i], kg, err)
				}
			}
			if v.err != nil {
				return fmt.Errorf("%v, key group %d: reading the snapshot's store: %w", h.infos[i], kg, v.err)
			}
		}
	}
	return nil
}

// adopt makes src, a native snapshot's database in dir, the database of
// an empty Pebble backend, keeping the key groups in want.
func (b *KeyedBackend[K]) adopt(h *keyedHeader, blocks []keyedBlock, src *pebble.DB, broken *bgFailure, dir string, want KeyGroupRange) error {
	old := b.lsm
	old.mu.Lock()
	pending := len(old.snaps)
	old.mu.Unlock()
	if pending > 0 {
		_ = src.Close()
		if old.slot != nil {
			old.slot.releaseCache()
		}
		b.removeNativeDir(dir)
		return fmt.Errorf("restore with %d snapshots pending", pending)
	}
	if old.commits != nil {
		close(old.commits) // an empty backend's: no commit waits in it
	}
	if err := old.db.Close(); err != nil {
		_ = src.Close()
		if old.slot != nil {
			old.slot.releaseCache()
		}
		b.removeNativeDir(dir)
		return err
	}
	if old.slot != nil {
		old.slot.releaseCache() // the old database's reference
	}
	old.removeDir()
	// The snapshot's directory is the database now (it is open: it
	// cannot be renamed): Close removes it, native snapshots go beside it.
	wd := b.nativeDirs[dir]
	delete(b.nativeDirs, dir)
	b.lsm = &lsm{db: src, dir: dir, wd: wd, mem: old.mem, snaps: map[*pebble.Snapshot]bool{}, cacheBudget: old.cacheBudget, heapTimers: old.heapTimers,
		slot: old.slot, fs: old.fs, broken: broken, tableRows: old.tableRows}
	// Rows of key groups outside want (keys start with the key group,
	// two bytes big-endian, below 0x8000).
	if want.Start > 0 {
		if err := b.lsm.tryDeleteRows(appendRowPrefix(nil, 0, 0)[:2], appendRowPrefix(nil, want.Start, 0)[:2]); err != nil {
			return err
		}
	}
	if err := b.lsm.tryDeleteRows(appendRowPrefix(nil, want.End+1, 0)[:2], []byte{0xff}); err != nil {
		return err
	}
	// The backend was empty, so the snapshot's states take the indices
	// they had, which are the ids of their rows.
	_, _, err := b.load(h, blocks, true)
	return err
}

// NativeDir returns a new directory for the files of a native snapshot
// to restore, beside the backend's store (or in the system's temporary
// directory for a heap backend), held by this process (workdir) until
// RestoreNative removes it or makes it the store, or the backend closes.
func (b *KeyedBackend[K]) NativeDir() (string, error) {
	parent := os.TempDir()
	if b.lsm != nil {
		parent = filepath.Dir(b.lsm.dir)
	}
	wd, _, err := workdir.Create(parent, "weir-restore-")
	if err != nil {
		return "", fmt.Errorf("state: directory of a native snapshot: %w", err)
	}
	if b.nativeDirs == nil {
		b.nativeDirs = map[string]*workdir.Dir{}
	}
	b.nativeDirs[wd.Path()] = wd
	return wd.Path(), nil
}

// removeNativeDir removes dir, a native snapshot's directory.
func (b *KeyedBackend[K]) removeNativeDir(dir string) {
	if wd, ok := b.nativeDirs[dir]; ok {
		delete(b.nativeDirs, dir)
		_ = wd.Remove()
		return
	}
	_ = os.RemoveAll(dir)
}

// emptyView is the view of a state with no entries in the blob: in a
// native snapshot, a state kept in the store.
type emptyView struct{}

func (emptyView) groupLen(int) int                     { return 0 }
func (emptyView) appendGroup(dst []byte, _ int) []byte { return dst }
