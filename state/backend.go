package state

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"time"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/workdir"
)

// KeyedBackend is the keyed-state backend of one subtask: every keyed
// state of an operator, for the key groups the subtask owns, and its
// timers. By default the states live on the heap, in hash tables, and
// snapshot copy-on-write; created WithPebble, they live in an embedded
// LSM store on local disk (see lsm.go) and snapshot through it, and so
// do its timers unless PebbleOptions.HeapTimers (see lsmtimers.go). Both
// write the same snapshot format.
//
// A KeyedBackend belongs to the goroutine of its subtask: SetCurrentKey, the
// state handles, Snapshot, KeyedSnapshot.Release and Restore must all be
// called from it, one at a time. Only KeyedSnapshot.WriteTo runs on another
// goroutine, concurrently with the owner.
//
// On the heap, values are stored as given, not copied. A value passed to Update, Add,
// Put or AddAll belongs to the state from then on and must not be modified
// by the caller; a value returned by Value, Get or All must not be modified
// in place (modify a copy and Update it). Containers that the state builds
// itself (the list of a ListState, the map of a MapState, accumulators) are
// copied on write whenever a pending snapshot shares them, so mutating
// through the state API is always safe.
type KeyedBackend[K comparable] struct {
	keyCodec  codec.Codec[K]
	hasher    func(K) uint32
	maxP      int
	kgs       KeyGroupRange
	shardSize int
	ep        *epochs
	// nativeDirs are the directories NativeDir made and RestoreNative
	// has not taken over yet.
	nativeDirs map[string]*workdir.Dir

	// The current key, its hash and its key group relative to kgs.Start
	// (-1 before the first SetCurrentKey).
	key   K
	hash  uint32
	kgIdx int

	// keyEnc is the current key's length-prefixed encoding, valid if
	// keyEncOK (made on first use by a Pebble state).
	keyEnc   []byte
	keyEncOK bool

	// lsm holds the states of a backend created WithPebble; nil keeps
	// them on the heap.
	lsm *lsm
	// now is the processing time, in Unix milliseconds, that times to
	// live follow.
	now func() int64
	// onKey holds the background cleanups of states with a time to live
	// that run on every SetCurrentKey (TTLConfig.CleanupEveryRecord).
	onKey []cleaner
	// snapshotTime is set once a state leaves expired values out of
	// snapshots: Snapshot then reads the clock.
	snapshotTime bool

	states []keyedState
	byName map[string]int
	// layouts holds each state's layout, as registered or, for a state
	// not registered yet, its schema as restored (see evolve.go).
	layouts map[string]layout
	// restored marks the key groups that a Restore has filled.
	restored []bool
	// snapEpochs holds the epochs of recent snapshots by checkpoint, the
	// bases a delta may build on (delta.go), while the backend tracks
	// changes.
	snapEpochs map[int64]uint64
	// incremental says the backend tracks changes for delta snapshots
	// (WithIncrementalSnapshots).
	incremental bool
}

// BackendOption configures NewKeyedBackend.
type BackendOption func(*backendConfig)

type backendConfig struct {
	hasher      any
	incremental bool
	shardSize   int
	pebble      *PebbleOptions
	now         func() int64
}

// WithKeyHasher sets the function that hashes keys to key groups. The
// default is HasherFor[K]() when K has a codec.For codec, and otherwise a
// hash of the key codec's bytes. Whatever partitions records between
// subtasks must use the same function (see KeyedBackend.KeyHasher).
func WithKeyHasher[K comparable](h func(K) uint32) BackendOption {
	return func(c *backendConfig) { c.hasher = h }
}

// WithShardSize sets the number of entries at which a shard of a state
// table splits in two. Smaller shards make the first write after a snapshot
// cheaper (it copies one shard) at the cost of more shards to capture.
// Default 1024.
func WithShardSize(n int) BackendOption {
	return func(c *backendConfig) { c.shardSize = n }
}

