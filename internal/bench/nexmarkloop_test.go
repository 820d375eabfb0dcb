package bench

import (
	"testing"

	"github.com/weirstream/weir/examples/nexmark"
)

// TestRunLoopQuery checks each hand-written loop against the query's
// oracle: as many rows, over events that span several windows on
// several splits, so the loop measures the query's whole work.
func TestRunLoopQuery(t *testing.T) {
	for _, splits := range []int{1, 3} {
		g := nexmark.DefaultGenConfig()
		g.Events, g.Rate, g.Splits = 20_000, 300, splits
		gen, err := nexmark.NewGenerator(g)
		if err != nil {
			t.Fatal(err)
		}
		events := gen.All()
		want := map[string]int{"q0": len(nexmark.OracleQ0(events)), "q1": len(nexmark.OracleQ1(events)),
			"q5": len(nexmark.OracleQ5(events)), "q7": len(nexmark.OracleQ7(events))}
		for _, q := range LoopQueries() {
			r, err := RunLoopQuery(q, g)
			if err != nil {
				t.Fatal(err)
			}
			if r.Rows != int64(want[q]) || r.Events != g.Events || r.CPU <= 0 {
				t.Errorf("%s on %d splits: %d rows, %d events, CPU %v; the oracle has %d rows", q, splits, r.Rows, r.Events, r.CPU, want[q])
			}
		}
	}
	if _, err := RunLoopQuery("q9", nexmark.DefaultGenConfig()); err == nil {
		t.Error("q9 has no loop, but ran")
	}
}
