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
