package runtime

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weirstream/weir/internal/netio"
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
	from    int        // records of data before it are not part of it (channel state only)
	pool    *sync.Pool // where the consumer returns data once processed
	wm      int64
	barrier Barrier
	// inflight, on an unaligned barrier, is what the barrier overtook on
	// its channel: the messages sent before it that the consumer reads
	// after it.
	inflight *inflight
	// stateOf marks a queued message that is part of the channel state of
	// an unaligned barrier queued before it, so that a channel bridged to
	// another process can say where that state ends.
	stateOf *inflight
}

// overtakable reports whether an unaligned barrier may pass m: records and
// the event-time markers between them, which become channel state. It
// never passes another barrier or the end of the channel's data.
func (m *message) overtakable() bool {
	switch m.kind {
	case msgData, msgWatermark, msgIdle, msgActive:
		return true
	}
	return false
}

// inflight is the channel state one unaligned barrier carries: the
// messages sent on its channel before it and read by the consumer after
// it, oldest first. The producer appends to msgs until it has taken its
// own snapshot and then closes sealed; the consumer reads msgs only after
// sealed is closed. The records are shared with the queue, never returned
// to a pool, so they stay as they were sent.
type inflight struct {
	msgs   []message
	sealed chan struct{}
}

func newInflight(msgs []message) *inflight {
	return &inflight{msgs: msgs, sealed: make(chan struct{})}
}

// producer is what a channel's sender offers while it waits for space: a
// signal that urgent work has arrived (an unaligned barrier, a trigger) and
// the function that does it, so that a subtask blocked on a full output
// still takes part in checkpoints at once.
type producer interface {
	urgentSignal() <-chan struct{}
	runUrgent() error
	// beforeMarker takes the snapshot an unaligned barrier deferred, so
	// that a marker the channel state must not hold (the end of data, a
	// barrier) goes out behind it.
	beforeMarker() error
	// promoted reports whether the producer's aligned barrier of
	// checkpoint id has timed out and now overtakes what is queued.
	promoted(id int64) bool
}

// channel connects one producing subtask to one consuming subtask. It is
// bounded: a producer that runs ahead of its consumer waits in send, which
// is how backpressure travels upstream. It is a queue rather than a Go
// channel because an unaligned barrier goes to its front, overtaking the
// records queued before it.
//
// It holds at most capacity messages and, with buffer debloating, at most
// limit records: a batch that would take it past the limit waits, unless
// the channel holds no records (so that progress never depends on the
// limit), and the producer's RecordWriter sends no batch larger than the
// limit. Only right after the limit shrank can the channel hold more:
// records admitted under the old one.
type channel struct {
	mu       sync.Mutex
	ring     []message
	head, n  int
	capacity int
	// queued is the number of records in the queued batches.
	queued int

	// limit is the most records the channel holds, set by the consumer
	// when it debloats (0: only capacity bounds it). The producer's
	// writer reads it once per batch.
	limit atomic.Int64
	// aheadMax is the most records queued ahead of an aligned barrier
	// when the barrier was queued: what the consumer processed between
	// the barrier's arrival and its taking it.
	aheadMax atomic.Int64
	// announceMu orders the announcements of the limit to the producer
	// in another process, on a channel bridged from there: each sends
	// the limit current when it holds the lock, so the last one sent is
	// the newest.
	announceMu sync.Mutex

	notify chan struct{} // the consumer's wake-up, shared by its channels
	space  chan struct{} // the producer's wake-up
	// urgent, if set, tells the consumer that an unaligned barrier is at
	// the front of the queue.
	urgent func()
	// overtaken, on a channel bridged to another process, is signalled
	// when an unaligned barrier goes to the front (see forwardOut).
	overtaken chan struct{}

	// remote, on a subtask's input channel bridged from another
	// process, is the network channel that feeds it: an aligned barrier
	// that timed out on its way is promoted there too.
	remote atomic.Pointer[netio.Receiver]

	// capture, owned by the producer, is the channel state being
	// collected since an unaligned barrier overtook the queue: until the
	// producer's snapshot seals it, whatever it sends belongs to it and is
	// queued without waiting for space.
	capture *inflight

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
	return &channel{ring: make([]message, max(capacity, 1)), capacity: capacity, notify: notify, space: make(chan struct{}, 1)}
}

func (c *channel) at(i int) *message { return &c.ring[(c.head+i)%len(c.ring)] }

func (c *channel) pushLocked(m message) {
	if m.kind == msgData {
		c.queued += m.n
	}
	if c.n == len(c.ring) {
		grown := make([]message, 2*len(c.ring))
		for i := range c.n {
			grown[i] = *c.at(i)
		}
		c.ring, c.head = grown, 0
	}
	c.ring[(c.head+c.n)%len(c.ring)] = m
	c.n++
}

