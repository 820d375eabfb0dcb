package ops

import (
	"github.com/weirstream/weir/internal/runtime"
)

// base gives an operator without state the default lifecycle: watermarks
// pass through, snapshots are empty.
type base[OUT any] struct {
	Out runtime.Output[OUT]
}

func (b *base[OUT]) Open(*runtime.OperatorContext) error { return nil }
func (b *base[OUT]) ProcessWatermark(wm int64) error     { return b.Out.EmitWatermark(wm) }
func (b *base[OUT]) Snapshot(int64) (runtime.Snapshot, error) {
	return runtime.Snapshot{}, nil
}
func (b *base[OUT]) NotifyCheckpointComplete(int64) error { return nil }
func (b *base[OUT]) Finish() error                        { return nil }
func (b *base[OUT]) Close() error                         { return nil }

// Map applies F to every record.
type Map[IN, OUT any] struct {
	base[OUT]
	F func(IN) (OUT, error)
}

// NewMap returns a Map writing to out.
func NewMap[IN, OUT any](f func(IN) (OUT, error), out runtime.Output[OUT]) *Map[IN, OUT] {
	return &Map[IN, OUT]{base: base[OUT]{Out: out}, F: f}
}

func (m *Map[IN, OUT]) Process(v IN, ts int64) error {
	o, err := m.F(v)
	if err != nil {
		return err
	}
	return m.Out.Collect(o, ts)
}

// Filter keeps the records for which F is true.
type Filter[T any] struct {
	base[T]
	F func(T) (bool, error)
}

// NewFilter returns a Filter writing to out.
func NewFilter[T any](f func(T) (bool, error), out runtime.Output[T]) *Filter[T] {
	return &Filter[T]{base: base[T]{Out: out}, F: f}
}

func (f *Filter[T]) Process(v T, ts int64) error {
	ok, err := f.F(v)
	if err != nil || !ok {
		return err
	}
	return f.Out.Collect(v, ts)
}

// FlatMap emits zero or more records per record.
type FlatMap[IN, OUT any] struct {
	base[OUT]
	F    func(IN, func(OUT)) error
	ts   int64
	err  error
	emit func(OUT)
}

// NewFlatMap returns a FlatMap writing to out.
func NewFlatMap[IN, OUT any](f func(IN, func(OUT)) error, out runtime.Output[OUT]) *FlatMap[IN, OUT] {
	m := &FlatMap[IN, OUT]{base: base[OUT]{Out: out}, F: f}
	m.emit = func(o OUT) {
		if m.err == nil {
			m.err = m.Out.Collect(o, m.ts)
		}
	}
	return m
}

func (m *FlatMap[IN, OUT]) Process(v IN, ts int64) error {
	m.ts, m.err = ts, nil
	if err := m.F(v, m.emit); err != nil {
		return err
	}
	return m.err
}

// Identity forwards records unchanged (the receiving side of a union or a
// repartitioning with nothing else to do).
type Identity[T any] struct{ base[T] }

// NewIdentity returns an Identity writing to out.
func NewIdentity[T any](out runtime.Output[T]) *Identity[T] {
	return &Identity[T]{base: base[T]{Out: out}}
}

func (i *Identity[T]) Process(v T, ts int64) error { return i.Out.Collect(v, ts) }
