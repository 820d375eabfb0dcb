package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/weirstream/weir/internal/bench"
)

// flinkJar returns the jar of bench/flink: $WEIR_FLINK_JAR, or one built
// here with Maven. Without Java and Maven the test is skipped, unless
// WEIR_FLINK_REQUIRED=1 (CI) makes that a failure.
func flinkJar(t *testing.T) string {
	t.Helper()
	missing := func(msg string) {
		if os.Getenv("WEIR_FLINK_REQUIRED") == "1" {
			t.Fatal(msg + "; WEIR_FLINK_REQUIRED=1")
		}
		t.Skip(msg + ": the Flink side of the benchmarks needs Java 17 and Maven (set WEIR_FLINK_REQUIRED=1 to fail instead)")
	}
	if _, err := exec.LookPath("java"); err != nil {
		missing("java is not on the PATH")
	}
	if jar := os.Getenv("WEIR_FLINK_JAR"); jar != "" {
		if _, err := os.Stat(jar); err != nil {
			t.Fatalf("WEIR_FLINK_JAR: %v", err)
		}
		return jar
	}
	mvn, err := exec.LookPath("mvn")
	if err != nil {
		missing("mvn is not on the PATH")
	}
	pom, err := filepath.Abs("../../bench/flink/pom.xml")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(mvn, "-q", "-B", "-f", pom, "package").CombinedOutput(); err != nil {
		t.Fatalf("mvn package: %v\n%s", err, out)
	}
	return filepath.Join(filepath.Dir(pom), "target", "weir-flink-bench.jar")
}

// TestBenchGatewayMeterVsFlink runs `weir bench gatewaymeter --vs-flink`
// over a small trace with each backend: weir and the Flink job of
// bench/flink each run it, and the command fails unless each side's
// outputs equal the oracle's (gatewaymeter.OracleFiles, diffed by
// gatewaymeter.Diff) to the last record. Both runs write one report,
// each its own section. It asserts that the command succeeded and
// reported both sides, never a time.
func TestBenchGatewayMeterVsFlink(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a JVM per run")
	}
	jar := flinkJar(t)
	bin := weirBinary(t)
	traces := t.TempDir()
	report := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	for _, backend := range []string{"hashmap", "rocksdb"} {
		t.Run(backend, func(t *testing.T) {
			sec := bench.SectionOf("weir bench gatewaymeter", "GatewayMeter", "gatewaymeter", backend, nil)
			cmd := exec.Command(bin, "bench", "gatewaymeter", "--vs-flink", "--flink-jar", jar, "--lines", "40000", "--rounds", "1",
				"--backend", backend, "--trace-dir", traces, "--work-dir", t.TempDir(), "--write", report)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%v: %v\n%s", cmd.Args, err, out)
			}
			for _, want := range []string{"outputs equal to the oracle's on every side in every round", "\n  weir ", "\n  flink ", "weir/flink per round",
				"checkpoints every 1s against none during the run"} {
				if !strings.Contains(string(out), want) {
					t.Errorf("the output lacks %q:\n%s", want, out)
				}
			}
			md, err := os.ReadFile(report)
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"## " + sec.Heading + "\n", "| gatewaymeter |", "equal to the oracle's on both sides in every round",
				"bench/charts/" + sec.ChartPrefix + "-ratio.svg", "--backend " + backend, "What checkpointing costs weir", "Memory of the state",
				"<!-- end: " + sec.Name + " -->", "<!-- end: weir bench gatewaymeter -->"} {
				if !strings.Contains(string(md), want) {
					t.Errorf("the report lacks %q:\n%s", want, md)
				}
			}
		})
	}
}

