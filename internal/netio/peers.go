package netio

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	weirconfig "github.com/weirstream/weir/config"
)

// A connection between Peers starts with a handshake before any frame:
//
//	dialer:   magic "WEIRNET2" | uvarint length, dialer id | uvarint length, expected acceptor id | auth uint8
//	acceptor: status uint8, and unless it is 0 (ok): uvarint length, message
//
// The acceptor checks the magic, that both sides agree on authentication,
// that the expected id is its own and that the dialer's id is the smaller
// one, and answers. Both sides bound the handshake with handshakeTimeout.
//
// With authentication (auth 1, both sides hold the token AuthToken
// gives), proofs come before the ids are checked:
//
//	dialer:   hello as above | nonce [32]byte
//	acceptor: status 5 (challenge) | nonce [32]byte | proof [32]byte
//	dialer:   proof [32]byte
//	acceptor: status as above
//
// A proof is an HMAC-SHA256 keyed by the token of a label naming the
// side that sends it, both ids and both nonces: the token never crosses
// the wire, and a proof is good for one side of one connection only.
// Each side checks the other's proof, so neither a dialer nor an acceptor
// without the token gets a connection.
const (
	handshakeMagic   = "WEIRNET2"
	handshakeTimeout = 10 * time.Second

	// maxPeerID bounds the length of a process id, in bytes.
	maxPeerID = 255
	// maxStatusMessage bounds the acceptor's explanation of a rejection.
	maxStatusMessage = 1024
	// nonceSize and proofSize are the sizes of the authentication's nonces
	// and proofs (HMAC-SHA256).
	nonceSize = 32
	proofSize = sha256.Size
)

// tokenKey is the option that sets the token, for error messages.
const tokenKey = weirconfig.KeyClusterAuthToken

// Authentication modes of a hello.
const (
	authNone byte = iota
	authHMAC
)

// Handshake status codes.
const (
	statusOK byte = iota
	statusBadMagic
	statusBadHello
	statusWrongID
	statusWrongDirection
	statusChallenge
	statusAuthFailed
)

func statusName(code byte) string {
	switch code {
	case statusOK:
		return "ok"
	case statusBadMagic:
		return "bad magic"
	case statusBadHello:
		return "malformed hello"
	case statusWrongID:
		return "wrong id"
	case statusWrongDirection:
		return "wrong direction"
	case statusChallenge:
		return "challenge"
	case statusAuthFailed:
		return "authentication failed"
	}
	return fmt.Sprintf("unknown status %d", code)
}

// ErrHandshake is wrapped by the errors of a connection between Peers that
// failed its handshake: the other end is not a weir data-plane endpoint, is
// another process than the one expected, or rejected the connection.
var ErrHandshake = errors.New("netio: handshake failed")

// ErrAuth is wrapped, with ErrHandshake, by the errors of a handshake that
// failed because the two sides do not share the token AuthToken gives:
// one has none, or they differ.
var ErrAuth = errors.New("authentication failed")

// Peers keeps one connection per pair of processes, each process known by
// a string id. Of a pair, the process with the lexicographically smaller id
// dials and the other accepts, so the two never race to build two
// connections. Each connection opens with a handshake in which the dialer
// names itself and the process it expects, so that reaching the wrong
// process, or a restarted one with another id, fails with an error
// wrapping ErrHandshake. It is safe for concurrent use.
type Peers struct {
	self   string
	ln     net.Listener
	logger *slog.Logger
	opts   []Option
	token  []byte // the shared secret (AuthToken); nil: no authentication
	// advertise is the host Addr gives (AdvertiseHost); "": the listener's.
	advertise string

	ctx    context.Context // canceled by Close: aborts dials and waits
	cancel context.CancelFunc

	mu      sync.Mutex
	closed  bool
	conns   map[string]*Conn
	dials   map[string]*dialCall         // dials under way, by peer
	arrived map[string]chan struct{}     // closed when the peer's connection is accepted
	raw     map[net.Conn]struct{}        // connections in their handshake
	wg      sync.WaitGroup               // every goroutine; Add only under mu while open
	hook    func(peer string, dial bool) // for tests: a Conn call starts waiting
}

// dialCall is one dial shared by the Conn calls that want it.
type dialCall struct {
	done chan struct{}
	c    *Conn
	err  error
}

