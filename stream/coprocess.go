package stream

import (
	"github.com/weirstream/weir/internal/ops"
	"github.com/weirstream/weir/internal/runtime"
	"github.com/weirstream/weir/state"
)

// ConnectedStreams are two keyed streams with the same key type whose
// records meet in one operator with shared keyed state: a join.
type ConnectedStreams[A, B any, K comparable] struct {
	a KeyedStream[A, K]
	b KeyedStream[B, K]
}

// Connect connects two keyed streams.
func Connect[A, B any, K comparable](a KeyedStream[A, K], b KeyedStream[B, K]) ConnectedStreams[A, B, K] {
	if a.env != b.env {
		a.env.setErr(errorf("Connect: the streams belong to different environments"))
	}
	return ConnectedStreams[A, B, K]{a: a, b: b}
}

// CoProcessFunction processes the records of two connected keyed streams.
// Both inputs see the same keyed state and timers for a key. It may also
// implement TimerHandler, Opener and Closer.
type CoProcessFunction[K comparable, A, B, OUT any] interface {
	ProcessElement1(ctx *Context[K, OUT], v A) error
	ProcessElement2(ctx *Context[K, OUT], v B) error
}

// CoProcess applies fn to connected streams. The operator's event time is
// the minimum of its two inputs' watermarks.
func CoProcess[A, B any, K comparable, OUT any](cs ConnectedStreams[A, B, K], fn CoProcessFunction[K, A, B, OUT], opts ...OpOption) Stream[OUT] {
	env := cs.a.env
	n := newNode[OUT](env, "coprocess", opts)
	connectKeyed(cs.a, n, 0)
	connectKeyed(cs.b, n, 1)
	n.deliver = func(ins []any) runtime.DeliverFunc {
		return runtime.DeliverTo2(ins[0].(runtime.Input[A]), ins[1].(runtime.Input[B]))
	}
	n.build = func(b *buildCtx, out any) (runtime.Operator, []any, error) {
		fn := cloneFunc(fn)
		op := &keyedProcess[K, any, OUT]{out: out.(runtime.Output[OUT]), side: b.side}
		in1 := &coInput[K, A, OUT]{op: op, key: cs.a.key, process: fn.ProcessElement1}
		in2 := &coInput[K, B, OUT]{op: op, key: cs.b.key, process: fn.ProcessElement2}
		op.keyed = ops.Keyed[K, state.VoidNamespace]{KeyCodec: cs.a.keyCodec, Hasher: cs.a.hasher, OnTimer: func(t state.Timer[K, state.VoidNamespace], d ops.TimeDomain) error {
			h, ok := fn.(TimerHandler[K, OUT])
			if !ok {
				return nil
			}
			c := &op.ctx
			c.op, c.ts, c.k = op, t.Timestamp, t.Key
			return h.OnTimer(c, Timer{Timestamp: t.Timestamp, ProcessingTime: d == ops.ProcessingTime})
		}}
		op.opener = func(rc *RuntimeContext[K]) error {
			if o, ok := fn.(Opener[K]); ok {
				return o.Open(rc)
			}
			return nil
		}
		if c, ok := fn.(Closer); ok {
			op.closer = c.Close
		}
		return op, []any{runtime.Input[A](in1), runtime.Input[B](in2)}, nil
	}
	return Stream[OUT]{env: env, node: n}
}

type coInput[K comparable, T, OUT any] struct {
	op      *keyedProcess[K, any, OUT]
	key     func(T) K
	process func(*Context[K, OUT], T) error
}

func (c *coInput[K, T, OUT]) Process(v T, ts int64) error {
	k := c.key(v)
	c.op.keyed.SetKey(k)
	ctx := &c.op.ctx
	ctx.op, ctx.ts, ctx.k = c.op, ts, k
	return c.process(ctx, v)
}
