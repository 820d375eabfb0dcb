package stream

import (
	"fmt"
	"reflect"
	"slices"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/ops"
	"github.com/weirstream/weir/internal/runtime"
	"github.com/weirstream/weir/internal/typeinfo"
	"github.com/weirstream/weir/state"
)

// WindowedStream is a keyed stream cut into event-time windows.
type WindowedStream[T any, K comparable] struct {
	ks       KeyedStream[T, K]
	assigner WindowAssigner
}

// Windowed groups ks's records into the assigner's windows. A window
// fires when the watermark passes its end; records that arrive after that
// are late and dropped (counted in the operator's log).
func Windowed[T any, K comparable](ks KeyedStream[T, K], a WindowAssigner) WindowedStream[T, K] {
	if a.err != nil {
		ks.env.setErr(errorf("Window: %w", a.err))
	}
	return WindowedStream[T, K]{ks: ks, assigner: a}
}

// AggregateFunction folds a window's records into an accumulator.
type AggregateFunction[IN, ACC, OUT any] = state.AggregateFunction[IN, ACC, OUT]

// Aggregate folds each window's records with agg and emits, when the
// window fires, result(key, window, agg's result).
//
// Sliding windows whose size is a multiple of their slide, over an
// accumulator that holds no pointers, are sliced as Flink's SQL windows
// are: each record is folded once, into its slide of time (a pane), and
// a window's accumulator is its panes' merged (agg.Merge) when it fires,
// rather than each record folded into every window it is in. agg's Merge
// must then agree with its Add, as merging session windows needs too.
func Aggregate[T any, K comparable, ACC, R, OUT any](ws WindowedStream[T, K], agg AggregateFunction[T, ACC, R], result func(key K, w Window, r R) OUT, opts ...OpOption) Stream[OUT] {
	var newPanes func(*state.KeyedBackend[K]) (panes[T, R], error)
	if a := ws.assigner; a.kind == sliding && a.size > a.slide && a.size%a.slide == 0 &&
		!typeinfo.HasPointers(reflect.TypeFor[ACC]()) && !ws.ks.env.noPanes {
		newPanes = func(b *state.KeyedBackend[K]) (panes[T, R], error) { return newAggPanes(b, agg) }
	}
	return windowStream(ws, "window-aggregate", opts, func(b *state.KeyedBackend[K], nc codec.Codec[Window]) (contents[T, R], error) {
		return state.AggregatingNS(b, nc, state.AggregatingDescriptor[T, ACC, R]{Name: "window-contents", Function: agg})
	}, newPanes, func(k K, w Window, r R, emit func(OUT) error) error { return emit(result(k, w, r)) })
}

// Reduce combines each window's records pairwise with reduce and emits,
// when the window fires, result(key, window, combined).
func Reduce[T any, K comparable, OUT any](ws WindowedStream[T, K], reduce func(a, b T) T, result func(key K, w Window, v T) OUT, opts ...OpOption) Stream[OUT] {
	return windowStream(ws, "window-reduce", opts, func(b *state.KeyedBackend[K], nc codec.Codec[Window]) (contents[T, T], error) {
		return state.ReducingNS(b, nc, state.ReducingDescriptor[T]{Name: "window-contents", Reduce: reduce})
	}, nil, func(k K, w Window, v T, emit func(OUT) error) error { return emit(result(k, w, v)) })
}

// ProcessWindow keeps each window's records and, when it fires, calls fn
// with all of them (in arrival order); fn emits any number of results.
func ProcessWindow[T any, K comparable, OUT any](ws WindowedStream[T, K], fn func(key K, w Window, records []T, emit func(OUT) error) error, opts ...OpOption) Stream[OUT] {
	return windowStream(ws, "window-process", opts, func(b *state.KeyedBackend[K], nc codec.Codec[Window]) (contents[T, []T], error) {
		l, err := state.ListNS(b, nc, state.ListDescriptor[T]{Name: "window-contents"})
		if err != nil {
			return nil, err
		}
		return listContents[T]{l}, nil
	}, nil, fn)
}

// contents is a window's state: what its records fold into.
type contents[T, R any] interface {
	SetNamespace(w Window)
	Add(v T)
	// AddWasPresent is Add that reports whether the window had contents
	// before; a true answer is exact (state.PresenceAdder).
	AddWasPresent(v T) bool
	Get() (R, bool)
	Clear()
	MergeNamespaces(target Window, sources ...Window)
}

