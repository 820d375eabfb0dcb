package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/weirstream/weir/codec"
)

// TTLConfig gives a keyed state's values a time to live, as Flink's
// StateTtlConfig does: a value (a list's element, a map's entry) expires
// TTL after it was last written, or read too with UpdateOnReadAndWrite,
// by the backend's processing time (WithProcessingTime). An expired value
// is removed when it is read, and in the background (below).
//
// Background cleanup, on unless DisableCleanupInBackground, removes
// expired values that are never read again, so that they do not stay in
// memory, in the store and in every checkpoint:
//
//   - On the heap (Flink's cleanupIncrementally), every access to the
//     state (and, with CleanupEveryRecord, every SetCurrentKey) first
//     checks the next CleanupSize entries of a cursor that goes round
//     the state's key groups and shards, and removes the expired values
//     among them. An entry the cursor passes may have moved by then (its
//     shard split); the cursor is lazy, not exact: it checks every entry
//     that stays in place while it goes round once.
//   - On Pebble, which has no compaction filter, every SweepRows
//     accesses (and SetCurrentKeys, with CleanupEveryRecord) one step
//     reads the next SweepRows rows of the state in the store, in key
//     order round its key groups, and deletes the expired ones (through
//     the write-back cache: a row the cache holds is judged by the
//     cache's version). Unlike Flink's cleanupInRocksdbCompactFilter,
//     which drops expired entries when compaction rewrites them (so at no
//     cost of its own, but only as often as files are compacted), the
//     sweep reads the rows itself, on the subtask's goroutine, at a
//     bounded cost per access; the option is named after what it does.
//
// CleanupFullSnapshot (Flink's cleanupFullSnapshot) also leaves out of a
// canonical snapshot (Snapshot, on both backends) the values that have
// expired at the snapshot's time, read once on the subtask's goroutine at
// the barrier; the state itself keeps them until a read or the
// background cleanup removes them. A native snapshot of a Pebble backend
// (NativeSnapshot: incremental checkpoints) ships the store's files as
// they are, expired rows included, as Flink's incremental RocksDB
// checkpoints do; the sweep removes them from later files.
//
// A snapshot holds what the state holds (less, with CleanupFullSnapshot);
// the values it keeps expire after a restore as they would have.
//
// A state with a time to live stores each value with its time, so it
// restores only into a state with a time to live, and the other way
// round: adding or removing the TTL of a state between a checkpoint and
// the code that restores it fails the restore, naming the state. The
// duration and the cleanup options may change.
type TTLConfig struct {
	// TTL is how long a value lives; it must be positive.
	TTL time.Duration
	// Update says what renews a value's time: UpdateOnCreateAndWrite (the
	// default) or UpdateOnReadAndWrite.
	Update TTLUpdate
	// Visibility says whether a read returns an expired value:
	// NeverReturnExpired (the default) or ReturnExpiredIfNotCleanedUp,
	// which returns it once and removes it (if the background cleanup
	// has not removed it first).
	Visibility TTLVisibility

	// CleanupFullSnapshot leaves values expired at a canonical snapshot's
	// time out of the snapshot. Default false, as in Flink.
	CleanupFullSnapshot bool
	// DisableCleanupInBackground turns the background cleanup off: an
	// expired value is then removed only when it is read (or left out of
	// a snapshot with CleanupFullSnapshot). It cannot be combined with
	// the options below.
	DisableCleanupInBackground bool
	// CleanupSize is the number of entries that each access checks on
	// the heap; 0 is DefaultTTLCleanupSize (Flink's default, 5).
	CleanupSize int
	// CleanupEveryRecord runs the background cleanup on every
	// SetCurrentKey (every record of a keyed operator) too, not only on
	// accesses to the state: Flink's runCleanupForEveryRecord. Default
	// false.
	CleanupEveryRecord bool
	// SweepRows is the number of rows one step of the Pebble sweep reads,
	// one step every SweepRows accesses; 0 is DefaultTTLSweepRows.
	SweepRows int
}

