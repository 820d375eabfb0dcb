package netio

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/weirstream/weir/codec"
)

// Receiver is the receiving end of one logical channel. It holds at most
// the credit it granted in data frames; the application returns a credit
// each time Next hands it a data frame. It is meant for one goroutine.
// After Conn.Release of its channel Next fails with ErrReleased.
type Receiver struct {
	c  *Conn
	ch uint32

	mu          sync.Mutex
	opened      bool
	q           []Frame
	outstanding int  // credit granted to the sender and not yet used
	endSeen     bool // the reader queued the end marker
	released    bool // Conn.Release dropped the channel
	wake        chan struct{}
	urgent      chan struct{} // an unaligned (or promoted) barrier was queued
	promote     int64         // the aligned barrier to take as urgent (Promote)

	ended bool // Next returned the end marker; touched only by the consumer

	bytes atomic.Int64 // bytes of the frames received, headers included
}

// Channel returns the logical channel id.
func (r *Receiver) Channel() uint32 { return r.ch }

// Bytes returns the bytes of the frames received on the channel so far,
// frame headers included: what the channel's records and markers took on
// the connection. It may be called from any goroutine.
func (r *Receiver) Bytes() int64 { return r.bytes.Load() }

// Buffered returns the frames received and not yet taken by Next.
func (r *Receiver) Buffered() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.q)
}

// push queues a frame of size bytes from the reader goroutine. Data beyond the granted
// credit, or anything after the end marker, is a protocol violation. A
// frame for a released receiver is dropped.
func (r *Receiver) push(f *Frame, size int) error {
	r.mu.Lock()
	switch {
	case r.released:
		r.mu.Unlock()
		return nil
	case r.endSeen:
		r.mu.Unlock()
		return fmt.Errorf("%w: %v after end on channel %d", ErrCorrupt, f.Kind, r.ch)
	case f.Kind == KindData && r.outstanding == 0:
		r.mu.Unlock()
		return fmt.Errorf("%w: data without credit on channel %d", ErrCorrupt, r.ch)
	case f.Kind == KindData:
		r.outstanding--
	case f.Kind == KindEnd:
		r.endSeen = true
	}
	r.q = append(r.q, *f)
	urgent := r.urgentLocked(f)
	r.mu.Unlock()
	r.bytes.Add(int64(size))
	select {
	case r.wake <- struct{}{}:
	default:
	}
	if urgent {
		select {
		case r.urgent <- struct{}{}:
		default:
		}
	}
	return nil
}

// urgentLocked reports whether f is a barrier to take ahead of the frames
// before it: an unaligned one, or the aligned one Promote named.
func (r *Receiver) urgentLocked(f *Frame) bool {
	return f.Kind == KindBarrier && (f.Barrier.Unaligned || (r.promote != 0 && f.Barrier.ID == r.promote))
}

// Promote makes the aligned barrier of checkpoint id urgent, queued now
// or later: Urgent is signalled for it and TakeThroughBarrier takes it as
// it takes an unaligned one. It may be called from any goroutine.
func (r *Receiver) Promote(id int64) {
	r.mu.Lock()
	r.promote = id
	urgent := false
	for i := range r.q {
		if r.q[i].Kind == KindBarrier && r.q[i].Barrier.ID == id {
			urgent = true
			break
		}
	}
	r.mu.Unlock()
	if urgent {
		select {
		case r.urgent <- struct{}{}:
		default:
		}
	}
}

// Promoted reports whether Promote named the barrier of checkpoint id.
func (r *Receiver) Promoted(id int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return id != 0 && r.promote == id
}

// Urgent is signalled when an unaligned barrier is queued: the
// application may take it ahead of the frames before it with
// TakeThroughBarrier, instead of waiting until Next reaches it.
func (r *Receiver) Urgent() <-chan struct{} { return r.urgent }

// TakeThroughBarrier takes the queued frames up to and including the
// first unaligned barrier, returning the credit of the data frames among
// them, and reports whether there was one.
func (r *Receiver) TakeThroughBarrier() ([]Frame, bool) {
	r.mu.Lock()
	at := -1
	for i := range r.q {
		if r.urgentLocked(&r.q[i]) {
			at = i
			break
		}
	}
	if at < 0 || r.released {
		r.mu.Unlock()
		return nil, false
	}
	taken := make([]Frame, at+1)
	copy(taken, r.q[:at+1])
	clear(r.q[:at+1])
	r.q = r.q[at+1:]
	credit := 0
	for _, f := range taken {
		if f.Kind == KindData {
			credit++
		}
	}
	r.outstanding += credit
	r.mu.Unlock()
	if credit > 0 {
		_ = r.grant(uint32(credit))
	}
	return taken, true
}

