package runtime

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/netio"
)

// BatchCodec carries the batches of one edge's record type across a
// process boundary. Records cross only through it.
type BatchCodec interface {
	// Send encodes batch ([]Rec[T]) into one data frame on s, waiting for
	// credit.
	Send(ctx context.Context, s *netio.Sender, batch any) error
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

func (c batchCodec[T]) Send(ctx context.Context, s *netio.Sender, batch any) error {
	return netio.SendBatch(ctx, s, codec.Codec[Rec[T]](c.rec), batch.([]Rec[T]))
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
// c fills, then the producer blocks: backpressure across processes.
func forwardOut(ctx context.Context, c *channel, s *netio.Sender, bc BatchCodec) error {
	for {
		m, err := c.recv(ctx)
		if err != nil {
			return err
		}
		switch m.kind {
		case msgData:
			err = bc.Send(ctx, s, m.data)
			if m.pool != nil {
				m.pool.Put(m.data)
			}
		case msgWatermark:
			err = s.SendWatermark(ctx, m.wm)
		case msgBarrier:
			err = s.SendBarrier(ctx, netio.Barrier{ID: m.barrier.ID, Timestamp: m.barrier.Timestamp, Savepoint: m.barrier.Savepoint})
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

// forwardIn moves the frames of network channel r into the local channel
// c of a subtask's input gate, in order, until the end marker or ctx's
// end. While c is full it does not take frames, so r returns no credit
// and the remote sender waits.
func forwardIn(ctx context.Context, r *netio.Receiver, c *channel, bc BatchCodec) error {
	var pool sync.Pool
	for {
		f, err := r.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		var m message
		switch f.Kind {
		case netio.KindData:
			data, n, err := bc.Decode(f, &pool)
			if err != nil {
				return err
			}
			m = message{kind: msgData, data: data, n: n, pool: &pool}
		case netio.KindWatermark:
			m = message{kind: msgWatermark, wm: f.Watermark}
		case netio.KindBarrier:
			m = message{kind: msgBarrier, barrier: Barrier{ID: f.Barrier.ID, Timestamp: f.Barrier.Timestamp, Savepoint: f.Barrier.Savepoint}}
		case netio.KindIdle:
			m = message{kind: msgIdle}
		case netio.KindActive:
			m = message{kind: msgActive}
		case netio.KindEndOfData:
			m = message{kind: msgEndOfData}
		case netio.KindEnd:
			m = message{kind: msgEnd}
		default:
			return fmt.Errorf("runtime: unexpected %v frame on channel %d", f.Kind, r.Channel())
		}
		if err := c.send(ctx, m, nil); err != nil {
			return err
		}
	}
}
