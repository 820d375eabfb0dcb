package state

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"sync/atomic"

	"github.com/weirstream/weir/config"
)

// KeyedSnapshot is a consistent view of a KeyedBackend backend at the moment
// Snapshot returned. It shares the backend's data: the backend copies what
// it would otherwise modify (see table.go) until Release.
//
// WriteTo may run on any goroutine, concurrently with the owner modifying
// the backend. Release must run on the owner's goroutine (deliver it as a
// mail once WriteTo has returned, or when the checkpoint is aborted).
type KeyedSnapshot struct {
	checkpointID int64
	epoch        uint64
	maxP         int
	kgs          KeyGroupRange
	infos        []stateInfo
	schemas      []stateSchema
	views        []stateView
	// inLSM marks, in a native snapshot, the states whose entries are in
	// the store's files rather than in the blob.
	inLSM    []bool
	release  func(uint64)
	released bool
	// since, in a delta snapshot, is the epoch of the snapshot of
	// checkpoint base that it writes the changes since (0: a full
	// snapshot).
	since uint64
	base  int64

	stats atomic.Pointer[SnapshotStats]
}

// SnapshotStats describes a serialized snapshot.
type SnapshotStats struct {
	// Bytes is the size of the serialized snapshot.
	Bytes int64
	// Entries is the number of entries written (for a list or map state,
	// one per key and namespace).
	Entries int64
	// KeyGroupOffsets[i] is the offset of the block of key group
	// KeyGroups.Start+i in the blob.
	KeyGroupOffsets []int64
	KeyGroups       KeyGroupRange
}

// Snapshot captures the backend's state for checkpoint checkpointID. It
// copies no entries: it records each state's shard pointers and advances
// the epoch, so it takes time proportional to the number of shards (about
// one per thousand entries), not to the number of entries. The owner may
// continue to modify state as soon as it returns.
//
// Several snapshots may be pending at once. Each must be released.
func (b *KeyedBackend[K]) Snapshot(checkpointID int64) *KeyedSnapshot {
	return b.snapshot(checkpointID, false)
}

// snapshot is Snapshot; native leaves the states in the embedded LSM
// store out of the blob, marked as such, for NativeSnapshot.
func (b *KeyedBackend[K]) snapshot(checkpointID int64, native bool) *KeyedSnapshot {
	return b.snapshotSince(checkpointID, native, 0)
}

// snapshotSince is snapshot; since > 0 captures a delta snapshot of the
// changes after epoch since (delta.go).
func (b *KeyedBackend[K]) snapshotSince(checkpointID int64, native bool, since uint64) *KeyedSnapshot {
	if b.lsm != nil {
		b.lsm.flushCaches(false) // the store holds every row from here
	}
	s := &KeyedSnapshot{
		checkpointID: checkpointID,
		maxP:         b.maxP,
		kgs:          b.kgs,
		infos:        make([]stateInfo, len(b.states)),
		schemas:      make([]stateSchema, len(b.states)),
		views:        make([]stateView, len(b.states)),
		release:      func(ep uint64) { b.ep.end(ep) },
	}
	if native {
		s.inLSM = make([]bool, len(b.states))
	}
	var now int64
	if b.snapshotTime {
		now = b.now()
	}
	for i, st := range b.states {
		s.infos[i] = st.info()
		s.schemas[i] = b.layouts[s.infos[i].name].stateSchema
		if native && inStoreOnly(st) {
			s.views[i], s.inLSM[i] = emptyView{}, true
			continue
		}
		if dc, ok := st.(deltaCapturer); ok && since > 0 {
			s.views[i] = dc.captureDelta(now, since)
			continue
		}
		s.views[i] = st.capture(now)
	}
	if since > 0 {
		s.since = since
		s.epoch = b.ep.beginDelta()
	} else {
		s.epoch = b.ep.begin()
	}
	b.rememberEpoch(checkpointID, s.epoch)
	return s
}

// inStoreOnly says every entry of st is a row of the embedded store,
// under its id: a native snapshot's files hold them.
func inStoreOnly(st keyedState) bool {
	switch st := st.(type) {
	case interface{ inStore() bool }:
		return st.inStore()
	case *rawState:
		return st.inStoreOnly()
	}
	return false
}

// CheckpointID returns the checkpoint the snapshot belongs to.
func (s *KeyedSnapshot) CheckpointID() int64 { return s.checkpointID }