// release discards the queued frames and makes every later or blocked Next
// fail with ErrReleased.
func (r *Receiver) release() {
	r.mu.Lock()
	r.released = true
	r.q = nil
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *Receiver) grant(n uint32) error {
	return r.c.enqueue(AppendFrame(r.c.getBuf(), &Frame{Channel: r.ch, Kind: KindCredit, Credit: n}))
}

// AnnounceLimit tells the sender the most records to have in flight on
// the channel, 0 for no limit (buffer debloating): the sender's side keeps
// within it; credit still bounds the data frames. It fails only when the
// connection has ended. It may be called from any goroutine.
func (r *Receiver) AnnounceLimit(n int64) error {
	n = min(max(n, 0), 1<<32-1)
	return r.c.enqueue(AppendFrame(r.c.getBuf(), &Frame{Channel: r.ch, Kind: KindLimit, Limit: uint32(n)}))
}

// Next returns the channel's next frame, waiting until one arrives or ctx
// is done. Taking a data frame returns its credit to the sender; its Data
// is the caller's to keep. After the end marker Next returns io.EOF. Frames
// that arrived before the connection failed are returned before its error.
// After Conn.Release of the channel Next returns an error wrapping
// ErrReleased.
func (r *Receiver) Next(ctx context.Context) (Frame, error) {
	for {
		r.mu.Lock()
		if r.released {
			r.mu.Unlock()
			return Frame{}, fmt.Errorf("%w: channel %d", ErrReleased, r.ch)
		}
		if len(r.q) > 0 {
			f := r.q[0]
			r.q[0] = Frame{}
			r.q = r.q[1:]
			if f.Kind == KindData {
				r.outstanding++
			}
			r.mu.Unlock()
			switch f.Kind {
			case KindData:
				// A failed grant means the connection ended; the next call
				// reports it.
				_ = r.grant(1)
			case KindEnd:
				r.ended = true
			}
			return f, nil
		}
		r.mu.Unlock()
		if r.ended {
			return Frame{}, io.EOF
		}
		select {
		case <-r.wake:
			continue
		case <-ctx.Done():
			return Frame{}, context.Cause(ctx)
		case <-r.c.done:
		}
		// The connection ended; hand out what arrived before it did.
		r.mu.Lock()
		empty := len(r.q) == 0
		r.mu.Unlock()
		if empty {
			return Frame{}, fmt.Errorf("channel %d: %w", r.ch, r.c.Err())
		}
	}
}

// DecodeBatch decodes the records of a data frame with c and appends them
// to dst. The frame must hold exactly its Count records.
func DecodeBatch[T any](c codec.Codec[T], f Frame, dst []T) ([]T, error) {
	if f.Kind != KindData {
		return dst, fmt.Errorf("netio: decode batch from a %v frame", f.Kind)
	}
	dst = append(dst, make([]T, f.Count)...)
	out := dst[len(dst)-f.Count:]
	p := f.Data
	for i := range out {
		v, n, err := c.Decode(p)
		if err != nil {
			return dst[:len(dst)-f.Count], fmt.Errorf("netio: channel %d record %d of %d: %w", f.Channel, i, f.Count, err)
		}
		out[i] = v
		p = p[n:]
	}
	if len(p) != 0 {
		return dst[:len(dst)-f.Count], fmt.Errorf("%w: %d bytes after %d records on channel %d", ErrCorrupt, len(p), f.Count, f.Channel)
	}
	return dst, nil
}

// RecvBatch returns the next frame of r and, for a data frame, its records
// decoded with c and appended to dst.
func RecvBatch[T any](ctx context.Context, r *Receiver, c codec.Codec[T], dst []T) (Frame, []T, error) {
	f, err := r.Next(ctx)
	if err != nil || f.Kind != KindData {
		return f, dst, err
	}
	dst, err = DecodeBatch(c, f, dst)
	return f, dst, err
}
