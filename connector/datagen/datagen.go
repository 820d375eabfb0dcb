// Package datagen is a source of generated records: seeded, deterministic,
// split into partitions, replayable from any offset, optionally rate
// limited, bounded or unbounded.
//
// A record is a pure function of (partition, sequence number), so a
// restore that seeks a partition to offset n produces exactly the records a
// failure-free run produced from n on. The offset of a partition is its
// next sequence number.
package datagen

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/weirstream/weir/connector"
)

// Source generates records of type T.
type Source[T any] struct {
	gen        func(partition int, seq int64) T
	ts         func(partition int, seq int64) int64
	partitions int
	count      int64
	rate       float64
	batch      int
}

// Option configures a Source.
type Option func(*config)

type config struct {
	partitions int
	count      int64
	rate       float64
	batch      int
	ts         func(int, int64) int64
}

// Partitions sets the number of partitions (splits). Default 1.
func Partitions(n int) Option { return func(c *config) { c.partitions = n } }

// Count bounds each partition to n records (the source ends when all
// partitions have). Default 0: unbounded.
func Count(n int64) Option { return func(c *config) { c.count = n } }

// RatePerSecond limits each partition to r records per second. Default 0:
// as fast as the job consumes.
func RatePerSecond(r float64) Option { return func(c *config) { c.rate = r } }

// BatchSize sets the most records generated per fetch. Default 1024.
func BatchSize(n int) Option { return func(c *config) { c.batch = n } }

// Timestamps gives each record a source timestamp (Unix milliseconds).
func Timestamps(f func(partition int, seq int64) int64) Option {
	return func(c *config) { c.ts = f }
}

// New returns a source whose record at (partition, seq) is gen(partition,
// seq). gen must be deterministic.
func New[T any](gen func(partition int, seq int64) T, opts ...Option) (*Source[T], error) {
	c := config{partitions: 1, batch: 1024}
	for _, o := range opts {
		o(&c)
	}
	switch {
	case gen == nil:
		return nil, fmt.Errorf("datagen: the generator function is nil")
	case c.partitions < 1:
		return nil, fmt.Errorf("datagen: partitions must be at least 1, got %d", c.partitions)
	case c.count < 0:
		return nil, fmt.Errorf("datagen: count must be at least 0 (0: unbounded), got %d", c.count)
	case c.rate < 0:
		return nil, fmt.Errorf("datagen: rate must be at least 0 (0: unlimited), got %g", c.rate)
	case c.batch < 1:
		return nil, fmt.Errorf("datagen: batch size must be at least 1, got %d", c.batch)
	}
	return &Source[T]{gen: gen, ts: c.ts, partitions: c.partitions, count: c.count, rate: c.rate, batch: c.batch}, nil
}

// SplitID names partition p's split.
func SplitID(p int) string { return "datagen-" + strconv.Itoa(p) }

// Splits implements connector.Source.
func (s *Source[T]) Splits(context.Context) ([]string, error) {
	ids := make([]string, s.partitions)
	for p := range ids {
		ids[p] = SplitID(p)
	}
	return ids, nil
}

// Bounded implements connector.Source.
func (s *Source[T]) Bounded() bool { return s.count > 0 }

// NewReader implements connector.Source.
func (s *Source[T]) NewReader(_ context.Context, _ connector.ReaderInfo, splits []connector.SplitStart) (connector.Reader[T], error) {
	r := &reader[T]{src: s, start: time.Now()}
	for _, sp := range splits {
		p, err := strconv.Atoi(strings.TrimPrefix(sp.Split, "datagen-"))
		if err != nil || p < 0 || p >= s.partitions {
			return nil, fmt.Errorf("datagen: unknown split %q", sp.Split)
		}
		off := max(sp.Offset, 0)
		r.parts = append(r.parts, &partState{id: sp.Split, p: p, next: off, base: off})
	}
	return r, nil
}

type partState struct {
	id   string
	p    int
	next int64
	base int64 // offset when the reader started, for rate limiting
	done bool
}

type reader[T any] struct {
	src   *Source[T]
	parts []*partState
	rr    int
	start time.Time
}

func (r *reader[T]) Fetch(ctx context.Context) (connector.Fetch[T], error) {
	for {
		if err := ctx.Err(); err != nil {
			return connector.Fetch[T]{}, err
		}
		var wait time.Duration = -1
		for range r.parts {
			ps := r.parts[r.rr]
			r.rr = (r.rr + 1) % len(r.parts)
			if ps.done {
				continue
			}
			n := int64(r.src.batch)
			if r.src.count > 0 {
				n = min(n, r.src.count-ps.next)
			}
			if r.src.rate > 0 {
				allowed := int64(r.src.rate*time.Since(r.start).Seconds()) + 1 - (ps.next - ps.base)
				if allowed <= 0 {
					w := time.Duration(float64(ps.next-ps.base)/r.src.rate*float64(time.Second)) - time.Since(r.start)
					if wait < 0 || w < wait {
						wait = max(w, time.Millisecond)
					}
					continue
				}
				n = min(n, allowed)
			}
			return r.generate(ps, n), nil
		}
		if wait < 0 {
			return connector.Fetch[T]{}, connector.ErrEndOfInput
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return connector.Fetch[T]{}, ctx.Err()
		case <-t.C:
		}
	}
}

func (r *reader[T]) generate(ps *partState, n int64) connector.Fetch[T] {
	f := connector.Fetch[T]{Split: ps.id, Records: make([]T, n)}
	if r.src.ts != nil {
		f.Timestamps = make([]int64, n)
	}
	for i := range n {
		seq := ps.next + i
		f.Records[i] = r.src.gen(ps.p, seq)
		if f.Timestamps != nil {
			f.Timestamps[i] = r.src.ts(ps.p, seq)
		}
	}
	ps.next += n
	f.Next = ps.next
	if r.src.count > 0 && ps.next >= r.src.count {
		ps.done = true
		f.EndOfSplit = true
	}
	return f
}

func (r *reader[T]) Close() error { return nil }

// Mix returns a well-mixed 64-bit value for (seed, partition, seq):
// splitmix64 over the three. Generators use it to draw deterministic
// pseudo-random fields without keeping a random source per partition.
func Mix(seed uint64, partition int, seq int64) uint64 {
	x := seed ^ uint64(partition)*0x9e3779b97f4a7c15 ^ uint64(seq)*0xbf58476d1ce4e5b9
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