func checkID(id string) error {
	if id == "" || len(id) > maxPeerID {
		return fmt.Errorf("netio: peer id %q: want 1 to %d bytes", id, maxPeerID)
	}
	return nil
}

// NewPeers starts accepting connections from other processes on ln, self
// being this process's id (1 to 255 bytes; NewPeers panics otherwise).
// Every connection is a Conn made with opts; with AuthToken among them,
// every connection is authenticated both ways. The Peers owns ln and
// closes it in Close. A nil logger discards the logs.
func NewPeers(self string, ln net.Listener, logger *slog.Logger, opts ...Option) *Peers {
	if err := checkID(self); err != nil {
		panic(err.Error())
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Peers{
		self:      self,
		ln:        ln,
		logger:    logger.With("self", self),
		opts:      opts,
		token:     cfg.token,
		advertise: cfg.advertise,
		ctx:       ctx,
		cancel:    cancel,
		conns:     map[string]*Conn{},
		dials:     map[string]*dialCall{},
		arrived:   map[string]chan struct{}{},
		raw:       map[net.Conn]struct{}{},
	}
	p.wg.Add(1)
	go p.acceptLoop()
	return p
}

// Addr returns the address the Peers accepts connections on: the
// listener's, or the host of AdvertiseHost with the listener's port.
func (p *Peers) Addr() string {
	a := p.ln.Addr().String()
	if p.advertise == "" {
		return a
	}
	_, port, err := net.SplitHostPort(a)
	if err != nil {
		return a
	}
	return net.JoinHostPort(p.advertise, port)
}

func (p *Peers) errClosed() error {
	return fmt.Errorf("netio: peers of %q closed: %w", p.self, ErrClosed)
}

// live returns the open connection to peer, forgetting one that ended.
// p.mu is held.
func (p *Peers) live(peer string) *Conn {
	c := p.conns[peer]
	if c == nil {
		return nil
	}
	select {
	case <-c.Done():
		delete(p.conns, peer)
		return nil
	default:
		return c
	}
}

// Connected reports whether an open connection to peer exists.
func (p *Peers) Connected(peer string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.closed && p.live(peer) != nil
}

// Conn returns the open connection to peer, making it if there is none.
// If this process's id is the smaller one it dials addr, the peer's Addr;
// otherwise it waits, until ctx is done, for the peer to dial in, and
// ignores addr. Concurrent calls for one peer share one dial (to the addr
// of the call that started it) or wait. A connection that ended (its Done
// is closed) is forgotten, so the next call makes a new one.
//
// A dial is not bound by ctx but by a timeout of its own; a call whose ctx
// ends first returns, and the connection, once made, serves later calls.
func (p *Peers) Conn(ctx context.Context, peer, addr string) (*Conn, error) {
	if err := checkID(peer); err != nil {
		return nil, err
	}
	if peer == p.self {
		return nil, fmt.Errorf("netio: peer %q is this process", peer)
	}
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, p.errClosed()
		}
		if c := p.live(peer); c != nil {
			p.mu.Unlock()
			return c, nil
		}
		if p.self < peer {
			d := p.dials[peer]
			if d == nil {
				d = &dialCall{done: make(chan struct{})}
				p.dials[peer] = d
				p.wg.Add(1)
				go p.dial(peer, addr, d)
			}
			hook := p.hook
			p.mu.Unlock()
			if hook != nil {
				hook(peer, true)
			}
			select {
			case <-d.done:
				return d.c, d.err
			case <-ctx.Done():
				return nil, fmt.Errorf("netio: connecting to peer %q at %s: %w", peer, addr, context.Cause(ctx))
			}
		}
		arrived := p.arrived[peer]
		if arrived == nil {
			arrived = make(chan struct{})
			p.arrived[peer] = arrived
		}
		hook := p.hook
		p.mu.Unlock()
		if hook != nil {
			hook(peer, false)
		}
		select {
		case <-arrived:
		case <-ctx.Done():
			return nil, fmt.Errorf("netio: waiting for peer %q to connect: %w", peer, context.Cause(ctx))
		case <-p.ctx.Done():
			return nil, p.errClosed()
		}
	}
}

// register makes nc, whose handshake with peer succeeded, the connection
// to peer, and returns the connection it replaces, if any. p.mu is held
// and p is open.
func (p *Peers) register(peer string, nc net.Conn) (c, old *Conn) {
	delete(p.raw, nc)
	c = New(nc, p.opts...)
	old = p.live(peer)
	p.conns[peer] = c
	if ch := p.arrived[peer]; ch != nil {
		close(ch)
		delete(p.arrived, peer)
	}
	p.wg.Add(1)
	go p.watch(peer, c)
	return c, old
}

