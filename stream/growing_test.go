package stream_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connector/datagen"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

// growingSource is a source whose partitions grow while the job runs, as
// a Kafka topic's do when partitions are added: it lists the first
// initial of its partitions until its readers have fetched after records
// (over every attempt of the job), and all of them from then on; the job
// lists it again every interval. Each partition holds a bounded number
// of generated records, but the source is unbounded, as a topic is: a
// reader that has read all it was given waits for more, and the test
// cancels the job once the output is complete.
type growingSource struct {
	all            *datagen.Source[rec]
	initial, total int
	after          int64
	interval       time.Duration

	fetched atomic.Int64
	grown   atomic.Bool // a listing returned the added partitions
}

func newGrowingSource(gen func(int, int64) rec, initial, total int, perPartition, after int64, interval time.Duration) (*growingSource, error) {
	all, err := datagen.New(gen, datagen.Partitions(total), datagen.Count(perPartition), datagen.BatchSize(64), datagen.RatePerSecond(60_000))
	if err != nil {
		return nil, err
	}
	return &growingSource{all: all, initial: initial, total: total, after: after, interval: interval}, nil
}

// Splits implements connector.Source.
func (g *growingSource) Splits(context.Context) ([]string, error) {
	n := g.initial
	if g.fetched.Load() >= g.after {
		g.grown.Store(true)
		n = g.total
	}
	ids := make([]string, n)
	for p := range ids {
		ids[p] = datagen.SplitID(p)
	}
	return ids, nil
}

// Bounded implements connector.Source.
func (g *growingSource) Bounded() bool { return false }

// SplitDiscoveryInterval implements connector.SplitDiscoverer.
func (g *growingSource) SplitDiscoveryInterval() time.Duration { return g.interval }

// NewReader implements connector.Source.
func (g *growingSource) NewReader(ctx context.Context, info connector.ReaderInfo, splits []connector.SplitStart) (connector.Reader[rec], error) {
	r, err := g.all.NewReader(ctx, info, splits)
	if err != nil {
		return nil, err
	}
	return &growingReader{r: r, g: g}, nil
}

type growingReader struct {
	r connector.Reader[rec]
	g *growingSource
}

func (r *growingReader) Fetch(ctx context.Context) (connector.Fetch[rec], error) {
	f, err := r.r.Fetch(ctx)
	if errors.Is(err, connector.ErrEndOfInput) {
		<-ctx.Done() // a topic's reader waits for records that may come
		return connector.Fetch[rec]{}, ctx.Err()
	}
	r.g.fetched.Add(int64(len(f.Records)))
	return f, err
}

func (r *growingReader) Close() error { return r.r.Close() }

// executeUntilComplete runs env's unbounded job until complete says its
// output holds every record, and then until two more checkpoints have
// completed (a duplicate written late would show), and cancels it. It
// fails the test if the output is not complete after a minute and a half
// (a record was lost) or the job ends on its own.
func executeUntilComplete(t *testing.T, env *stream.Environment, ev *streamtest.Events, complete func() bool, describe string, verify func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- env.Execute(ctx, "differential") }()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(90 * time.Second)
	completedAt := -1
	for {
		select {
		case err := <-errc:
			t.Fatalf("%s: the unbounded job ended on its own: %v", describe, err)
		case <-deadline:
			dump := dumpGoroutines(t)
			cancel()
			<-errc
			t.Fatalf("%s: the output is not complete after 90 s: %v (goroutines: %s)", describe, verify(), dump)
		case <-tick.C:
		}
		n := ev.Count(stream.EventCheckpointCompleted)
		if completedAt < 0 && complete() {
			completedAt = n
		}
		if completedAt >= 0 && n >= completedAt+2 {
			break
		}
	}
	cancel()
	if err := <-errc; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("%s: canceling the job: %v", describe, err)
	}
}

// verifyPassThrough checks a pass-through job's output against its input:
// every record exactly once, or, if atLeastOnce, at least once; and no
// record that is not in the input, nor one whose key or value is not its
// input record's.
func verifyPassThrough(out []KeyedSum, input []rec, atLeastOnce bool) error {
	type pos struct {
		p   int
		seq int64
	}
	records := make(map[pos]rec, len(input))
	for _, x := range input {
		records[pos{x.P, x.Seq}] = x
	}
	seen := make(map[pos]int, len(out))
	for _, s := range out {
		if x, ok := records[pos{s.P, s.Seq}]; ok && (x.Key != s.Key || x.Value != s.Sum) {
			return fmt.Errorf("record %d/%d out as %s=%d, in as %s=%d", s.P, s.Seq, s.Key, s.Sum, x.Key, x.Value)
		}
		seen[pos{s.P, s.Seq}]++
	}
	var missing, dup []string
	for _, x := range input {
		switch n := seen[pos{x.P, x.Seq}]; {
		case n == 0:
			missing = append(missing, fmt.Sprintf("%d/%d", x.P, x.Seq))
		case n > 1 && !atLeastOnce:
			dup = append(dup, fmt.Sprintf("%d/%d×%d", x.P, x.Seq, n))
		}
		delete(seen, pos{x.P, x.Seq})
	}
	if len(seen) > 0 {
		return fmt.Errorf("%d records in the output that are not in the input", len(seen))
	}
	if len(missing) > 0 || len(dup) > 0 {
		return fmt.Errorf("%d of %d records missing (first %v), %d duplicated (first %v)",
			len(missing), len(input), missing[:min(len(missing), 5)], len(dup), dup[:min(len(dup), 5)])
	}
	if len(out) != len(input) && !atLeastOnce {
		return fmt.Errorf("%d records out for %d in", len(out), len(input))
	}
	return nil
}
