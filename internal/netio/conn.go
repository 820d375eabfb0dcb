package netio

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
)

// ErrClosed is the error of a connection closed by Close on this side or
// by the peer between frames.
var ErrClosed = errors.New("netio: connection closed")

// ErrReleased is wrapped by the errors of a Sender or Receiver used after
// Release forgot its channel.
var ErrReleased = errors.New("netio: channel released")

// Option configures a Conn, or the Peers that make Conns.
type Option func(*config)

type config struct {
	maxFrame int
	bufSize  int
	// token is the secret Peers authenticate connections with; nil: none.
	token []byte
	// advertise is the host Peers.Addr gives; "": the listener's.
	advertise string
}

func defaultConfig() config {
	return config{maxFrame: DefaultMaxFrameSize, bufSize: 64 << 10}
}

// MaxFrameSize bounds the body of a frame the connection accepts; a longer
// frame is treated as corrupt. Default: DefaultMaxFrameSize (64 MiB).
func MaxFrameSize(n int) Option {
	return func(c *config) {
		if n >= bodyMin {
			c.maxFrame = n
		}
	}
}

// BufferSize sets the size of the read and write buffers around the
// network connection. Default: 64 KiB.
func BufferSize(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.bufSize = n
		}
	}
}

// AdvertiseHost makes Peers.Addr give host, with the listener's port, as
// the address other processes reach it at: for a listener on a wildcard
// address, or behind an address translation. For Peers only.
func AdvertiseHost(host string) Option { return func(c *config) { c.advertise = host } }

// AuthToken makes Peers authenticate every connection with the secret
// tok, which every process of the cluster shares (cluster.auth-token):
// each side of a handshake proves it holds tok with an HMAC of both sides'
// fresh nonces, so tok itself never crosses the wire, and a peer without
// it, or with another one, is refused with an error wrapping ErrAuth. An
// empty tok turns authentication off. It has no effect on a Conn made by
// New, which starts after the handshake.
func AuthToken(tok string) Option {
	return func(c *config) {
		c.token = nil
		if tok != "" {
			c.token = []byte(tok)
		}
	}
}

// Conn multiplexes logical channels over one network connection. A writer
// goroutine serialises the frames handed over by all senders, whole frames
// at a time, and a reader goroutine dispatches incoming frames to receivers
// (data and markers) and senders (credit).
//
// A Conn fails as a whole: a network error or a corrupt frame closes it, and
// every blocked or later Send and Next returns the error.
type Conn struct {
	nc  net.Conn
	cfg config

	// The writer's queue: encoded frames in the order they were handed over.
	wmu     sync.Mutex
	wq      [][]byte
	wclosed bool // Close has drained the queue; nothing more is accepted
	wsignal chan struct{}
	closing chan struct{} // closed by Close: drain the queue, then stop

	mu        sync.Mutex
	senders   map[uint32]*Sender
	receivers map[uint32]*Receiver
	released  map[uint32]struct{} // channels forgotten by Release

	done    chan struct{} // closed when the connection has failed or closed
	errOnce sync.Once
	err     error

	closeOnce sync.Once
	writerWG  sync.WaitGroup
	readerWG  sync.WaitGroup

	bufs sync.Pool // *[]byte for outgoing frames
}

// New starts multiplexing over nc. The Conn owns nc and closes it.
func New(nc net.Conn, opts ...Option) *Conn {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	c := &Conn{
		nc:        nc,
		cfg:       cfg,
		wsignal:   make(chan struct{}, 1),
		closing:   make(chan struct{}),
		senders:   map[uint32]*Sender{},
		receivers: map[uint32]*Receiver{},
		released:  map[uint32]struct{}{},
		done:      make(chan struct{}),
	}
	c.writerWG.Add(1)
	c.readerWG.Add(1)
	go c.writer()
	go c.reader()
	return c
}

// Done is closed once the connection has failed or been closed.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err returns why the connection ended, or nil while it is open.
func (c *Conn) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

// peerClosed reports whether err says the other side closed the
// connection (or this side did, racing with the peer): a write on a closed
// pipe or socket, a reset. Such an end is ErrClosed, whichever goroutine
// notices it first.
func peerClosed(err error) bool {
	return errors.Is(err, io.ErrClosedPipe) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
}