// Defaults of TTLConfig's background cleanup.
const (
	// DefaultTTLCleanupSize is the number of entries each access checks
	// on the heap (Flink's cleanupIncrementally default).
	DefaultTTLCleanupSize = 5
	// DefaultTTLSweepRows is the number of rows a step of the Pebble
	// sweep reads, once per as many accesses: one row per access, in
	// batches that pay for opening an iterator.
	DefaultTTLSweepRows = 1000
)

// TTLUpdate says what renews a value's time to live.
type TTLUpdate uint8

const (
	// UpdateOnCreateAndWrite renews it when the value is written.
	UpdateOnCreateAndWrite TTLUpdate = iota
	// UpdateOnReadAndWrite renews it when the value is read, too.
	UpdateOnReadAndWrite
)

// TTLVisibility says whether a read returns an expired value.
type TTLVisibility uint8

const (
	// NeverReturnExpired never returns an expired value.
	NeverReturnExpired TTLVisibility = iota
	// ReturnExpiredIfNotCleanedUp returns an expired value that is still
	// stored (and removes it).
	ReturnExpiredIfNotCleanedUp
)

func (c *TTLConfig) check() error {
	switch {
	case c.TTL <= 0:
		return fmt.Errorf("a time to live of %v: it must be positive", c.TTL)
	case c.Update > UpdateOnReadAndWrite:
		return fmt.Errorf("TTL update type %d: want UpdateOnCreateAndWrite or UpdateOnReadAndWrite", c.Update)
	case c.Visibility > ReturnExpiredIfNotCleanedUp:
		return fmt.Errorf("TTL visibility %d: want NeverReturnExpired or ReturnExpiredIfNotCleanedUp", c.Visibility)
	case c.CleanupSize < 0:
		return fmt.Errorf("TTL CleanupSize %d: want 0 (the default, %d) or more", c.CleanupSize, DefaultTTLCleanupSize)
	case c.SweepRows < 0:
		return fmt.Errorf("TTL SweepRows %d: want 0 (the default, %d) or more", c.SweepRows, DefaultTTLSweepRows)
	case c.DisableCleanupInBackground && (c.CleanupSize != 0 || c.CleanupEveryRecord || c.SweepRows != 0):
		return errors.New("TTL DisableCleanupInBackground with CleanupSize, CleanupEveryRecord or SweepRows: the background cleanup is either off or configured")
	}
	return nil
}

// WithProcessingTime sets the clock that times to live follow, in Unix
// milliseconds; the default is the system's clock.
func WithProcessingTime(now func() int64) BackendOption {
	return func(c *backendConfig) { c.now = now }
}

// stamped is a value with the processing time it was last written (or
// read) at.
type stamped[T any] struct {
	v  T
	ts int64
}

// stampedCodec encodes a stamped value: its time, then the value.
type stampedCodec[T any] struct{ c codec.Codec[T] }

func (s stampedCodec[T]) Append(dst []byte, v stamped[T]) []byte {
	return s.c.Append(binary.AppendVarint(dst, v.ts), v.v)
}

func (s stampedCodec[T]) Decode(src []byte) (stamped[T], int, error) {
	ts, n := binary.Varint(src)
	if n <= 0 {
		return stamped[T]{}, 0, errors.New("state: a value without its time to live's timestamp")
	}
	v, m, err := s.c.Decode(src[n:])
	return stamped[T]{v, ts}, n + m, err
}

// ttl is what the handles of a state with a time to live share.
type ttl struct {
	cfg TTLConfig
	now func() int64
	// clean is the state's background cleanup (ttlcleanup.go), nil if it
	// is disabled.
	clean cleaner
}

func (t *ttl) expired(ts int64) bool { return t.now()-ts >= t.cfg.TTL.Milliseconds() }

// cutoff returns the latest time of an expired value, now.
func (t *ttl) cutoff() int64 { return t.now() - t.cfg.TTL.Milliseconds() }

// touch runs a step of the background cleanup, as every access does
// before it reads or writes.
func (t *ttl) touch() {
	if t.clean != nil {
		t.clean.step()
	}
}

// visible reports whether a stored value of time ts is returned by a read.
func (t *ttl) visible(ts int64) bool {
	return !t.expired(ts) || t.cfg.Visibility == ReturnExpiredIfNotCleanedUp
}

