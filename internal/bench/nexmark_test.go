package bench

import (
	"context"
	"testing"
	"time"

	"github.com/weirstream/weir/connector/file"
	"github.com/weirstream/weir/examples/nexmark"
)

// TestRunNexmark runs every query as `weir bench nexmark` does, on a few
// thousand events with checkpoints, so that the harness cannot rot; it
// asserts that each ran over every event, never a time.
func TestRunNexmark(t *testing.T) {
	c := DefaultNexmark()
	c.Gen.Events, c.Gen.Rate, c.Checkpoint = 3000, 1000, 10*time.Millisecond
	for _, q := range nexmark.Queries() {
		c.Query = q.Name
		r, err := RunNexmark(context.Background(), c)
		if err != nil {
			t.Fatalf("%s: %v", q.Name, err)
		}
		if r.Events != 3000 || r.Elapsed <= 0 || r.PeakRSS <= 0 {
			t.Fatalf("%s: %+v", q.Name, r)
		}
	}
	if _, err := RunNexmark(context.Background(), NexmarkConfig{Query: "q6", Gen: c.Gen, Parallelism: 1}); err == nil {
		t.Fatal("q6, which the suite does not have, ran")
	}
}

func TestCheckpointQuantile(t *testing.T) {
	r := NexmarkResult{Checkpoints: []time.Duration{5, 1, 4, 2, 3}}
	if p50, p99 := r.CheckpointQuantile(0.5), r.CheckpointQuantile(0.99); p50 != 3 || p99 != 5 {
		t.Fatalf("p50 %v, p99 %v; want 3 and 5", p50, p99)
	}
	if (NexmarkResult{}).CheckpointQuantile(0.5) != 0 {
		t.Fatal("a quantile of no checkpoints")
	}
}

// TestRunNexmarkOutput runs queries writing their rows (Output), with
// checkpoints every few milliseconds, and checks that the final content
// of each table has as many rows as the query's oracle says: every row
// committed once, none lost or duplicated across the checkpoints.
func TestRunNexmarkOutput(t *testing.T) {
	c := DefaultNexmark()
	c.Gen.Events, c.Gen.Rate, c.Checkpoint = 3000, 200, 10*time.Millisecond
	gen, err := nexmark.NewGenerator(c.Gen)
	if err != nil {
		t.Fatal(err)
	}
	events := gen.All()
	want := map[string]int{
		"q0": len(nexmark.OracleQ0(events)), "q4": len(nexmark.OracleQ4(events)),
		"q5": len(nexmark.OracleQ5(events)), "q19": 0,
	}
	for _, r := range nexmark.OracleQ19(events) {
		want["q19"] += len(r.Top)
	}
	for q, n := range want {
		c.Query, c.Output, c.Backend = q, t.TempDir(), "hashmap"
		if _, err := RunNexmark(context.Background(), c); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		lines, err := file.ReadLines(c.Output)
		if err != nil {
			t.Fatal(err)
		}
		text := make([]string, len(lines))
		for i, l := range lines {
			text[i] = string(l.Text)
		}
		tb, err := nexmark.TableOf(q)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := nexmark.FinalRows(tb, text)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != n || n == 0 {
			t.Errorf("%s: %d rows in the final table, the oracle has %d", q, len(rows), n)
		}
	}
}
