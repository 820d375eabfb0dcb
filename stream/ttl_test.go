package stream_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/state"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

// fedSource is an unbounded source of one split whose records the test
// sends on feed, one at a time.
type fedSource struct{ feed chan tsEvent }

func (fedSource) Splits(context.Context) ([]string, error) { return []string{"fed"}, nil }
func (fedSource) Bounded() bool                            { return false }
func (s fedSource) NewReader(context.Context, connector.ReaderInfo, []connector.SplitStart) (connector.Reader[tsEvent], error) {
	return &fedReader{s: s}, nil
}

type fedReader struct {
	s   fedSource
	seq int64
}

func (r *fedReader) Fetch(ctx context.Context) (connector.Fetch[tsEvent], error) {
	select {
	case <-ctx.Done():
		return connector.Fetch[tsEvent]{}, ctx.Err()
	case e := <-r.s.feed:
		r.seq++
		return connector.Fetch[tsEvent]{Split: "fed", Records: []tsEvent{e}, Next: r.seq}, nil
	}
}

func (r *fedReader) Close() error { return nil }

// ttlCounter counts each key's records in a value state whose count
// lives ttl, and emits key:count.
type ttlCounter struct {
	ttl   time.Duration
	count state.ValueState[int]
}

func (c *ttlCounter) Open(rc *stream.RuntimeContext[string]) (err error) {
	c.count, err = stream.ValueState[int](rc, "count", stream.WithTTL(state.TTLConfig{TTL: c.ttl}))
	return err
}

func (c *ttlCounter) ProcessElement(ctx *stream.Context[string, string], e tsEvent) error {
	n, _ := c.count.Value()
	c.count.Update(n + 1)
	return ctx.Emit(fmt.Sprintf("%s:%d", e.Key, n+1))
}

// TestStateTTLFollowsProcessingTime counts records per key in state with
// a time to live of a second, on both backends, with a manual clock: a
// key's count goes on while the clock stands, and starts over once the
// clock has passed the time to live.
func TestStateTTLFollowsProcessingTime(t *testing.T) {
	for _, backend := range []string{"hashmap", "pebble"} {
		t.Run(backend, func(t *testing.T) {
			clock := streamtest.NewManualClock(time.Unix(1_700_000_000, 0))
			env, err := stream.NewEnvironment(stream.WithConfig(mustConfig(t, "parallelism.default=1", "state.backend.type="+backend,
				"state.backend.pebble.localdir="+t.TempDir())), stream.WithLogger(quiet), stream.WithClock(clock))
			if err != nil {
				t.Fatal(err)
			}
			feed := make(chan tsEvent)
			in := stream.FromSource[tsEvent](env, fedSource{feed}, "fed", stream.NoWatermarks[tsEvent]())
			counts := stream.Process(stream.KeyBy(in, func(e tsEvent) string { return e.Key }), stream.KeyedProcessFunction[string, tsEvent, string](&ttlCounter{ttl: time.Second}), stream.Uid("count"))
			sink := newNotifySink[string](-1)
			stream.SinkTo(counts, sink, stream.Uid("sink"))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			client, err := env.ExecuteAsync(ctx, "ttl")
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			send := func(key, expect string) {
				t.Helper()
				feed <- tsEvent{Key: key}
				want = append(want, expect)
				deadline := time.Now().Add(time.Minute)
				for {
					sink.mu.Lock()
					got := slices.Clone(sink.got)
					sink.mu.Unlock()
					if len(got) == len(want) {
						if !slices.Equal(got, want) {
							t.Fatalf("outputs %v, want %v", got, want)
						}
						return
					}
					if time.Now().After(deadline) {
						t.Fatalf("outputs %v after a minute, want %v", got, want)
					}
					time.Sleep(time.Millisecond)
				}
			}
			send("a", "a:1")
			send("a", "a:2")
			send("b", "b:1")
			clock.Advance(900 * time.Millisecond)
			send("a", "a:3") // written 900 ms ago: alive, and renewed
			clock.Advance(900 * time.Millisecond)
			send("a", "a:4")
			send("b", "b:1") // written 1.8 s ago: expired
			clock.Advance(1500 * time.Millisecond)
			send("a", "a:1")
			cancel()
			client.Wait()
		})
	}
}