func newTTL[K comparable](b *KeyedBackend[K], name string, c *TTLConfig) (*ttl, error) {
	if err := c.check(); err != nil {
		return nil, fmt.Errorf("state: %q: %w", name, err)
	}
	return &ttl{cfg: *c, now: b.now}, nil
}

type ttlValue[T any] struct {
	*ttl
	s ValueState[stamped[T]]
}

func ttlValueOf[K comparable, T any](b *KeyedBackend[K], d ValueDescriptor[T]) (ValueState[T], error) {
	t, err := newTTL(b, d.Name, d.TTL)
	if err != nil {
		return nil, err
	}
	c, err := orFor(d.Codec)
	if err != nil {
		return nil, fmt.Errorf("state: %q: %w", d.Name, err)
	}
	s, err := valueOf(b, ValueDescriptor[stamped[T]]{Name: d.Name, Codec: stampedCodec[T]{c}}, &ttlHook[stamped[T]]{t, stampOf[T]})
	if err != nil {
		return nil, err
	}
	return &ttlValue[T]{t, s}, nil
}

func (s *ttlValue[T]) Value() (T, bool) {
	s.touch()
	e, ok := s.s.Value()
	switch {
	case !ok:
		var zero T
		return zero, false
	case s.expired(e.ts):
		s.s.Clear()
		if !s.visible(e.ts) {
			var zero T
			return zero, false
		}
	case s.cfg.Update == UpdateOnReadAndWrite:
		s.s.Update(stamped[T]{e.v, s.now()})
	}
	return e.v, true
}

func (s *ttlValue[T]) Update(v T) {
	s.touch()
	s.s.Update(stamped[T]{v, s.now()})
}

func (s *ttlValue[T]) Clear() {
	s.touch()
	s.s.Clear()
}

type ttlList[T any] struct {
	*ttl
	s ListState[stamped[T]]
}

func ttlListOf[K comparable, T any](b *KeyedBackend[K], d ListDescriptor[T]) (ListState[T], error) {
	t, err := newTTL(b, d.Name, d.TTL)
	if err != nil {
		return nil, err
	}
	c, err := orFor(d.Codec)
	if err != nil {
		return nil, fmt.Errorf("state: %q: %w", d.Name, err)
	}
	s, err := listOf(b, ListDescriptor[stamped[T]]{Name: d.Name, Codec: stampedCodec[T]{c}}, &ttlHook[stamped[T]]{t, stampOf[T]})
	if err != nil {
		return nil, err
	}
	return &ttlList[T]{t, s}, nil
}