// watch forgets the connection to peer when it ends.
func (p *Peers) watch(peer string, c *Conn) {
	defer p.wg.Done()
	select {
	case <-c.Done():
	case <-p.ctx.Done():
		return
	}
	p.mu.Lock()
	if p.conns[peer] == c {
		delete(p.conns, peer)
	}
	closed := p.closed
	p.mu.Unlock()
	if !closed {
		p.logger.Info("netio: connection to peer ended", "peer", peer, "err", c.Err())
	}
}

// errReplaced ends a connection superseded by a newer one from its peer.
var errReplaced = fmt.Errorf("%w: replaced by a newer connection from the peer", ErrClosed)

// replace closes old, the connection to peer that a new one superseded.
func (p *Peers) replace(peer string, old *Conn) {
	p.logger.Info("netio: peer connected again; closing its old connection", "peer", peer)
	// The peer gave up the old connection: do not wait to flush it.
	old.fail(errReplaced)
	_ = old.Close()
}

// dial connects to peer at addr for the Conn calls waiting on d.
func (p *Peers) dial(peer, addr string, d *dialCall) {
	defer p.wg.Done()
	defer close(d.done)
	nc, err := p.dialHandshake(peer, addr)
	p.mu.Lock()
	delete(p.dials, peer)
	if nc != nil {
		delete(p.raw, nc)
	}
	closed := p.closed
	if closed {
		// Whatever happened to the dial, Close aborted it.
		err = p.errClosed()
	}
	if err != nil {
		p.mu.Unlock()
		if nc != nil {
			nc.Close()
		}
		d.err = fmt.Errorf("netio: connect to peer %q at %s: %w", peer, addr, err)
		if !closed {
			p.logger.Warn("netio: connect to peer failed", "peer", peer, "addr", addr, "err", err)
		}
		return
	}
	c, old := p.register(peer, nc)
	p.mu.Unlock()
	d.c = c
	p.logger.Info("netio: connected to peer", "peer", peer, "addr", addr)
	if old != nil {
		p.replace(peer, old)
	}
}

// dialHandshake dials addr and shakes hands with peer. The connection it
// returns, with or without an error, is in p.raw.
func (p *Peers) dialHandshake(peer, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: handshakeTimeout}
	nc, err := d.DialContext(p.ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		nc.Close()
		return nil, p.errClosed()
	}
	p.raw[nc] = struct{}{}
	p.mu.Unlock()
	return nc, clientHandshake(nc, p.self, peer, p.token)
}

// clientHandshake introduces self to the acceptor, expected to be peer,
// proves it holds token (if any) and checks the acceptor's proof, and
// reads the acceptor's answer.
func clientHandshake(nc net.Conn, self, peer string, token []byte) error {
	if err := nc.SetDeadline(time.Now().Add(handshakeTimeout)); err != nil {
		return fmt.Errorf("%w: %w", ErrHandshake, err)
	}
	hello := make([]byte, 0, len(handshakeMagic)+2*binary.MaxVarintLen64+len(self)+len(peer)+1+nonceSize)
	hello = append(hello, handshakeMagic...)
	hello = appendString(hello, self)
	hello = appendString(hello, peer)
	var nonce []byte
	if token == nil {
		hello = append(hello, authNone)
	} else {
		nonce = newNonce()
		hello = append(append(hello, authHMAC), nonce...)
	}
	if _, err := nc.Write(hello); err != nil {
		return fmt.Errorf("%w: sending hello: %w", ErrHandshake, err)
	}
	if token != nil {
		if err := answerChallenge(nc, self, peer, token, nonce); err != nil {
			return err
		}
	}
	if err := readStatus(nc); err != nil {
		return err
	}
	if err := nc.SetDeadline(time.Time{}); err != nil {
		return fmt.Errorf("%w: %w", ErrHandshake, err)
	}
	return nil
}

