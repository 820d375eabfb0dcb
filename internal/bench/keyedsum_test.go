package bench

import (
	"context"
	"testing"
	"time"
)

func BenchmarkKeyedSumEngine(b *testing.B) {
	for _, interval := range []time.Duration{0, time.Second} {
		name := "checkpoints-off"
		if interval > 0 {
			name = "checkpoints-1s"
		}
		b.Run(name, func(b *testing.B) {
			c := DefaultKeyedSum()
			c.Records = 2_000_000
			c.Checkpoint = interval
			var total Result
			for range b.N {
				r, err := RunEngine(context.Background(), c)
				if err != nil {
					b.Fatal(err)
				}
				total.Records += r.Records
				total.Elapsed += r.Elapsed
			}
			b.ReportMetric(total.PerSecond(), "records/s")
		})
	}
}

func BenchmarkKeyedSumLoop(b *testing.B) {
	c := DefaultKeyedSum()
	c.Records = 2_000_000
	var total Result
	for range b.N {
		r := RunLoop(c)
		total.Records += r.Records
		total.Elapsed += r.Elapsed
	}
	b.ReportMetric(total.PerSecond(), "records/s")
}

// TestKeyedSumRuns keeps the benchmark code working in the default suite.
func TestKeyedSumRuns(t *testing.T) {
	c := DefaultKeyedSum()
	c.Records = 20_000
	c.Checkpoint = 10 * time.Millisecond
	r, err := RunEngine(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if r.Records != c.Records {
		t.Fatalf("processed %d records, want %d", r.Records, c.Records)
	}
}
