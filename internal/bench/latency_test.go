package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/weirstream/weir/examples/nexmark"
)

// TestLatencyBuckets: every value falls in the bucket whose least value
// is at most it and whose successor's exceeds it, buckets are at most
// 1/64 of their values wide, and values below 128 µs are exact.
func TestLatencyBuckets(t *testing.T) {
	check := func(v int64) {
		i := latencyBucket(v)
		lo, hi := latencyLow(i), latencyLow(i+1)
		if lo > v || v >= hi || latencyBucket(lo) != i {
			t.Fatalf("%d: bucket %d of [%d, %d)", v, i, lo, hi)
		}
		if v < 128 && (lo != v || hi != v+1) {
			t.Fatalf("%d: bucket [%d, %d), want exact", v, lo, hi)
		}
		if float64(hi-lo) > float64(lo)/64+1 {
			t.Fatalf("%d: bucket [%d, %d) wider than 1/64", v, lo, hi)
		}
	}
	for v := range int64(100_000) {
		check(v)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 100_000 {
		check(r.Int64N(1 << 50))
	}
	for e := 7; e < 62; e++ {
		check(1<<e - 1)
		check(1 << e)
	}
}

// TestLatencyHistogramFiles: histograms written per subtask read back
// merged, with the quantiles of the values counted; a file that does not
// hold a histogram, or none at all, is an error.
func TestLatencyHistogramFiles(t *testing.T) {
	dir := t.TempDir()
	var a, b LatencyHistogram
	for v := range int64(1000) { // 0 … 999 µs: 1000 values
		a.Add(v)
	}
	b.Add(-5)       // counts as 0
	b.Add(5000_000) // 5 s
	if err := a.writeFile(filepath.Join(dir, "latency-0.txt")); err != nil {
		t.Fatal(err)
	}
	if err := b.writeFile(filepath.Join(dir, "latency-1.txt")); err != nil {
		t.Fatal(err)
	}
	h, err := ReadLatencyDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if h.Count() != 1002 {
		t.Fatalf("%d values, want 1002", h.Count())
	}
	// Rank 501 of 0, 0, 1, …, 999, 5 s is 499 µs; rank 1002 is 5 s.
	if p50 := h.Quantile(0.5); p50 < 492*time.Microsecond || p50 > 500*time.Microsecond {
		t.Errorf("p50 %v, want 499 µs within its bucket", p50)
	}
	if max := h.Quantile(1); max < 4900*time.Millisecond || max > 5100*time.Millisecond {
		t.Errorf("p100 %v, want 5 s within its bucket", max)
	}
	if (&LatencyHistogram{}).Quantile(0.5) != 0 {
		t.Error("a quantile of nothing")
	}
	for name, text := range map[string]string{"a word": "12 x\n", "not a bucket's least value": "129 1\n", "negative": "-1 3\n"} {
		bad := t.TempDir()
		if err := os.WriteFile(filepath.Join(bad, "latency-0.txt"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadLatencyDir(bad); err == nil {
			t.Errorf("%s: %q read", name, text)
		}
	}
	if _, err := ReadLatencyDir(t.TempDir()); err == nil {
		t.Error("a directory without histograms read")
	}
}

// TestLatencyShift: readers asking at once get one shift, the one in the
// start file.
func TestLatencyShift(t *testing.T) {
	dir := t.TempDir()
	const base = 1_000
	got := make([]int64, 8)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() {
			v, err := LatencyShift(dir, base)
			if err != nil {
				t.Error(err)
			}
			got[i] = v
		})
	}
	wg.Wait()
	b, err := os.ReadFile(filepath.Join(dir, LatencyStartFile))
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		if fmt.Sprint(v) != string(b) {
			t.Fatalf("reader %d: shift %d, the start file %q", i, v, b)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("%d files left in the directory, want the start file alone", len(entries))
	}
}

// TestRunNexmarkLatency runs queries paced, as a latency run's child
// does, and checks that the sinks counted exactly the rows the query's
// oracle has due in the counted span: every row once, its due time as the
// spec says.
func TestRunNexmarkLatency(t *testing.T) {
	c := DefaultNexmark()
	c.Gen.Events, c.Gen.Rate, c.Checkpoint = 40_000, 10_000, 200*time.Millisecond // 2 s of event time
	gen, err := nexmark.NewGenerator(c.Gen)
	if err != nil {
		t.Fatal(err)
	}
	events := gen.All()
	base := c.Gen.BaseTime
	from, until := base+500, base+2001
	dues := map[string][]int64{}
	for _, r := range nexmark.OracleQ0(events) {
		dues["q0"] = append(dues["q0"], r.DateTime)
	}
	for _, r := range nexmark.OracleQ5(events) {
		dues["q5"] = append(dues["q5"], r.Start+10_000)
	}
	for _, q := range []string{"q0", "q5"} {
		spec, err := nexmark.LatencyOf(q)
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		for _, d := range dues[q] {
			if d >= from && d < until {
				want++
			}
		}
		if want == 0 {
			t.Fatalf("%s: no row due in the span: the test counts nothing", q)
		}
		c.Query = q
		c.Latency = &LatencyRun{Dir: t.TempDir(), Base: base, From: from, Until: until}
		if _, err := RunNexmark(context.Background(), c); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		h, err := ReadLatencyDir(c.Latency.Dir)
		if err != nil {
			t.Fatal(err)
		}
		if h.Count() != int64(want) {
			t.Errorf("%s (due at %+v): %d rows counted, the oracle has %d due in the span", q, spec, h.Count(), want)
		}
	}
}