type listContents[T any] struct{ state.ListStateNS[Window, T] }

// panes is the state of sliding windows cut into panes, each a slide
// long: a record is added to the one pane it falls in.
type panes[T, R any] interface {
	SetNamespace(p Window)
	// AddWasPresent adds v to the current pane and reports whether the
	// pane had contents before.
	AddWasPresent(v T) bool
	// fire returns the current key's result of window w (slide apart
	// panes), false if it has no contents, and clears w's first pane,
	// which no later window holds. more reports whether another of w's
	// panes has contents (the next window then has some too).
	fire(w Window, slide int64) (r R, ok, more bool)
}

// aggPanes are an aggregation's panes: each holds the accumulator of its
// records.
type aggPanes[T, ACC, R any] struct {
	state.AggregatingStateNS[Window, T, ACC]
	// whole holds the accumulators of whole windows that a checkpoint
	// taken without panes restored (see fire).
	whole state.AggregatingStateNS[Window, T, ACC]
	fn    AggregateFunction[T, ACC, R]
}

// accOf is an aggregation whose result is its accumulator.
type accOf[T, ACC, R any] struct{ AggregateFunction[T, ACC, R] }

func (accOf[T, ACC, R]) GetResult(acc ACC) ACC { return acc }

func newAggPanes[T any, K comparable, ACC, R any](b *state.KeyedBackend[K], fn AggregateFunction[T, ACC, R]) (panes[T, R], error) {
	p := &aggPanes[T, ACC, R]{fn: fn}
	var err error
	if p.AggregatingStateNS, err = state.AggregatingNS(b, windowCodec{}, state.AggregatingDescriptor[T, ACC, ACC]{Name: "window-panes", Function: accOf[T, ACC, R]{fn}}); err != nil {
		return nil, err
	}
	p.whole, err = state.AggregatingNS(b, windowCodec{}, state.AggregatingDescriptor[T, ACC, ACC]{Name: "window-contents", Function: accOf[T, ACC, R]{fn}})
	return p, err
}

func (p *aggPanes[T, ACC, R]) fire(w Window, slide int64) (R, bool, bool) {
	acc := p.fn.CreateAccumulator()
	ok, more := false, false
	// A window that a checkpoint taken without panes holds: its timer
	// was registered then, and fires it now.
	p.whole.SetNamespace(w)
	if a, found := p.whole.Get(); found {
		acc, ok = p.fn.Merge(acc, a), true
		p.whole.Clear()
	}
	for start := w.Start; start < w.End; start += slide {
		p.SetNamespace(Window{start, start + slide})
		a, found := p.Get()
		if !found {
			continue
		}
		acc, ok = p.fn.Merge(acc, a), true
		if start == w.Start {
			p.Clear()
		} else {
			more = true
		}
	}
	var r R
	if ok {
		r = p.fn.GetResult(acc)
	}
	return r, ok, more
}

func (l listContents[T]) Get() ([]T, bool) {
	v := l.ListStateNS.Get()
	return v, len(v) > 0
}

// windowCodec encodes a window as two varints.
type windowCodec struct{}

var int64Codec = codec.Int64()

func (windowCodec) Append(dst []byte, w Window) []byte {
	dst = int64Codec.Append(dst, w.Start)
	return int64Codec.Append(dst, w.End)
}

func (windowCodec) Decode(src []byte) (Window, int, error) {
	s, n, err := int64Codec.Decode(src)
	if err != nil {
		return Window{}, 0, err
	}
	e, m, err := int64Codec.Decode(src[n:])
	if err != nil {
		return Window{}, 0, err
	}
	return Window{Start: s, End: e}, n + m, nil
}