func writeErr(err error) error {
	if peerClosed(err) {
		return ErrClosed
	}
	return fmt.Errorf("netio: write: %w", err)
}

// fail ends the connection with err; the first error wins.
func (c *Conn) fail(err error) {
	c.errOnce.Do(func() {
		c.err = err
		close(c.done)
		c.nc.Close()
	})
}

// Close writes out the frames already handed over, then closes the
// connection and waits for its goroutines. It returns the error that ended
// the connection earlier, if any, and nil after a clean close (by either
// side).
func (c *Conn) Close() error {
	c.closeOnce.Do(func() { close(c.closing) })
	c.writerWG.Wait()
	c.fail(ErrClosed)
	c.readerWG.Wait()
	if errors.Is(c.err, ErrClosed) {
		return nil
	}
	return c.err
}

func (c *Conn) getBuf() []byte {
	if p, ok := c.bufs.Get().(*[]byte); ok {
		return (*p)[:0]
	}
	return make([]byte, 0, 512)
}

func (c *Conn) putBuf(b []byte) {
	if cap(b) > 4<<20 {
		return
	}
	b = b[:0]
	c.bufs.Put(&b)
}

// enqueue hands an encoded frame to the writer. It never blocks: data
// frames are bounded by credit, and markers are a few bytes each.
func (c *Conn) enqueue(frame []byte) error {
	if err := c.Err(); err != nil {
		return err
	}
	c.wmu.Lock()
	if c.wclosed {
		c.wmu.Unlock()
		return ErrClosed
	}
	c.wq = append(c.wq, frame)
	c.wmu.Unlock()
	select {
	case c.wsignal <- struct{}{}:
	default:
	}
	return nil
}

func (c *Conn) writer() {
	defer c.writerWG.Done()
	bw := bufio.NewWriterSize(c.nc, c.cfg.bufSize)
	var batch [][]byte
	for {
		select {
		case <-c.wsignal:
		case <-c.closing:
		case <-c.done:
			return
		}
		stop := false
		for {
			c.wmu.Lock()
			batch, c.wq = c.wq, batch[:0]
			if len(batch) == 0 {
				select {
				case <-c.closing:
					c.wclosed = true
					stop = true
				default:
				}
				c.wmu.Unlock()
				break
			}
			c.wmu.Unlock()
			for i, b := range batch {
				if _, err := bw.Write(b); err != nil {
					c.writeFailed(err)
					return
				}
				c.putBuf(b)
				batch[i] = nil
			}
		}
		if err := bw.Flush(); err != nil {
			c.writeFailed(err)
			return
		}
		if stop {
			return
		}
	}
}

// writeFailed ends the writing side after a failed write. When the peer
// has closed the connection, what it sent before closing may still wait
// in this side's socket, unread (the ends of its channels, say): closing
// the connection now would lose it. So writing stops, later frames are
// refused with ErrClosed, and the reader, which reaches the peer's end
// once it has read everything, ends the connection. Any other write error
// ends it at once.
func (c *Conn) writeFailed(err error) {
	if !peerClosed(err) {
		c.fail(writeErr(err))
		return
	}
	c.wmu.Lock()
	c.wclosed = true
	for _, b := range c.wq {
		c.putBuf(b)
	}
	c.wq = nil
	c.wmu.Unlock()
}

func (c *Conn) reader() {
	defer c.readerWG.Done()
	br := bufio.NewReaderSize(c.nc, c.cfg.bufSize)
	var hdr [headerSize]byte
	for {
		f, err := readFrame(br, &hdr, c.cfg.maxFrame)
		if err == nil {
			err = c.dispatch(&f, headerSize+frameBodySize(&hdr))
		}
		if err != nil {
			switch {
			case err == io.EOF || peerClosed(err):
				err = ErrClosed
			case errors.Is(err, ErrCorrupt), errors.Is(err, ErrTruncated):
			default:
				err = fmt.Errorf("netio: read: %w", err)
			}
			c.fail(err)
			return
		}
	}
}

