package runtime

import (
	"net"
	"slices"
	"testing"
	"time"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/netio"
)

// TestUnalignedBarrierOvertakesAcrossProcesses fills every buffer between
// a producer and a consumer in two processes (the consumer reads
// nothing): the receiving channel, the record forwardIn is pushing, the
// frames the network credit let through, the batch forwardOut waits to
// send, and the sending channel. An unaligned barrier put at the front of
// the sending channel reaches the front of the receiving one at once, and
// its channel state is every record sent before the producer's snapshot,
// in order, wherever it was; what the producer sends after is not in it.
func TestUnalignedBarrierOvertakesAcrossProcesses(t *testing.T) {
	ctx := t.Context()
	p1, p2 := net.Pipe()
	a, b := netio.New(p1), netio.New(p2)
	defer a.Close()
	defer b.Close()
	c, err := codec.For[int64]()
	if err != nil {
		t.Fatal(err)
	}
	bc := NewBatchCodec(c)
	out := newChannel(4, make(chan struct{}, 1))
	out.overtaken = make(chan struct{}, 1)
	in := newChannel(2, make(chan struct{}, 1))
	go func() { _ = forwardOut(ctx, out, a.OpenSender(1), bc) }()
	go func() { _ = forwardIn(ctx, b.OpenReceiver(1, 2), in, bc) }()

	rec := func(v int64) message { return message{kind: msgData, data: []Rec[int64]{{V: v}}, n: 1} }
	for v := range int64(10) {
		if err := out.send(ctx, rec(v+1), nil); err != nil {
			t.Fatal(err)
		}
	}
	// Wait until the records have spread over every buffer on the way.
	deadline := time.Now().Add(10 * time.Second)
	for !(in.n2() == 2 && out.n2() == 4) {
		if time.Now().After(deadline) {
			t.Fatalf("buffers never filled: %d received, %d queued to send", in.n2(), out.n2())
		}
		time.Sleep(time.Millisecond)
	}

	// The producer's snapshot: the barrier overtakes, 11 and 12 follow as
	// channel state, the seal ends it, and 13 comes after.
	out.overtake(message{kind: msgBarrier, barrier: Barrier{ID: 1, Unaligned: true}}, false)
	for _, v := range []int64{11, 12} {
		if err := out.send(ctx, rec(v), nil); err != nil {
			t.Fatal(err)
		}
	}
	out.seal()
	go func() { _ = out.send(ctx, rec(13), nil) }()

	var barrier message
	for {
		if m, ok := in.recvUrgent(); ok {
			barrier = m
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the unaligned barrier never reached the front of the receiving channel")
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case <-barrier.inflight.sealed:
	case <-time.After(10 * time.Second):
		t.Fatal("the barrier's channel state never ended")
	}
	values := func(ms []message) []int64 {
		var vs []int64
		for _, m := range ms {
			for _, r := range m.data.([]Rec[int64])[m.from:] {
				vs = append(vs, r.V)
			}
		}
		return vs
	}
	want := []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	if got := values(barrier.inflight.msgs); !slices.Equal(got, want) {
		t.Fatalf("channel state %v, want %v", got, want)
	}
	var after []message
	for len(after) < 13 {
		m, err := in.recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		after = append(after, m)
	}
	if got := values(after); !slices.Equal(got, append(want, 13)) {
		t.Fatalf("read after the barrier %v, want %v", got, append(want, 13))
	}
}

// n2 is the number of queued messages, for tests.
func (c *channel) n2() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// TestTimedOutBarrierPromotedOnTheNetwork: an aligned barrier that has
// left the producer's process and waits in the consumer's network buffer
// behind records (the receiving channel is full, the consumer reads
// nothing) times out. Promoted on the consumer's input (promoteInput, as
// Task.alignedTimedOut does), it reaches the front of the receiving
// channel at once, unaligned, with every record sent before it as its
// channel state, sealed (its producer snapshotted before sending it);
// the records sent after it are not in it, and every record is still
// read once, in order.
func TestTimedOutBarrierPromotedOnTheNetwork(t *testing.T) {
	ctx := t.Context()
	p1, p2 := net.Pipe()
	a, b := netio.New(p1), netio.New(p2)
	defer a.Close()
	defer b.Close()
	c, err := codec.For[int64]()
	if err != nil {
		t.Fatal(err)
	}
	bc := NewBatchCodec(c)
	out := newChannel(4, make(chan struct{}, 1))
	out.overtaken = make(chan struct{}, 1)
	in := newChannel(2, make(chan struct{}, 1))
	r := b.OpenReceiver(1, 2)
	in.remote.Store(r)
	go func() { _ = forwardOut(ctx, out, a.OpenSender(1), bc) }()
	go func() { _ = forwardIn(ctx, r, in, bc) }()

	rec := func(v int64) message { return message{kind: msgData, data: []Rec[int64]{{V: v}}, n: 1} }
	for v := range int64(5) {
		if err := out.send(ctx, rec(v+1), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := out.send(ctx, message{kind: msgBarrier, barrier: Barrier{ID: 1, Timestamp: 1, AlignedTimeout: time.Millisecond}}, nil); err != nil {
		t.Fatal(err)
	}
	for _, v := range []int64{6, 7} {
		if err := out.send(ctx, rec(v), nil); err != nil {
			t.Fatal(err)
		}
	}
	// 1 and 2 in the receiving channel, 3 in forwardIn's hands, 4, 5 and
	// the barrier in the network buffer.
	deadline := time.Now().Add(10 * time.Second)
	for !(in.n2() == 2 && r.Buffered() == 3) {
		if time.Now().After(deadline) {
			t.Fatalf("buffers never filled: %d received, %d in the network buffer", in.n2(), r.Buffered())
		}
		time.Sleep(time.Millisecond)
	}
	promoteInput(in, 1)
	var barrier message
	for {
		if m, ok := in.recvUrgent(); ok {
			barrier = m
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the promoted barrier never reached the front of the receiving channel")
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case <-barrier.inflight.sealed:
	default:
		t.Fatal("the promoted barrier's channel state is not sealed")
	}
	values := func(ms []message) []int64 {
		var vs []int64
		for _, m := range ms {
			for _, r := range m.data.([]Rec[int64])[m.from:] {
				vs = append(vs, r.V)
			}
		}
		return vs
	}
	want := []int64{1, 2, 3, 4, 5}
	if got := values(barrier.inflight.msgs); !slices.Equal(got, want) {
		t.Fatalf("channel state %v, want %v", got, want)
	}
	var after []message
	for len(after) < 7 {
		m, err := in.recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		after = append(after, m)
	}
	if got := values(after); !slices.Equal(got, []int64{1, 2, 3, 4, 5, 6, 7}) {
		t.Fatalf("read after the barrier %v, want 1 to 7", got)
	}
}
