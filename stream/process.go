package stream

import (
	"errors"
	"reflect"

	"github.com/weirstream/weir/internal/ops"
	"github.com/weirstream/weir/internal/runtime"
	"github.com/weirstream/weir/state"
)

// KeyedProcessFunction processes the records of a KeyedStream one at a
// time, with keyed state and timers scoped to the record's key. It may
// also implement TimerHandler, Opener and Closer.
type KeyedProcessFunction[K comparable, IN, OUT any] interface {
	ProcessElement(ctx *Context[K, OUT], v IN) error
}

// TimerHandler is implemented by process functions that register timers.
type TimerHandler[K comparable, OUT any] interface {
	OnTimer(ctx *Context[K, OUT], t Timer) error
}

// Opener is implemented by functions that create state or resources
// before the first record.
type Opener[K comparable] interface {
	Open(rc *RuntimeContext[K]) error
}

// Closer is implemented by functions that release resources.
type Closer interface {
	Close() error
}

// Timer is a timer that fired.
type Timer struct {
	// Timestamp is the time it was registered for, in Unix ms.
	Timestamp int64
	// ProcessingTime is true for a processing-time timer, false for an
	// event-time one.
	ProcessingTime bool
}

// ProcessFunc adapts a function to a KeyedProcessFunction.
type ProcessFunc[K comparable, IN, OUT any] func(ctx *Context[K, OUT], v IN) error

// ProcessElement calls f.
func (f ProcessFunc[K, IN, OUT]) ProcessElement(ctx *Context[K, OUT], v IN) error { return f(ctx, v) }

// RuntimeContext is what a keyed function gets at Open: where it runs,
// and its keyed state.
type RuntimeContext[K comparable] struct {
	// Subtask and Parallelism say which of the operator's subtasks this is.
	Subtask, Parallelism int
	backend              *state.KeyedBackend[K]
	oc                   *runtime.OperatorContext
}

// StateOption configures a keyed state a function registers.
type StateOption func(*stateOptions)

type stateOptions struct{ ttl *state.TTLConfig }

// WithTTL gives the state's values a time to live, in processing time
// (Flink's StateTtlConfig; see state.TTLConfig): its duration, update
// type and visibility, and its cleanup — in full snapshots
// (CleanupFullSnapshot) and in the background, on by default
// (DisableCleanupInBackground, CleanupSize and CleanupEveryRecord on the
// heap, SweepRows on the pebble backend).
func WithTTL(c state.TTLConfig) StateOption {
	return func(o *stateOptions) { o.ttl = &c }
}

func stateOpts(opts []StateOption) stateOptions {
	var o stateOptions
	for _, f := range opts {
		f(&o)
	}
	return o
}

// ValueState returns the keyed value state called name.
func ValueState[T any, K comparable](rc *RuntimeContext[K], name string, opts ...StateOption) (state.ValueState[T], error) {
	return state.Value(rc.backend, state.ValueDescriptor[T]{Name: name, TTL: stateOpts(opts).ttl})
}

// ListState returns the keyed list state called name.
func ListState[T any, K comparable](rc *RuntimeContext[K], name string, opts ...StateOption) (state.ListState[T], error) {
	return state.List(rc.backend, state.ListDescriptor[T]{Name: name, TTL: stateOpts(opts).ttl})
}

// MapState returns the keyed map state called name.
func MapState[UK comparable, UV any, K comparable](rc *RuntimeContext[K], name string, opts ...StateOption) (state.MapState[UK, UV], error) {
	return state.Map(rc.backend, state.MapDescriptor[UK, UV]{Name: name, TTL: stateOpts(opts).ttl})
}

// ReducingState returns the keyed reducing state called name.
func ReducingState[T any, K comparable](rc *RuntimeContext[K], name string, reduce func(acc, v T) T, opts ...StateOption) (state.ReducingState[T], error) {
	return state.Reducing(rc.backend, state.ReducingDescriptor[T]{Name: name, Reduce: reduce, TTL: stateOpts(opts).ttl})
}

// AggregatingState returns the keyed aggregating state called name.
func AggregatingState[IN, ACC, OUT any, K comparable](rc *RuntimeContext[K], name string, f state.AggregateFunction[IN, ACC, OUT], opts ...StateOption) (state.AggregatingState[IN, OUT], error) {
	return state.Aggregating(rc.backend, state.AggregatingDescriptor[IN, ACC, OUT]{Name: name, Function: f, TTL: stateOpts(opts).ttl})
}

// Context is a keyed function's view of the record or timer at hand.
type Context[K comparable, OUT any] struct {
	op *keyedProcess[K, any, OUT]
	ts int64
	k  K
}

// Key returns the current key.
func (c *Context[K, OUT]) Key() K { return c.k }

// Timestamp returns the event time of the record (or the firing timer's
// time), NoTimestamp if it has none.
func (c *Context[K, OUT]) Timestamp() int64 { return c.ts }

// Emit sends v downstream with the current timestamp.
func (c *Context[K, OUT]) Emit(v OUT) error { return c.op.out.Collect(v, c.ts) }

// EmitAt sends v downstream with event time ts.
func (c *Context[K, OUT]) EmitAt(v OUT, ts int64) error { return c.op.out.Collect(v, ts) }

// CurrentWatermark returns the operator's event time.
func (c *Context[K, OUT]) CurrentWatermark() int64 { return c.op.keyed.Watermark() }

// CurrentProcessingTime returns the processing time in Unix ms.
func (c *Context[K, OUT]) CurrentProcessingTime() int64 { return c.op.keyed.Ctx.Now().UnixMilli() }

