package netio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/weirstream/weir/codec"
)

type rec struct {
	Ch   uint32
	Seq  int64
	Name string
}

func recCodec(t testing.TB) codec.Codec[rec] {
	c, err := codec.For[rec]()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// pipePair connects two Conns over an in-memory pipe.
func pipePair(t testing.TB) (*Conn, *Conn) {
	p1, p2 := net.Pipe()
	return New(p1), New(p2)
}

// tcpPair connects two Conns over loopback TCP.
func tcpPair(t testing.TB) (*Conn, *Conn) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			t.Error(err)
		}
		accepted <- nc
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	other := <-accepted
	if other == nil {
		t.FailNow()
	}
	return New(nc), New(other)
}

// step is one action of a channel's script and its description as the
// receiver should see it.
type step struct {
	kind Kind
	recs []rec
	wm   int64
	b    Barrier
}

func (s step) String() string {
	switch s.kind {
	case KindData:
		var sb strings.Builder
		sb.WriteString("data")
		for _, r := range s.recs {
			fmt.Fprintf(&sb, " %d/%d/%s", r.Ch, r.Seq, r.Name)
		}
		return sb.String()
	case KindWatermark:
		return fmt.Sprintf("watermark %d", s.wm)
	case KindBarrier:
		return fmt.Sprintf("barrier %+v", s.b)
	}
	return s.kind.String()
}

// script is what the sender of channel ch sends: batches of varying size
// interleaved with every kind of marker, ending with end-of-data and end.
func script(ch uint32, batches int) []step {
	var out []step
	seq := int64(0)
	for i := range batches {
		n := int(ch+uint32(i))%7 + 1
		recs := make([]rec, n)
		for j := range recs {
			recs[j] = rec{Ch: ch, Seq: seq, Name: strings.Repeat("x", int(seq%5))}
			seq++
		}
		out = append(out, step{kind: KindData, recs: recs}, step{kind: KindWatermark, wm: int64(i)})
		if i%10 == 9 {
			out = append(out, step{kind: KindBarrier, b: Barrier{ID: int64(i / 10), Timestamp: int64(i), Savepoint: i%20 == 19}})
		}
		if i == batches/2 {
			out = append(out, step{kind: KindIdle}, step{kind: KindActive})
		}
	}
	return append(out, step{kind: KindEndOfData}, step{kind: KindEnd})
}

