package runtime

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/netio"
)

// BatchCodec carries the batches of one edge's record type across a
// process boundary. Records cross only through it.
type BatchCodec interface {
	// Send encodes batch ([]Rec[T]) into one data frame on s, waiting for
	// credit unless interrupt (nil: never) is signalled first, when it
	// sends nothing and returns netio.ErrInterrupted.
	Send(ctx context.Context, s *netio.Sender, batch any, interrupt <-chan struct{}) error
	// Decode turns a data frame back into a batch ([]Rec[T]), taking its
	// slice from pool when it has one.
	Decode(f netio.Frame, pool *sync.Pool) (batch any, n int, err error)
	// AppendBatch appends the records of batch ([]Rec[T]) from index from
	// on to dst, back to back, for channel state.
	AppendBatch(dst []byte, batch any, from int) []byte
	// DecodeBatch decodes n records that AppendBatch wrote at the start
	// of src and returns them ([]Rec[T]) and the bytes they took.
	DecodeBatch(src []byte, n int) (batch any, used int, err error)
}

// NewBatchCodec returns the BatchCodec of records of type T encoded by c:
// each record is the value followed by its timestamp as a varint.
func NewBatchCodec[T any](c codec.Codec[T]) BatchCodec { return batchCodec[T]{rec: recCodec[T]{c}} }

// BatchCodecFor returns the BatchCodec for T with codec.For's default:
// the type's own binary marshalling if it has one, else a compiled codec
// of its fields.
func BatchCodecFor[T any]() (BatchCodec, error) {
	c, err := codec.For[T]()
	if err != nil {
		return nil, err
	}
	return NewBatchCodec(c), nil
}

type recCodec[T any] struct{ v codec.Codec[T] }

func (c recCodec[T]) Append(dst []byte, r Rec[T]) []byte {
	return binary.AppendVarint(c.v.Append(dst, r.V), r.Ts)
}

func (c recCodec[T]) Decode(src []byte) (Rec[T], int, error) {
	v, n, err := c.v.Decode(src)
	if err != nil {
		return Rec[T]{}, 0, err
	}
	ts, m := binary.Varint(src[n:])
	if m <= 0 {
		return Rec[T]{}, 0, errors.New("runtime: bad record timestamp")
	}
	return Rec[T]{V: v, Ts: ts}, n + m, nil
}

type batchCodec[T any] struct{ rec recCodec[T] }

func (c batchCodec[T]) Send(ctx context.Context, s *netio.Sender, batch any, interrupt <-chan struct{}) error {
	return netio.SendBatchUnless(ctx, s, codec.Codec[Rec[T]](c.rec), batch.([]Rec[T]), interrupt)
}

func (c batchCodec[T]) AppendBatch(dst []byte, batch any, from int) []byte {
	for _, r := range batch.([]Rec[T])[from:] {
		dst = c.rec.Append(dst, r)
	}
	return dst
}

func (c batchCodec[T]) DecodeBatch(src []byte, n int) (any, int, error) {
	out := make([]Rec[T], n)
	used := 0
	for i := range out {
		r, m, err := c.rec.Decode(src[used:])
		if err != nil {
			return nil, 0, fmt.Errorf("record %d of %d: %w", i, n, err)
		}
		out[i] = r
		used += m
	}
	return out, used, nil
}

func (c batchCodec[T]) Decode(f netio.Frame, pool *sync.Pool) (any, int, error) {
	var dst []Rec[T]
	if b, ok := pool.Get().([]Rec[T]); ok {
		dst = b[:0]
	}
	dst, err := netio.DecodeBatch(codec.Codec[Rec[T]](c.rec), f, dst)
	if err != nil {
		return nil, 0, err
	}
	return dst, len(dst), nil
}

// forwardOut drains the local channel c, which a RecordWriter fills, onto
// the network channel s, in order, until the end marker or ctx's end. The
// local channel's bound and the receiver's credit together bound what is
// in flight; a receiver that grants no credit blocks this goroutine, then
// c fills, then the producer blocks: backpressure across processes. A
// limit the receiver announces (buffer debloating) becomes c's: the
// producer's batches, and so the data frames, and c's queue keep within
// it.
//
// An unaligned barrier that overtakes c goes out at once, even while a
// batch waits for credit (that batch then follows it, as channel state),
// and the messages of its channel state follow it, closed by a state-end
// marker: the receiver persists them, so the records in flight between two
// processes are persisted by the consumer alone (see forwardIn).
func forwardOut(ctx context.Context, c *channel, s *netio.Sender, bc BatchCodec) error {
	var state *inflight // the channel state being sent, until its end marker
	var held *message   // a batch the barrier overtook while it waited for credit
	for {
		// The consumer's in-flight limit (buffer debloating) holds on
		// this side too: the writer's batches and c's queue keep within
		// it.
		if lim := s.Limit(); lim != 0 && lim != c.limit.Load() {
			c.setLimit(lim)
		}
		var m message
		switch {
		case held != nil:
			m, held = *held, nil
		default:
			var ok bool
			if m, ok = c.tryRecv(); ok {
				break
			}
			var sealed <-chan struct{}
			if state != nil {
				select {
				case <-state.sealed:
					// Sealed and nothing queued: all of it has gone.
					if err := s.SendStateEnd(ctx); err != nil {
						return err
					}
					state = nil
					continue
				default:
					sealed = state.sealed
				}
			}
			select {
			case <-c.notify:
			case <-c.overtaken:
			case <-sealed:
			case <-ctx.Done():
				return context.Cause(ctx)
			}
			continue
		}
		if state != nil && m.stateOf != state {
			if err := s.SendStateEnd(ctx); err != nil {
				return err
			}
			state = nil
		}
		var err error
		switch m.kind {
		case msgData:
			err = bc.Send(ctx, s, m.data, c.overtaken)
			if errors.Is(err, netio.ErrInterrupted) {
				b, ok := c.recvUrgent()
				if !ok {
					held = &m // signalled for a barrier that is not at the front
					continue
				}
				if err := s.SendBarrier(ctx, wireBarrier(b.barrier)); err != nil {
					return err
				}
				if state != nil {
					return errors.New("runtime: an unaligned barrier overtook before the previous channel state ended")
				}
				state = b.inflight
				m.stateOf = state
				held = &m
				continue
			}
			if err == nil && m.pool != nil {
				m.pool.Put(m.data)
			}
		case msgWatermark:
			err = s.SendWatermark(ctx, m.wm)
		case msgBarrier:
			err = s.SendBarrier(ctx, wireBarrier(m.barrier))
			if err == nil && m.barrier.Unaligned {
				state = m.inflight
			}
		case msgIdle:
			err = s.SendIdle(ctx)
		case msgActive:
			err = s.SendActive(ctx)
		case msgEndOfData:
			err = s.SendEndOfData(ctx)
		case msgEnd:
			return s.SendEnd(ctx)
		}
		if err != nil {
			return err
		}
	}
}