// KeyGroups returns the key groups in the snapshot.
func (s *KeyedSnapshot) KeyGroups() KeyGroupRange { return s.kgs }

// Release tells the backend that the snapshot will not be read again, so
// that it can modify in place what the snapshot shared. It must be called
// on the backend's goroutine, after WriteTo has returned; calling it again
// does nothing.
func (s *KeyedSnapshot) Release() {
	if s.released {
		return
	}
	s.released = true
	s.release(s.epoch)
	for _, v := range s.views {
		if r, ok := v.(interface{ release() }); ok {
			r.release()
		}
	}
	s.views = nil
}

// Stats returns the statistics of the last completed WriteTo, or nil.
func (s *KeyedSnapshot) Stats() *SnapshotStats { return s.stats.Load() }

// WriteTo serializes the snapshot: a header naming the states, then one
// checksummed block per key group holding every state's entries in that
// key group, so a restore can take any subset of key groups. It may run
// concurrently with the backend's owner, but not after Release.
func (s *KeyedSnapshot) WriteTo(w io.Writer) (int64, error) {
	if s.views == nil {
		return 0, fmt.Errorf("state: snapshot of checkpoint %d written after Release", s.checkpointID)
	}
	bw := newBlobWriter(w)
	hdr := binary.AppendVarint(nil, s.checkpointID)
	hdr = binary.AppendUvarint(hdr, uint64(s.maxP))
	hdr = binary.AppendUvarint(hdr, uint64(s.kgs.Start))
	hdr = binary.AppendUvarint(hdr, uint64(s.kgs.End))
	hdr = binary.AppendUvarint(hdr, uint64(len(s.infos)))
	for i, inf := range s.infos {
		hdr = appendStateInfo(hdr, inf, s.inLSM != nil && s.inLSM[i], s.schemas[i])
	}
	if s.since > 0 {
		bw.header(blobDelta, append(binary.AppendVarint(nil, s.base), hdr...))
		return s.writeDelta(bw)
	}
	bw.header(blobKeyed, hdr)

	stats := &SnapshotStats{KeyGroups: s.kgs, KeyGroupOffsets: make([]int64, s.kgs.Len())}
	var buf []byte
	for kgIdx := range s.kgs.Len() {
		buf = buf[:0]
		for i, v := range s.views {
			n := v.groupLen(kgIdx)
			if n == 0 {
				continue
			}
			stats.Entries += int64(n)
			buf = binary.AppendUvarint(buf, uint64(i))
			buf = binary.AppendUvarint(buf, uint64(n))
			buf = v.appendGroup(buf, kgIdx)
		}
		if err := s.failure(); err != nil {
			return bw.n, fmt.Errorf("state: reading snapshot of checkpoint %d: %w", s.checkpointID, err)
		}
		stats.KeyGroupOffsets[kgIdx] = bw.block(s.kgs.Start+kgIdx, buf)
		if bw.err != nil {
			break
		}
	}
	n, err := bw.end()
	if err != nil {
		return n, fmt.Errorf("state: writing snapshot of checkpoint %d: %w", s.checkpointID, err)
	}
	stats.Bytes = n
	s.stats.Store(stats)
	return n, nil
}

// failure returns the first error a view met reading its store.
func (s *KeyedSnapshot) failure() error {
	for _, v := range s.views {
		if f, ok := v.(interface{ failure() error }); ok {
			if err := f.failure(); err != nil {
				return err
			}
		}
	}
	return nil
}

// State flags in a snapshot's header.
const (
	flagNamespaced = 1
	// flagInLSM marks a state of a native snapshot whose entries are in
	// the embedded LSM store's files, not in the blob's blocks.
	flagInLSM = 2
	// flagTTL marks a state with a time to live.
	flagTTL = 4
	// flagSchema marks a state whose value schema follows its flags
	// (evolve.go): the value schema, then the map key schema.
	flagSchema = 8
)

func appendStateInfo(dst []byte, inf stateInfo, inLSM bool, sch stateSchema) []byte {
	dst = appendString(dst, inf.name)
	var flags byte
	if inf.namespaced {
		flags |= flagNamespaced
	}
	if inLSM {
		flags |= flagInLSM
	}
	if inf.ttl {
		flags |= flagTTL
	}
	if !sch.empty() {
		flags |= flagSchema
	}
	dst = append(dst, byte(inf.kind), flags)
	if !sch.empty() {
		dst = appendBytes(appendBytes(dst, sch.value), sch.key)
	}
	return dst
}

