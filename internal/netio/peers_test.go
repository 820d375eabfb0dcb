package netio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testTimeout bounds every wait of these tests.
const testTimeout = 20 * time.Second

// countingListener counts the connections it accepts.
type countingListener struct {
	net.Listener
	accepts atomic.Int32
}

func (l *countingListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err == nil {
		l.accepts.Add(1)
	}
	return nc, err
}

// logLines is an io.Writer for a slog text handler: it hands each log
// line over on a channel.
type logLines chan string

func (l logLines) Write(p []byte) (int, error) {
	select {
	case l <- string(p):
	default: // the test does not look for it
	}
	return len(p), nil
}

// waitLog waits for a line holding every one of parts.
func (l logLines) wait(t *testing.T, parts ...string) string {
	t.Helper()
	deadline := time.After(testTimeout)
	for {
		select {
		case line := <-l:
			ok := true
			for _, p := range parts {
				ok = ok && strings.Contains(line, p)
			}
			if ok {
				return line
			}
		case <-deadline:
			t.Fatalf("no log line with %q", parts)
		}
	}
}

type testPeer struct {
	*Peers
	ln   *countingListener
	logs logLines
}

// newPeer starts Peers id on a loopback port, made with opts; Close runs
// at the end of the test.
func newPeer(t *testing.T, id string, opts ...Option) *testPeer {
	t.Helper()
	nl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &countingListener{Listener: nl}
	logs := make(logLines, 256)
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	p := &testPeer{Peers: NewPeers(id, ln, logger, opts...), ln: ln, logs: logs}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("close peers %s: %v", id, err)
		}
	})
	return p
}

// connect returns the connection between x and y as each side sees it,
// calling Conn on both sides at once.
func connect(t *testing.T, x, y *testPeer) (xc, yc *Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	var xerr, yerr error
	var wg sync.WaitGroup
	wg.Go(func() { xc, xerr = x.Conn(ctx, y.self, y.Addr()) })
	wg.Go(func() { yc, yerr = y.Conn(ctx, x.self, x.Addr()) })
	wg.Wait()
	if xerr != nil || yerr != nil {
		t.Fatalf("connect %s and %s: %v, %v", x.self, y.self, xerr, yerr)
	}
	return xc, yc
}

// exchange runs a channel script in each direction between x and y over
// channel ids ch and ch+1 and checks what arrives.
func exchange(t *testing.T, x, y *Conn, ch uint32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	c := recCodec(t)
	const batches = 20
	var wg sync.WaitGroup
	for i, pair := range [][2]*Conn{{x, y}, {y, x}} {
		id := ch + uint32(i)
		s, r := pair[0].OpenSender(id), pair[1].OpenReceiver(id, 2)
		wg.Go(func() {
			if err := play(ctx, s, c, script(id, batches)); err != nil {
				t.Errorf("channel %d send: %v", id, err)
			}
		})
		wg.Go(func() {
			got, err := consume(ctx, r, c)
			if err != nil {
				t.Errorf("channel %d receive: %v", id, err)
				return
			}
			want := script(id, batches)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("channel %d: got %v, want %v", id, got, want)
			}
		})
	}
	wg.Wait()
}

func waitDone(t *testing.T, c *Conn, what string) {
	t.Helper()
	select {
	case <-c.Done():
	case <-time.After(testTimeout):
		t.Fatalf("%s: connection still open", what)
	}
}

// TestPeersPair connects two processes: one TCP connection, dialed by the
// smaller id, carries batches both ways.
func TestPeersPair(t *testing.T) {
	a, b := newPeer(t, "tm-a"), newPeer(t, "tm-b")
	ac, bc := connect(t, a, b)
	exchange(t, ac, bc, 1)
	if !a.Connected("tm-b") || !b.Connected("tm-a") {
		t.Fatal("not connected")
	}
	// Later calls return the same connection.
	if again, _ := connect(t, a, b); again != ac {
		t.Fatal("second Conn made a new connection")
	}
	if n, m := a.ln.accepts.Load(), b.ln.accepts.Load(); n != 0 || m != 1 {
		t.Fatalf("accepts: a %d, b %d; want 0 and 1", n, m)
	}
	b.logs.wait(t, "level=INFO", "peer connected", "peer=tm-a")
}