func play(ctx context.Context, s *Sender, c codec.Codec[rec], steps []step) error {
	for _, st := range steps {
		var err error
		switch st.kind {
		case KindData:
			err = SendBatch(ctx, s, c, st.recs)
		case KindWatermark:
			err = s.SendWatermark(ctx, st.wm)
		case KindBarrier:
			err = s.SendBarrier(ctx, st.b)
		case KindIdle:
			err = s.SendIdle(ctx)
		case KindActive:
			err = s.SendActive(ctx)
		case KindEndOfData:
			err = s.SendEndOfData(ctx)
		case KindEnd:
			err = s.SendEnd(ctx)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// consume reads r to its end and describes each frame as a step.
func consume(ctx context.Context, r *Receiver, c codec.Codec[rec]) ([]string, error) {
	var got []string
	for {
		f, recs, err := RecvBatch(ctx, r, c, nil)
		if err == io.EOF {
			return got, nil
		}
		if err != nil {
			return got, err
		}
		got = append(got, step{kind: f.Kind, recs: recs, wm: f.Watermark, b: f.Barrier}.String())
	}
}

// TestOrdering runs many channels in both directions over one connection;
// each receiver must see exactly its sender's script, data and markers in
// order.
func TestOrdering(t *testing.T) {
	for name, pair := range map[string]func(testing.TB) (*Conn, *Conn){"pipe": pipePair, "tcp": tcpPair} {
		t.Run(name, func(t *testing.T) {
			a, b := pair(t)
			c := recCodec(t)
			ctx := t.Context()
			const channels, batches = 16, 60
			var wg sync.WaitGroup
			for ch := range uint32(channels) {
				from, to := a, b
				if ch%2 == 1 {
					from, to = b, a
				}
				s := from.OpenSender(ch)
				r := to.OpenReceiver(ch, int(ch%3)+1)
				wg.Add(2)
				go func() {
					defer wg.Done()
					if err := play(ctx, s, c, script(ch, batches)); err != nil {
						t.Errorf("channel %d send: %v", ch, err)
					}
				}()
				go func() {
					defer wg.Done()
					got, err := consume(ctx, r, c)
					if err != nil {
						t.Errorf("channel %d receive: %v", ch, err)
					}
					want := script(ch, batches)
					if len(got) != len(want) {
						t.Errorf("channel %d: got %d frames, want %d", ch, len(got), len(want))
						return
					}
					for i := range want {
						if got[i] != want[i].String() {
							t.Errorf("channel %d frame %d: got %q, want %q", ch, i, got[i], want[i])
							return
						}
					}
				}()
			}
			wg.Wait()
			if err := a.Close(); err != nil {
				t.Errorf("close a: %v", err)
			}
			if err := b.Close(); err != nil {
				t.Errorf("close b: %v", err)
			}
		})
	}
}

// blockedSender opens channel ch on a with a hook that reports each time a
// send starts waiting for credit.
func blockedSender(a *Conn, ch uint32) (*Sender, <-chan struct{}) {
	waiting := make(chan struct{}, 1)
	s := a.OpenSender(ch)
	s.waitHook = func() {
		select {
		case waiting <- struct{}{}:
		default:
		}
	}
	return s, waiting
}

// TestCredit checks that a receiver that stops consuming stops its sender
// after exactly its credit, and that each batch consumed lets exactly one
// more through.
func TestCredit(t *testing.T) {
	a, b := pipePair(t)
	defer a.Close()
	defer b.Close()
	c := recCodec(t)
	ctx := t.Context()
	const credit = 3
	s, waiting := blockedSender(a, 1)
	r := b.OpenReceiver(1, credit)

	sent := make(chan int64, 100)
	go func() {
		for i := int64(0); ; i++ {
			if err := SendBatch(ctx, s, c, []rec{{Seq: i}}); err != nil {
				close(sent)
				return
			}
			sent <- i
		}
	}()
	for i := range int64(credit) {
		if got := <-sent; got != i {
			t.Fatalf("sent %d, want %d", got, i)
		}
	}
	// Only the receiver grants credit, and it has granted exactly three:
	// whenever the sender waits from here on, no fourth batch can leave.
	<-waiting
	if got := s.Credit(); got != 0 {
		t.Fatalf("credit %d while blocked", got)
	}
	select {
	case i := <-sent:
		t.Fatalf("batch %d sent beyond the credit", i)
	default:
	}

	for i := range int64(10) {
		if got := r.Buffered(); got > credit {
			t.Fatalf("%d frames buffered, credit is %d", got, credit)
		}
		f, recs, err := RecvBatch(ctx, r, c, nil)
		if err != nil || f.Kind != KindData || recs[0].Seq != i {
			t.Fatalf("receive %d: %+v %v %v", i, f, recs, err)
		}
		if got := <-sent; got != i+credit {
			t.Fatalf("after consuming %d, sent %d, want %d", i, got, i+credit)
		}
		<-waiting
		select {
		case j := <-sent:
			t.Fatalf("batch %d sent beyond the credit", j)
		default:
		}
	}
}

// TestCancelUnblocksSender cancels a send waiting for credit.
func TestCancelUnblocksSender(t *testing.T) {
	a, b := pipePair(t)
	defer a.Close()
	defer b.Close()
	c := recCodec(t)
	s, waiting := blockedSender(a, 5)
	b.OpenReceiver(5, 0)

	ctx, cancel := context.WithCancelCause(t.Context())
	done := make(chan error, 1)
	go func() { done <- SendBatch(ctx, s, c, []rec{{Seq: 1}}) }()
	<-waiting
	stop := errors.New("stop")
	cancel(stop)
	if err := <-done; !errors.Is(err, stop) {
		t.Fatalf("send returned %v, want the cancel cause", err)
	}
	// Markers need no credit and still go through.
	if err := s.SendWatermark(t.Context(), 3); err != nil {
		t.Fatal(err)
	}
}

// TestConnFailureUnblocks closes the peer under a blocked sender and a
// waiting receiver.
func TestConnFailureUnblocks(t *testing.T) {
	a, b := pipePair(t)
	c := recCodec(t)
	s, waiting := blockedSender(a, 1)
	r := a.OpenReceiver(2, 1)
	done := make(chan error, 2)
	go func() { done <- SendBatch(t.Context(), s, c, []rec{{}}) }()
	<-waiting
	go func() { _, err := r.Next(t.Context()); done <- err }()
	b.Close()
	for range 2 {
		if err := <-done; !errors.Is(err, ErrClosed) {
			t.Fatalf("got %v, want ErrClosed", err)
		}
	}
	if err := a.Close(); err != nil {
		t.Fatalf("close after the peer closed: %v", err)
	}
}

// rawPeer is a Conn facing a raw pipe end the test writes frames to; what
// the Conn writes is discarded.
func rawPeer(t *testing.T) (*Conn, net.Conn) {
	p1, p2 := net.Pipe()
	go io.Copy(io.Discard, p2)
	return New(p1), p2
}

func TestCorruptFrameClosesConn(t *testing.T) {
	for name, tc := range map[string]struct {
		write   func() []byte
		closeIt bool
		want    error
	}{
		"checksum": {write: func() []byte {
			f := AppendFrame(nil, &Frame{Channel: 1, Kind: KindWatermark, Watermark: 2})
			f[len(f)-1] ^= 0xff
			return f
		}, want: ErrCorrupt},
		"truncated": {write: func() []byte {
			f := AppendFrame(nil, &Frame{Channel: 1, Kind: KindWatermark, Watermark: 2})
			return f[:len(f)-3]
		}, closeIt: true, want: ErrTruncated},
		"huge length": {write: func() []byte { return []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0} }, want: ErrCorrupt},
		"data without credit": {write: func() []byte {
			return AppendFrame(nil, &Frame{Channel: 9, Kind: KindData, Count: 1, Data: []byte{0}})
		}, want: ErrCorrupt},
		"after end": {write: func() []byte {
			f := AppendFrame(nil, &Frame{Channel: 1, Kind: KindEnd})
			return AppendFrame(f, &Frame{Channel: 1, Kind: KindIdle})
		}, want: ErrCorrupt},
	} {
		t.Run(name, func(t *testing.T) {
			a, raw := rawPeer(t)
			r := a.OpenReceiver(1, 0)
			good := AppendFrame(nil, &Frame{Channel: 1, Kind: KindWatermark, Watermark: 1})
			if _, err := raw.Write(append(good, tc.write()...)); err != nil {
				t.Fatal(err)
			}
			if tc.closeIt {
				raw.Close()
			}
			<-a.Done()
			if err := a.Err(); !errors.Is(err, tc.want) {
				t.Fatalf("conn error %v, want %v", err, tc.want)
			}
			// What arrived intact is still delivered, then the error.
			var err error
			for err == nil {
				_, err = r.Next(t.Context())
			}
			// After the end marker the channel is over for its reader, so
			// only the connection reports the violation.
			if err != io.EOF && !errors.Is(err, tc.want) {
				t.Fatalf("Next error %v, want %v", err, tc.want)
			}
			if err := a.Close(); !errors.Is(err, tc.want) {
				t.Fatalf("Close returned %v, want %v", err, tc.want)
			}
			raw.Close()
		})
	}
}

// TestShutdown ends every channel, drains the receivers and closes both
// sides cleanly; sends after end fail.
func TestShutdown(t *testing.T) {
	a, b := tcpPair(t)
	ctx := t.Context()
	c := recCodec(t)
	var senders []*Sender
	var receivers []*Receiver
	for ch := range uint32(4) {
		senders = append(senders, a.OpenSender(ch))
		receivers = append(receivers, b.OpenReceiver(ch, 1))
	}
	for _, s := range senders {
		if err := SendBatch(ctx, s, c, []rec{{Ch: s.Channel()}}); err != nil {
			t.Fatal(err)
		}
		if err := s.SendEnd(ctx); err != nil {
			t.Fatal(err)
		}
		if err := s.SendWatermark(ctx, 1); !errors.Is(err, ErrEnded) {
			t.Fatalf("send after end: %v", err)
		}
	}
	// Close the sending side first: it flushes what was handed over.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	for _, r := range receivers {
		got, err := consume(ctx, r, c)
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("[data %d/0/ end]", r.Channel()); fmt.Sprint(got) != want {
			t.Fatalf("channel %d: got %v, want %s", r.Channel(), got, want)
		}
		if _, err := r.Next(ctx); err != io.EOF {
			t.Fatalf("Next after end: %v", err)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestByteCounts checks that a channel's sender and receiver count the
// bytes of every frame of a script, markers included: the frames'
// encodings, header and all.
func TestByteCounts(t *testing.T) {
	a, b := pipePair(t)
	c := recCodec(t)
	const ch = 5
	steps := script(ch, 40)
	want := 0
	for _, st := range steps {
		f := Frame{Channel: ch, Kind: st.kind, Watermark: st.wm, Barrier: st.b}
		if st.kind == KindData {
			f.Count = len(st.recs)
			for _, r := range st.recs {
				f.Data = c.Append(f.Data, r)
			}
		}
		want += len(AppendFrame(nil, &f))
	}
	s, r := a.OpenSender(ch), b.OpenReceiver(ch, 2)
	if s.Bytes() != 0 || r.Bytes() != 0 {
		t.Fatalf("before any frame: sent %d, received %d bytes", s.Bytes(), r.Bytes())
	}
	errc := make(chan error, 1)
	go func() { errc <- play(t.Context(), s, c, steps) }()
	if _, err := consume(t.Context(), r, c); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if s.Bytes() != int64(want) || r.Bytes() != int64(want) {
		t.Fatalf("sent %d and received %d bytes, want %d", s.Bytes(), r.Bytes(), want)
	}
}

// TestAnnounceLimit: the in-flight limit a receiver announces reaches its
// sender in order with the connection's other frames, a later one
// replaces it, and one beyond 32 bits is capped.
func TestAnnounceLimit(t *testing.T) {
	a, b := pipePair(t)
	defer a.Close()
	defer b.Close()
	c := recCodec(t)
	ctx := t.Context()
	s := a.OpenSender(1)
	r := b.OpenReceiver(1, 0)
	if got := s.Limit(); got != 0 {
		t.Fatalf("limit %d before any announcement", got)
	}
	for i, tc := range []struct{ announce, want int64 }{{100, 100}, {64, 64}, {0, 0}, {1 << 40, 1<<32 - 1}} {
		if err := r.AnnounceLimit(tc.announce); err != nil {
			t.Fatal(err)
		}
		// A credit granted after the limit: once the batch it lets
		// through has gone, the sender's side has read the limit.
		ch := uint32(10 + i)
		b.OpenReceiver(ch, 1)
		if err := SendBatch(ctx, a.OpenSender(ch), c, []rec{{Seq: 1}}); err != nil {
			t.Fatal(err)
		}
		if got := s.Limit(); got != tc.want {
			t.Errorf("announced %d, the sender has %d, want %d", tc.announce, got, tc.want)
		}
	}
}
