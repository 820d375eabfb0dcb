package stream

import (
	"math"
	"time"

	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/internal/ops"
	"github.com/weirstream/weir/internal/runtime"
)

// WatermarkStrategy says how event time is read from records and how far
// watermarks trail it.
type WatermarkStrategy[T any] struct {
	w ops.Watermarks[T]
}

// BoundedOutOfOrderness returns a strategy whose watermark trails the
// largest timestamp seen on each split by d: records may be up to d late.
// Timestamps come from the source until WithTimestamps says otherwise.
func BoundedOutOfOrderness[T any](d time.Duration) WatermarkStrategy[T] {
	return WatermarkStrategy[T]{w: ops.Watermarks[T]{OutOfOrderness: d}}
}

// NoWatermarks returns a strategy without event time progress.
func NoWatermarks[T any]() WatermarkStrategy[T] {
	return WatermarkStrategy[T]{w: ops.Watermarks[T]{Disabled: true}}
}

// WithTimestamps sets the timestamp assigner: f gets the record and the
// source's timestamp (NoTimestamp if none) and returns the record's event
// time in Unix milliseconds.
func (s WatermarkStrategy[T]) WithTimestamps(f func(v T, sourceTs int64) int64) WatermarkStrategy[T] {
	s.w.Timestamp = f
	return s
}

// WithIdleness marks a split idle after d without records, so it does
// not hold event time back.
func (s WatermarkStrategy[T]) WithIdleness(d time.Duration) WatermarkStrategy[T] {
	s.w.Idleness = d
	return s
}

// WithWatermarkAlignment keeps the source's event time within maxDrift of
// the other sources of group (Flink's
// WatermarkStrategy.withWatermarkAlignment): every updateInterval (0:
// one second, Flink's default) each source subtask reports its watermark
// to the job master, which announces the group's lowest plus maxDrift; a
// subtask stops reading a split whose watermark is past that until it
// rises. A reader that cannot pause single splits
// (connector.SplitPauser) stops as a whole while the subtask's watermark
// is past it.
//
// Without it a subtask that reads faster runs ahead in event time, and an
// operator that joins or windows what several subtasks read keeps in its
// state whatever the slower ones have not caught up with: with it, about
// maxDrift of event time. A drift too small for the rate at which event
// time advances slows the job down: in each update interval a source can
// go at most about maxDrift ahead of the group's slowest.
func (s WatermarkStrategy[T]) WithWatermarkAlignment(group string, maxDrift, updateInterval time.Duration) WatermarkStrategy[T] {
	if updateInterval == 0 {
		updateInterval = time.Second
	}
	s.w.Alignment = &runtime.WatermarkAlignment{Group: group, MaxDrift: maxDrift, UpdateInterval: updateInterval}
	return s
}

// NoTimestamp is the timestamp of a record without event time.
const NoTimestamp int64 = math.MinInt64

// NoTimestamp is the runtime's: this fails to compile if they differ.
var _ [0]struct{} = [NoTimestamp - runtime.NoTimestamp]struct{}{}

// FromSource adds a source to the job. The job lists the source's splits
// when it starts, and again every SplitDiscoveryInterval if the source is
// an unbounded connector.SplitDiscoverer; each split is read by one
// subtask, which keeps it while the job runs (see connector.Source).
func FromSource[T any](env *Environment, src connector.Source[T], name string, wm WatermarkStrategy[T], opts ...OpOption) Stream[T] {
	n := newNode[T](env, "source", append([]OpOption{Name(name)}, opts...))
	if n.settings.uid == "" {
		n.settings.uid = name
	}
	n.source = true
	if a := wm.w.Alignment; a != nil {
		if err := a.Validate(); err != nil {
			env.setErr(errorf("FromSource %s: %w", name, err))
		} else if wm.w.Disabled {
			env.setErr(errorf("FromSource %s: watermark alignment of a source without watermarks", name))
		}
		n.alignment = a
	}
	n.listSplits = src.Splits
	if d, ok := src.(connector.SplitDiscoverer); ok && !src.Bounded() {
		n.discovery = max(d.SplitDiscoveryInterval(), 0)
	}
	n.build = func(_ *buildCtx, out any) (runtime.Operator, []any, error) {
		return ops.NewSource(src, wm.w, out.(runtime.Output[T])), nil, nil
	}
	return Stream[T]{env: env, node: n}
}

// Map applies f to every record.
func Map[IN, OUT any](s Stream[IN], f func(IN) OUT, opts ...OpOption) Stream[OUT] {
	return MapErr(s, func(v IN) (OUT, error) { return f(v), nil }, opts...)
}