// TestPeersLargerIDWaits checks that the larger id never dials: its Conn
// waits until the smaller id dials in, or until its ctx ends.
func TestPeersLargerIDWaits(t *testing.T) {
	a, b := newPeer(t, "a"), newPeer(t, "b")
	waiting := make(chan bool, 1)
	b.hook = func(peer string, dial bool) { waiting <- dial }

	// Without the peer, the wait ends with ctx, after no dial.
	ctx, cancel := context.WithCancelCause(t.Context())
	stop := errors.New("stop waiting")
	go func() {
		if dial := <-waiting; dial {
			t.Error("the larger id dials")
		}
		cancel(stop)
	}()
	if _, err := b.Conn(ctx, "a", a.Addr()); !errors.Is(err, stop) || !strings.Contains(err.Error(), "waiting for peer") {
		t.Fatalf("Conn without the peer: %v, want the cancel cause", err)
	}

	type result struct {
		c   *Conn
		err error
	}
	got := make(chan result, 1)
	go func() {
		c, err := b.Conn(t.Context(), "a", a.Addr())
		got <- result{c, err}
	}()
	if dial := <-waiting; dial {
		t.Fatal("the larger id dials")
	}
	if b.Connected("a") {
		t.Fatal("connected before the dial")
	}
	ac, err := a.Conn(t.Context(), "b", b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	var res result
	select {
	case res = <-got:
	case <-time.After(testTimeout):
		t.Fatal("the waiting Conn did not return")
	}
	if res.err != nil {
		t.Fatal(res.err)
	}
	exchange(t, ac, res.c, 1)
	if n := a.ln.accepts.Load(); n != 0 {
		t.Fatalf("the larger id dialed %d times", n)
	}
}

// TestPeersConcurrent has three processes ask for each other's connection
// from many goroutines at once: each pair gets one connection, shared by
// all calls, and it carries batches both ways.
func TestPeersConcurrent(t *testing.T) {
	ps := []*testPeer{newPeer(t, "p1"), newPeer(t, "p2"), newPeer(t, "p3")}
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	const callers = 8
	// conns[i][j][k] is caller k's connection from ps[i] to ps[j].
	var conns [3][3][callers]*Conn
	var wg sync.WaitGroup
	for i, p := range ps {
		for j, q := range ps {
			if i == j {
				continue
			}
			for k := range callers {
				wg.Go(func() {
					c, err := p.Conn(ctx, q.self, q.Addr())
					if err != nil {
						t.Errorf("%s to %s: %v", p.self, q.self, err)
					}
					conns[i][j][k] = c
				})
			}
		}
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for i := range ps {
		for j := range ps {
			for k := 1; k < callers && i != j; k++ {
				if conns[i][j][k] != conns[i][j][0] {
					t.Fatalf("%s to %s: callers got different connections", ps[i].self, ps[j].self)
				}
			}
		}
	}
	for i, p := range ps {
		if got, want := p.ln.accepts.Load(), int32(i); got != want {
			t.Fatalf("%s accepted %d connections, want %d", p.self, got, want)
		}
	}
	var ex sync.WaitGroup
	for i := range ps {
		for j := i + 1; j < len(ps); j++ {
			ex.Go(func() { exchange(t, conns[i][j][0], conns[j][i][0], uint32(10*(i+1)+j)) })
		}
	}
	ex.Wait()
}

// TestPeersBadMagic dials with something that is not a weir hello.
func TestPeersBadMagic(t *testing.T) {
	b := newPeer(t, "b")
	nc, err := net.Dial("tcp", b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(testTimeout))
	if _, err := nc.Write(appendString(appendString([]byte("GET / HT"), "a"), "b")); err != nil {
		t.Fatal(err)
	}
	err = readStatus(nc)
	if !errors.Is(err, ErrHandshake) || !strings.Contains(err.Error(), "bad magic") {
		t.Fatalf("answer %v, want a bad magic rejection", err)
	}
	if n, err := nc.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("after the rejection: %d bytes, %v; want EOF", n, err)
	}
	b.logs.wait(t, "level=WARN", "rejected a connection", `bad magic \"GET / HT\"`)
	if b.Connected("a") {
		t.Fatal("connected after a bad magic")
	}
}

// TestPeersNotAWeirEndpoint dials something that is not a Peers: the
// error says the handshake failed.
func TestPeersNotAWeirEndpoint(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		nc.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n"))
		nc.Close()
	}()
	a := newPeer(t, "a")
	_, err = a.Conn(t.Context(), "b", ln.Addr().String())
	if !errors.Is(err, ErrHandshake) || !strings.Contains(err.Error(), "not a weir data-plane endpoint") {
		t.Fatalf("Conn: %v, want a handshake error", err)
	}
}

