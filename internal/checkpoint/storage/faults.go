package storage

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"path"
	"strings"
	"sync"
)

// ErrInjected is the error a Fault with Action Fail returns when it has no
// Err of its own.
var ErrInjected = errors.New("injected fault")

// Op is a kind of storage operation a Fault applies to; Ops combine with |.
type Op uint8

const (
	// OpWrite is writing an object: a state file or _metadata.
	OpWrite Op = 1 << iota
	// OpRead is reading an object.
	OpRead
	// OpStat is looking up an object's size.
	OpStat
	// OpList is listing a directory.
	OpList
	// OpDelete is deleting an object.
	OpDelete

	// OpAll is every operation.
	OpAll = OpWrite | OpRead | OpStat | OpList | OpDelete
)

func (o Op) String() string {
	var names []string
	for _, n := range []struct {
		op   Op
		name string
	}{{OpWrite, "write"}, {OpRead, "read"}, {OpStat, "stat"}, {OpList, "list"}, {OpDelete, "delete"}} {
		if o&n.op != 0 {
			names = append(names, n.name)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, "|")
}

// Action is what a Fault does to an operation it hits.
type Action uint8

const (
	// Fail makes the operation return an error wrapping the Fault's Err. A
	// failed write fails at Close and stores nothing.
	Fail Action = iota
	// Drop loses the operation without a word: a write reports success and
	// stores nothing, a delete reports success and deletes nothing, a read
	// or stat finds no object, a list finds nothing.
	Drop
	// Truncate cuts the object at Offset bytes (a negative Offset counts
	// from the end): a write stores only the bytes before it and reports
	// success, a read ends there. Other operations fail as with Fail.
	Truncate
	// FlipBit inverts the low bit of the byte at Offset (a negative Offset
	// counts from the end; past the end means the last byte) of what is
	// written or read. Other operations fail as with Fail.
	FlipBit
)

func (a Action) String() string {
	switch a {
	case Fail:
		return "fail"
	case Drop:
		return "drop"
	case Truncate:
		return "truncate"
	case FlipBit:
		return "flip-bit"
	}
	return "unknown"
}

// A Fault says which storage operations to disturb and how.
type Fault struct {
	// Op is the operations the fault applies to. Zero means OpAll.
	Op Op
	// Path is a path.Match pattern matched against the trailing elements
	// of an object's key: "_metadata" hits every metadata file, "chk-7/*"
	// every file of checkpoint 7, "*/_metadata" the metadata of every
	// checkpoint and savepoint. Empty matches every key. Lists match
	// against the listed directory's key with a trailing "/".
	Path string
	// After lets the first After matching operations through.
	After int
	// Times is how many operations the fault hits before it stops; zero
	// means every matching operation.
	Times int
	// Probability, when in (0, 1), hits a matching operation with that
	// chance, drawn from the Faults' seeded generator. Zero means always.
	Probability float64
	// Action is what happens to a hit operation.
	Action Action
	// Offset is where Truncate cuts and FlipBit flips.
	Offset int64
	// Err is the error Fail returns, wrapped with the object's path.
	// Default: ErrInjected.
	Err error
}

func (f *Fault) err() error {
	if f.Err != nil {
		return f.Err
	}
	return ErrInjected
}

func (f *Fault) matches(op Op, key string) bool {
	ops := f.Op
	if ops == 0 {
		ops = OpAll
	}
	if ops&op == 0 {
		return false
	}
	if f.Path == "" {
		return true
	}
	key = strings.TrimSuffix(key, "/")
	for {
		if ok, _ := path.Match(f.Path, key); ok {
			return true
		}
		i := strings.IndexByte(key, '/')
		if i < 0 {
			return false
		}
		key = key[i+1:]
	}
}

// apply returns b with the fault's Truncate or FlipBit applied; it may
// modify b.
func (f *Fault) apply(b []byte) []byte {
	n := int64(len(b))
	off := f.Offset
	if off < 0 {
		off += n
	}
	switch f.Action {
	case Truncate:
		off = max(0, min(off, n))
		return b[:off]
	case FlipBit:
		if n == 0 {
			return b
		}
		off = max(0, min(off, n-1))
		b[off] ^= 1
	}
	return b
}

// FaultEvent records one operation a Fault hit.
type FaultEvent struct {
	Op     Op
	Key    string // the object's key in its bucket
	Action Action
}

// Faults injects failures into a Storage's operations, in the manner of
// pebble's vfs/errorfs: pass it to Open with WithFaults, then add, and
// clear, Faults while the test runs. The first added Fault that matches an
// operation and is due hits it. Safe for concurrent use.
//
// Inline state (below the inline threshold) never reaches storage, so no
// Fault hits it; its corruption shows up in _metadata instead.
type Faults struct {
	mu     sync.Mutex
	rules  []*faultRule
	rng    *rand.Rand
	events []FaultEvent
	hook   Hook
}

// Hook is asked about every storage operation that no Fault hits, with
// the operation's context and its object's key: a non-nil error fails the
// operation as a Fault with Action Fail and that Err would. It may block,
// to make storage slow, until ctx is done. Hooks are called concurrently,
// from every goroutine that uses the Storage, without the Faults' lock.
type Hook func(ctx context.Context, op Op, key string) error

// NewHookFaults returns Faults that ask h about every operation. Faults
// added to it are checked first.
func NewHookFaults(seed uint64, h Hook) *Faults {
	f := NewFaults(seed)
	f.hook = h
	return f
}

type faultRule struct {
	Fault
	seen, hit int
}

// NewFaults returns Faults holding faults, whose Probability draws come
// from a generator seeded with seed.
func NewFaults(seed uint64, faults ...Fault) *Faults {
	f := &Faults{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	f.Add(faults...)
	return f
}

// Add appends faults; they are checked after the ones already there.
func (f *Faults) Add(faults ...Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ft := range faults {
		f.rules = append(f.rules, &faultRule{Fault: ft})
	}
}

// Clear removes every fault; operations run undisturbed from then on.
// The events recorded so far are kept.
func (f *Faults) Clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = nil
}

// Events returns the operations hit so far, in order.
func (f *Faults) Events() []FaultEvent {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]FaultEvent(nil), f.events...)
}