// Get returns the elements that have not expired, and rewrites the list
// if some had (or, with UpdateOnReadAndWrite, to renew them).
func (s *ttlList[T]) Get() []T {
	s.touch()
	l := s.s.Get()
	if len(l) == 0 {
		return nil
	}
	out := make([]T, 0, len(l))
	kept := make([]stamped[T], 0, len(l))
	now := s.now()
	for _, e := range l {
		if s.visible(e.ts) {
			out = append(out, e.v)
		}
		if !s.expired(e.ts) {
			if s.cfg.Update == UpdateOnReadAndWrite {
				e.ts = now
			}
			kept = append(kept, e)
		}
	}
	if len(kept) != len(l) || s.cfg.Update == UpdateOnReadAndWrite {
		s.s.Update(kept)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func (s *ttlList[T]) Add(v T) {
	s.touch()
	s.s.Add(stamped[T]{v, s.now()})
}

func (s *ttlList[T]) AddAll(vs []T) {
	s.touch()
	s.s.AddAll(s.stamp(vs))
}

func (s *ttlList[T]) Update(vs []T) {
	s.touch()
	s.s.Update(s.stamp(vs))
}

func (s *ttlList[T]) Clear() {
	s.touch()
	s.s.Clear()
}

func (s *ttlList[T]) stamp(vs []T) []stamped[T] {
	now := s.now()
	out := make([]stamped[T], len(vs))
	for i, v := range vs {
		out[i] = stamped[T]{v, now}
	}
	return out
}

type ttlMap[UK comparable, UV any] struct {
	*ttl
	s MapState[UK, stamped[UV]]
}

func ttlMapOf[K, UK comparable, UV any](b *KeyedBackend[K], d MapDescriptor[UK, UV]) (MapState[UK, UV], error) {
	t, err := newTTL(b, d.Name, d.TTL)
	if err != nil {
		return nil, err
	}
	vc, err := orFor(d.ValueCodec)
	if err != nil {
		return nil, fmt.Errorf("state: %q: %w", d.Name, err)
	}
	s, err := mapOf(b, MapDescriptor[UK, stamped[UV]]{Name: d.Name, KeyCodec: d.KeyCodec, ValueCodec: stampedCodec[UV]{vc}}, &ttlHook[stamped[UV]]{t, stampOf[UV]})
	if err != nil {
		return nil, err
	}
	return &ttlMap[UK, UV]{t, s}, nil
}

func (s *ttlMap[UK, UV]) Get(uk UK) (UV, bool) {
	s.touch()
	e, ok := s.s.Get(uk)
	switch {
	case !ok:
		var zero UV
		return zero, false
	case s.expired(e.ts):
		s.s.Remove(uk)
		if !s.visible(e.ts) {
			var zero UV
			return zero, false
		}
	case s.cfg.Update == UpdateOnReadAndWrite:
		s.s.Put(uk, stamped[UV]{e.v, s.now()})
	}
	return e.v, true
}

func (s *ttlMap[UK, UV]) Put(uk UK, uv UV) {
	s.touch()
	s.s.Put(uk, stamped[UV]{uv, s.now()})
}

func (s *ttlMap[UK, UV]) Remove(uk UK) {
	s.touch()
	s.s.Remove(uk)
}

func (s *ttlMap[UK, UV]) Contains(uk UK) bool {
	_, ok := s.Get(uk)
	return ok
}

// All iterates over the entries that have not expired, removing the
// expired ones it passes.
func (s *ttlMap[UK, UV]) All() iter.Seq2[UK, UV] {
	return func(yield func(UK, UV) bool) {
		s.touch()
		var gone []UK
		defer func() {
			for _, uk := range gone {
				s.s.Remove(uk)
			}
		}()
		for uk, e := range s.s.All() {
			visible := s.visible(e.ts)
			if s.expired(e.ts) {
				gone = append(gone, uk)
			}
			if visible && !yield(uk, e.v) {
				return
			}
		}
	}
}

func (s *ttlMap[UK, UV]) Len() int {
	n := 0
	for range s.All() {
		n++
	}
	return n
}

func (s *ttlMap[UK, UV]) IsEmpty() bool {
	for range s.All() {
		return false
	}
	return true
}

func (s *ttlMap[UK, UV]) Clear() {
	s.touch()
	s.s.Clear()
}

type ttlReducing[T any] struct {
	*ttl
	s ReducingState[stamped[T]]
}

func ttlReducingOf[K comparable, T any](b *KeyedBackend[K], d ReducingDescriptor[T]) (ReducingState[T], error) {
	t, err := newTTL(b, d.Name, d.TTL)
	if err != nil {
		return nil, err
	}
	if d.Reduce == nil {
		return nil, fmt.Errorf("state: %q needs a Reduce function", d.Name)
	}
	c, err := orFor(d.Codec)
	if err != nil {
		return nil, fmt.Errorf("state: %q: %w", d.Name, err)
	}
	reduce := func(acc, v stamped[T]) stamped[T] {
		if t.expired(acc.ts) {
			return v // an expired value is as none
		}
		return stamped[T]{d.Reduce(acc.v, v.v), v.ts}
	}
	s, err := reducingOf(b, ReducingDescriptor[stamped[T]]{Name: d.Name, Codec: stampedCodec[T]{c}, Reduce: reduce}, &ttlHook[stamped[T]]{t, stampOf[T]})
	if err != nil {
		return nil, err
	}
	return &ttlReducing[T]{t, s}, nil
}

func (s *ttlReducing[T]) Get() (T, bool) {
	s.touch()
	e, ok := s.s.Get()
	switch {
	case !ok:
		var zero T
		return zero, false
	case s.expired(e.ts):
		s.s.Clear()
		if !s.visible(e.ts) {
			var zero T
			return zero, false
		}
	case s.cfg.Update == UpdateOnReadAndWrite:
		// Reducing the value with itself is no renewal: write it anew.
		s.s.Clear()
		s.s.Add(stamped[T]{e.v, s.now()})
	}
	return e.v, true
}

func (s *ttlReducing[T]) Add(v T) {
	s.touch()
	s.s.Add(stamped[T]{v, s.now()})
}

func (s *ttlReducing[T]) Clear() {
	s.touch()
	s.s.Clear()
}

// ttlAggregate wraps an aggregate function so that its accumulator
// carries its time; an expired accumulator starts over.
type ttlAggregate[IN, ACC, OUT any] struct {
	t  *ttl
	fn AggregateFunction[IN, ACC, OUT]
	// lastTS is the time of the accumulator GetResult was last given.
	lastTS int64
}

func (a *ttlAggregate[IN, ACC, OUT]) CreateAccumulator() stamped[ACC] {
	return stamped[ACC]{a.fn.CreateAccumulator(), a.t.now()}
}

func (a *ttlAggregate[IN, ACC, OUT]) Add(v IN, acc stamped[ACC]) stamped[ACC] {
	if a.t.expired(acc.ts) {
		acc.v = a.fn.CreateAccumulator()
	}
	return stamped[ACC]{a.fn.Add(v, acc.v), a.t.now()}
}

func (a *ttlAggregate[IN, ACC, OUT]) GetResult(acc stamped[ACC]) OUT {
	a.lastTS = acc.ts
	return a.fn.GetResult(acc.v)
}

func (a *ttlAggregate[IN, ACC, OUT]) Merge(x, y stamped[ACC]) stamped[ACC] {
	return stamped[ACC]{a.fn.Merge(x.v, y.v), max(x.ts, y.ts)}
}

type ttlAggregating[IN, ACC, OUT any] struct {
	*ttl
	s  AggregatingState[IN, OUT]
	fn *ttlAggregate[IN, ACC, OUT]
}

func ttlAggregatingOf[K comparable, IN, ACC, OUT any](b *KeyedBackend[K], d AggregatingDescriptor[IN, ACC, OUT]) (AggregatingState[IN, OUT], error) {
	t, err := newTTL(b, d.Name, d.TTL)
	if err != nil {
		return nil, err
	}
	if d.Function == nil {
		return nil, fmt.Errorf("state: %q needs a Function", d.Name)
	}
	c, err := orFor(d.AccCodec)
	if err != nil {
		return nil, fmt.Errorf("state: %q: %w", d.Name, err)
	}
	fn := &ttlAggregate[IN, ACC, OUT]{t: t, fn: d.Function}
	s, err := aggregatingOf(b, AggregatingDescriptor[IN, stamped[ACC], OUT]{Name: d.Name, Function: fn, AccCodec: stampedCodec[ACC]{c}}, &ttlHook[stamped[ACC]]{t, stampOf[ACC]})
	if err != nil {
		return nil, err
	}
	return &ttlAggregating[IN, ACC, OUT]{t, s, fn}, nil
}

// Get returns the result of an accumulator that has not expired. With
// UpdateOnReadAndWrite a read does not renew an accumulator: the state
// holds no way to rewrite one without adding to it.
func (s *ttlAggregating[IN, ACC, OUT]) Get() (OUT, bool) {
	s.touch()
	out, ok := s.s.Get()
	if ok && s.expired(s.fn.lastTS) {
		s.s.Clear()
		if !s.visible(s.fn.lastTS) {
			var zero OUT
			return zero, false
		}
	}
	return out, ok
}

func (s *ttlAggregating[IN, ACC, OUT]) Add(v IN) {
	s.touch()
	s.s.Add(v)
}

func (s *ttlAggregating[IN, ACC, OUT]) Clear() {
	s.touch()
	s.s.Clear()
}

// layout is the wrapped value's: the stamp is not part of the schema.
func (s stampedCodec[T]) layout() layout { return valueLayout(s.c) }
