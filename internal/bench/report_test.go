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

// TestSectionOf gives the rocksdb backend a section of its own (markers,
// heading, command and chart files) and leaves hashmap's as it was.
func TestSectionOf(t *testing.T) {
	for _, b := range []string{"", "hashmap"} {
		want := Section{Name: "weir bench gatewaymeter", Heading: "GatewayMeter", Command: "weir bench gatewaymeter --vs-flink --write", ChartPrefix: "gatewaymeter"}
		if got := SectionOf("weir bench gatewaymeter", "GatewayMeter", "gatewaymeter", b, nil); got != want {
			t.Errorf("backend %q: %+v, want %+v", b, got, want)
		}
	}
	want := Section{Name: "weir bench gatewaymeter --backend rocksdb", Heading: "GatewayMeter, RocksDB on both sides (weir: pebble)",
		Command: "weir bench gatewaymeter --vs-flink --backend rocksdb --write", ChartPrefix: "gatewaymeter-rocksdb"}
	if got := SectionOf("weir bench gatewaymeter", "GatewayMeter", "gatewaymeter", "rocksdb", []string{"rocksdb"}); got != want {
		t.Errorf("rocksdb: %+v, want %+v", got, want)
	}
	got := SectionOf("weir bench nexmark", "Nexmark", "nexmark", "rocksdb", []string{"hashmap", "rocksdb"})
	if got.Name != "weir bench nexmark --backend rocksdb" || got.ChartPrefix != "nexmark-rocksdb" ||
		got.Heading != "Nexmark, weir on RocksDB (weir: pebble), Flink on hashmap and rocksdb" {
		t.Errorf("rocksdb against Flink on both: %+v", got)
	}
}

// TestWriteSectionPerBackend writes a command's hashmap section and its
// rocksdb section into one report file: both are there after writing
// each, and rewriting either keeps the other as it was. The introduction
// before the first section, an older one here, is rewritten to list the
// commands.
func TestWriteSectionPerBackend(t *testing.T) {
	path := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	if err := os.WriteFile(path, []byte(reportTitle+"\n\nAn older introduction.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	read := func() string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	heap := SectionOf("weir bench gatewaymeter", "GatewayMeter", "gatewaymeter", "hashmap", nil)
	lsm := SectionOf("weir bench gatewaymeter", "GatewayMeter", "gatewaymeter", "rocksdb", nil)
	write := func(s Section, body string) {
		t.Helper()
		if err := WriteSection(path, s.Name, []byte("## "+s.Heading+"\n\n"+body+"\n")); err != nil {
			t.Fatal(err)
		}
	}
	section := func(text string, s Section) string {
		t.Helper()
		begin, end := sectionMarkers(s.Name)
		b, e := strings.Index(text, begin), strings.Index(text, end)
		if b < 0 || e < b {
			t.Fatalf("no section %q:\n%s", s.Name, text)
		}
		return text[b : e+len(end)]
	}
	write(heap, "HEAP-1")
	write(lsm, "LSM-1")
	both := read()
	if h, l := section(both, heap), section(both, lsm); !strings.Contains(h, "HEAP-1") || strings.Contains(h, "LSM-1") ||
		!strings.Contains(l, "LSM-1") || strings.Contains(l, "HEAP-1") {
		t.Fatalf("each section should hold its own body:\n%s", both)
	}
	if strings.Contains(both, "An older introduction.") || !strings.HasPrefix(both, reportTitle+"\n\n"+reportIntro+"\n\n<!-- begin: ") {
		t.Errorf("the introduction was not rewritten:\n%s", both)
	}
	for _, cmd := range []string{"--vs-flink --write BENCHMARKS.md", "--vs-flink --backend rocksdb --write BENCHMARKS.md"} {
		for _, c := range []string{"gatewaymeter ", "nexmark "} {
			if !strings.Contains(both, "`./weir bench "+c+cmd+"`") {
				t.Errorf("the introduction does not list weir bench %s%s:\n%s", c, cmd, both)
			}
		}
	}
	write(lsm, "LSM-2")
	if got, want := read(), strings.Replace(both, "LSM-1", "LSM-2", 1); got != want {
		t.Fatalf("rewriting the rocksdb section changed more than it:\n%s\nwant:\n%s", got, want)
	}
	write(heap, "HEAP-2")
	if got, want := read(), strings.Replace(strings.Replace(both, "LSM-1", "LSM-2", 1), "HEAP-1", "HEAP-2", 1); got != want {
		t.Fatalf("rewriting the hashmap section changed more than it:\n%s\nwant:\n%s", got, want)
	}
	// A file that does not start with the report's title keeps its top.
	other := filepath.Join(t.TempDir(), "OTHER.md")
	if err := os.WriteFile(other, []byte("# Something else\n\nKept.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteSection(other, lsm.Name, []byte("LSM")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(other); !strings.HasPrefix(string(b), "# Something else\n\nKept.\n\n<!-- begin: ") {
		t.Errorf("a file of another title lost its top:\n%s", b)
	}
}

func TestSecondHalfMedian(t *testing.T) {
	for _, tc := range []struct {
		in   map[int64]float64
		want float64
		n    int
	}{
		{map[int64]float64{}, 0, 0},
		{map[int64]float64{1: 0.5}, 0.5, 1},
		// The first half (ids 1, 2) is left out whatever its values.
		{map[int64]float64{1: 1, 2: 1, 3: 0.03, 4: 0.01, 5: 0.02}, 0.02, 3},
		{map[int64]float64{7: 0.9, 3: 0.1, 5: 0.2, 9: 0.3}, 0.9, 2},
	} {
		got, n := secondHalfMedian(tc.in)
		if got != tc.want || n != tc.n {
			t.Errorf("secondHalfMedian(%v) = %v, %d; want %v, %d", tc.in, got, n, tc.want, tc.n)
		}
	}
}
