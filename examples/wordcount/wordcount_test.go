package wordcount_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/connector/file"
	"github.com/weirstream/weir/examples/wordcount"
)

// build compiles cmd/wordcount: a program that carries its own job.
func build(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "wordcount")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/wordcount").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// writeInput writes four files of seeded text and returns the words'
// counts.
func writeInput(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(7, 7))
	vocab := []string{"Stream", "barrier", "checkpoint", "state", "Kafka", "sink", "source", "watermark", "window", "key"}
	want := map[string]int64{}
	for f := range 4 {
		var b strings.Builder
		for range 2000 {
			n := 1 + r.IntN(8)
			for i := range n {
				w := vocab[r.IntN(len(vocab))]
				if i > 0 {
					b.WriteString(", ")
				}
				b.WriteString(w)
				want[strings.ToLower(w)]++
			}
			b.WriteString(".\n")
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("part-%d.txt", f)), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return want
}

// check requires the output to count every word exactly once: for a word
// seen n times, the counts 1..n, each once.
func check(t *testing.T, out string, want map[string]int64) {
	t.Helper()
	got, err := file.ReadJSONLines[wordcount.Count](out)
	if err != nil {
		t.Fatal(err)
	}
	by := map[string][]int64{}
	for _, c := range got {
		by[c.Word] = append(by[c.Word], c.Count)
	}
	for w, n := range want {
		cs := by[w]
		slices.Sort(cs)
		if int64(len(cs)) != n || len(cs) > 0 && (cs[0] != 1 || cs[len(cs)-1] != n) {
			t.Errorf("word %q: %d counts from %v to %v, want 1..%d each once", w, len(cs), first(cs), last(cs), n)
			continue
		}
		for i, c := range cs {
			if c != int64(i+1) {
				t.Errorf("word %q: count %d is missing or repeated", w, i+1)
				break
			}
		}
	}
	if len(by) != len(want) {
		t.Errorf("%d words counted, want %d", len(by), len(want))
	}
}

func first(cs []int64) any {
	if len(cs) == 0 {
		return "-"
	}
	return cs[0]
}

func last(cs []int64) any {
	if len(cs) == 0 {
		return "-"
	}
	return cs[len(cs)-1]
}

func TestWords(t *testing.T) {
	if got := wordcount.Words("Stream, barrier. Ké-42!"); !slices.Equal(got, []string{"stream", "barrier", "ké", "42"}) {
		t.Fatalf("Words: %q", got)
	}
}

// TestRunHere runs the program's job in its own process.
func TestRunHere(t *testing.T) {
	bin := build(t)
	dir := t.TempDir()
	want := writeInput(t, filepath.Join(dir, "in"))
	out, err := exec.Command(bin, "run", "wordcount", "-D", "execution.checkpointing.interval=50 ms",
		"-D", "execution.checkpointing.dir="+filepath.Join(dir, "ckpt"), "-D", "rest.port=0",
		"--", "--input", filepath.Join(dir, "in"), "--output", filepath.Join(dir, "out")).CombinedOutput()
	if err != nil {
		t.Fatalf("wordcount run: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("finished")) {
		t.Fatalf("wordcount run did not say it finished:\n%s", out)
	}
	check(t, filepath.Join(dir, "out"), want)

	for _, bad := range [][]string{
		{"run", "nope"},
		{"run", "wordcount", "--", "--input", filepath.Join(dir, "missing"), "--output", filepath.Join(dir, "o")},
		{"run", "wordcount", "stray"},
	} {
		out, err := exec.Command(bin, bad...).CombinedOutput()
		if err == nil {
			t.Errorf("wordcount %q succeeded:\n%s", bad, out)
		}
	}
}

// TestRunOnItsOwnCluster starts the program as a job manager and two task
// managers and submits its job there.
func TestRunOnItsOwnCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of processes")
	}
	bin := build(t)
	dir := t.TempDir()
	want := writeInput(t, filepath.Join(dir, "in"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := func(name string, args ...string) *bufio.Scanner {
		cmd := exec.CommandContext(ctx, bin, args...)
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return bufio.NewScanner(stderr)
	}
	jm := start("jobmanager", "jobmanager", "--listen", "127.0.0.1:0", "-D", "rest.port=0")
	var addr string
	listening := regexp.MustCompile(`job manager listening on (\S+);`)
	for jm.Scan() {
		if m := listening.FindStringSubmatch(jm.Text()); m != nil {
			addr = m[1]
			break
		}
	}
	if addr == "" {
		t.Fatal("the job manager did not say where it listens")
	}
	go func() {
		for jm.Scan() {
		}
	}()
	for i := range 2 {
		tm := start("taskmanager", "taskmanager", "--jobmanager", addr, "--slots", "2", "--id", fmt.Sprintf("tm-%d", i))
		go func() {
			for tm.Scan() {
			}
		}()
	}
	out, err := exec.CommandContext(ctx, bin, "run", "-m", addr, "wordcount",
		"-D", "parallelism.default=4", "-D", "execution.checkpointing.interval=50 ms",
		"-D", "execution.checkpointing.dir="+filepath.Join(dir, "ckpt"),
		"--", "--input", filepath.Join(dir, "in"), "--output", filepath.Join(dir, "out")).CombinedOutput()
	if err != nil {
		t.Fatalf("wordcount run -m: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("FINISHED")) {
		t.Fatalf("the job did not finish:\n%s", out)
	}
	check(t, filepath.Join(dir, "out"), want)
}