// MapErr is Map for a function that can fail; an error fails the subtask
// (and the restart strategy decides what happens next).
func MapErr[IN, OUT any](s Stream[IN], f func(IN) (OUT, error), opts ...OpOption) Stream[OUT] {
	n := newNode[OUT](s.env, "map", opts)
	connect(s.node, s.tag, n, 0, runtime.Forward, false, nil)
	n.deliver = oneInput[IN]
	n.build = func(_ *buildCtx, out any) (runtime.Operator, []any, error) {
		op := ops.NewMap(f, out.(runtime.Output[OUT]))
		return op, []any{runtime.Input[IN](op)}, nil
	}
	return Stream[OUT]{env: s.env, node: n}
}

// Filter keeps the records for which f returns true.
func Filter[T any](s Stream[T], f func(T) bool, opts ...OpOption) Stream[T] {
	n := newNode[T](s.env, "filter", opts)
	connect(s.node, s.tag, n, 0, runtime.Forward, false, nil)
	n.deliver = oneInput[T]
	n.build = func(_ *buildCtx, out any) (runtime.Operator, []any, error) {
		op := ops.NewFilter(func(v T) (bool, error) { return f(v), nil }, out.(runtime.Output[T]))
		return op, []any{runtime.Input[T](op)}, nil
	}
	return Stream[T]{env: s.env, node: n}
}

// FlatMap calls f for every record; f emits any number of records.
func FlatMap[IN, OUT any](s Stream[IN], f func(v IN, emit func(OUT)) error, opts ...OpOption) Stream[OUT] {
	n := newNode[OUT](s.env, "flatmap", opts)
	connect(s.node, s.tag, n, 0, runtime.Forward, false, nil)
	n.deliver = oneInput[IN]
	n.build = func(_ *buildCtx, out any) (runtime.Operator, []any, error) {
		op := ops.NewFlatMap(f, out.(runtime.Output[OUT]))
		return op, []any{runtime.Input[IN](op)}, nil
	}
	return Stream[OUT]{env: s.env, node: n}
}

// Union merges streams of the same type.
func Union[T any](first Stream[T], more ...Stream[T]) Stream[T] {
	n := newNode[T](first.env, "union", nil)
	n.settings.noChain = true
	for _, s := range append([]Stream[T]{first}, more...) {
		connect(s.node, s.tag, n, 0, runtime.Rebalance, false, nil)
	}
	n.deliver = oneInput[T]
	n.build = func(_ *buildCtx, out any) (runtime.Operator, []any, error) {
		op := ops.NewIdentity(out.(runtime.Output[T]))
		return op, []any{runtime.Input[T](op)}, nil
	}
	return Stream[T]{env: first.env, node: n}
}

// Rebalance distributes records round-robin over the next operator's
// subtasks.
func Rebalance[T any](s Stream[T], opts ...OpOption) Stream[T] {
	return repartition(s, runtime.Rebalance, "rebalance", opts)
}

// Broadcast sends every record to every subtask of the next operator.
func Broadcast[T any](s Stream[T], opts ...OpOption) Stream[T] {
	return repartition(s, runtime.Broadcast, "broadcast", opts)
}

func repartition[T any](s Stream[T], kind runtime.PartitionerKind, name string, opts []OpOption) Stream[T] {
	n := newNode[T](s.env, name, opts)
	connect(s.node, s.tag, n, 0, kind, true, nil)
	n.deliver = oneInput[T]
	n.build = func(_ *buildCtx, out any) (runtime.Operator, []any, error) {
		op := ops.NewIdentity(out.(runtime.Output[T]))
		return op, []any{runtime.Input[T](op)}, nil
	}
	return Stream[T]{env: s.env, node: n}
}

// SinkTo writes the stream to sink. With EXACTLY_ONCE checkpoints and a
// transactional sink (one whose writer implements connector.Committer),
// every record is visible downstream exactly once, after the checkpoint
// that covers it completes.
func SinkTo[T any](s Stream[T], sink connector.Sink[T], opts ...OpOption) {
	n := newNode[T](s.env, "sink", opts)
	n.sink = sink
	connect(s.node, s.tag, n, 0, runtime.Forward, false, nil)
	n.deliver = oneInput[T]
	n.build = func(b *buildCtx, _ any) (runtime.Operator, []any, error) {
		op := ops.NewSink(sink, b.checkpointing, b.exactlyOnce)
		return op, []any{runtime.Input[T](op)}, nil
	}
}
