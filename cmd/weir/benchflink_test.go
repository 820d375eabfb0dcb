package main

import (
	"os"
	"os/exec"
	"path/filepath"
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
			cmd := exec.Command(bin, "bench", "gatewaymeter", "--vs-flink", "--flink-jar", jar, "--lines", "40000", "--rounds", "1",
				"--backend", backend, "--trace-dir", traces, "--work-dir", t.TempDir())
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%v: %v\n%s", cmd.Args, err, out)
			}
			for _, want := range []string{"outputs equal to the oracle's on every side in every round", "\n  weir ", "\n  flink ", "weir/flink per round"} {
				if !strings.Contains(string(out), want) {
					t.Errorf("the output lacks %q:\n%s", want, out)
				}
			}
		})
	}
}