// TestBenchGatewayMeterCheckpointCost runs `weir bench gatewaymeter`
// (weir alone) over a small trace: after its round, weir's side runs with
// and without checkpoints during the run, each run's outputs equal to the
// oracle's or the command fails. It asserts that the command succeeded and
// reported the cost of checkpointing (with its runs, one of each), never a
// time; --checkpoint-cost=false leaves it out.
func TestBenchGatewayMeterCheckpointCost(t *testing.T) {
	bin := weirBinary(t)
	traces := t.TempDir()
	cmd := exec.Command(bin, "bench", "gatewaymeter", "--lines", "4000", "--rounds", "1", "--trace-dir", traces, "--work-dir", t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %v\n%s", cmd.Args, err, out)
	}
	for _, want := range []string{"outputs equal to the oracle's on every side in every round", "round 1  weir-ckpt ", "round 1  weir-none ",
		"checkpoints every 1s against none during the run (weir, 1 rounds interleaved", "CPU time added "} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the output lacks %q:\n%s", want, out)
		}
	}
	cmd = exec.Command(bin, "bench", "gatewaymeter", "--lines", "4000", "--rounds", "1", "--trace-dir", traces, "--work-dir", t.TempDir(), "--checkpoint-cost=false")
	if out, err = cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", cmd.Args, err, out)
	}
	if strings.Contains(string(out), "weir-none") || strings.Contains(string(out), "against none") {
		t.Errorf("--checkpoint-cost=false ran the cost runs:\n%s", out)
	}
}

// TestBenchNexmarkVsFlink runs `weir bench nexmark --vs-flink` over a few
// thousand events for q0, q1, q5 and q7, one round: each query runs on
// weir and as the reference suite's Flink SQL (bench/flink), once writing
// its rows, compared, and once timed, q0 once more paced for its latency
// (q5's windowed latency is covered by TestRunNexmarkLatency in-process), and the command writes its report. It asserts that every query
// ran on both sides, that their results were equal, that both sides
// counted the same rows' latencies, and that the report and its charts
// were written, never a time.
func TestBenchNexmarkVsFlink(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a JVM per run")
	}
	jar := flinkJar(t)
	bin := weirBinary(t)
	dir := t.TempDir()
	report := filepath.Join(dir, "BENCHMARKS.md")
	cmd := exec.Command(bin, "bench", "nexmark", "--vs-flink", "--flink-jar", jar, "--query", "q0,q1,q5,q7",
		"--events", "4000", "--rate", "200", "--rounds", "1", "--events-dir", filepath.Join(dir, "events"),
		"--work-dir", filepath.Join(dir, "work"), "--write", report, "--note", "A test run.",
		"--latency-query", "q0", "--latency-rate", "2000", "--latency-duration", "3s", "--latency-warmup", "0s")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %v\n%s", cmd.Args, err, out)
	}
	text := string(out)
	for _, q := range []string{"q0", "q1", "q5", "q7"} {
		if !regexp.MustCompile(`(?m)^  ` + q + `: equal \([1-9][0-9]* rows\)$`).MatchString(text) {
			t.Errorf("%s: no line saying its results were equal:\n%s", q, text)
		}
	}
	for _, want := range []string{"results equal on every query compared", "\n        flink ", "weir/flink per round"} {
		if !strings.Contains(text, want) {
			t.Errorf("the output lacks %q:\n%s", want, text)
		}
	}
	lat := regexp.MustCompile(`(?m)^ +latency at 2000 events/s \(one run per side\): weir p50 \S+ \S+ p99 \S+ \S+ \(([0-9]+) rows\); flink p50 \S+ \S+ p99 \S+ \S+ \(([0-9]+) rows\)$`)
	if m := lat.FindAllStringSubmatch(text, -1); len(m) != 1 {
		t.Errorf("%d latency lines, want q0's:\n%s", len(m), text)
	} else {
		for _, l := range m {
			if l[1] == "0" || l[1] != l[2] {
				t.Errorf("%q: the sides counted %s and %s rows, want the same, not none", l[0], l[1], l[2])
			}
		}
	}
	md, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"A test run.", "| q0 |", "| q7 |", "bench/charts/nexmark-ratio.svg", "Apache Flink: 2.",
		"#### End-to-end latency at a fixed rate", "## Nexmark", "| q0 | 2000 |"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
	for _, chart := range []string{"nexmark-events-per-cpu-second.svg", "nexmark-ratio.svg"} {
		b, err := os.ReadFile(filepath.Join(dir, "bench", "charts", chart))
		if err != nil || !strings.HasPrefix(string(b), "<svg") || !strings.Contains(string(b), ">q7<") {
			t.Errorf("%s: %v\n%.300s", chart, err, b)
		}
	}
}

