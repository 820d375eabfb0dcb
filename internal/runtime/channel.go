package runtime

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Rec is a record with its event-time timestamp (NoTimestamp if it has
// none).
type Rec[T any] struct {
	V  T
	Ts int64
}

// NoTimestamp marks a record without event time.
const NoTimestamp int64 = MinWatermark

type msgKind uint8

const (
	msgData msgKind = iota
	msgWatermark
	msgBarrier
	msgIdle
	msgActive
	// msgEndOfData: the producer emits no more records, but it still takes
	// part in checkpoints (the final one among them).
	msgEndOfData
	// msgEnd: the channel is closed; nothing more, not even barriers.
	msgEnd
)

// message is what travels on a channel: a batch of records ([]Rec[T] for
// the channel's record type) or a marker.
type message struct {
	kind    msgKind
	data    any
	n       int        // records in data
	pool    *sync.Pool // where the consumer returns data once processed
	wm      int64
	barrier Barrier
}

// channel connects one producing subtask to one consuming subtask. It is
// bounded: a producer that runs ahead of its consumer blocks in send, which
// is how backpressure travels upstream.
type channel struct {
	q      chan message
	notify chan struct{} // the consumer's wake-up, shared by its channels

	backpressured atomic.Int64 // nanoseconds the producer spent blocked
	blockedSince  atomic.Int64 // Unix nanoseconds the current wait began, 0 if none
}

// backpressuredNanos returns the producer's blocked time, including a
// wait still in progress.
func (c *channel) backpressuredNanos() int64 {
	n := c.backpressured.Load()
	if since := c.blockedSince.Load(); since != 0 {
		n += max(time.Now().UnixNano()-since, 0)
	}
	return n
}

func newChannel(capacity int, notify chan struct{}) *channel {
	return &channel{q: make(chan message, capacity), notify: notify}
}

// send delivers m, blocking while the channel is full, until ctx is done.
func (c *channel) send(ctx context.Context, m message) error {
	select {
	case c.q <- m:
	default:
		start := time.Now()
		c.blockedSince.Store(start.UnixNano())
		select {
		case c.q <- m:
		case <-ctx.Done():
			c.blockedSince.Store(0)
			return context.Cause(ctx)
		}
		c.blockedSince.Store(0)
		c.backpressured.Add(int64(time.Since(start)))
	}
	select {
	case c.notify <- struct{}{}:
	default:
	}
	return nil
}

// inputGate is a subtask's view of its input channels.
type inputGate struct {
	chans   []*channel
	logical []int // channel -> logical input of the head operator
	notify  chan struct{}
	next    int
}

// poll returns a message from a channel that is not blocked, trying the
// channels round-robin, or ok=false if none has one ready.
func (g *inputGate) poll(blocked func(int) bool) (ch int, m message, ok bool) {
	n := len(g.chans)
	for i := 0; i < n; i++ {
		c := (g.next + i) % n
		if blocked(c) {
			continue
		}
		select {
		case m = <-g.chans[c].q:
			g.next = (c + 1) % n
			return c, m, true
		default:
		}
	}
	return 0, message{}, false
}

// mailbox carries control actions into a loop, a subtask's or the job
// master's: checkpoint triggers and notifications, timers, completions of
// asynchronous work, reports. Posting never blocks, so the job master and
// timers never wait on a busy subtask; the queue is bounded in practice by
// the number of checkpoints in flight and timers due.
type mailbox struct {
	mu     sync.Mutex
	mails  []func() error
	signal chan struct{}
}

func newMailbox() *mailbox { return &mailbox{signal: make(chan struct{}, 1)} }

func (mb *mailbox) post(f func() error) {
	mb.mu.Lock()
	mb.mails = append(mb.mails, f)
	mb.mu.Unlock()
	select {
	case mb.signal <- struct{}{}:
	default:
	}
}

// take returns the queued mails, oldest first, and empties the queue.
func (mb *mailbox) take() []func() error {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	m := mb.mails
	mb.mails = nil
	return m
}
