package netio

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// mapSizes returns how many senders and receivers c tracks.
func mapSizes(c *Conn) (senders, receivers int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.senders), len(c.receivers)
}

// syncMarker sends a watermark on sync channel s and waits for it at r.
// Frames travel in order over one connection, so once it arrives, the
// peer's reader has dispatched everything sent before it.
func syncMarker(t *testing.T, s *Sender, r *Receiver, wm int64) {
	t.Helper()
	ctx := t.Context()
	if err := s.SendWatermark(ctx, wm); err != nil {
		t.Fatalf("sync send: %v", err)
	}
	f, err := r.Next(ctx)
	if err != nil || f.Kind != KindWatermark || f.Watermark != wm {
		t.Fatalf("sync receive: %+v %v, want watermark %d", f, err, wm)
	}
}

// TestReleaseDropsLateFrames releases a receiver with frames queued and
// more in flight: they are dropped, the maps are freed and the connection
// keeps working.
func TestReleaseDropsLateFrames(t *testing.T) {
	for name, pair := range map[string]func(testing.TB) (*Conn, *Conn){"pipe": pipePair, "tcp": tcpPair} {
		t.Run(name, func(t *testing.T) {
			a, b := pair(t)
			ctx := t.Context()
			c := recCodec(t)
			syncS, syncR := a.OpenSender(100), b.OpenReceiver(100, 0)

			const credit = 4
			s := a.OpenSender(1)
			r := b.OpenReceiver(1, credit)
			for i := range int64(2) {
				if err := SendBatch(ctx, s, c, []rec{{Ch: 1, Seq: i}}); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.SendWatermark(ctx, 7); err != nil {
				t.Fatal(err)
			}
			syncMarker(t, syncS, syncR, 1)
			if got := r.Buffered(); got != 3 {
				t.Fatalf("%d frames buffered before release, want 3", got)
			}

			b.Release(1)
			if got := r.Buffered(); got != 0 {
				t.Fatalf("%d frames buffered after release", got)
			}
			if _, err := r.Next(ctx); !errors.Is(err, ErrReleased) {
				t.Fatalf("Next after release: %v, want ErrReleased", err)
			}
			if _, n := mapSizes(b); n != 1 { // the sync receiver
				t.Fatalf("%d receivers after release, want 1", n)
			}

			// The sender still has credit: its data, markers and end reach b
			// late and are dropped without failing the connection.
			for i := range int64(credit - 2) {
				if err := SendBatch(ctx, s, c, []rec{{Ch: 1, Seq: 10 + i}}); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.SendBarrier(ctx, Barrier{ID: 1}); err != nil {
				t.Fatal(err)
			}
			if err := s.SendEnd(ctx); err != nil {
				t.Fatal(err)
			}
			// A frame for a channel released without ever being opened.
			b.Release(2)
			s2 := a.OpenSender(2)
			if err := s2.SendWatermark(ctx, 3); err != nil {
				t.Fatal(err)
			}
			syncMarker(t, syncS, syncR, 2)
			if err := b.Err(); err != nil {
				t.Fatalf("connection failed: %v", err)
			}
			if _, n := mapSizes(b); n != 1 {
				t.Fatalf("late frames re-created receivers: %d, want 1", n)
			}
			if got := r.Buffered(); got != 0 {
				t.Fatalf("released receiver buffered %d late frames", got)
			}

			// Other channels work as before, both ways.
			s3, r3 := b.OpenSender(3), a.OpenReceiver(3, 1)
			if err := SendBatch(ctx, s3, c, []rec{{Ch: 3}}); err != nil {
				t.Fatal(err)
			}
			if f, recs, err := RecvBatch(ctx, r3, c, nil); err != nil || f.Kind != KindData || len(recs) != 1 || recs[0].Ch != 3 {
				t.Fatalf("channel 3 after release: %+v %v %v", f, recs, err)
			}
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestReleaseDropsLateCredit releases a sender whose receiver keeps
// granting credit: the credit is dropped and creates no sender.
func TestReleaseDropsLateCredit(t *testing.T) {
	a, b := pipePair(t)
	defer a.Close()
	defer b.Close()
	ctx := t.Context()
	c := recCodec(t)
	// The sync channel runs from b to a, the direction credit travels.
	syncS, syncR := b.OpenSender(100), a.OpenReceiver(100, 0)

	s := a.OpenSender(1)
	r := b.OpenReceiver(1, 2)
	for i := range int64(2) {
		if err := SendBatch(ctx, s, c, []rec{{Seq: i}}); err != nil {
			t.Fatal(err)
		}
	}
	a.Release(1)
	if n, _ := mapSizes(a); n != 0 {
		t.Fatalf("%d senders after release, want 0", n)
	}
	// Consuming the batches returns their credit to the released sender.
	for range 2 {
		if f, err := r.Next(ctx); err != nil || f.Kind != KindData {
			t.Fatalf("Next: %+v %v", f, err)
		}
	}
	// Credit for a channel never opened and released is dropped too.
	a.Release(9)
	b.OpenReceiver(9, 5)
	syncMarker(t, syncS, syncR, 1)
	if n, _ := mapSizes(a); n != 0 {
		t.Fatalf("late credit re-created %d senders", n)
	}
	if err := a.Err(); err != nil {
		t.Fatalf("connection failed: %v", err)
	}
	if err := SendBatch(ctx, s, c, []rec{{}}); !errors.Is(err, ErrReleased) {
		t.Fatalf("send after release: %v, want ErrReleased", err)
	}
	if err := s.SendWatermark(ctx, 1); !errors.Is(err, ErrReleased) {
		t.Fatalf("marker after release: %v, want ErrReleased", err)
	}
}

// TestReleaseUnblocks releases channels under a sender waiting for credit
// and a receiver waiting for a frame.
func TestReleaseUnblocks(t *testing.T) {
	a, b := pipePair(t)
	defer a.Close()
	defer b.Close()
	c := recCodec(t)
	s, waiting := blockedSender(a, 1)
	b.OpenReceiver(1, 0)
	r := a.OpenReceiver(2, 1)
	b.OpenSender(2)

	sendDone := make(chan error, 1)
	go func() { sendDone <- SendBatch(context.Background(), s, c, []rec{{}}) }()
	<-waiting
	a.Release(1)
	if err := <-sendDone; !errors.Is(err, ErrReleased) {
		t.Fatalf("blocked send: %v, want ErrReleased", err)
	}

	// Next may or may not have started waiting when Release runs; either
	// way it must return ErrReleased.
	nextDone := make(chan error, 1)
	go func() { _, err := r.Next(context.Background()); nextDone <- err }()
	a.Release(2)
	if err := <-nextDone; !errors.Is(err, ErrReleased) {
		t.Fatalf("blocked Next: %v, want ErrReleased", err)
	}
	if err := a.Err(); err != nil {
		t.Fatalf("connection failed: %v", err)
	}
	if s, r := mapSizes(a); s != 0 || r != 0 {
		t.Fatalf("maps hold %d senders and %d receivers after release", s, r)
	}
	a.Release(2) // twice is fine
}

func TestReleaseReopenPanics(t *testing.T) {
	a, b := pipePair(t)
	defer a.Close()
	defer b.Close()
	a.OpenSender(1)
	a.OpenReceiver(2, 1)
	a.Release(1)
	a.Release(2)
	a.Release(3)
	for name, open := range map[string]func(){
		"sender":          func() { a.OpenSender(1) },
		"receiver":        func() { a.OpenReceiver(2, 1) },
		"never opened":    func() { a.OpenReceiver(3, 0) },
		"sender as recv":  func() { a.OpenReceiver(1, 0) },
		"receiver as snd": func() { a.OpenSender(2) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if v := recover(); v == nil || !strings.Contains(fmt.Sprint(v), "after release") {
					t.Fatalf("recovered %v, want an after-release panic", v)
				}
			}()
			open()
		})
	}
}
