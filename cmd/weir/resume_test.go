package main

import (
	"bytes"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The resume tests run weir run as a user does: start it, stop it with a
// signal, and run the line it printed to resume.

var (
	jobIDRE  = regexp.MustCompile(`running gatewaymeter as job ([0-9a-f]+);`)
	resumeRE = regexp.MustCompile(`(?m)resume with: (.+)$`)
)

// genTrace writes a seeded trace into dir/name.
func genTrace(t *testing.T, dir, name string, requests int) string {
	t.Helper()
	out := filepath.Join(dir, name)
	gen := exec.Command(weirBinary(t), "gen", "gatewaymeter", "--seed", "5", "--requests", strconv.Itoa(requests),
		"--partitions", "4", "--tenants", "20", "--bad-rate", "0.01", "--out", out)
	if b, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("weir gen: %v\n%s", err, b)
	}
	return out
}

// waitCheckpointFile waits until the job's checkpoint directory holds a
// completed checkpoint n or later.
func waitCheckpointFile(t *testing.T, p *proc, dir, jobID string, n int) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		for i := n; i < n+50; i++ {
			if _, err := os.Stat(filepath.Join(dir, "weir-data", "checkpoints", jobID, "chk-"+strconv.Itoa(i), "_metadata")); err == nil {
				return
			}
		}
		select {
		case <-p.done:
			t.Fatalf("%s ended before checkpoint %d completed", p.name, n)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no checkpoint %d within 90 s", p.name, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop sends sig and waits, with a generous deadline, for the process to
// exit.
func (p *proc) stop(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not exit within 30 s of %v", p.name, sig)
	}
}

// waitExit waits for the process to end on its own.
func (p *proc) waitExit(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(within):
		t.Fatalf("%s still running after %v", p.name, within)
	}
	return p.cmd.ProcessState.ExitCode()
}