func (d *decoder) stateInfo() (stateInfo, bool, stateSchema) {
	name := string(d.bytes())
	kind := stateKind(d.byte())
	flags := d.byte()
	if d.err == nil && (kind < kindValue || kind > kindTimers || flags > flagNamespaced|flagInLSM|flagTTL|flagSchema || flags&(flagTTL|flagSchema) != 0 && kind == kindTimers) {
		d.err = corrupt("state %q has kind %d, flags %#x", name, kind, flags)
	}
	var sch stateSchema
	if flags&flagSchema != 0 {
		// Empty stands for unknown: a schema is never empty.
		if v := d.bytes(); len(v) > 0 {
			sch.value = slices.Clone(v)
		}
		if k := d.bytes(); len(k) > 0 {
			sch.key = slices.Clone(k)
		}
	}
	return stateInfo{name: name, kind: kind, namespaced: flags&flagNamespaced != 0, ttl: flags&flagTTL != 0}, flags&flagInLSM != 0, sch
}

// KeyedSnapshotInfo describes a serialized keyed snapshot, as read from its
// header.
type KeyedSnapshotInfo struct {
	CheckpointID   int64
	MaxParallelism int
	KeyGroups      KeyGroupRange
	// States names the states in the snapshot.
	States []string
}

type keyedHeader struct {
	KeyedSnapshotInfo
	infos   []stateInfo
	schemas []stateSchema
	// inLSM marks the states whose entries are in the files of a native
	// snapshot.
	inLSM []bool
}

// native reports whether the header is a native snapshot's: some of its
// states are in the store's files.
func (h *keyedHeader) native() bool {
	for _, in := range h.inLSM {
		if in {
			return true
		}
	}
	return false
}

func readKeyedHeader(br *blobReader) (*keyedHeader, error) {
	p, err := br.header(blobKeyed)
	if err != nil {
		return nil, err
	}
	return decodeKeyedHeader(&decoder{b: p}, &keyedHeader{})
}

// decodeKeyedHeader decodes the payload of a keyed snapshot's header (or
// what follows a delta's base) into h.
func decodeKeyedHeader(d *decoder, h *keyedHeader) (*keyedHeader, error) {
	h.CheckpointID = d.varint()
	h.MaxParallelism = d.int(config.UpperBoundMaxParallelism, "maxParallelism")
	h.KeyGroups.Start = d.int(config.UpperBoundMaxParallelism, "key group")
	h.KeyGroups.End = d.int(config.UpperBoundMaxParallelism, "key group")
	n := d.int(len(d.b), "state count")
	for range n {
		if d.err != nil {
			break
		}
		inf, inLSM, sch := d.stateInfo()
		h.infos = append(h.infos, inf)
		h.schemas = append(h.schemas, sch)
		h.inLSM = append(h.inLSM, inLSM)
		h.States = append(h.States, inf.name)
	}
	switch {
	case d.err != nil:
		return nil, fmt.Errorf("header: %w", d.err)
	case len(d.b) != 0:
		return nil, corrupt("header has %d trailing bytes", len(d.b))
	case h.MaxParallelism == 0 || h.KeyGroups.Len() == 0 || h.KeyGroups.End >= h.MaxParallelism:
		return nil, corrupt("header has key groups %v of %d", h.KeyGroups, h.MaxParallelism)
	}
	seen := make(map[string]bool, len(h.infos))
	for _, inf := range h.infos {
		if seen[inf.name] {
			return nil, corrupt("header names state %q twice", inf.name)
		}
		seen[inf.name] = true
	}
	return h, nil
}

// ReadKeyedSnapshotInfo reads the header of a serialized keyed snapshot.
func ReadKeyedSnapshotInfo(r io.Reader) (KeyedSnapshotInfo, error) {
	h, err := readKeyedHeader(newBlobReader(r))
	if err != nil {
		return KeyedSnapshotInfo{}, err
	}
	return h.KeyedSnapshotInfo, nil
}