// TestPeersWrongID dials a process other than the one expected, and the
// wrong way round.
func TestPeersWrongID(t *testing.T) {
	a, b := newPeer(t, "a"), newPeer(t, "b")
	_, err := a.Conn(t.Context(), "c", b.Addr())
	if !errors.Is(err, ErrHandshake) || !strings.Contains(err.Error(), `wrong id: this is "b", not "c"`) {
		t.Fatalf("Conn to the wrong process: %v", err)
	}
	b.logs.wait(t, "level=WARN", "rejected a connection", "wrong id")
	if a.Connected("c") || b.Connected("a") {
		t.Fatal("connected to the wrong process")
	}

	// A larger id must not dial a smaller one.
	nc, err := net.Dial("tcp", a.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	err = clientHandshake(nc, "b", "a", nil)
	if !errors.Is(err, ErrHandshake) || !strings.Contains(err.Error(), "wrong direction") {
		t.Fatalf("dial from the larger id: %v", err)
	}
	a.logs.wait(t, "level=WARN", "rejected a connection", "wrong direction")

	// The right process still connects.
	ac, bc := connect(t, a, b)
	exchange(t, ac, bc, 1)
}

// TestPeersAuthenticated: peers that share a token connect; a dialer or
// an acceptor without it, or with another one, is refused on both sides
// with an error wrapping ErrAuth that names the option, and the token
// appears neither in the refusal nor in the logs nor on the wire.
func TestPeersAuthenticated(t *testing.T) {
	const token = "s3cret-token"
	a, b := newPeer(t, "a", AuthToken(token)), newPeer(t, "b", AuthToken(token))
	ac, bc := connect(t, a, b)
	exchange(t, ac, bc, 1)

	for _, c := range []struct {
		name    string
		dialer  []Option
		dialed  *testPeer
		refusal string
	}{
		{"dialer without a token", nil, b, "did not authenticate"},
		{"dialer with another token", []Option{AuthToken("other")}, b, "does not match"},
		{"acceptor without a token", []Option{AuthToken(token)}, newPeer(t, "z"), "has no cluster.auth-token"},
		{"acceptor with another token", []Option{AuthToken(token)}, newPeer(t, "y", AuthToken("other")), "does not match"},
	} {
		t.Run(c.name, func(t *testing.T) {
			x := newPeer(t, "0-"+c.dialed.self, c.dialer...)
			_, err := x.Conn(t.Context(), c.dialed.self, c.dialed.Addr())
			if !errors.Is(err, ErrHandshake) || !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), "cluster.auth-token") {
				t.Fatalf("Conn: %v, want an authentication failure naming cluster.auth-token", err)
			}
			if !strings.Contains(err.Error(), c.refusal) {
				t.Errorf("Conn: %v, want %q", err, c.refusal)
			}
			line := c.dialed.logs.wait(t, "level=WARN", "rejected a connection", "authentication failed")
			for _, s := range []string{err.Error(), line} {
				if strings.Contains(s, token) || strings.Contains(s, "other") {
					t.Errorf("a token is shown: %s", s)
				}
			}
			if x.Connected(c.dialed.self) || c.dialed.Connected(x.self) {
				t.Fatal("connected without authentication")
			}
		})
	}

	// A dialer's hello and proof, as the acceptor receives them, hold
	// nothing of the token.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	wire := make(chan []byte, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			wire <- nil
			return
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(testTimeout))
		hello := make([]byte, len(handshakeMagic)+2+2+1+nonceSize)
		if _, err := io.ReadFull(nc, hello); err != nil {
			wire <- nil
			return
		}
		// Answer as an acceptor holding the token would.
		dn := hello[len(hello)-nonceSize:]
		an := newNonce()
		nc.Write(append(append([]byte{statusChallenge}, an...), prove([]byte(token), "acceptor", "c", "d", dn, an)...))
		proof := make([]byte, proofSize)
		_, err = io.ReadFull(nc, proof)
		if err == nil && !proofOK(proof, []byte(token), "dialer", "c", "d", dn, an) {
			err = errors.New("bad proof")
		}
		nc.Write([]byte{statusOK})
		if err != nil {
			wire <- nil
			return
		}
		wire <- append(hello, proof...)
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if err := clientHandshake(nc, "c", "d", []byte(token)); err != nil {
		t.Fatal(err)
	}
	got := <-wire
	if got == nil {
		t.Fatal("the dialer's hello or proof was not as expected")
	}
	if strings.Contains(string(got), token) {
		t.Fatalf("the token went over the wire: %q", got)
	}
}

