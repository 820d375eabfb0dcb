package netio

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/weirstream/weir/codec"
)

// ErrEnded is returned by a send after the channel's end marker.
var ErrEnded = errors.New("netio: channel ended")

// Sender is the sending end of one logical channel. It is meant for one
// goroutine: frames leave in the order of the calls, so markers never
// overtake data sent before them. After Conn.Release of its channel every
// send fails with ErrReleased.
type Sender struct {
	c  *Conn
	ch uint32

	mu     sync.Mutex
	opened bool
	credit int // data frames the receiver accepts now
	wake   chan struct{}

	ended bool // touched only by the sending goroutine

	released atomic.Bool // set by Conn.Release

	bytes atomic.Int64 // bytes of the frames handed to the connection

	limit atomic.Uint32 // the receiver's last KindLimit, 0 if none

	// waitHook, if set, runs each time a send starts waiting for credit.
	waitHook func()
}

// Channel returns the logical channel id.
func (s *Sender) Channel() uint32 { return s.ch }

// Bytes returns the bytes of the frames sent on the channel so far, frame
// headers included. It may be called from any goroutine.
func (s *Sender) Bytes() int64 { return s.bytes.Load() }

// Limit returns the most records the receiver last asked to have in
// flight on the channel (KindLimit), 0 for no limit. It may be called
// from any goroutine.
func (s *Sender) Limit() int64 { return int64(s.limit.Load()) }

// Credit returns the data frames the sender may send without waiting.
func (s *Sender) Credit() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.credit
}

func (s *Sender) grant(n uint32) {
	s.mu.Lock()
	s.credit += int(n)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// release makes every later or blocked send fail with ErrReleased.
func (s *Sender) release() {
	s.released.Store(true)
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *Sender) errReleased() error { return fmt.Errorf("%w: channel %d", ErrReleased, s.ch) }

// ErrInterrupted is returned by a send that gave up waiting for credit
// because its interrupt channel was signalled; nothing was sent.
var ErrInterrupted = errors.New("netio: send interrupted")

// acquire takes one credit, waiting for the receiver to grant one, unless
// interrupt (nil: never) is signalled first.
func (s *Sender) acquire(ctx context.Context, interrupt <-chan struct{}) error {
	for {
		s.mu.Lock()
		if s.released.Load() {
			s.mu.Unlock()
			return s.errReleased()
		}
		if s.credit > 0 {
			s.credit--
			s.mu.Unlock()
			return nil
		}
		s.mu.Unlock()
		if s.waitHook != nil {
			s.waitHook()
		}
		select {
		case <-s.wake:
		case <-interrupt:
			return ErrInterrupted
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-s.c.done:
			return s.c.Err()
		}
	}
}

// send hands an encoded frame to the connection, after taking a credit if
// it is a data frame. The frame buffer belongs to the connection from then
// on, sent or not.
func (s *Sender) send(ctx context.Context, frame []byte, data bool) error {
	return s.sendUnless(ctx, frame, data, nil)
}

// sendUnless is send, giving up on a data frame with ErrInterrupted if
// interrupt is signalled while it waits for credit.
func (s *Sender) sendUnless(ctx context.Context, frame []byte, data bool, interrupt <-chan struct{}) error {
	err := ctx.Err()
	if err != nil {
		err = context.Cause(ctx)
	} else if s.released.Load() {
		err = s.errReleased()
	} else if s.ended {
		err = fmt.Errorf("%w: channel %d", ErrEnded, s.ch)
	} else if data {
		err = s.acquire(ctx, interrupt)
	}
	if err != nil {
		s.c.putBuf(frame)
		return err
	}
	n := len(frame)
	if err := s.c.enqueue(frame); err != nil {
		return err
	}
	s.bytes.Add(int64(n))
	return nil
}

func (s *Sender) marker(ctx context.Context, f Frame) error {
	f.Channel = s.ch
	err := s.send(ctx, AppendFrame(s.c.getBuf(), &f), false)
	if err == nil && f.Kind == KindEnd {
		s.ended = true
	}
	return err
}

// SendData sends count records already encoded back to back in data,
// waiting for credit. data is copied.
func (s *Sender) SendData(ctx context.Context, count int, data []byte) error {
	f := Frame{Channel: s.ch, Kind: KindData, Count: count, Data: data}
	return s.send(ctx, AppendFrame(s.c.getBuf(), &f), true)
}

// SendBatch encodes recs with c into one data frame and sends it, waiting
// (until ctx is done) for the receiver to grant credit.
func SendBatch[T any](ctx context.Context, s *Sender, c codec.Codec[T], recs []T) error {
	return SendBatchUnless(ctx, s, c, recs, nil)
}

// SendBatchUnless is SendBatch, giving up with ErrInterrupted, having sent
// nothing, if interrupt is signalled while it waits for credit.
func SendBatchUnless[T any](ctx context.Context, s *Sender, c codec.Codec[T], recs []T, interrupt <-chan struct{}) error {
	buf, start := beginFrame(s.c.getBuf(), s.ch, KindData)
	buf = binary.AppendUvarint(buf, uint64(len(recs)))
	for _, r := range recs {
		buf = c.Append(buf, r)
	}
	return s.sendUnless(ctx, sealFrame(buf, start), true, interrupt)
}

// SendWatermark sends an event-time watermark.
func (s *Sender) SendWatermark(ctx context.Context, wm int64) error {
	return s.marker(ctx, Frame{Kind: KindWatermark, Watermark: wm})
}

// SendBarrier sends a checkpoint barrier.
func (s *Sender) SendBarrier(ctx context.Context, b Barrier) error {
	return s.marker(ctx, Frame{Kind: KindBarrier, Barrier: b})
}

// SendIdle marks the producer idle.
func (s *Sender) SendIdle(ctx context.Context) error { return s.marker(ctx, Frame{Kind: KindIdle}) }

// SendActive marks the producer active again.
func (s *Sender) SendActive(ctx context.Context) error {
	return s.marker(ctx, Frame{Kind: KindActive})
}

// SendStateEnd ends the channel state of the last unaligned barrier sent.
func (s *Sender) SendStateEnd(ctx context.Context) error {
	return s.marker(ctx, Frame{Kind: KindStateEnd})
}

// SendEndOfData says no more records follow; barriers still may.
func (s *Sender) SendEndOfData(ctx context.Context) error {
	return s.marker(ctx, Frame{Kind: KindEndOfData})
}

// SendEnd closes the channel; every later send returns ErrEnded.
func (s *Sender) SendEnd(ctx context.Context) error { return s.marker(ctx, Frame{Kind: KindEnd}) }