func windowStream[T any, K comparable, R, OUT any](ws WindowedStream[T, K], kind string, opts []OpOption,
	newContents func(*state.KeyedBackend[K], codec.Codec[Window]) (contents[T, R], error),
	newPanes func(*state.KeyedBackend[K]) (panes[T, R], error),
	emit func(key K, w Window, r R, emit func(OUT) error) error) Stream[OUT] {
	ks := ws.ks
	n := newNode[OUT](ks.env, kind, opts)
	connectKeyed(ks, n, 0)
	n.deliver = oneInput[T]
	n.build = func(b *buildCtx, out any) (runtime.Operator, []any, error) {
		op := &windowOp[T, K, R, OUT]{
			key: ks.key, assigner: ws.assigner, out: out.(runtime.Output[OUT]),
			newContents: newContents, newPanes: newPanes, result: emit,
		}
		op.keyed = ops.Keyed[K, Window]{KeyCodec: ks.keyCodec, Hasher: ks.hasher, NSCodec: windowCodec{}, OnTimer: op.onTimer}
		op.emitOut = func(v OUT) error { return op.out.Collect(v, op.firing.MaxTimestamp()) }
		return op, []any{runtime.Input[T](op)}, nil
	}
	return Stream[OUT]{env: ks.env, node: n}
}

// windowOp is the event-time window operator: records go into the state of
// the windows they belong to, an event-time timer at each window's last
// timestamp fires it, and firing emits the result and clears the window.
// Session windows merge: the key's open sessions are kept in a value
// state, each with the namespace its contents live under.
type windowOp[T any, K comparable, R, OUT any] struct {
	key         func(T) K
	assigner    WindowAssigner
	out         runtime.Output[OUT]
	newContents func(*state.KeyedBackend[K], codec.Codec[Window]) (contents[T, R], error)
	// newPanes, if set, makes the panes that sliding windows are cut
	// into, and the operator keeps them instead of contents.
	newPanes func(*state.KeyedBackend[K]) (panes[T, R], error)
	result   func(key K, w Window, r R, emit func(OUT) error) error
	emitOut  func(OUT) error

	keyed    ops.Keyed[K, Window]
	contents contents[T, R]
	panes    panes[T, R]
	sessions state.ValueState[[]openSession]
	ctx      *runtime.OperatorContext
	buf      []Window
	firing   Window
	late     int64
}

// openSession is an open session window and the namespace holding its
// contents (the window it started as: merging keeps one namespace).
type openSession struct {
	Window Window
	State  Window
}

func (o *windowOp[T, K, R, OUT]) Open(ctx *runtime.OperatorContext) error {
	o.ctx = ctx
	if err := o.keyed.Open(ctx); err != nil {
		return err
	}
	var err error
	if o.newPanes != nil {
		o.panes, err = o.newPanes(o.keyed.Backend)
		return err
	}
	if o.contents, err = o.newContents(o.keyed.Backend, windowCodec{}); err != nil {
		return err
	}
	if o.assigner.Merging() {
		o.sessions, err = state.Value(o.keyed.Backend, state.ValueDescriptor[[]openSession]{Name: "window-sessions"})
	}
	return err
}

func (o *windowOp[T, K, R, OUT]) Process(v T, ts int64) error {
	if ts == NoTimestamp {
		return fmt.Errorf("event-time window: a record has no timestamp (set one with WatermarkStrategy.WithTimestamps)")
	}
	k := o.key(v)
	o.keyed.SetKey(k)
	wm := o.keyed.Watermark()
	if o.panes != nil {
		o.addToPane(v, ts, wm)
		return nil
	}
	o.buf = o.assigner.Assign(o.buf[:0], ts)
	if o.assigner.Merging() {
		return o.addToSession(v, o.buf[0], wm)
	}
	for _, w := range o.buf {
		if w.MaxTimestamp() <= wm {
			o.late++
			continue
		}
		o.contents.SetNamespace(w)
		// A window has contents exactly while its timer is registered:
		// the first record registers it, firing clears the contents.
		// Registering it again for every later record would only find
		// it there.
		if !o.contents.AddWasPresent(v) {
			o.keyed.RegisterEventTimer(w, w.MaxTimestamp())
		}
	}
	return nil
}

// addToPane adds v to the pane of ts. The pane belongs to size/slide
// windows, ending at the pane's end and every slide after; v is late for
// those that end at or before the watermark wm (they have fired). A pane
// that comes into being registers the timer of the first window it is
// in that has not fired; firing a window registers the next window's if
// any of its panes remains (see onTimer), so every window holding a
// pane fires.
func (o *windowOp[T, K, R, OUT]) addToPane(v T, ts, wm int64) {
	a := o.assigner
	start := windowStart(ts, a.offset, a.slide)
	pane := Window{start, start + a.slide}
	// The window that ends at end fires at end-1, its last millisecond.
	end := pane.End
	for last := pane.Start + a.size; end <= last && end-1 <= wm; end += a.slide {
		o.late++
	}
	if end > pane.Start+a.size {
		return // late for every window it is in
	}
	o.panes.SetNamespace(pane)
	if !o.panes.AddWasPresent(v) {
		w := Window{end - a.size, end}
		o.keyed.RegisterEventTimer(w, w.MaxTimestamp())
	}
}