// answerChallenge reads the acceptor's challenge to the dialer self,
// checks the acceptor's proof and sends the dialer's.
func answerChallenge(nc net.Conn, self, peer string, token, nonce []byte) error {
	var code [1]byte
	if _, err := io.ReadFull(nc, code[:]); err != nil {
		if err == io.EOF {
			return fmt.Errorf("%w: connection closed without an answer (not a weir data-plane endpoint?)", ErrHandshake)
		}
		return fmt.Errorf("%w: reading the answer: %w", ErrHandshake, err)
	}
	if code[0] != statusChallenge {
		return readStatus(io.MultiReader(bytes.NewReader(code[:]), nc))
	}
	var ch [nonceSize + proofSize]byte
	if _, err := io.ReadFull(nc, ch[:]); err != nil {
		return fmt.Errorf("%w: reading the challenge: %w", ErrHandshake, err)
	}
	theirs, proof := ch[:nonceSize], ch[nonceSize:]
	if !proofOK(proof, token, "acceptor", self, peer, nonce, theirs) {
		return fmt.Errorf("%w: %w: the peer's proof does not match this process's %s: the processes hold different tokens",
			ErrHandshake, ErrAuth, tokenKey)
	}
	if _, err := nc.Write(prove(token, "dialer", self, peer, nonce, theirs)); err != nil {
		return fmt.Errorf("%w: sending the proof: %w", ErrHandshake, err)
	}
	return nil
}

// newNonce returns fresh random bytes for a handshake.
func newNonce() []byte {
	b := make([]byte, nonceSize)
	_, _ = rand.Read(b) // never fails, as crypto/rand documents
	return b
}

// prove returns the proof side sends on the connection between dialer
// and acceptor whose nonces are dn and an.
func prove(token []byte, side, dialer, acceptor string, dn, an []byte) []byte {
	m := hmac.New(sha256.New, token)
	msg := appendString(nil, "weir netio proof of the "+side)
	msg = appendString(msg, dialer)
	msg = appendString(msg, acceptor)
	msg = append(append(msg, dn...), an...)
	m.Write(msg)
	return m.Sum(nil)
}

// proofOK checks a proof in constant time.
func proofOK(proof, token []byte, side, dialer, acceptor string, dn, an []byte) bool {
	return subtle.ConstantTimeCompare(proof, prove(token, side, dialer, acceptor, dn, an)) == 1
}

// readStatus reads the acceptor's answer to a hello.
func readStatus(r io.Reader) error {
	br := &byteReader{r: r}
	code, err := br.ReadByte()
	if err == io.EOF {
		return fmt.Errorf("%w: connection closed without an answer (not a weir data-plane endpoint?)", ErrHandshake)
	}
	if err != nil {
		return fmt.Errorf("%w: reading the answer: %w", ErrHandshake, err)
	}
	if code == statusOK {
		return nil
	}
	msg, err := readString(br, maxStatusMessage)
	if err != nil {
		return fmt.Errorf("%w: unreadable answer after status %q (not a weir data-plane endpoint?): %w", ErrHandshake, statusName(code), err)
	}
	if code == statusAuthFailed {
		return fmt.Errorf("%w: %w: rejected by the peer: %s", ErrHandshake, ErrAuth, msg)
	}
	return fmt.Errorf("%w: rejected by the peer: %s: %s", ErrHandshake, statusName(code), msg)
}

func (p *Peers) acceptLoop() {
	defer p.wg.Done()
	var backoff time.Duration
	for {
		nc, err := p.ln.Accept()
		if err != nil {
			select {
			case <-p.ctx.Done():
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				p.logger.Error("netio: listener closed", "err", err)
				return
			}
			// Out of file descriptors, say: back off and try again.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			p.logger.Warn("netio: accept failed", "err", err, "retry_in", backoff)
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-p.ctx.Done():
				t.Stop()
				return
			}
			continue
		}
		backoff = 0
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			nc.Close()
			return
		}
		p.raw[nc] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		go p.accept(nc)
	}
}

// accept shakes hands with a process that dialed in and makes the
// connection its peer's, replacing an older one.
func (p *Peers) accept(nc net.Conn) {
	defer p.wg.Done()
	remote := nc.RemoteAddr().String()
	peer, err := p.serverHandshake(nc)
	p.mu.Lock()
	if err == nil && p.closed {
		err = p.errClosed()
	}
	if err != nil {
		delete(p.raw, nc)
		closed := p.closed
		p.mu.Unlock()
		if closed {
			nc.Close()
			p.logger.Debug("netio: handshake aborted by close", "remote", remote, "err", err)
			return
		}
		p.logger.Warn("netio: rejected a connection", "remote", remote, "err", err)
		// Let the dialer read the rejection: drain what it sent, so that
		// closing does not reset the connection under the answer. Close
		// and the handshake deadline bound the wait.
		_, _ = io.Copy(io.Discard, io.LimitReader(nc, 64<<10))
		nc.Close()
		return
	}
	_, old := p.register(peer, nc)
	p.mu.Unlock()
	p.logger.Info("netio: peer connected", "peer", peer, "remote", remote)
	if old != nil {
		p.replace(peer, old)
	}
}