// RegisterEventTimeTimer makes OnTimer run for the current key once the
// watermark reaches ts. Registering the same time twice fires once.
func (c *Context[K, OUT]) RegisterEventTimeTimer(ts int64) {
	c.op.keyed.RegisterEventTimer(state.VoidNamespace{}, ts)
}

// DeleteEventTimeTimer removes the current key's event-time timer at ts.
func (c *Context[K, OUT]) DeleteEventTimeTimer(ts int64) {
	c.op.keyed.DeleteEventTimer(state.VoidNamespace{}, ts)
}

// RegisterProcessingTimeTimer makes OnTimer run for the current key at
// processing time ts (Unix ms).
func (c *Context[K, OUT]) RegisterProcessingTimeTimer(ts int64) {
	c.op.keyed.RegisterProcessingTimer(state.VoidNamespace{}, ts)
}

// DeleteProcessingTimeTimer removes the current key's processing-time
// timer at ts.
func (c *Context[K, OUT]) DeleteProcessingTimeTimer(ts int64) {
	c.op.keyed.DeleteProcessingTimer(state.VoidNamespace{}, ts)
}

func (c *Context[K, OUT]) sideOutput(id string) (any, int64) { return c.op.side[id], c.ts }

// cloneFunc gives each subtask its own copy of a function: a pointer to a
// struct is copied shallowly (fields set in Open then belong to one
// subtask, as each Flink subtask gets its own deserialized function); any
// other value is used as it is.
func cloneFunc[F any](fn F) F {
	v := reflect.ValueOf(fn)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return fn
	}
	c := reflect.New(v.Elem().Type())
	c.Elem().Set(v.Elem())
	return c.Interface().(F)
}

// Process applies fn to a keyed stream. Each subtask works on its own
// shallow copy of fn when fn is a pointer to a struct.
func Process[K comparable, IN, OUT any](ks KeyedStream[IN, K], fn KeyedProcessFunction[K, IN, OUT], opts ...OpOption) Stream[OUT] {
	n := newNode[OUT](ks.env, "process", opts)
	connectKeyed(ks, n, 0)
	n.deliver = oneInput[IN]
	n.build = func(b *buildCtx, out any) (runtime.Operator, []any, error) {
		fn := cloneFunc(fn)
		op := &keyedProcess[K, any, OUT]{out: out.(runtime.Output[OUT]), side: b.side}
		in := &processInput[K, IN, OUT]{op: op, key: ks.key, fn: fn}
		op.keyed = ops.Keyed[K, state.VoidNamespace]{KeyCodec: ks.keyCodec, Hasher: ks.hasher, OnTimer: in.onTimer}
		op.opener = func(rc *RuntimeContext[K]) error {
			if o, ok := fn.(Opener[K]); ok {
				return o.Open(rc)
			}
			return nil
		}
		if c, ok := fn.(Closer); ok {
			op.closer = c.Close
		}
		return op, []any{runtime.Input[IN](in)}, nil
	}
	return Stream[OUT]{env: ks.env, node: n}
}

// keyedProcess is the operator behind Process. Its input type is erased
// (any) so that Context need not carry it; processInput is the typed
// input.
type keyedProcess[K comparable, IN any, OUT any] struct {
	keyed  ops.Keyed[K, state.VoidNamespace]
	out    runtime.Output[OUT]
	side   map[string]any
	opener func(*RuntimeContext[K]) error
	closer func() error
	ctx    Context[K, OUT]
}

type processInput[K comparable, IN, OUT any] struct {
	op  *keyedProcess[K, any, OUT]
	key func(IN) K
	fn  KeyedProcessFunction[K, IN, OUT]
}

func (p *processInput[K, IN, OUT]) Process(v IN, ts int64) error {
	k := p.key(v)
	p.op.keyed.SetKey(k)
	c := &p.op.ctx
	c.op, c.ts, c.k = p.op, ts, k
	return p.fn.ProcessElement(c, v)
}

func (p *processInput[K, IN, OUT]) onTimer(t state.Timer[K, state.VoidNamespace], d ops.TimeDomain) error {
	h, ok := p.fn.(TimerHandler[K, OUT])
	if !ok {
		return nil
	}
	c := &p.op.ctx
	c.op, c.ts, c.k = p.op, t.Timestamp, t.Key
	return h.OnTimer(c, Timer{Timestamp: t.Timestamp, ProcessingTime: d == ops.ProcessingTime})
}

func (o *keyedProcess[K, IN, OUT]) Open(ctx *runtime.OperatorContext) error {
	if err := o.keyed.Open(ctx); err != nil {
		return err
	}
	return o.opener(&RuntimeContext[K]{Subtask: ctx.Subtask, Parallelism: ctx.Parallelism, backend: o.keyed.Backend, oc: ctx})
}

func (o *keyedProcess[K, IN, OUT]) ProcessWatermark(wm int64) error {
	if err := o.keyed.AdvanceWatermark(wm); err != nil {
		return err
	}
	return o.out.EmitWatermark(wm)
}

func (o *keyedProcess[K, IN, OUT]) Snapshot(id int64) (runtime.Snapshot, error) {
	return o.keyed.Snapshot(id)
}

func (o *keyedProcess[K, IN, OUT]) NotifyCheckpointComplete(int64) error { return nil }
func (o *keyedProcess[K, IN, OUT]) Finish() error                        { return nil }

func (o *keyedProcess[K, IN, OUT]) Close() error {
	var err error
	if o.closer != nil {
		err = o.closer()
	}
	return errors.Join(err, o.keyed.Close())
}
