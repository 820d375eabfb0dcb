package bench

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestNexmarkReportSides renders the printed table, BENCHMARKS.md and the
// charts of a run with Flink on two backends and a latency phase: each
// Flink side has its own table and ratios against weir, and the latency
// table a column per side.
func TestNexmarkReportSides(t *testing.T) {
	run := func(wall, cpu time.Duration) ProcessRun {
		return ProcessRun{Wall: wall, CPU: cpu, MaxRSS: 100 << 20, Checkpoints: []CheckpointStat{{Duration: time.Millisecond, Size: 1 << 20}}}
	}
	side := func(name string, wall, cpu time.Duration) SideResult {
		return SideResult{Name: name, Runs: []ProcessRun{run(wall, cpu)}, Startup: []ProcessRun{run(time.Second, time.Second)}}
	}
	hist := func(us ...int64) *LatencyHistogram {
		var h LatencyHistogram
		for _, v := range us {
			h.Add(v)
		}
		return &h
	}
	results := []WorkloadResult{{
		Query: "q0", Check: "equal (9 rows)", Equal: true,
		SideBySide: SideBySide{Workload: "q0", Events: 1_000_000, Sides: []SideResult{
			side("weir", 2*time.Second, 2*time.Second), side("flink-hashmap", 11*time.Second, 21*time.Second), side("flink-rocksdb", 21*time.Second, 41*time.Second)}},
		Latency: &LatencyResult{Rate: 5000, Events: 100, Sides: []LatencySide{
			{"weir", hist(1000, 2000)}, {"flink-hashmap", hist(3000, 4000)}, {"flink-rocksdb", hist(5000, 6000)}}},
	}}
	var printed bytes.Buffer
	FormatNexmarkVsFlink(&printed, results)
	for _, want := range []string{"weir/flink-hashmap per round, median [min–max]: events/s 10.00×", "weir/flink-rocksdb per round, median [min–max]: events/s 20.00×",
		"latency at 5000 events/s (one run per side): weir p50 1.00 ms", "flink-rocksdb p50 5.02 ms"} {
		if !strings.Contains(printed.String(), want) {
			t.Errorf("the printed table lacks %q:\n%s", want, printed.String())
		}
	}
	var md bytes.Buffer
	WriteMarkdown(&md, Report{Heading: "Nexmark"}, results)
	for _, want := range []string{"#### weir and Flink (hashmap)", "#### weir and Flink (rocksdb)", "| weir/Flink (rocksdb) events/CPU-s |",
		"| q0 | 5000 | 1.00 ms / 2.01 ms | 2.99 ms / 4.02 ms | 5.02 ms / 5.98 ms | 2 / 2 / 2 | its bid's time (dateTime) |"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, md.String())
		}
	}
	if svg := RatioChartSVG(results); !strings.Contains(svg, ">q0 hashmap<") || !strings.Contains(svg, ">q0 rocksdb<") {
		t.Errorf("the ratio chart lacks a row per Flink side:\n%s", svg)
	}
	if svg := PerCPUChartSVG(results); strings.Count(svg, "<rect x=") != 3 || !strings.Contains(svg, "flink-rocksdb (green)") {
		t.Errorf("the chart lacks a bar per side:\n%s", svg)
	}
}

// TestNexmarkReportNoRate renders a side whose run took less than twice
// its start-up: no events/s and no ratio of them (never "NaN"), a note
// under the table saying why, and its events per CPU-second still there.
func TestNexmarkReportNoRate(t *testing.T) {
	side := func(name string, wall, cpu time.Duration) SideResult {
		return SideResult{Name: name, Runs: []ProcessRun{{Wall: wall, CPU: cpu, MaxRSS: 100 << 20}},
			Startup: []ProcessRun{{Wall: 10 * time.Second, CPU: 10 * time.Second}}}
	}
	results := []WorkloadResult{{
		Query: "q0", Check: "equal (9 rows)", Equal: true,
		SideBySide: SideBySide{Workload: "q0", Events: 1_000_000, Sides: []SideResult{
			{Name: "weir", Runs: []ProcessRun{{Wall: 2 * time.Second, CPU: 2 * time.Second}}, Startup: []ProcessRun{{Wall: time.Second / 10, CPU: time.Second / 10}}},
			side("flink-hashmap", 15*time.Second, 20*time.Second)}},
	}}
	var printed, md bytes.Buffer
	FormatNexmarkVsFlink(&printed, results)
	WriteMarkdown(&md, Report{Heading: "Nexmark"}, results)
	for name, s := range map[string]string{"printed": printed.String(), "markdown": md.String()} {
		if strings.Contains(s, "NaN") {
			t.Errorf("the %s report shows NaN:\n%s", name, s)
		}
		if !strings.Contains(s, "events/s "+noRate) && !strings.Contains(s, "| "+noRate+" |") {
			t.Errorf("the %s report does not mark the missing rate with %q:\n%s", name, noRate, s)
		}
	}
	// weir: 1 M events over 1.9 s of CPU; Flink: over 10 s.
	for _, want := range []string{"| q0 | 526316 | " + noRate + " | " + noRate + " | 526316 | 100000 | **5.26× [5.26–5.26]** |", noRateNote} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, md.String())
		}
	}
}
