package runtime

import (
	"context"
	"sync"
)

// Output receives the records an operator emits and the watermarks it
// forwards. Within a chain it is the next operator's input; at the chain's
// end it is a RecordWriter towards the next subtasks.
type Output[T any] interface {
	Collect(v T, ts int64) error
	EmitWatermark(wm int64) error
}

// Input is an operator's typed record input.
type Input[T any] interface {
	Process(v T, ts int64) error
}

// ChainOutput hands records straight to the next operator of a chain and
// watermarks to its ProcessWatermark.
type ChainOutput[T any] struct {
	In Input[T]
	Op Operator
}

func (o ChainOutput[T]) Collect(v T, ts int64) error { return o.In.Process(v, ts) }
func (o ChainOutput[T]) EmitWatermark(wm int64) error {
	return o.Op.ProcessWatermark(wm)
}

// FanOut sends everything to several outputs, in order.
type FanOut[T any] []Output[T]

func (f FanOut[T]) Collect(v T, ts int64) error {
	for _, o := range f {
		if err := o.Collect(v, ts); err != nil {
			return err
		}
	}
	return nil
}

func (f FanOut[T]) EmitWatermark(wm int64) error {
	for _, o := range f {
		if err := o.EmitWatermark(wm); err != nil {
			return err
		}
	}
	return nil
}

// Discard drops everything.
type Discard[T any] struct{}

func (Discard[T]) Collect(T, int64) error    { return nil }
func (Discard[T]) EmitWatermark(int64) error { return nil }

// Partitioner picks the channel (index among numChannels) a record goes to.
type Partitioner[T any] interface {
	Channel(v T, numChannels int) int
}

// PartitionerKind names how an edge distributes records.
type PartitionerKind uint8

const (
	// Forward sends subtask i's records to subtask i (equal parallelism).
	Forward PartitionerKind = iota
	// Hash sends a record to the subtask that owns its key's key group.
	Hash
	// Rebalance sends records round-robin.
	Rebalance
	// Broadcast sends every record to every subtask.
	Broadcast
)

func (k PartitionerKind) String() string {
	switch k {
	case Forward:
		return "FORWARD"
	case Hash:
		return "HASH"
	case Rebalance:
		return "REBALANCE"
	case Broadcast:
		return "BROADCAST"
	}
	return "UNKNOWN"
}

// HashPartitioner routes by key group: hash(key) picks one of
// maxParallelism key groups, and key groups map to subtasks in contiguous
// ranges (keyGroup·p/maxP), so that state can later move in whole groups.
type HashPartitioner[T any] struct {
	KeyGroup       func(v T) int // the record's key group in [0, MaxParallelism)
	MaxParallelism int
}

func (p HashPartitioner[T]) Channel(v T, n int) int {
	return p.KeyGroup(v) * n / p.MaxParallelism
}

// writer is a RecordWriter without its record type: what the task needs to
// flush it and to broadcast markers.
type writer interface {
	flush() error
	broadcast(m message) error
	numChannels() int
	// overtake sends the unaligned barrier b ahead of what is queued on
	// every channel; see RecordWriter.overtake.
	overtake(b Barrier)
	channels() []*channel
}

// RecordWriter is the end of a chain towards one downstream edge: it
// partitions records into one batch per channel and sends a batch when it
// is full, before any marker, and when the subtask runs out of input
// (so batching adds no latency on an idle stream). A channel with an
// in-flight limit (buffer debloating) gets batches of at most half its
// limit, so that it holds two, and never one larger than the limit.
type RecordWriter[T any] struct {
	ctx       context.Context
	chans     []*channel
	kind      PartitionerKind
	part      Partitioner[T]
	bufs      [][]Rec[T]
	batchSize int
	// full is, per channel, the size at which its batch is sent: the
	// batch size, or less under the channel's limit, as read when the
	// channel's last batch was sent.
	full []int
	// pool recycles batches: the consumer puts a batch back once it has
	// processed it, so steady state allocates no batches.
	pool    sync.Pool
	rr      int
	records int64 // records written, for metrics
	// p is the subtask that writes, whose urgent work runs while a send
	// waits for space; nil in tests that drive a writer alone.
	p producer
}

