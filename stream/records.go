package stream

import (
	"github.com/weirstream/weir/internal/runtime"
)

// ProcessFunction processes the records of a (not keyed) stream one at a
// time; it can emit any number of records and write to side outputs. It
// may also implement Closer.
type ProcessFunction[IN, OUT any] interface {
	ProcessElement(ctx *RecordContext[OUT], v IN) error
}

// RecordFunc adapts a function to a ProcessFunction.
type RecordFunc[IN, OUT any] func(ctx *RecordContext[OUT], v IN) error

// ProcessElement calls f.
func (f RecordFunc[IN, OUT]) ProcessElement(ctx *RecordContext[OUT], v IN) error { return f(ctx, v) }

// RecordContext is a ProcessFunction's view of the record at hand.
type RecordContext[OUT any] struct {
	out  runtime.Output[OUT]
	side map[string]any
	ts   int64
}

// Timestamp returns the record's event time, NoTimestamp if none.
func (c *RecordContext[OUT]) Timestamp() int64 { return c.ts }

// Emit sends v downstream with the record's timestamp.
func (c *RecordContext[OUT]) Emit(v OUT) error { return c.out.Collect(v, c.ts) }

// EmitAt sends v downstream with event time ts.
func (c *RecordContext[OUT]) EmitAt(v OUT, ts int64) error { return c.out.Collect(v, ts) }

func (c *RecordContext[OUT]) sideOutput(id string) (any, int64) { return c.side[id], c.ts }

// ProcessRecords applies fn to every record of s. Like Map and FlatMap it
// chains to its input; unlike them it can write to side outputs. Each
// subtask works on its own shallow copy of fn when fn is a pointer to a
// struct.
func ProcessRecords[IN, OUT any](s Stream[IN], fn ProcessFunction[IN, OUT], opts ...OpOption) Stream[OUT] {
	n := newNode[OUT](s.env, "process", opts)
	connect(s.node, s.tag, n, 0, runtime.Forward, false, nil)
	n.deliver = oneInput[IN]
	n.build = func(b *buildCtx, out any) (runtime.Operator, []any, error) {
		op := &recordProcess[IN, OUT]{fn: cloneFunc(fn)}
		op.ctx = RecordContext[OUT]{out: out.(runtime.Output[OUT]), side: b.side}
		return op, []any{runtime.Input[IN](op)}, nil
	}
	return Stream[OUT]{env: s.env, node: n}
}

type recordProcess[IN, OUT any] struct {
	fn  ProcessFunction[IN, OUT]
	ctx RecordContext[OUT]
}

func (p *recordProcess[IN, OUT]) Process(v IN, ts int64) error {
	p.ctx.ts = ts
	return p.fn.ProcessElement(&p.ctx, v)
}

func (p *recordProcess[IN, OUT]) Open(*runtime.OperatorContext) error { return nil }
func (p *recordProcess[IN, OUT]) ProcessWatermark(wm int64) error {
	return p.ctx.out.EmitWatermark(wm)
}
func (p *recordProcess[IN, OUT]) Snapshot(int64) (runtime.Snapshot, error) {
	return runtime.Snapshot{}, nil
}
func (p *recordProcess[IN, OUT]) NotifyCheckpointComplete(int64) error { return nil }
func (p *recordProcess[IN, OUT]) Finish() error                        { return nil }
func (p *recordProcess[IN, OUT]) Close() error {
	if c, ok := p.fn.(Closer); ok {
		return c.Close()
	}
	return nil
}