// splitShell splits a command line as weir prints it (words, and words in
// single quotes).
func splitShell(t *testing.T, line string) []string {
	t.Helper()
	var out []string
	var cur strings.Builder
	inWord, quoted := false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quoted && c == '\'':
			quoted = false
		case quoted:
			cur.WriteByte(c)
		case c == '\'':
			quoted, inWord = true, true
		case c == '\\' && i+1 < len(line):
			i++
			cur.WriteByte(line[i])
			inWord = true
		case c == ' ' || c == '\t':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if quoted {
		t.Fatalf("unterminated quote in %q", line)
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out
}

func verifyExact(t *testing.T, trace, out string) {
	t.Helper()
	var b bytes.Buffer
	verify := exec.Command(weirBinary(t), "verify", "gatewaymeter", "--input", trace, "--output", out)
	verify.Stdout, verify.Stderr = &b, &b
	if err := verify.Run(); err != nil || !strings.Contains(b.String(), "exact match") {
		t.Fatalf("weir verify %s: %v\n%s", out, err, b.String())
	}
}

// TestResumeAsPrinted stops a run with SIGINT after a few checkpoints and
// runs the resume line it printed, as written: the resumed job must write
// into the first run's output (which the checkpoint records) and finish
// with output equal to the oracle's, without a restart.
func TestResumeAsPrinted(t *testing.T) {
	skipClusterUnlessEnabled(t)
	dir := t.TempDir()
	trace := genTrace(t, dir, "trace", 6000)
	first := startProc(t, dir, "run-1", "run", "gatewaymeter", "--input", "trace", "--input-rate", "300",
		"-D", "execution.checkpointing.interval=200 ms", "-D", "rest.port=0", "--status-interval", "0")
	jobID := first.waitLog(t, jobIDRE, 1)[0][1]
	waitCheckpointFile(t, first, dir, jobID, 3)
	first.stop(t, syscall.SIGINT)
	m := resumeRE.FindStringSubmatch(first.output())
	if m == nil {
		t.Fatalf("the stopped run printed no resume line:\n%s", first.output())
	}
	args := splitShell(t, m[1])
	if args[0] != weirBinary(t) {
		t.Fatalf("the resume line runs %q, want the binary that printed it (%s)", args[0], weirBinary(t))
	}
	second := startProc(t, dir, "run-2", args[1:]...)
	if code := second.waitExit(t, 2*time.Minute); code != 0 {
		t.Fatalf("the resumed run exited with %d:\n%s", code, second.output())
	}
	out := second.output()
	if !strings.Contains(out, "weir: finished") {
		t.Fatalf("the resumed run did not finish:\n%s", out)
	}
	if strings.Contains(out, "subtask failed") {
		t.Fatalf("the resumed run failed and restarted:\n%s", out)
	}
	if !regexp.MustCompile(`msg="restoring from checkpoint" .*checkpoint=[3-9]`).MatchString(out) {
		t.Fatalf("the resumed run did not restore from checkpoint 3 or later:\n%s", out)
	}
	verifyExact(t, trace, filepath.Join(dir, "weir-data", "out", jobID))
	if entries, _ := os.ReadDir(filepath.Join(dir, "weir-data", "out")); len(entries) != 1 {
		t.Fatalf("the resumed run wrote a second output directory: %v", entries)
	}
}

// TestResumeRefusesAnotherOutput resumes with an --output other than the
// checkpoint's: weir must refuse at once, naming the checkpoint's output.
func TestResumeRefusesAnotherOutput(t *testing.T) {
	skipClusterUnlessEnabled(t)
	dir := t.TempDir()
	genTrace(t, dir, "trace", 3000)
	first := startProc(t, dir, "run-1", "run", "gatewaymeter", "--input", "trace", "--output", "out",
		"-D", "execution.checkpointing.interval=100 ms", "-D", "rest.port=0", "--status-interval", "0")
	if code := first.waitExit(t, 2*time.Minute); code != 0 {
		t.Fatalf("the first run exited with %d:\n%s", code, first.output())
	}
	jobID := jobIDRE.FindStringSubmatch(first.output())[1]
	second := startProc(t, dir, "run-2", "run", "gatewaymeter", "--input", "trace", "--output", "elsewhere",
		"--from", filepath.Join("weir-data", "checkpoints", jobID), "-D", "rest.port=0", "--status-interval", "0")
	if code := second.waitExit(t, time.Minute); code == 0 {
		t.Fatalf("resuming into another output succeeded:\n%s", second.output())
	}
	want := "wrote its output to " + filepath.Join(dir, "out")
	if !strings.Contains(second.output(), want) {
		t.Fatalf("the refusal does not say %q:\n%s", want, second.output())
	}
	if _, err := os.Stat(filepath.Join(dir, "elsewhere")); err == nil {
		t.Fatal("the refused run created the other output directory")
	}
}

// TestResumeWithAShorterInputFails resumes with an input shorter than the
// checkpoint's positions: the job must fail at once with the file
// source's message, not restart (or hang) forever.
func TestResumeWithAShorterInputFails(t *testing.T) {
	skipClusterUnlessEnabled(t)
	dir := t.TempDir()
	genTrace(t, dir, "trace", 6000)
	first := startProc(t, dir, "run-1", "run", "gatewaymeter", "--input", "trace", "--input-rate", "300",
		"-D", "execution.checkpointing.interval=100 ms", "-D", "rest.port=0", "--status-interval", "0")
	jobID := first.waitLog(t, jobIDRE, 1)[0][1]
	// Some 300 lines per partition read: past the end of the short trace.
	waitCheckpointFile(t, first, dir, jobID, 10)
	first.stop(t, syscall.SIGINT)
	genTrace(t, dir, "short", 200)
	second := startProc(t, dir, "run-2", "run", "gatewaymeter", "--input", "short",
		"--from", filepath.Join("weir-data", "checkpoints", jobID), "-D", "rest.port=0", "--status-interval", "0",
		"-D", "restart-strategy.type=fixed-delay", "-D", "restart-strategy.fixed-delay.attempts=1000000")
	if code := second.waitExit(t, time.Minute); code == 0 {
		t.Fatalf("resuming with a shorter input succeeded:\n%s", second.output())
	}
	out := second.output()
	if !strings.Contains(out, "past the end of the file") || !strings.Contains(out, "a restart cannot cure") {
		t.Fatalf("the failure does not name the cause:\n%s", out)
	}
}

// TestSignalStopsARestartingRun sends SIGTERM to a run that waits to
// restart after a failure: it must exit promptly and keep its checkpoint.
func TestSignalStopsARestartingRun(t *testing.T) {
	skipClusterUnlessEnabled(t)
	dir := t.TempDir()
	genTrace(t, dir, "trace", 6000)
	p := startProc(t, dir, "run", "run", "gatewaymeter", "--input", "trace", "--input-rate", "200",
		"-D", "execution.checkpointing.interval=100 ms", "-D", "rest.port=0", "--status-interval", "0",
		"-D", "restart-strategy.type=fixed-delay", "-D", "restart-strategy.fixed-delay.delay=1 h",
		"--fail-after", "2s")
	jobID := p.waitLog(t, jobIDRE, 1)[0][1]
	p.waitLog(t, regexp.MustCompile(`msg="subtask failed"`), 1)
	waitCheckpointFile(t, p, dir, jobID, 1)
	p.stop(t, syscall.SIGTERM)
	out := p.output()
	if !regexp.MustCompile(`checkpoint \d+ is retained`).MatchString(out) {
		t.Fatalf("the stopped run kept no checkpoint:\n%s", out)
	}
	if !strings.Contains(out, "the job was restarting after: injected failure 1") {
		t.Fatalf("the stopped run does not say it was restarting:\n%s", out)
	}
}

// TestFailAfterChecksItsTarget rejects --fail-after naming a vertex or a
// subtask the job does not have, and reports a failure that never struck.
func TestFailAfterChecksItsTarget(t *testing.T) {
	skipClusterUnlessEnabled(t)
	dir := t.TempDir()
	genTrace(t, dir, "trace", 500)
	for _, tc := range []struct{ spec, want string }{
		{"10@nonexistent[0]", `the job has no vertex "nonexistent"; its vertices`},
		{"10@assemble[9]", "vertex assemble has subtasks 0 to 3"},
	} {
		var b bytes.Buffer
		cmd := exec.Command(weirBinary(t), "run", "gatewaymeter", "--input", "trace", "--fail-after", tc.spec, "-D", "rest.port=0", "--status-interval", "0")
		cmd.Dir, cmd.Stdout, cmd.Stderr = dir, &b, &b
		if err := cmd.Run(); err == nil || !strings.Contains(b.String(), tc.want) {
			t.Errorf("--fail-after %s: %v, want an error saying %q:\n%s", tc.spec, err, tc.want, b.String())
		}
	}
	var b bytes.Buffer
	cmd := exec.Command(weirBinary(t), "run", "gatewaymeter", "--input", "trace", "--output", "out2", "--fail-after", "100000000",
		"-D", "rest.port=0", "--status-interval", "0", "--checkpoint-dir", "ck2")
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, &b, &b
	if err := cmd.Run(); err == nil || !strings.Contains(b.String(), "before 1 of its 1 --fail-after failures struck (100000000)") {
		t.Errorf("a --fail-after that never struck: %v, want it reported:\n%s", err, b.String())
	}
}

// TestSignalStopsEveryState sends SIGINT or SIGTERM to weir run as soon
// as it is starting, restoring, and restarting after failures to reach its
// broker: it must exit promptly each time (stop fails the test after 30 s),
// and a resumed run that is stopped keeps the checkpoint it resumed from.
func TestSignalStopsEveryState(t *testing.T) {
	skipClusterUnlessEnabled(t)
	dir := t.TempDir()
	genTrace(t, dir, "trace", 6000)
	common := []string{"-D", "rest.port=0", "--status-interval", "0", "-D", "execution.checkpointing.interval=100 ms"}

	starting := startProc(t, dir, "starting", append([]string{"run", "gatewaymeter", "--input", "trace", "--input-rate", "200"}, common...)...)
	starting.waitLog(t, jobIDRE, 1)
	starting.stop(t, syscall.SIGINT)
	if !strings.Contains(starting.output(), "weir: stopped") {
		t.Fatalf("a run stopped while starting did not say so:\n%s", starting.output())
	}

	first := startProc(t, dir, "first", append([]string{"run", "gatewaymeter", "--input", "trace", "--input-rate", "200", "--output", "out"}, common...)...)
	jobID := first.waitLog(t, jobIDRE, 1)[0][1]
	waitCheckpointFile(t, first, dir, jobID, 2)
	first.stop(t, syscall.SIGTERM)
	restoring := startProc(t, dir, "restoring", append([]string{"run", "gatewaymeter", "--input", "trace", "--input-rate", "200",
		"--from", filepath.Join("weir-data", "checkpoints", jobID)}, common...)...)
	restoring.waitLog(t, regexp.MustCompile(`msg="restoring from checkpoint"`), 1)
	restoring.stop(t, syscall.SIGINT)
	if out := restoring.output(); !strings.Contains(out, "weir: stopped") || !strings.Contains(out, "resume") {
		t.Fatalf("a run stopped while restoring does not say how to resume:\n%s", out)
	}

	unreachable := startProc(t, dir, "unreachable", append([]string{"run", "gatewaymeter", "--kafka", "127.0.0.1:1",
		"-D", "restart-strategy.type=fixed-delay", "-D", "restart-strategy.fixed-delay.attempts=1000", "-D", "restart-strategy.fixed-delay.delay=10 ms"}, common...)...)
	unreachable.waitLog(t, regexp.MustCompile(`msg="subtask failed"`), 3)
	unreachable.stop(t, syscall.SIGTERM)
	if !strings.Contains(unreachable.output(), "connection refused") {
		t.Fatalf("a run that cannot reach its broker does not say why:\n%s", unreachable.output())
	}
}

// TestResumeAfterAStopAsPrinted stops a run through its REST API with a
// savepoint (POST /jobs/:id/stop, as Flink's clients do): the run exits
// cleanly, printing the line that resumes from the savepoint, and that
// line, run as written, finishes the job with output equal to the
// oracle's.
func TestResumeAfterAStopAsPrinted(t *testing.T) {
	skipClusterUnlessEnabled(t)
	dir := t.TempDir()
	trace := genTrace(t, dir, "trace", 6000)
	first := startProc(t, dir, "run-1", "run", "gatewaymeter", "--input", "trace", "--input-rate", "300",
		"-D", "execution.checkpointing.interval=200 ms", "-D", "rest.port=0", "--status-interval", "0",
		"-D", "execution.checkpointing.savepoint-dir="+filepath.Join(dir, "savepoints"))
	jobID := first.waitLog(t, jobIDRE, 1)[0][1]
	addr := first.waitLog(t, regexp.MustCompile(`msg="REST API listening" addr=(\S+)`), 1)[0][1]
	waitCheckpointFile(t, first, dir, jobID, 2)
	resp, err := http.Post("http://"+addr+"/jobs/"+jobID+"/stop", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST stop: %s", resp.Status)
	}
	if code := first.waitExit(t, time.Minute); code != 0 {
		t.Fatalf("the stopped run exited with %d:\n%s", code, first.output())
	}
	if !strings.Contains(first.output(), "stopped with savepoint "+filepath.Join(dir, "savepoints", "savepoint-")) {
		t.Fatalf("the stopped run does not name its savepoint:\n%s", first.output())
	}
	m := resumeRE.FindStringSubmatch(first.output())
	if m == nil {
		t.Fatalf("the stopped run printed no resume line:\n%s", first.output())
	}
	args := splitShell(t, m[1])
	second := startProc(t, dir, "run-2", args[1:]...)
	if code := second.waitExit(t, 2*time.Minute); code != 0 {
		t.Fatalf("the resumed run exited with %d:\n%s", code, second.output())
	}
	if out := second.output(); !strings.Contains(out, "weir: finished") || strings.Contains(out, "subtask failed") {
		t.Fatalf("the resumed run did not finish without a failure:\n%s", out)
	}
	verifyExact(t, trace, filepath.Join(dir, "weir-data", "out", jobID))
}