// Restore loads the key groups of the backend's range from a serialized
// keyed snapshot. After a rescale, a subtask calls it once for each old
// snapshot whose key groups overlap its own; each key group may be restored
// only once. Restore before processing any record.
//
// Into a heap backend, the whole blob is read and verified (checksums,
// block sequence, block count, entry structure) before anything is
// loaded, so a corrupt or truncated blob changes nothing. A backend
// created WithPebble loads each key group's block once it is verified,
// holding one at a time, so a blob far larger than its memory restores;
// a corrupt one found there leaves it partly loaded. Entries of
// registered states are decoded with their codecs during the load;
// entries of states not registered yet are kept as bytes (in the store,
// for a backend created WithPebble) and decoded when the state is
// registered. If the load fails, the error is returned and the backend,
// partly loaded, must be discarded.
func (b *KeyedBackend[K]) Restore(r io.Reader) error {
	return b.RestoreKeyGroups(r, b.kgs)
}

// RestoreKeyGroups is Restore limited to the key groups in kgs.
func (b *KeyedBackend[K]) RestoreKeyGroups(r io.Reader, kgs KeyGroupRange) error {
	if err := b.restore(r, kgs.Intersect(b.kgs)); err != nil {
		return fmt.Errorf("state: restoring keyed state: %w", err)
	}
	return nil
}

type keyedBlock struct {
	kgIdx int
	segs  []blockSegment
}

// blockSegment is the part of a key group block holding one state's
// entries.
type blockSegment struct {
	state int
	rawSegment
}

func (b *KeyedBackend[K]) restore(r io.Reader, want KeyGroupRange) error {
	if b.lsm != nil {
		return b.restoreStreaming(r, want)
	}
	h, blocks, err := b.parse(r, want)
	if err != nil {
		return err
	}
	if h.native() {
		return errNative(h)
	}
	_, _, err = b.load(h, blocks, false)
	return err
}

func errNative(h *keyedHeader) error {
	return fmt.Errorf("snapshot of checkpoint %d is a native snapshot of an embedded LSM store: restore it with its files (RestoreNative)", h.CheckpointID)
}

// restoreStreaming is restore for a backend created WithPebble, whose
// state may be far larger than its memory: each key group's block is
// loaded into the store as it is read and verified, so a restore holds
// one block at a time. A blob that turns out corrupt or truncated leaves
// the backend partly loaded: it must be discarded, as after any failed
// restore.
func (b *KeyedBackend[K]) restoreStreaming(r io.Reader, want KeyGroupRange) error {
	var (
		targets []keyedState
		evs     []*evolution
	)
	return b.parseEach(r, want, func(h *keyedHeader) error {
		if h.native() {
			return errNative(h)
		}
		var err error
		targets, evs, err = b.prepare(h, false)
		return err
	}, func(blk keyedBlock) error {
		return b.loadBlock(targets, evs, blk)
	})
}