func wireBarrier(b Barrier) netio.Barrier {
	return netio.Barrier{ID: b.ID, Timestamp: b.Timestamp, Savepoint: b.Savepoint, Stop: b.Stop, Drain: b.Drain, Native: b.Native, Unaligned: b.Unaligned, AlignedTimeout: int64(b.AlignedTimeout), Base: b.Base, Target: b.Target}
}

// forwardIn moves the frames of network channel r into the local channel
// c of a subtask's input gate, in order, until the end marker or ctx's
// end. While c is full it does not take frames, so r returns no credit
// and the remote sender waits.
//
// An unaligned barrier does not wait behind the frames before it: when
// one arrives, forwardIn takes every frame up to it at once, queues them,
// and puts the barrier at the front of c, with what it passed there as its
// channel state; the frames of the sender's channel state that follow it
// join that state without waiting for space, until the state-end marker.
// So does an aligned barrier that timed out while on its way (the
// consumer's Receiver.Promote, see Task.alignedTimedOut), as an unaligned
// barrier whose channel state is what it passed: its producer has
// snapshotted before sending it.
func forwardIn(ctx context.Context, r *netio.Receiver, c *channel, bc BatchCodec) error {
	var pool sync.Pool
	capturing := false
	for {
		f, err := r.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if f.Kind == netio.KindStateEnd {
			if !capturing {
				return fmt.Errorf("runtime: a state-end marker without an unaligned barrier on channel %d", r.Channel())
			}
			c.seal()
			capturing = false
			continue
		}
		m, err := frameMessage(f, bc, &pool)
		if err != nil {
			return fmt.Errorf("runtime: channel %d: %w", r.Channel(), err)
		}
		switch {
		case m.kind == msgBarrier && m.barrier.Unaligned:
			c.overtake(m, false)
			capturing = true
			continue
		case capturing:
			// Channel state: queued without waiting for space.
			if err := c.send(ctx, m, nil); err != nil {
				return err
			}
			continue
		}
		if m.kind == msgBarrier && r.Promoted(m.barrier.ID) {
			// Promoted before it arrived: it overtakes at once.
			c.pushAnyway(m)
			c.promote(m.barrier.ID)
			continue
		}
	wait:
		for !c.trySend(m) {
			select {
			case <-c.space:
			case <-r.Urgent():
				frames, ok := r.TakeThroughBarrier()
				if !ok {
					continue
				}
				c.pushAnyway(m)
				for _, f := range frames[:len(frames)-1] {
					mm, err := frameMessage(f, bc, &pool)
					if err != nil {
						return fmt.Errorf("runtime: channel %d: %w", r.Channel(), err)
					}
					c.pushAnyway(mm)
				}
				b, err := frameMessage(frames[len(frames)-1], bc, &pool)
				if err != nil {
					return err
				}
				if !b.barrier.Unaligned {
					// An aligned barrier that timed out (Promote): its
					// producer snapshotted before sending it, so what it
					// passes is its whole channel state.
					b.barrier.Unaligned, b.barrier.AlignedTimeout = true, 0
					c.overtake(b, true)
					break wait
				}
				c.overtake(b, false)
				capturing = true
				break wait
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		}
	}
}

// frameMessage turns a frame into the message it carries.
func frameMessage(f netio.Frame, bc BatchCodec, pool *sync.Pool) (message, error) {
	switch f.Kind {
	case netio.KindData:
		data, n, err := bc.Decode(f, pool)
		if err != nil {
			return message{}, err
		}
		return message{kind: msgData, data: data, n: n, pool: pool}, nil
	case netio.KindWatermark:
		return message{kind: msgWatermark, wm: f.Watermark}, nil
	case netio.KindBarrier:
		b := f.Barrier
		return message{kind: msgBarrier, barrier: Barrier{ID: b.ID, Timestamp: b.Timestamp, Savepoint: b.Savepoint, Stop: b.Stop, Drain: b.Drain, Native: b.Native, Unaligned: b.Unaligned, AlignedTimeout: time.Duration(b.AlignedTimeout), Base: b.Base, Target: b.Target}}, nil
	case netio.KindIdle:
		return message{kind: msgIdle}, nil
	case netio.KindActive:
		return message{kind: msgActive}, nil
	case netio.KindEndOfData:
		return message{kind: msgEndOfData}, nil
	case netio.KindEnd:
		return message{kind: msgEnd}, nil
	}
	return message{}, fmt.Errorf("unexpected %v frame", f.Kind)
}