// serverHandshake reads a dialer's hello, authenticates the dialer if
// this process has a token, answers and returns the dialer's id.
func (p *Peers) serverHandshake(nc net.Conn) (string, error) {
	if err := nc.SetDeadline(time.Now().Add(handshakeTimeout)); err != nil {
		return "", fmt.Errorf("%w: %w", ErrHandshake, err)
	}
	var magic [len(handshakeMagic)]byte
	if _, err := io.ReadFull(nc, magic[:]); err != nil {
		return "", fmt.Errorf("%w: reading the magic: %w", ErrHandshake, err)
	}
	if string(magic[:]) != handshakeMagic {
		msg := fmt.Sprintf("bad magic %q, want %q", magic[:], handshakeMagic)
		reject(nc, statusBadMagic, msg)
		return "", fmt.Errorf("%w: %s (not a weir data-plane endpoint?)", ErrHandshake, msg)
	}
	br := &byteReader{r: nc}
	from, err := readString(br, maxPeerID)
	if err == nil && from == "" {
		err = errors.New("empty id")
	}
	if err != nil {
		msg := fmt.Sprintf("dialer id: %v", err)
		reject(nc, statusBadHello, msg)
		return "", fmt.Errorf("%w: %s", ErrHandshake, msg)
	}
	want, err := readString(br, maxPeerID)
	if err != nil {
		msg := fmt.Sprintf("expected id: %v", err)
		reject(nc, statusBadHello, msg)
		return "", fmt.Errorf("%w: from %q: %s", ErrHandshake, from, msg)
	}
	mode, err := br.ReadByte()
	if err != nil {
		msg := fmt.Sprintf("authentication mode: %v", err)
		reject(nc, statusBadHello, msg)
		return "", fmt.Errorf("%w: from %q: %s", ErrHandshake, from, msg)
	}
	if err := p.authenticate(nc, mode, from, want); err != nil {
		return "", err
	}
	if want != p.self {
		msg := fmt.Sprintf("this is %q, not %q", p.self, want)
		reject(nc, statusWrongID, msg)
		return "", fmt.Errorf("%w: from %q: wrong id: %s", ErrHandshake, from, msg)
	}
	if from >= p.self {
		msg := fmt.Sprintf("%q dialed %q, but the smaller id dials", from, p.self)
		reject(nc, statusWrongDirection, msg)
		return "", fmt.Errorf("%w: wrong direction: %s", ErrHandshake, msg)
	}
	if _, err := nc.Write([]byte{statusOK}); err != nil {
		return "", fmt.Errorf("%w: from %q: answering: %w", ErrHandshake, from, err)
	}
	if err := nc.SetDeadline(time.Time{}); err != nil {
		return "", fmt.Errorf("%w: %w", ErrHandshake, err)
	}
	return from, nil
}