// dispatch hands an incoming frame of size bytes (header included) to its
// channel. Frames for a released channel are dropped: the peer may still
// have had them in flight.
func (c *Conn) dispatch(f *Frame, size int) error {
	switch f.Kind {
	case KindCredit:
		if s := c.sender(f.Channel); s != nil {
			s.grant(f.Credit)
		}
		return nil
	case KindLimit:
		if s := c.sender(f.Channel); s != nil {
			s.limit.Store(f.Limit)
		}
		return nil
	}
	if r := c.receiver(f.Channel); r != nil {
		return r.push(f, size)
	}
	return nil
}

// sender returns the sender of channel ch, creating it unopened if credit
// arrives before OpenSender, or nil if ch was released.
func (c *Conn) sender(ch uint32) *Sender {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.senders[ch]
	if s == nil {
		if _, ok := c.released[ch]; ok {
			return nil
		}
		s = &Sender{c: c, ch: ch, wake: make(chan struct{}, 1)}
		c.senders[ch] = s
	}
	return s
}

// receiver returns the receiver of channel ch, creating it unopened if
// markers arrive before OpenReceiver, or nil if ch was released.
func (c *Conn) receiver(ch uint32) *Receiver {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.receivers[ch]
	if r == nil {
		if _, ok := c.released[ch]; ok {
			return nil
		}
		r = &Receiver{c: c, ch: ch, wake: make(chan struct{}, 1), urgent: make(chan struct{}, 1)}
		c.receivers[ch] = r
	}
	return r
}

// OpenSender returns the sending end of logical channel ch. Each channel
// id has at most one sender per side; opening it twice, or after Release,
// panics.
func (c *Conn) OpenSender(ch uint32) *Sender {
	s := c.sender(ch)
	if s == nil {
		panic(fmt.Sprintf("netio: sender for channel %d opened after release", ch))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.opened {
		panic(fmt.Sprintf("netio: sender for channel %d opened twice", ch))
	}
	s.opened = true
	return s
}

// OpenReceiver returns the receiving end of logical channel ch and grants
// its peer sender initialCredit data frames. The credit bounds the batches
// buffered for this channel. Opening a channel twice, or after Release,
// panics.
func (c *Conn) OpenReceiver(ch uint32, initialCredit int) *Receiver {
	if initialCredit < 0 || uint64(initialCredit) > 1<<31 {
		panic(fmt.Sprintf("netio: initial credit %d out of range", initialCredit))
	}
	r := c.receiver(ch)
	if r == nil {
		panic(fmt.Sprintf("netio: receiver for channel %d opened after release", ch))
	}
	r.mu.Lock()
	if r.opened {
		r.mu.Unlock()
		panic(fmt.Sprintf("netio: receiver for channel %d opened twice", ch))
	}
	r.opened = true
	r.outstanding += initialCredit
	r.mu.Unlock()
	if initialCredit > 0 {
		// An error here also ends the connection, which Next reports.
		_ = r.grant(uint32(initialCredit))
	}
	return r
}

// Release forgets logical channel ch on this side, once the task using its
// sender or receiver is gone (canceled, say). It drops both ends of ch and
// the frames queued for its receiver, and from then on silently drops what
// still arrives for ch: data, markers and credit the peer had in flight.
// Such late data does not fail the connection.
//
// The Sender and Receiver of ch obtained before Release are dead after it:
// their sends and Next return an error wrapping ErrReleased, a send or
// Next blocked at the time included (Release may run on another goroutine
// than theirs; a send racing with it may still get its frame out). Channel
// ids are not reused: opening ch again panics. Releasing a channel twice,
// or one never opened, is allowed.
//
// The connection keeps one map entry per released id so that late frames
// are recognised.
func (c *Conn) Release(ch uint32) {
	c.mu.Lock()
	s, r := c.senders[ch], c.receivers[ch]
	delete(c.senders, ch)
	delete(c.receivers, ch)
	c.released[ch] = struct{}{}
	c.mu.Unlock()
	if s != nil {
		s.release()
	}
	if r != nil {
		r.release()
	}
}