// parse reads and verifies a serialized keyed snapshot, keeping the
// blocks of the key groups in want.
func (b *KeyedBackend[K]) parse(r io.Reader, want KeyGroupRange) (*keyedHeader, []keyedBlock, error) {
	var (
		h      *keyedHeader
		blocks []keyedBlock
	)
	err := b.parseEach(r, want, func(hdr *keyedHeader) error {
		h = hdr
		return nil
	}, func(blk keyedBlock) error {
		blocks = append(blocks, blk)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return h, blocks, nil
}

// parseEach reads and verifies a serialized keyed snapshot, calling
// header with its header and then each with the blocks of the key groups
// in want, in order, each once it is verified. An error of theirs stops
// it.
func (b *KeyedBackend[K]) parseEach(r io.Reader, want KeyGroupRange, header func(*keyedHeader) error, each func(keyedBlock) error) error {
	br := newBlobReader(r)
	h, err := readKeyedHeader(br)
	if err != nil {
		return err
	}
	if h.MaxParallelism != b.maxP {
		return fmt.Errorf("snapshot of checkpoint %d has %d key groups, this backend %d: maxParallelism cannot change",
			h.CheckpointID, h.MaxParallelism, b.maxP)
	}
	if err := header(h); err != nil {
		return err
	}
	next := h.KeyGroups.Start
	for {
		kg, payload, ok, err := br.next()
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		if kg != next || kg > h.KeyGroups.End {
			return corrupt("block for key group %d where %d was expected (snapshot range %v)", kg, next, h.KeyGroups)
		}
		next++
		if !want.Contains(kg) {
			continue
		}
		segs, err := parseKeyedBlock(payload, len(h.infos))
		if err != nil {
			return fmt.Errorf("key group %d: %w", kg, err)
		}
		if b.restored[kg-b.kgs.Start] {
			return fmt.Errorf("key group %d restored twice", kg)
		}
		if err := each(keyedBlock{kg - b.kgs.Start, segs}); err != nil {
			return err
		}
	}
	if next != h.KeyGroups.End+1 {
		return corrupt("snapshot ends after key group %d of %v", next-1, h.KeyGroups)
	}
	return nil
}

// load fills the backend from a verified snapshot's header and blocks. It
// returns, by the header's index, the backend's state of each of the
// snapshot's states (placeholders for those not registered yet), and how
// the entries of each registered one are rewritten into its current
// layout (nil: as they are).
// adopting says the snapshot's states in the store are the backend's rows
// now (adopt).
func (b *KeyedBackend[K]) load(h *keyedHeader, blocks []keyedBlock, adopting bool) ([]keyedState, []*evolution, error) {
	targets, evs, err := b.prepare(h, adopting)
	if err != nil {
		return nil, nil, err
	}
	for _, blk := range blocks {
		if err := b.loadBlock(targets, evs, blk); err != nil {
			return nil, nil, err
		}
	}
	return targets, evs, nil
}

// prepare returns what load does for the snapshot with header h, before
// any block is loaded: the backend's state of each of its states
// (placeholders made for those not registered yet) and their evolutions.
func (b *KeyedBackend[K]) prepare(h *keyedHeader, adopting bool) ([]keyedState, []*evolution, error) {
	targets := make([]keyedState, len(h.infos))
	evs := make([]*evolution, len(h.infos))
	for i, inf := range h.infos {
		j, ok := b.byName[inf.name]
		if !ok {
			j = len(b.states)
			raw, err := b.newRaw(inf, j)
			if err != nil {
				return nil, nil, err
			}
			b.byName[inf.name] = j
			b.states = append(b.states, raw)
			b.layouts[inf.name] = layout{stateSchema: h.schemas[i]}
		}
		if got := b.states[j].info(); got != inf {
			return nil, nil, fmt.Errorf("snapshot has %v, backend has %v", inf, got)
		}
		if raw, ok := b.states[j].(*rawState); ok {
			// Placeholders keep the bytes of one schema, evolved on
			// registration: the snapshots of one state must agree.
			if prev := b.layouts[inf.name]; !bytes.Equal(prev.value, h.schemas[i].value) || !bytes.Equal(prev.key, h.schemas[i].key) {
				return nil, nil, fmt.Errorf("%v: the snapshots restored disagree on its schema", inf)
			}
			raw.inStore = raw.inStore || adopting && h.inLSM[i]
		} else {
			// Registered before the restore: rewrite into its layout.
			ev, err := planEvolution(inf, h.schemas[i], b.layouts[inf.name])
			if err != nil {
				return nil, nil, err
			}
			evs[i] = ev
		}
		targets[i] = b.states[j]
	}
	return targets, evs, nil
}

// loadBlock loads the block of one key group into targets (see prepare).
func (b *KeyedBackend[K]) loadBlock(targets []keyedState, evs []*evolution, blk keyedBlock) error {
	b.restored[blk.kgIdx] = true
	for _, seg := range blk.segs {
		st := targets[seg.state]
		if ev := evs[seg.state]; ev != nil {
			var err error
			if seg.rawSegment, err = ev.segment(seg.rawSegment); err != nil {
				return fmt.Errorf("key group %d: %w", blk.kgIdx+b.kgs.Start, err)
			}
		}
		if err := st.restoreGroup(blk.kgIdx, seg.n, seg.data); err != nil {
			return fmt.Errorf("%v, key group %d: %w", st.info(), blk.kgIdx+b.kgs.Start, err)
		}
	}
	return nil
}

// parseKeyedBlock splits a key group's payload into the segments of each
// state, verifying its structure.
func parseKeyedBlock(p []byte, states int) ([]blockSegment, error) {
	if states == 0 && len(p) > 0 {
		return nil, corrupt("entries in a snapshot without states")
	}
	var segs []blockSegment
	d := &decoder{b: p}
	last := -1
	for len(d.b) > 0 {
		i := d.int(states-1, "state index")
		if d.err == nil && i <= last {
			return nil, corrupt("state %d after state %d", i, last)
		}
		last = i
		n := d.int(len(d.b), "entry count")
		start := d.b
		for range n {
			d.bytes()
			d.bytes()
			d.bytes()
			if d.err != nil {
				break
			}
		}
		if d.err != nil {
			return nil, d.err
		}
		used := len(start) - len(d.b)
		segs = append(segs, blockSegment{i, rawSegment{n: n, data: start[:used:used]}})
	}
	return segs, nil
}
