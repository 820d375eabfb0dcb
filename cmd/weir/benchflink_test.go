package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
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
// gatewaymeter.Diff) to the last record. It asserts that the command
// succeeded and reported both sides, never a time.
func TestBenchGatewayMeterVsFlink(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a JVM per run")
	}
	jar := flinkJar(t)
	bin := weirBinary(t)
	traces := t.TempDir()
	for _, backend := range []string{"hashmap", "rocksdb"} {
		t.Run(backend, func(t *testing.T) {
			report := filepath.Join(t.TempDir(), "BENCHMARKS.md")
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
			for _, want := range []string{"## GatewayMeter", "| gatewaymeter |", "equal to the oracle's on both sides in every round", "bench/charts/gatewaymeter-ratio.svg",
				"--backend " + backend, "What checkpointing costs weir", "<!-- end: weir bench gatewaymeter -->"} {
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