// ttlKeyCounter is ttlCounter with the state's whole TTL configuration.
type ttlKeyCounter struct {
	cfg   state.TTLConfig
	count state.ValueState[int]
}

func (c *ttlKeyCounter) Open(rc *stream.RuntimeContext[string]) (err error) {
	c.count, err = stream.ValueState[int](rc, "count", stream.WithTTL(c.cfg))
	return err
}

func (c *ttlKeyCounter) ProcessElement(ctx *stream.Context[string, string], e tsEvent) error {
	n, _ := c.count.Value()
	c.count.Update(n + 1)
	return ctx.Emit(fmt.Sprintf("%s:%d", e.Key, n+1))
}

// TestStateTTLBoundsCheckpointSize feeds a job new keys only, a batch per
// half second of a manual processing-time clock, with a time to live of
// a second, and checkpoints after each batch: with the background
// cleanup (the default), the keys that expired are removed although no
// record reads them again, so the checkpoints stop growing; with it
// disabled, they grow with every batch. On both backends.
func TestStateTTLBoundsCheckpointSize(t *testing.T) {
	const batches, perBatch = 12, 150
	for _, backend := range []string{"hashmap", "pebble"} {
		for _, disabled := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/disabled=%v", backend, disabled), func(t *testing.T) {
				clock := streamtest.NewManualClock(time.Unix(1_700_000_000, 0))
				env, err := stream.NewEnvironment(stream.WithConfig(mustConfig(t, "parallelism.default=1", "pipeline.max-parallelism=16", "execution.checkpointing.interval=1 h",
					"state.backend.type="+backend, "state.backend.pebble.localdir="+t.TempDir())), stream.WithLogger(quiet), stream.WithClock(clock))
				if err != nil {
					t.Fatal(err)
				}
				cfg := state.TTLConfig{TTL: time.Second, SweepRows: 20}
				if disabled {
					cfg = state.TTLConfig{TTL: time.Second, DisableCleanupInBackground: true}
				}
				feed := make(chan tsEvent)
				in := stream.FromSource[tsEvent](env, fedSource{feed}, "fed", stream.NoWatermarks[tsEvent]())
				counts := stream.Process(stream.KeyBy(in, func(e tsEvent) string { return e.Key }),
					stream.KeyedProcessFunction[string, tsEvent, string](&ttlKeyCounter{cfg: cfg}), stream.Uid("count"))
				sink := newNotifySink[string](-1)
				stream.SinkTo(counts, sink, stream.Uid("sink"))
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				client, err := env.ExecuteAsync(ctx, "ttl-size")
				if err != nil {
					t.Fatal(err)
				}
				var sizes []int64
				for batch := range batches {
					for i := range perBatch {
						feed <- tsEvent{Key: fmt.Sprintf("b%02d-k%04d", batch, i)}
					}
					deadline := time.Now().Add(time.Minute)
					for {
						sink.mu.Lock()
						n := len(sink.got)
						sink.mu.Unlock()
						if n == (batch+1)*perBatch {
							break
						}
						if time.Now().After(deadline) {
							t.Fatalf("%d outputs after a minute, want %d", n, (batch+1)*perBatch)
						}
						time.Sleep(time.Millisecond)
					}
					clock.Advance(500 * time.Millisecond)
					id, err := client.TriggerCheckpoint(ctx)
					if err != nil {
						t.Fatal(err)
					}
					last := client.Metrics().LastCheckpoint
					if last.ID != id {
						t.Fatalf("last checkpoint %d, want %d", last.ID, id)
					}
					sizes = append(sizes, last.Size)
				}
				cancel()
				client.Wait()
				t.Logf("checkpoint sizes: %v", sizes)
				// Batch b's keys expire at the checkpoint after batch b+1;
				// cleanup runs as later batches' records access the state.
				early, late := sizes[4], sizes[batches-1]
				if !disabled && late > early+early/2 {
					t.Errorf("with background cleanup the checkpoints grew from %d bytes after batch 5 to %d after batch %d: %v", early, late, batches, sizes)
				}
				if disabled && late < 2*early {
					t.Errorf("with cleanup disabled the checkpoints grew only from %d to %d bytes: %v", early, late, sizes)
				}
			})
		}
	}
}