// NewKeyedBackend returns an empty backend for the key groups kgs out of
// maxParallelism. A nil keyCodec means codec.For[K]().
func NewKeyedBackend[K comparable](keyCodec codec.Codec[K], maxParallelism int, kgs KeyGroupRange, opts ...BackendOption) (*KeyedBackend[K], error) {
	cfg := backendConfig{shardSize: defaultShardSize}
	for _, o := range opts {
		o(&cfg)
	}
	if maxParallelism <= 0 || maxParallelism > config.UpperBoundMaxParallelism {
		return nil, fmt.Errorf("state: maxParallelism %d out of (0, %d]", maxParallelism, config.UpperBoundMaxParallelism)
	}
	if kgs.Len() == 0 || kgs.Start < 0 || kgs.End >= maxParallelism {
		return nil, fmt.Errorf("state: key group range %v is empty or outside [0, %d)", kgs, maxParallelism)
	}
	if cfg.shardSize < 1 {
		return nil, fmt.Errorf("state: shard size %d must be positive", cfg.shardSize)
	}
	if keyCodec == nil {
		c, err := codec.For[K]()
		if err != nil {
			return nil, fmt.Errorf("state: key codec: %w", err)
		}
		keyCodec = c
	}
	b := &KeyedBackend[K]{
		keyCodec:  keyCodec,
		maxP:      maxParallelism,
		kgs:       kgs,
		shardSize: cfg.shardSize,
		ep:        newEpochs(),
		kgIdx:     -1,
		byName:    make(map[string]int),
		layouts:   make(map[string]layout),
		restored:  make([]bool, kgs.Len()),
	}
	switch h := cfg.hasher.(type) {
	case nil:
		b.hasher = scalarHasher[K]()
		if b.hasher == nil {
			if c, err := codec.For[K](); err == nil {
				b.hasher = HasherFromCodec(c)
			} else {
				b.hasher = HasherFromCodec(keyCodec)
			}
		}
	case func(K) uint32:
		b.hasher = h
	default:
		return nil, fmt.Errorf("state: WithKeyHasher got %T, want func(%v) uint32", h, reflect.TypeFor[K]())
	}
	b.incremental = cfg.incremental
	b.now = cfg.now
	if b.now == nil {
		b.now = func() int64 { return time.Now().UnixMilli() }
	}
	if cfg.pebble != nil {
		l, err := openLSM(*cfg.pebble)
		if err != nil {
			return nil, err
		}
		b.lsm = l
	}
	return b, nil
}

// KeyHasher returns the function the backend hashes keys with.
func (b *KeyedBackend[K]) KeyHasher() func(K) uint32 { return b.hasher }

// KeyCodec returns the codec of the backend's keys.
func (b *KeyedBackend[K]) KeyCodec() codec.Codec[K] { return b.keyCodec }

// MaxParallelism returns the number of key groups.
func (b *KeyedBackend[K]) MaxParallelism() int { return b.maxP }

// KeyGroups returns the key groups the backend holds.
func (b *KeyedBackend[K]) KeyGroups() KeyGroupRange { return b.kgs }

// SetCurrentKey sets the key that state handles read and write. It hashes
// k once; every state access until the next SetCurrentKey uses that hash.
// It panics if k belongs to a key group outside the backend's range, which
// means records were partitioned with another hash or key group layout.
func (b *KeyedBackend[K]) SetCurrentKey(k K) {
	b.SetCurrentKeyWithHash(k, b.hasher(k))
}

// SetCurrentKeyWithHash is SetCurrentKey for a caller that has already
// computed hash = KeyHasher()(k), for instance to partition the record.
func (b *KeyedBackend[K]) SetCurrentKeyWithHash(k K, hash uint32) {
	kg := KeyGroupFor(hash, b.maxP)
	if kg < b.kgs.Start || kg > b.kgs.End {
		panic(fmt.Sprintf("state: key %v is in key group %d, outside this backend's range %v (of %d): records were partitioned with a different key hash or parallelism",
			k, kg, b.kgs, b.maxP))
	}
	b.key, b.hash, b.kgIdx = k, hash, kg-b.kgs.Start
	b.keyEncOK = false
	for _, c := range b.onKey {
		c.step()
	}
}

// CurrentKey returns the current key (the zero K before SetCurrentKey).
func (b *KeyedBackend[K]) CurrentKey() K { return b.key }

