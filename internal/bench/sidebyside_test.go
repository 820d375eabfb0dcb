package bench

import (
	"context"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	gm "github.com/weirstream/weir/examples/gatewaymeter"
)

// TestGatewayMeterSameCatchesADifference gives the GatewayMeter workload's
// check the oracle's own outputs for one side and the same outputs with one
// tenant-cost minute off by a micro-dollar for the other: it must pass the
// first and name the second.
func TestGatewayMeterSameCatchesADifference(t *testing.T) {
	c := DefaultGatewayMeterBench()
	c.Lines, c.TraceDir, c.FlinkJar = 4000, t.TempDir(), "flink.jar"
	w, err := c.Workload(nil)
	if err != nil {
		t.Fatal(err)
	}
	want, err := gm.OracleFiles(w.Input)
	if err != nil {
		t.Fatal(err)
	}
	if len(want.TenantCost) == 0 {
		t.Fatal("the oracle has no tenant-cost minute to change")
	}
	good, bad := filepath.Join(t.TempDir(), "good"), filepath.Join(t.TempDir(), "bad")
	if err := gm.WriteOutputs(good, want); err != nil {
		t.Fatal(err)
	}
	if err := w.Same([]string{good, good}); err != nil {
		t.Fatalf("the oracle's outputs on both sides: %v", err)
	}
	want.TenantCost[len(want.TenantCost)/2].CostMicros++
	if err := gm.WriteOutputs(bad, want); err != nil {
		t.Fatal(err)
	}
	err = w.Same([]string{good, bad})
	if err == nil || !strings.Contains(err.Error(), "flink's outputs are not the oracle's") || strings.Contains(err.Error(), "weir's") {
		t.Fatalf("one changed minute on Flink's side: got %v", err)
	}
}

// TestSpreadOf checks the median of odd and even counts, and the bounds.
func TestSpreadOf(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want Spread
	}{
		{[]float64{3, 1, 2}, Spread{2, 1, 3}},
		{[]float64{4, 1, 3, 2}, Spread{2.5, 1, 4}},
		{[]float64{5}, Spread{5, 5, 5}},
	} {
		if got := SpreadOf(c.in); got != c.want {
			t.Errorf("SpreadOf(%v) = %+v, want %+v", c.in, got, c.want)
		}
	}
}

// TestRunSideRSS runs a child that holds little memory from a parent that
// has touched much more: the child's peak RSS must be its own, not the
// parent's high-water mark that ru_maxrss carries across exec.
func TestRunSideRSS(t *testing.T) {
	big := make([]byte, 256<<20)
	for i := range big {
		big[i] = byte(i)
	}
	s := Side{Name: "sleep", Command: func(ctx context.Context, _ SideRun) *exec.Cmd {
		return exec.CommandContext(ctx, "sleep", "0.3")
	}}
	r, err := RunSide(context.Background(), s, "", t.TempDir(), true)
	if err != nil {
		t.Fatal(err)
	}
	if r.MaxRSS <= 0 || r.MaxRSS >= 128<<20 {
		t.Errorf("peak RSS of sleep: %d bytes, want more than 0 and far below the parent's %d", r.MaxRSS, len(big))
	}
	runtime.KeepAlive(big)
}

// TestGatewayMeterLoop runs GatewayMeter's hand-written loop over a small
// trace: it reads every event and computes the oracle's outputs.
func TestGatewayMeterLoop(t *testing.T) {
	c := DefaultGatewayMeterBench()
	c.TraceDir = t.TempDir()
	dir, events, err := c.Trace(2000, nil)
	if err != nil {
		t.Fatal(err)
	}
	want, err := gm.OracleFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	l, err := RunGatewayMeterLoop(dir, events)
	if err != nil {
		t.Fatal(err)
	}
	rows := len(want.TenantCost) + len(want.ModelLatency) + len(want.Alerts) + len(want.Orphans) + len(want.DeadLetters)
	if l.Events != events || l.Rows != int64(rows) || rows == 0 {
		t.Errorf("the loop: %d events, %d rows; the trace has %d events, the oracle %d rows", l.Events, l.Rows, events, rows)
	}
	var b strings.Builder
	FormatLoop(&b, SideBySide{}, []LoopResult{{Events: 10}})
	if !strings.Contains(b.String(), "too short") {
		t.Errorf("a loop charged no CPU time: %q", b.String())
	}
}