// addToSession merges w into the key's sessions and adds v to the
// openSession that now covers it.
func (o *windowOp[T, K, R, OUT]) addToSession(v T, w Window, wm int64) error {
	open, _ := o.sessions.Value()
	all := make([]Window, 0, len(open)+1)
	for _, s := range open {
		all = append(all, s.Window)
	}
	all = append(all, w)
	var next []openSession
	var target openSession
	for _, m := range MergeWindows(all) {
		var s openSession
		var absorbed []openSession
		for _, x := range m.Merged {
			if i := slices.IndexFunc(open, func(s openSession) bool { return s.Window == x }); i >= 0 {
				absorbed = append(absorbed, open[i])
			}
		}
		switch {
		case len(absorbed) == 0: // the new window alone
			s = openSession{Window: m.Window, State: m.Window}
		default:
			s = openSession{Window: m.Window, State: absorbed[0].State}
			var sources []Window
			for _, a := range absorbed[1:] {
				sources = append(sources, a.State)
			}
			for _, a := range absorbed {
				if a.Window != m.Window {
					o.keyed.DeleteEventTimer(a.Window, a.Window.MaxTimestamp())
				}
			}
			if len(sources) > 0 {
				o.contents.SetNamespace(s.State)
				o.contents.MergeNamespaces(s.State, sources...)
			}
		}
		if m.Window.Start <= w.Start && w.End <= m.Window.End {
			target = s
		}
		next = append(next, s)
	}
	if target.Window.MaxTimestamp() <= wm {
		o.late++
		return nil // late: the openSession it would join has fired
	}
	o.sessions.Update(next)
	o.contents.SetNamespace(target.State)
	o.contents.Add(v)
	o.keyed.RegisterEventTimer(target.Window, target.Window.MaxTimestamp())
	return nil
}

func (o *windowOp[T, K, R, OUT]) onTimer(t state.Timer[K, Window], d ops.TimeDomain) error {
	w, ns := t.Namespace, t.Namespace
	if o.panes != nil {
		r, ok, more := o.panes.fire(w, o.assigner.slide)
		if more {
			next := Window{w.Start + o.assigner.slide, w.End + o.assigner.slide}
			o.keyed.RegisterEventTimer(next, next.MaxTimestamp())
		}
		if !ok {
			return nil
		}
		o.firing = w
		return o.result(t.Key, w, r, o.emitOut)
	}
	if o.assigner.Merging() {
		open, _ := o.sessions.Value()
		i := slices.IndexFunc(open, func(s openSession) bool { return s.Window == w })
		if i < 0 {
			return nil // merged into a later openSession
		}
		ns = open[i].State
		open = slices.Delete(slices.Clone(open), i, i+1)
		if len(open) == 0 {
			o.sessions.Clear()
		} else {
			o.sessions.Update(open)
		}
	}
	o.contents.SetNamespace(ns)
	r, ok := o.contents.Get()
	o.contents.Clear()
	if !ok {
		return nil
	}
	o.firing = w
	return o.result(t.Key, w, r, o.emitOut)
}

func (o *windowOp[T, K, R, OUT]) ProcessWatermark(wm int64) error {
	if err := o.keyed.AdvanceWatermark(wm); err != nil {
		return err
	}
	return o.out.EmitWatermark(wm)
}

func (o *windowOp[T, K, R, OUT]) Snapshot(id int64) (runtime.Snapshot, error) {
	return o.keyed.Snapshot(id)
}

func (o *windowOp[T, K, R, OUT]) NotifyCheckpointComplete(int64) error { return nil }
func (o *windowOp[T, K, R, OUT]) Finish() error                        { return nil }

func (o *windowOp[T, K, R, OUT]) Close() error {
	if o.late > 0 && o.ctx != nil {
		o.ctx.Logger.Warn("late records dropped", "count", o.late)
	}
	return o.keyed.Close()
}