func newRecordWriter[T any](ctx context.Context, chans []*channel, kind PartitionerKind, part Partitioner[T], batchSize int, p producer) *RecordWriter[T] {
	w := &RecordWriter[T]{ctx: ctx, chans: chans, kind: kind, part: part, batchSize: batchSize, bufs: make([][]Rec[T], len(chans)), full: make([]int, len(chans)), p: p}
	for i := range w.bufs {
		w.bufs[i] = make([]Rec[T], 0, batchSize)
		w.full[i] = batchSize
	}
	return w
}

func (w *RecordWriter[T]) numChannels() int { return len(w.chans) }

func (w *RecordWriter[T]) channels() []*channel { return w.chans }

// overtake sends the unaligned barrier b on every channel ahead of the
// records queued there: the records still batching here go out first,
// without waiting for space, and then b passes everything it may. Until the
// subtask's snapshot seals them, the channels capture what follows as
// channel state (see channel.overtake).
func (w *RecordWriter[T]) overtake(b Barrier) {
	for c, ch := range w.chans {
		if len(w.bufs[c]) > 0 {
			batch := w.bufs[c]
			w.bufs[c] = make([]Rec[T], 0, w.batchSize)
			ch.mu.Lock()
			ch.pushLocked(message{kind: msgData, data: batch, n: len(batch)})
			ch.mu.Unlock()
		}
		ch.overtake(message{kind: msgBarrier, barrier: b}, false)
	}
}

// Collect implements Output.
func (w *RecordWriter[T]) Collect(v T, ts int64) error {
	w.records++
	switch w.kind {
	case Broadcast:
		for c := range w.bufs {
			if err := w.add(c, v, ts); err != nil {
				return err
			}
		}
		return nil
	case Rebalance:
		c := w.rr
		w.rr++
		if w.rr == len(w.chans) {
			w.rr = 0
		}
		return w.add(c, v, ts)
	case Forward:
		return w.add(0, v, ts)
	}
	return w.add(w.part.Channel(v, len(w.chans)), v, ts)
}

func (w *RecordWriter[T]) add(c int, v T, ts int64) error {
	w.bufs[c] = append(w.bufs[c], Rec[T]{V: v, Ts: ts})
	if len(w.bufs[c]) >= w.full[c] {
		return w.send(c)
	}
	return nil
}

// batch returns an empty batch, recycled if the pool has one.
func (w *RecordWriter[T]) batch() []Rec[T] {
	if r, ok := w.pool.Get().([]Rec[T]); ok {
		return r[:0]
	}
	return make([]Rec[T], 0, w.batchSize)
}

// send sends channel c's batch. Under an in-flight limit smaller than the
// batch (the limit shrank while it filled) the batch goes in pieces within
// the limit. The channel's buffer is empty while they wait for space: an
// unaligned barrier's overtake, which runs inside the wait, must find no
// record there that was collected before the ones waiting.
func (w *RecordWriter[T]) send(c int) error {
	b := w.bufs[c]
	w.bufs[c] = w.batch()
	ch := w.chans[c]
	limit := ch.limit.Load()
	if limit <= 0 {
		w.full[c] = w.batchSize
		return ch.send(w.ctx, message{kind: msgData, data: b, n: len(b), pool: &w.pool}, w.p)
	}
	w.full[c] = int(min(max(limit/2, 1), int64(w.batchSize)))
	for int64(len(b)) > limit {
		lim := int(limit)
		rest := append(w.batch(), b[lim:]...)
		clear(b[lim:])
		if err := ch.send(w.ctx, message{kind: msgData, data: b[:lim], n: lim, pool: &w.pool}, w.p); err != nil {
			return err
		}
		b = rest
	}
	return ch.send(w.ctx, message{kind: msgData, data: b, n: len(b), pool: &w.pool}, w.p)
}

// EmitWatermark implements Output: pending records go first.
func (w *RecordWriter[T]) EmitWatermark(wm int64) error {
	return w.broadcast(message{kind: msgWatermark, wm: wm})
}

func (w *RecordWriter[T]) flush() error {
	for c := range w.bufs {
		if len(w.bufs[c]) > 0 {
			if err := w.send(c); err != nil {
				return err
			}
		}
	}
	return nil
}

func (w *RecordWriter[T]) broadcast(m message) error {
	if err := w.flush(); err != nil {
		return err
	}
	for _, c := range w.chans {
		if err := c.send(w.ctx, m, w.p); err != nil {
			return err
		}
	}
	return nil
}