// decide returns the fault that hits op on key, or nil.
func (f *Faults) decide(ctx context.Context, op Op, key string) *Fault {
	if f == nil {
		return nil
	}
	if ft := f.decideRules(op, key); ft != nil || f.hook == nil {
		return ft
	}
	err := f.hook(ctx, op, key)
	if err == nil {
		return nil
	}
	f.mu.Lock()
	f.events = append(f.events, FaultEvent{Op: op, Key: key, Action: Fail})
	f.mu.Unlock()
	return &Fault{Op: op, Action: Fail, Err: err}
}

// decideRules returns the added Fault that hits op on key, or nil.
func (f *Faults) decideRules(op Op, key string) *Fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.rules {
		if !r.matches(op, key) {
			continue
		}
		r.seen++
		if r.seen <= r.After || (r.Times > 0 && r.hit >= r.Times) {
			continue
		}
		if p := r.Probability; p > 0 && p < 1 && f.rng.Float64() >= p {
			continue
		}
		r.hit++
		f.events = append(f.events, FaultEvent{Op: op, Key: key, Action: r.Action})
		ft := r.Fault
		return &ft
	}
	return nil
}

// faultWriter holds a write's bytes until Close, then stores them
// disturbed as its fault says, or not at all.
type faultWriter struct {
	under objectWriter
	fault *Fault
	buf   bytes.Buffer
}

func (w *faultWriter) Write(p []byte) (int, error) { return w.buf.Write(p) }

func (w *faultWriter) Close() error {
	switch w.fault.Action {
	case Fail:
		w.under.Abort()
		return w.fault.err()
	case Drop:
		w.under.Abort()
		return nil
	}
	if _, err := w.under.Write(w.fault.apply(w.buf.Bytes())); err != nil {
		w.under.Abort()
		return err
	}
	return w.under.Close()
}

func (w *faultWriter) Abort() { w.under.Abort() }

// faultReader serves an object's bytes disturbed as its fault says.
type faultReader struct {
	*bytes.Reader
	size int64
}

func newFaultReader(r objectReader, f *Fault) (objectReader, error) {
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	return &faultReader{Reader: bytes.NewReader(f.apply(b)), size: r.Size()}, nil
}

func (r *faultReader) Size() int64  { return r.size }
func (r *faultReader) Close() error { return nil }
