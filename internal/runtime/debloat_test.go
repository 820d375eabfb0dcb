package runtime

import (
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/netio"
)

// TestRecordWriterKeepsBatchesWithinTheLimit: under a channel's in-flight
// limit the writer sends batches of half the limit, and a batch that
// filled before the limit shrank goes in pieces within it, in order.
func TestRecordWriterKeepsBatchesWithinTheLimit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit int64
		sizes []int // the batches the consumer receives, in order
	}{
		// 8 records batched before the limit of 2: four pieces of 2;
		// then batches of 1, half the limit.
		{"shrunk", 2, []int{2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}},
		// 8 records batched before the limit of 6: a piece of 6 and one
		// of 2; then batches of 3.
		{"halved", 6, []int{6, 2, 3, 3, 3, 3}},
		// A limit above twice the batch size leaves batches whole.
		{"ample", 16, []int{8, 8, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			c := newChannel(4, make(chan struct{}, 1))
			w := newRecordWriter[int](ctx, []*channel{c}, Forward, nil, 8, nil)
			const n = 20
			for i := range 5 {
				if err := w.Collect(i, 0); err != nil {
					t.Fatal(err)
				}
			}
			c.setLimit(tc.limit)
			type result struct {
				sizes, vals []int
				err         error
			}
			done := make(chan result, 1)
			go func() {
				var r result
				for len(r.vals) < n {
					m, err := c.recv(ctx)
					if err != nil {
						r.err = err
						break
					}
					if int64(m.n) > tc.limit {
						r.err = fmt.Errorf("a batch of %d records under a limit of %d", m.n, tc.limit)
						break
					}
					r.sizes = append(r.sizes, m.n)
					for _, rec := range m.data.([]Rec[int])[:m.n] {
						r.vals = append(r.vals, rec.V)
					}
				}
				done <- r
			}()
			for i := 5; i < n; i++ {
				if err := w.Collect(i, 0); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.flush(); err != nil {
				t.Fatal(err)
			}
			r := <-done
			if r.err != nil {
				t.Fatal(r.err)
			}
			want := make([]int, n)
			for i := range want {
				want[i] = i
			}
			if !slices.Equal(r.vals, want) {
				t.Errorf("records %v, want %v", r.vals, want)
			}
			if !slices.Equal(r.sizes, tc.sizes) {
				t.Errorf("batches of %v, want %v", r.sizes, tc.sizes)
			}
		})
	}
}

// TestDebloatLimitCrossesProcesses: the in-flight limit a consumer sets on
// a channel from another process reaches the producer's side (a limit
// frame, taken up by forwardOut), whose writer then sends no batch larger
// than the limit: the data frames on the network keep within it too.
func TestDebloatLimitCrossesProcesses(t *testing.T) {
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
	in := newChannel(4, make(chan struct{}, 1))
	r := b.OpenReceiver(1, 4)
	in.remote.Store(r)
	go func() { _ = forwardOut(ctx, out, a.OpenSender(1), bc) }()
	go func() { _ = forwardIn(ctx, r, in, bc) }()

	const limit = 100
	in.setLimit(limit)
	in.announceLimit()
	// The consumer: every batch it takes, by size.
	sizes := make(chan int, 1<<16)
	go func() {
		for {
			m, err := in.recv(ctx)
			if err != nil {
				return
			}
			sizes <- m.n
		}
	}()
	// forwardOut takes the limit up when it next forwards something.
	w := newRecordWriter[int64](ctx, []*channel{out}, Forward, nil, 1024, nil)
	deadline := time.Now().Add(10 * time.Second)
	sent := 0
	for out.limit.Load() != limit {
		if time.Now().After(deadline) {
			t.Fatalf("the producer's side never took up the limit: it has %d", out.limit.Load())
		}
		if err := w.Collect(int64(sent), 0); err != nil {
			t.Fatal(err)
		}
		if err := w.flush(); err != nil {
			t.Fatal(err)
		}
		sent++
		time.Sleep(time.Millisecond)
	}
	for v := range 5000 {
		if err := w.Collect(int64(v), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.flush(); err != nil {
		t.Fatal(err)
	}
	got := 0
	for got < sent+5000 {
		select {
		case n := <-sizes:
			got += n
			if got > sent && n > limit {
				t.Fatalf("a batch of %d records crossed under a limit of %d", n, limit)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d records arrived", got, sent+5000)
		}
	}
}