func (c *channel) wake() {
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

// send delivers m, waiting while the channel is full, until ctx is done.
// While it waits it runs p's urgent work (p may be nil), after which m may
// no longer have to wait: the channel is capturing channel state, or m is
// an aligned barrier that has timed out and overtakes.
func (c *channel) send(ctx context.Context, m message, p producer) error {
	var start time.Time
	for {
		if c.capture != nil && !m.overtakable() {
			// A marker goes out behind the channel state, never in it,
			// even when the capture began while this send waited.
			if p == nil {
				return errors.New("runtime: a marker sent while its channel captures channel state")
			}
			if err := p.beforeMarker(); err != nil {
				return err
			}
			if c.capture != nil {
				return errors.New("runtime: the channel still captures channel state after the snapshot")
			}
		}
		if c.capture != nil {
			// Sent before the producer's snapshot, read after the
			// barrier: channel state, kept as it is.
			m.pool, m.stateOf = nil, c.capture
			c.capture.msgs = append(c.capture.msgs, m)
			c.mu.Lock()
			c.pushLocked(m)
			c.mu.Unlock()
			break
		}
		if m.kind == msgBarrier && p != nil && !m.barrier.Unaligned && p.promoted(m.barrier.ID) {
			m.barrier.Unaligned = true
			c.overtake(m, true)
			break
		}
		c.mu.Lock()
		if c.admitsLocked(&m) {
			c.pushLocked(m)
			c.mu.Unlock()
			break
		}
		c.mu.Unlock()
		if start.IsZero() {
			start = time.Now()
			c.blockedSince.Store(start.UnixNano())
		}
		var urgent <-chan struct{}
		if p != nil {
			urgent = p.urgentSignal()
		}
		select {
		case <-c.space:
		case <-urgent:
			if err := p.runUrgent(); err != nil {
				c.endWait(start)
				return err
			}
		case <-ctx.Done():
			c.endWait(start)
			return context.Cause(ctx)
		}
	}
	c.endWait(start)
	c.wake()
	return nil
}

func (c *channel) endWait(start time.Time) {
	if start.IsZero() {
		return
	}
	c.blockedSince.Store(0)
	c.backpressured.Add(int64(time.Since(start)))
}

// overtake puts the unaligned barrier b ahead of every queued message it
// may pass, returns its channel state (those messages, oldest first), and
// wakes the consumer's urgent path. With sealed the state is final (the
// producer has snapshotted already); otherwise the channel captures what
// the producer sends until it seals it.
func (c *channel) overtake(b message, sealed bool) *inflight {
	c.mu.Lock()
	k := c.n // b goes at index k: after the last message it may not pass
	for k > 0 && c.passable(c.at(k-1)) {
		k--
	}
	att := newInflight(make([]message, 0, c.n-k))
	for i := k; i < c.n; i++ {
		m := c.at(i)
		m.pool, m.stateOf = nil, att // shared with the channel state from now on
		att.msgs = append(att.msgs, *m)
	}
	b.inflight = att
	c.pushLocked(message{}) // room for b
	for i := c.n - 1; i > k; i-- {
		*c.at(i) = *c.at(i - 1)
	}
	*c.at(k) = b
	c.mu.Unlock()
	if sealed {
		close(att.sealed)
	} else {
		c.capture = att
	}
	c.wake()
	c.signalOvertaken()
	return att
}

// passable reports whether an unaligned barrier may pass the queued m. On
// a channel bridged to another process it does not pass the channel state
// of an earlier barrier still on its way out: the receiver takes what
// follows a barrier up to the state-end marker as that barrier's state.
func (c *channel) passable(m *message) bool {
	return m.overtakable() && (c.overtaken == nil || m.stateOf == nil)
}

func (c *channel) signalOvertaken() {
	if c.urgent != nil {
		c.urgent()
	}
	if c.overtaken != nil {
		select {
		case c.overtaken <- struct{}{}:
		default:
		}
	}
}

// pushAnyway queues m whatever the channel holds: what arrived from
// another process ahead of an unaligned barrier, taken in one go.
func (c *channel) pushAnyway(m message) {
	c.mu.Lock()
	c.pushLocked(m)
	c.mu.Unlock()
	c.wake()
}

// admitsLocked reports whether the channel takes m now: it holds fewer
// than capacity messages and, for a batch, stays within the limit or holds
// no records. An aligned barrier it takes is counted in aheadMax.
func (c *channel) admitsLocked(m *message) bool {
	if c.n >= c.capacity {
		return false
	}
	switch {
	case m.kind == msgData:
		lim := c.limit.Load()
		return lim <= 0 || c.queued == 0 || int64(c.queued+m.n) <= lim
	case m.kind == msgBarrier && !m.barrier.Unaligned:
		if q := int64(c.queued); q > c.aheadMax.Load() {
			c.aheadMax.Store(q)
		}
	}
	return true
}

// setLimit sets the most records the channel holds (0: no limit) and
// wakes a producer waiting for space, which a larger limit may give.
func (c *channel) setLimit(n int64) {
	if c.limit.Swap(n) == n {
		return
	}
	select {
	case c.space <- struct{}{}:
	default:
	}
}

// announceLimit tells the producer of a channel bridged from another
// process the channel's limit, so that its side of the channel keeps
// within it too (see forwardOut). A channel not bridged yet has its limit
// announced when its receiver opens.
func (c *channel) announceLimit() {
	r := c.remote.Load()
	if r == nil {
		return
	}
	c.announceMu.Lock()
	defer c.announceMu.Unlock()
	// A failure means the connection ended, which forwardIn reports.
	_ = r.AnnounceLimit(c.limit.Load())
}

// trySend queues m if there is space.
func (c *channel) trySend(m message) bool {
	c.mu.Lock()
	if !c.admitsLocked(&m) {
		c.mu.Unlock()
		return false
	}
	c.pushLocked(m)
	c.mu.Unlock()
	c.wake()
	return true
}

// promote moves the aligned barrier of checkpoint id, if it is still
// queued, ahead of what it may pass, as an unaligned barrier whose channel
// state is what it passed. It reports whether the barrier was queued.
func (c *channel) promote(id int64) bool {
	c.mu.Lock()
	at := -1
	for i := range c.n {
		if m := c.at(i); m.kind == msgBarrier && m.barrier.ID == id && !m.barrier.Unaligned {
			at = i
			break
		}
	}
	if at < 0 {
		c.mu.Unlock()
		return false
	}
	b := *c.at(at)
	b.barrier.Unaligned = true
	k := at
	for k > 0 && c.passable(c.at(k-1)) {
		k--
	}
	b.inflight = newInflight(make([]message, 0, at-k))
	for i := k; i < at; i++ {
		m := c.at(i)
		m.pool, m.stateOf = nil, b.inflight
		b.inflight.msgs = append(b.inflight.msgs, *m)
	}
	close(b.inflight.sealed)
	for i := at; i > k; i-- {
		*c.at(i) = *c.at(i - 1)
	}
	*c.at(k) = b
	c.mu.Unlock()
	c.wake()
	c.signalOvertaken()
	return true
}

// seal ends the producer's capture: the channel state of its unaligned
// barrier is final.
func (c *channel) seal() {
	if c.capture != nil {
		close(c.capture.sealed)
		c.capture = nil
	}
}

// tryRecv takes the oldest message, if there is one.
func (c *channel) tryRecv() (message, bool) {
	c.mu.Lock()
	if c.n == 0 {
		c.mu.Unlock()
		return message{}, false
	}
	m := *c.at(0)
	*c.at(0) = message{}
	c.head = (c.head + 1) % len(c.ring)
	c.n--
	if m.kind == msgData {
		c.queued -= m.n
	}
	c.mu.Unlock()
	select {
	case c.space <- struct{}{}:
	default:
	}
	return m, true
}

// recvUrgent takes the oldest message if it is an unaligned barrier.
func (c *channel) recvUrgent() (message, bool) {
	c.mu.Lock()
	if c.n == 0 || c.at(0).kind != msgBarrier || !c.at(0).barrier.Unaligned {
		c.mu.Unlock()
		return message{}, false
	}
	c.mu.Unlock()
	return c.tryRecv()
}

// recv takes the oldest message, waiting for one until ctx is done. Only a
// channel's single consumer calls it.
func (c *channel) recv(ctx context.Context) (message, error) {
	for {
		if m, ok := c.tryRecv(); ok {
			return m, nil
		}
		select {
		case <-c.notify:
		case <-ctx.Done():
			return message{}, context.Cause(ctx)
		}
	}
}

// inputGate is a subtask's view of its input channels.
type inputGate struct {
	chans   []*channel
	logical []int   // channel -> logical input of the head operator
	edges   []*Edge // channel -> its edge
	froms   []int   // channel -> the subtask of its edge's producer it comes from
	notify  chan struct{}
	next    int
	// replay holds, per channel, the channel state of the checkpoint the
	// subtask restored: read before anything the channel brings.
	replay [][]message
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
		if g.replay != nil && len(g.replay[c]) > 0 {
			m = g.replay[c][0]
			g.replay[c] = g.replay[c][1:]
			g.next = (c + 1) % n
			return c, m, true
		}
		if m, ok = g.chans[c].tryRecv(); ok {
			g.next = (c + 1) % n
			return c, m, true
		}
	}
	return 0, message{}, false
}

// recvUrgent takes the unaligned barrier at the front of channel ch, if
// there is one and the channel state restored for ch has been read: a
// restored channel's records and watermarks come before anything the
// channel brings, barriers included.
func (g *inputGate) recvUrgent(ch int) (message, bool) {
	if g.replay != nil && len(g.replay[ch]) > 0 {
		return message{}, false
	}
	return g.chans[ch].recvUrgent()
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
