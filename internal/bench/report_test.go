package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestWriteSection writes two commands' sections into one report file
// and rewrites one of them: the other section, and text around them,
// stay as they were; broken markers are refused, the file untouched.
func TestWriteSection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	read := func() string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if err := WriteSection(path, "weir bench nexmark", []byte("## Nexmark\n\nNX-FIRST\n")); err != nil {
		t.Fatal(err)
	}
	if err := WriteSection(path, "weir bench gatewaymeter", []byte("## GatewayMeter\n\nGM-BODY\n")); err != nil {
		t.Fatal(err)
	}
	first := read()
	if !strings.HasPrefix(first, reportTitle+"\n") || strings.Index(first, "NX-FIRST") > strings.Index(first, "GM-BODY") {
		t.Fatalf("want the title, then the Nexmark section, then GatewayMeter's:\n%s", first)
	}
	if err := WriteSection(path, "weir bench nexmark", []byte("## Nexmark\n\nNX-SECOND\n")); err != nil {
		t.Fatal(err)
	}
	second := read()
	if want := strings.Replace(first, "NX-FIRST", "NX-SECOND", 1); second != want {
		t.Fatalf("rewriting one section changed more than it:\n%s\nwant:\n%s", second, want)
	}
	_, end := sectionMarkers("weir bench gatewaymeter")
	broken := strings.Replace(second, end, "", 1)
	if err := os.WriteFile(path, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteSection(path, "weir bench gatewaymeter", []byte("## GatewayMeter\n\nnew\n")); err == nil || !strings.Contains(err.Error(), "incomplete") {
		t.Fatalf("a section without its end marker: got %v, want an error", err)
	}
	if read() != broken {
		t.Fatal("a refused write changed the file")
	}
}

// TestCheckpointSizeChart draws a dot per checkpoint with state, a
// labelled median per series, and nothing without points.
func TestCheckpointSizeChart(t *testing.T) {
	series := []CheckpointSeries{
		{Side: "weir", Workload: "q5", Points: []CheckpointStat{{Duration: 30 * time.Millisecond, Size: 2 << 20}, {Duration: 0, Size: 3 << 20}, {Duration: time.Second, Size: 0}}},
		{Side: "flink", Workload: "q5", Points: []CheckpointStat{{Duration: 2 * time.Second, Size: 40 << 20}}},
	}
	svg := CheckpointSizeChartSVG(series)
	if got := strings.Count(svg, `r="2.5"`); got != 3 {
		t.Errorf("%d dots, want 3 (the checkpoint without state left out):\n%s", got, svg)
	}
	if got := strings.Count(svg, ">q5</text>"); got != 2 {
		t.Errorf("%d median labels, want one per series:\n%s", got, svg)
	}
	for _, want := range []string{"weir (blue)", "flink (orange)", ">1 MB<", ">10 MB<", ">100 MB<", ">1 ms<", ">10.00 s<"} {
		if !strings.Contains(svg, want) {
			t.Errorf("the chart lacks %q:\n%s", want, svg)
		}
	}
	if svg := CheckpointSizeChartSVG([]CheckpointSeries{{Side: "weir", Points: []CheckpointStat{{Duration: time.Second}}}}); svg != "" {
		t.Errorf("a chart of no state: %s", svg)
	}
}