// CurrentKeyGroup returns the current key's key group, or -1 before
// SetCurrentKey.
func (b *KeyedBackend[K]) CurrentKeyGroup() int {
	if b.kgIdx < 0 {
		return -1
	}
	return b.kgIdx + b.kgs.Start
}

// pos returns the current key's position, panicking if there is none.
func (b *KeyedBackend[K]) pos() (kgIdx int, hash uint32) {
	if b.kgIdx < 0 {
		panic("state: keyed state accessed before SetCurrentKey")
	}
	return b.kgIdx, b.hash
}

// PendingSnapshots returns the number of snapshots taken and not yet
// released.
func (b *KeyedBackend[K]) PendingSnapshots() int { return len(b.ep.pending) }

// StateNames returns the names of the states the backend holds, registered
// or restored, in registration order.
func (b *KeyedBackend[K]) StateNames() []string {
	names := make([]string, len(b.states))
	for i, s := range b.states {
		names[i] = s.info().name
	}
	return names
}

// stateKind is the kind of a keyed state, as recorded in snapshots.
type stateKind uint8

const (
	kindValue stateKind = iota + 1
	kindList
	kindMap
	kindReducing
	kindAggregating
	kindTimers
)

func (k stateKind) String() string {
	switch k {
	case kindValue:
		return "value"
	case kindList:
		return "list"
	case kindMap:
		return "map"
	case kindReducing:
		return "reducing"
	case kindAggregating:
		return "aggregating"
	case kindTimers:
		return "timers"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

type stateInfo struct {
	name       string
	kind       stateKind
	namespaced bool
	// ttl marks a state with a time to live: its values carry the time
	// they were last written (or read), so it restores only as such.
	ttl bool
}

func (i stateInfo) String() string {
	s := fmt.Sprintf("%s state %q", i.kind, i.name)
	if i.namespaced {
		s += " (namespaced)"
	}
	if i.ttl {
		s += " (with a time to live)"
	}
	return s
}

// keyedState is a state as the backend sees it: something to snapshot and
// to restore into.
type keyedState interface {
	info() stateInfo
	// capture returns an immutable view of the state for a snapshot taken
	// at processing time now (read only if a state leaves expired values
	// out of snapshots). It is called on the owner goroutine and must not
	// copy entries.
	capture(now int64) stateView
	// restoreGroup adds n entries of key group kgIdx (relative to the
	// backend's range), laid out in data as in a snapshot block (each a
	// length-prefixed key, namespace and value).
	restoreGroup(kgIdx, n int, data []byte) error
}

// stateView is a snapshot of one state; its methods run on the goroutine
// that serializes the snapshot.
type stateView interface {
	groupLen(kgIdx int) int
	// appendGroup appends the entries of key group kgIdx, each as
	// length-prefixed key, namespace and value bytes.
	appendGroup(dst []byte, kgIdx int) []byte
}

var errRegistered = errors.New("state: registered with a different kind or types")

// register returns the state named info.name, creating it with build if
// needed and filling it with entries restored for it.
func register[K comparable, S keyedState](b *KeyedBackend[K], info stateInfo, lay layout, build func() S) (S, error) {
	var zero S
	if info.name == "" {
		return zero, errors.New("state: a state needs a name")
	}
	i, ok := b.byName[info.name]
	if ok {
		if s, ok := b.states[i].(S); ok && s.info() == info {
			return s, nil
		}
		if raw, ok := b.states[i].(*rawState); !ok {
			return zero, fmt.Errorf("%w: %v is already a %v", errRegistered, info, b.states[i].info())
		} else if raw.inf != info {
			return zero, fmt.Errorf("state: %v was restored as a %v", info, raw.inf)
		}
	}
	s := build()
	if ok {
		raw := b.states[i].(*rawState)
		ev, err := planEvolution(info, b.layouts[info.name].stateSchema, lay)
		if err != nil {
			return zero, fmt.Errorf("state: restoring %w", err)
		}
		if l, ok := any(s).(*lsmState[K]); ok && ev != nil && raw.inStore {
			// An adopted native snapshot's rows are in the store.
			if err := l.evolveRows(ev); err != nil {
				return zero, fmt.Errorf("state: restoring %w", err)
			}
		}
		if a, ok := any(s).(interface{ adopted() error }); ok && raw.inStore {
			if err := a.adopted(); err != nil {
				return zero, fmt.Errorf("state: restoring %v: %w", info, err)
			}
		}
		apply := func(kgIdx int, segs []rawSegment) error {
			dt, direct := any(s).(deltaTarget)
			if merged(segs) && !direct {
				// A delta's removals, for a state that cannot apply
				// them: merge the key group's segments first.
				n, data := mergeRaw(segs)
				segs = []rawSegment{{n: n, data: data}}
			}
			for _, seg := range segs {
				if seg.op == opDel {
					// n == 0: the mark of a replaced key group, whose
					// earlier segments are gone.
					if seg.n > 0 {
						if err := dt.removeGroup(kgIdx, seg.n, seg.data); err != nil {
							return err
						}
					}
					continue
				}
				if ev != nil {
					var err error
					if seg, err = ev.segment(seg); err != nil {
						return err
					}
				}
				if err := s.restoreGroup(kgIdx, seg.n, seg.data); err != nil {
					return err
				}
			}
			return nil
		}
		for kgIdx := range b.kgs.Len() {
			var err error
			switch _, direct := any(s).(deltaTarget); {
			case raw.stage == nil:
				err = apply(kgIdx, raw.groups[kgIdx])
			case direct || !raw.stage.merging:
				// One staged row at a time.
				err = raw.stage.each(b.lsm.db, kgIdx, func(seg rawSegment) error {
					// The iterator's bytes; a state may keep what
					// it decodes from them.
					seg.data = append([]byte(nil), seg.data...)
					return apply(kgIdx, []rawSegment{seg})
				})
			default:
				var segs []rawSegment
				if segs, err = raw.stage.segments(b.lsm.db, kgIdx); err == nil {
					err = apply(kgIdx, segs)
				}
			}
			if err != nil {
				return zero, fmt.Errorf("state: restoring %v in key group %d: %w", info, kgIdx+b.kgs.Start, err)
			}
		}
		if raw.stage != nil && raw.stage.rows > 0 {
			if err := raw.stage.drop(); err != nil {
				return zero, fmt.Errorf("state: restoring %v: %w", info, err)
			}
		}
		b.states[i] = s
		b.layouts[info.name] = lay
		return s, nil
	}
	b.layouts[info.name] = lay
	b.byName[info.name] = len(b.states)
	b.states = append(b.states, s)
	return s, nil
}

// newRaw returns the placeholder of a restored state, info, not
// registered yet, at index idx of the backend's states.
func (b *KeyedBackend[K]) newRaw(info stateInfo, idx int) (*rawState, error) {
	r := &rawState{inf: info}
	if b.lsm == nil {
		r.groups = make([][]rawSegment, b.kgs.Len())
		return r, nil
	}
	if idx >= math.MaxUint16 {
		return nil, fmt.Errorf("more than %d states in one backend", math.MaxUint16)
	}
	id := uint16(idx)
	r.stage = &rawStage{store: func() *lsm { return b.lsm }, id: id}
	kgStart := b.kgs.Start
	r.rows = func(rd pebbleReader) *lsmView {
		return &lsmView{r: rd, id: id, kgStart: kgStart, isMap: info.kind == kindMap, timers: info.kind == kindTimers, kg: -1}
	}
	return r, nil
}

// orFor returns c, or codec.For[T]() if c is nil.
func orFor[T any](c codec.Codec[T]) (codec.Codec[T], error) {
	if c != nil {
		return c, nil
	}
	return codec.For[T]()
}

// checkKeyGroup verifies that a restored key hashes to the key group it was
// stored under; a mismatch means the key hash function changed.
func (b *KeyedBackend[K]) checkKeyGroup(kgIdx int, h uint32) error {
	if kg := KeyGroupFor(h, b.maxP); kg != kgIdx+b.kgs.Start {
		return fmt.Errorf("%w: key stored in key group %d hashes to key group %d (did the key type or its hash change?)",
			ErrCorrupt, kgIdx+b.kgs.Start, kg)
	}
	return nil
}