// TestPeersRestart closes one side of a pair: the other's connection ends,
// and a new process with the same id connects again, whichever side
// restarted.
func TestPeersRestart(t *testing.T) {
	a, b := newPeer(t, "a"), newPeer(t, "b")
	ac, bc := connect(t, a, b)
	exchange(t, ac, bc, 1)

	// The dialing side restarts.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	waitDone(t, bc, "b after a closed")
	if !errors.Is(bc.Err(), ErrClosed) {
		t.Fatalf("b's connection ended with %v, want ErrClosed", bc.Err())
	}
	if b.Connected("a") {
		t.Fatal("b still connected to the closed a")
	}
	if _, err := a.Conn(t.Context(), "b", b.Addr()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Conn on closed Peers: %v, want ErrClosed", err)
	}
	a2 := newPeer(t, "a")
	a2c, bc2 := connect(t, a2, b)
	if bc2 == bc {
		t.Fatal("b kept the ended connection")
	}
	exchange(t, a2c, bc2, 1)

	// The accepting side restarts, on another port.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	waitDone(t, a2c, "a after b closed")
	b2 := newPeer(t, "b")
	a2c2, b2c := connect(t, a2, b2)
	if a2c2 == a2c {
		t.Fatal("a kept the ended connection")
	}
	exchange(t, a2c2, b2c, 1)
	if n := b2.ln.accepts.Load(); n != 1 {
		t.Fatalf("b2 accepted %d connections, want 1", n)
	}
}

// TestPeersReplace has a second process with a connected peer's id dial
// in: the new connection replaces the old, which is closed.
func TestPeersReplace(t *testing.T) {
	a1, b := newPeer(t, "a"), newPeer(t, "b")
	a1c, bc1 := connect(t, a1, b)
	a2 := newPeer(t, "a")
	a2c, err := a2.Conn(t.Context(), "b", b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, bc1, "b's replaced connection")
	if err := bc1.Err(); !errors.Is(err, ErrClosed) || !strings.Contains(err.Error(), "replaced") {
		t.Fatalf("replaced connection ended with %v", err)
	}
	waitDone(t, a1c, "the old a's connection")
	bc2, err := b.Conn(t.Context(), "a", "")
	if err != nil {
		t.Fatal(err)
	}
	if bc2 == bc1 {
		t.Fatal("b kept the replaced connection")
	}
	exchange(t, a2c, bc2, 1)
	b.logs.wait(t, "closing its old connection", "peer=a")
}

// TestPeersCloseAborts closes Peers under a Conn waiting for its peer and
// one stuck in a handshake.
func TestPeersCloseAborts(t *testing.T) {
	// A listener that accepts and never answers.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		nc, err := ln.Accept()
		if err == nil {
			accepted <- nc
		}
	}()

	a := newPeer(t, "a")
	b := newPeer(t, "b")
	waiting := make(chan struct{}, 1)
	b.hook = func(string, bool) { waiting <- struct{}{} }
	errs := make(chan error, 2)
	go func() { _, err := a.Conn(context.Background(), "z", ln.Addr().String()); errs <- err }()
	go func() { _, err := b.Conn(context.Background(), "a", ""); errs <- err }()
	var silent net.Conn
	select {
	case silent = <-accepted:
	case <-time.After(testTimeout):
		t.Fatal("no dial")
	}
	defer silent.Close()
	<-waiting
	// The dial is in its handshake or about to be: Close must abort it
	// either way, without the handshake timeout.
	a.Close()
	b.Close()
	for range 2 {
		select {
		case err := <-errs:
			if !errors.Is(err, ErrClosed) {
				t.Fatalf("Conn during Close: %v", err)
			}
		case <-time.After(testTimeout):
			t.Fatal("Conn not aborted by Close")
		}
	}
}

// TestPeersReset drops every connection at once: both sides see theirs
// end, and the next Conn calls make a fresh connection on which channel
// ids used before are new again.
func TestPeersReset(t *testing.T) {
	a, b := newPeer(t, "tm-a"), newPeer(t, "tm-b")
	ac, bc := connect(t, a, b)
	exchange(t, ac, bc, 1)
	ac.Release(1)
	b.Reset()
	waitDone(t, bc, "reset side")
	waitDone(t, ac, "peer side")
	ac2, bc2 := connect(t, a, b)
	if ac2 == ac || bc2 == bc {
		t.Fatal("Conn after Reset returned the old connection")
	}
	exchange(t, ac2, bc2, 1)
}