// authenticate checks that the dialer from, which expects the acceptor
// want, authenticates as this process requires (mode is the hello's),
// and with a token exchanges proofs with it. A failure is answered and
// returned wrapping ErrAuth.
func (p *Peers) authenticate(nc net.Conn, mode byte, from, want string) error {
	fail := func(format string, args ...any) error {
		msg := fmt.Sprintf(format, args...)
		reject(nc, statusAuthFailed, msg)
		return fmt.Errorf("%w: %w: from %q: %s", ErrHandshake, ErrAuth, from, msg)
	}
	switch {
	case mode == authNone && p.token == nil:
		return nil
	case mode == authNone:
		return fail("%q did not authenticate, but this process requires %s: set the same token on every process of the cluster",
			from, tokenKey)
	case mode == authHMAC && p.token == nil:
		return fail("%q authenticates, but this process has no %s: set the same token on every process of the cluster",
			from, tokenKey)
	case mode != authHMAC:
		msg := fmt.Sprintf("unknown authentication mode %d", mode)
		reject(nc, statusBadHello, msg)
		return fmt.Errorf("%w: from %q: %s", ErrHandshake, from, msg)
	}
	theirs := make([]byte, nonceSize)
	if _, err := io.ReadFull(nc, theirs); err != nil {
		return fmt.Errorf("%w: from %q: reading the nonce: %w", ErrHandshake, from, err)
	}
	// The proofs name the acceptor the dialer expects, so that a dialer
	// reaching the wrong process learns it from the id check below.
	ours := newNonce()
	ch := append(append([]byte{statusChallenge}, ours...), prove(p.token, "acceptor", from, want, theirs, ours)...)
	if _, err := nc.Write(ch); err != nil {
		return fmt.Errorf("%w: from %q: sending the challenge: %w", ErrHandshake, from, err)
	}
	proof := make([]byte, proofSize)
	if _, err := io.ReadFull(nc, proof); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			// The dialer hung up on the challenge: it refused this
			// process's proof.
			return fmt.Errorf("%w: %w: from %q: the dialer hung up after the challenge: its %s differs from this process's",
				ErrHandshake, ErrAuth, from, tokenKey)
		}
		return fmt.Errorf("%w: from %q: reading the proof: %w", ErrHandshake, from, err)
	}
	if !proofOK(proof, p.token, "dialer", from, want, theirs, ours) {
		return fail("the proof of %q does not match this process's %s: the processes hold different tokens",
			from, tokenKey)
	}
	return nil
}

// reject answers a hello with an error status and message and ends this
// side of the stream.
func reject(nc net.Conn, code byte, msg string) {
	if len(msg) > maxStatusMessage {
		msg = msg[:maxStatusMessage]
	}
	if _, err := nc.Write(appendString([]byte{code}, msg)); err != nil {
		return
	}
	if cw, ok := nc.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// readString reads a uvarint length, at most limit, and as many bytes.
func readString(br *byteReader, limit int) (string, error) {
	n, err := binary.ReadUvarint(br)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return "", err
	}
	if n > uint64(limit) {
		return "", fmt.Errorf("length %d exceeds %d", n, limit)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(br.r, b); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return "", err
	}
	return string(b), nil
}

// byteReader reads one byte at a time, so the handshake never consumes
// bytes of the frames that follow it.
type byteReader struct {
	r   io.Reader
	buf [1]byte
}

func (b *byteReader) ReadByte() (byte, error) {
	if _, err := io.ReadFull(b.r, b.buf[:]); err != nil {
		return 0, err
	}
	return b.buf[0], nil
}

// errReset ends the connections Reset drops.
var errReset = fmt.Errorf("%w: reset", ErrClosed)

// Reset drops every connection at once, without flushing, and keeps
// accepting new ones: what a process does when the work its channels
// served is gone (its job manager went away), so that a later peer starts
// from fresh connections and channel ids are never confused with old
// ones.
func (p *Peers) Reset() {
	p.mu.Lock()
	conns := p.conns
	p.conns = map[string]*Conn{}
	p.mu.Unlock()
	for peer, c := range conns {
		p.logger.Info("netio: dropping connection to peer", "peer", peer)
		c.fail(errReset)
		_ = c.Close()
	}
}

// Close stops accepting connections, aborts dials and waits under way and
// closes every connection (Conn.Close: frames already handed over are
// written out first). It returns the errors of the listener and of
// connections that had failed.
func (p *Peers) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.wg.Wait()
		return nil
	}
	p.closed = true
	p.cancel()
	conns := p.conns
	p.conns = map[string]*Conn{}
	raw := make([]net.Conn, 0, len(p.raw))
	for nc := range p.raw {
		raw = append(raw, nc)
	}
	p.mu.Unlock()

	var errs []error
	if err := p.ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		errs = append(errs, fmt.Errorf("netio: close listener: %w", err))
	}
	for _, nc := range raw {
		nc.Close()
	}
	var (
		wg    sync.WaitGroup
		errMu sync.Mutex
	)
	for peer, c := range conns {
		wg.Go(func() {
			if err := c.Close(); err != nil {
				errMu.Lock()
				errs = append(errs, fmt.Errorf("netio: connection to peer %q: %w", peer, err))
				errMu.Unlock()
			}
		})
	}
	wg.Wait()
	p.wg.Wait()
	return errors.Join(errs...)
}