// TestWriteReportSectionPerBackend writes a GatewayMeter result as the
// hashmap section and as the rocksdb section of one report: each has its
// own heading, markers and chart files, and rewriting the rocksdb one
// leaves the hashmap one and its charts as they were.
func TestWriteReportSectionPerBackend(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "BENCHMARKS.md")
	run := func(wall time.Duration) bench.ProcessRun {
		return bench.ProcessRun{Wall: wall, CPU: wall, MaxRSS: 100 << 20, Checkpoints: []bench.CheckpointStat{{Duration: 5 * time.Millisecond, Size: 2 << 20}}}
	}
	result := func(weirWall time.Duration) []bench.WorkloadResult {
		side := func(name string, wall time.Duration) bench.SideResult {
			return bench.SideResult{Name: name, Runs: []bench.ProcessRun{run(wall)}, Startup: []bench.ProcessRun{run(time.Second)}}
		}
		return []bench.WorkloadResult{{Query: "gatewaymeter", Equal: true, Check: "equal",
			SideBySide: bench.SideBySide{Workload: "gatewaymeter", Events: 1000, Sides: []bench.SideResult{side("weir", weirWall), side("flink", 9*time.Second)}}}}
	}
	write := func(backend string, weirWall time.Duration) {
		t.Helper()
		sec := bench.SectionOf("weir bench gatewaymeter", "GatewayMeter", "gatewaymeter", backend, nil)
		rep := bench.Report{Heading: sec.Heading, Command: sec.Command, Row: "job", Config: []string{memoryText(backend, nil, 2)}}
		if err := writeReportSection(&cobra.Command{}, path, sec, rep, result(weirWall)); err != nil {
			t.Fatal(err)
		}
	}
	read := func(name string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	write("hashmap", 2*time.Second)
	write("rocksdb", 3*time.Second)
	md := read("BENCHMARKS.md")
	heap, lsm, ok := strings.Cut(md, "<!-- end: weir bench gatewaymeter -->")
	if !ok {
		t.Fatalf("no hashmap section:\n%s", md)
	}
	for _, want := range []string{"## GatewayMeter\n", "bench/charts/gatewaymeter-ratio.svg", "the heap on both sides"} {
		if !strings.Contains(heap, want) {
			t.Errorf("the hashmap section lacks %q:\n%s", want, heap)
		}
	}
	for _, want := range []string{"<!-- begin: weir bench gatewaymeter --backend rocksdb ", "## GatewayMeter, RocksDB on both sides (weir: pebble)\n",
		"Written by `weir bench gatewaymeter --vs-flink --backend rocksdb --write`", "bench/charts/gatewaymeter-rocksdb-ratio.svg",
		"taskmanager.memory.managed.size 128 mb", "(64 mb, one slot per subtask index: 2 slots)", "weir's pebble stores", "Flink's RocksDB instances",
		"<!-- end: weir bench gatewaymeter --backend rocksdb -->"} {
		if !strings.Contains(lsm, want) {
			t.Errorf("the rocksdb section lacks %q:\n%s", want, lsm)
		}
	}
	if strings.Contains(lsm, "bench/charts/gatewaymeter-ratio.svg") || strings.Contains(heap, "rocksdb-") {
		t.Errorf("a section shows the other's charts:\n%s", md)
	}
	heapRatio := read("bench/charts/gatewaymeter-ratio.svg")
	if heapRatio == read("bench/charts/gatewaymeter-rocksdb-ratio.svg") {
		t.Error("the two sections' ratio charts are the same file's contents; want each its run's")
	}
	write("rocksdb", 4*time.Second)
	again := read("BENCHMARKS.md")
	if h, _, _ := strings.Cut(again, "<!-- end: weir bench gatewaymeter -->"); h != heap {
		t.Errorf("rewriting the rocksdb section changed the hashmap one:\n%s\nwas:\n%s", h, heap)
	}
	if again == md || read("bench/charts/gatewaymeter-ratio.svg") != heapRatio {
		t.Error("rewriting the rocksdb section did not rewrite it, or redrew the hashmap section's chart")
	}
}
