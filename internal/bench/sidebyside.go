package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// Side is one system's way of running a workload, as a child process.
type Side struct {
	Name string
	// Command returns the process that runs the workload: it reads r.Input,
	// writes its outputs under r.Output, checkpoints into r.Checkpoints and
	// serves a Flink-compatible REST API on r.RESTPort.
	Command func(ctx context.Context, r SideRun) *exec.Cmd
	// Checkpoints, if set, returns the checkpoints a finished run
	// completed, from what the run wrote (its REST API is not asked).
	Checkpoints func(r SideRun) ([]CheckpointStat, error)
}

// CheckpointStat is one completed checkpoint of a run.
type CheckpointStat struct {
	// Duration is its end-to-end duration, trigger to completion.
	Duration time.Duration `json:"duration_ns"`
	// Size is the bytes of state it holds in full (Flink's state_size,
	// the Full Checkpoint Data Size), whether or not it was incremental.
	Size int64 `json:"state_size"`
}

// SideRun is where one run of a side reads, writes and answers.
type SideRun struct {
	Input, Output, Checkpoints string
	RESTPort                   int
	// Dir is the run's own directory, which holds the others.
	Dir string
	// Discard says the run writes its results nowhere (a sink that
	// discards them), as a timed run does; Output is then unused.
	Discard bool
	// LatencyDir is an empty directory for a latency run's files
	// (LatencyRun.Dir), there for every run.
	LatencyDir string
	// Latency, if set, makes the run a latency run: its source paced, its
	// rows' latencies counted into LatencyDir.
	Latency *LatencyWindow
}

// Workload is one job that every side runs over identical input: a row of
// the side-by-side table.
type Workload struct {
	Name string
	// Input is what every side reads; Events counts the events in it.
	Input  string
	Events int64
	// Empty is an input of the same shape with no events: a run over it
	// measures a side's start-up and shut-down.
	Empty string
	// StartupRounds is in how many of the first rounds the sides run over
	// Empty; 0: in every round.
	StartupRounds int
	Sides         []Side
	// Same fails unless the outputs in dirs (one per side, in the order of
	// Sides) hold the same records. Nil: the runs discard their results
	// (SideRun.Discard) and the outputs are checked apart (RunSide).
	Same func(dirs []string) error
}

// ProcessRun is one child process, as the operating system accounted it.
type ProcessRun struct {
	Wall time.Duration
	// CPU is the child's user and system time (its rusage).
	CPU time.Duration
	// MaxRSS is the child's peak resident set in bytes: its VmHWM
	// (/proc/PID/status), read every 50 ms while it runs. Not ru_maxrss:
	// Linux carries the high-water mark of the memory a process had
	// before exec into it, and a child forked from a parent that is
	// larger would report the parent's.
	MaxRSS int64
	// Checkpoints are the checkpoints the child completed, by duration.
	Checkpoints []CheckpointStat
}

// SideResult is one side's runs over the rounds.
type SideResult struct {
	Name    string
	Runs    []ProcessRun // over Input, one per round
	Startup []ProcessRun // over Empty, one per round
}

// SideBySide is the result of RunSideBySide.
type SideBySide struct {
	Workload string
	Events   int64
	Sides    []SideResult
}

// RunSideBySide runs every side of w over w.Empty and then over w.Input,
// rounds times, interleaved (A, B, A, B, …), each run a fresh child
// process, and checks after every round that the sides' outputs agree
// (w.Same). Each run's files go under work, removed once the round is
// checked; log, if not nil, gets a line per run.
func RunSideBySide(ctx context.Context, w Workload, rounds int, work string, log io.Writer) (SideBySide, error) {
	if log == nil {
		log = io.Discard
	}
	res := SideBySide{Workload: w.Name, Events: w.Events, Sides: make([]SideResult, len(w.Sides))}
	for i, s := range w.Sides {
		res.Sides[i].Name = s.Name
	}
	for round := 1; round <= rounds; round++ {
		dir := filepath.Join(work, fmt.Sprintf("round-%d", round))
		outs := make([]string, len(w.Sides))
		for pass, input := range []string{w.Empty, w.Input} {
			if pass == 0 && w.StartupRounds > 0 && round > w.StartupRounds {
				continue
			}
			for i, s := range w.Sides {
				name := s.Name
				if pass == 0 {
					name += "-empty"
				}
				r, err := RunSide(ctx, s, input, filepath.Join(dir, name), w.Same == nil)
				if err != nil {
					return res, fmt.Errorf("%s, round %d, %s: %w", w.Name, round, name, err)
				}
				fmt.Fprintf(log, "  round %d  %-12s wall %8.2fs  cpu %8.2fs  rss %7.1f MiB  checkpoints %d\n",
					round, name, r.Wall.Seconds(), r.CPU.Seconds(), float64(r.MaxRSS)/(1<<20), len(r.Checkpoints))
				if pass == 0 {
					res.Sides[i].Startup = append(res.Sides[i].Startup, r)
				} else {
					res.Sides[i].Runs = append(res.Sides[i].Runs, r)
					outs[i] = filepath.Join(dir, name, "out")
				}
			}
		}
		if w.Same != nil {
			if err := w.Same(outs); err != nil {
				return res, fmt.Errorf("%s, round %d: the outputs differ (kept in %s): %w", w.Name, round, dir, err)
			}
		}
		if err := os.RemoveAll(dir); err != nil {
			return res, err
		}
	}
	return res, nil
}

// RunSide runs one side over input in a fresh directory dir, polling its
// REST API for checkpoint statistics until it exits (unless the side
// reports them itself: Side.Checkpoints). Its outputs, unless discard,
// are in dir/out.
func RunSide(ctx context.Context, s Side, input, dir string, discard bool) (ProcessRun, error) {
	return runSide(ctx, s, input, dir, discard, nil)
}

// runSide is RunSide, a latency run if lat is set.
func runSide(ctx context.Context, s Side, input, dir string, discard bool, lat *LatencyWindow) (ProcessRun, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return ProcessRun{}, err
	}
	port, err := freePort()
	if err != nil {
		return ProcessRun{}, err
	}
	sr := SideRun{Input: input, Output: filepath.Join(dir, "out"), Checkpoints: filepath.Join(dir, "checkpoints"), RESTPort: port,
		Dir: dir, Discard: discard, LatencyDir: filepath.Join(dir, "latency"), Latency: lat}
	if err := os.MkdirAll(sr.LatencyDir, 0o755); err != nil {
		return ProcessRun{}, err
	}
	cmd := s.Command(ctx, sr)
	logPath := filepath.Join(dir, "log")
	logf, err := os.Create(logPath)
	if err != nil {
		return ProcessRun{}, err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return ProcessRun{}, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// Start returns once the child has exec'd, so every read is of the
	// child's own memory.
	stopHWM := WatchPeakRSS(cmd.Process.Pid)
	ckpts := map[int64]CheckpointStat{}
	client := &http.Client{Timeout: time.Second}
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	var waitErr error
poll:
	for {
		select {
		case waitErr = <-done:
			break poll
		case <-tick.C:
			pollCheckpoints(client, port, ckpts)
		}
	}
	var run ProcessRun
	run.Wall = time.Since(start)
	run.MaxRSS = stopHWM()
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		run.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		if run.MaxRSS == 0 { // it ended before the first read
			run.MaxRSS = ru.Maxrss * 1024 // kilobytes on Linux
		}
	}
	if waitErr != nil {
		tail, _ := os.ReadFile(logPath)
		if len(tail) > 4000 {
			tail = tail[len(tail)-4000:]
		}
		return run, fmt.Errorf("%v: %w\n%s", cmd.Args, waitErr, tail)
	}
	if s.Checkpoints != nil {
		if run.Checkpoints, err = s.Checkpoints(sr); err != nil {
			return run, fmt.Errorf("%v: its checkpoints: %w", cmd.Args, err)
		}
	} else {
		for _, c := range ckpts {
			run.Checkpoints = append(run.Checkpoints, c)
		}
	}
	slices.SortFunc(run.Checkpoints, func(a, b CheckpointStat) int { return cmp.Compare(a.Duration, b.Duration) })
	return run, nil
}

// pollCheckpoints adds the completed checkpoints in the checkpoint history
// of every job the REST API on port lists (GET /jobs, then
// /jobs/:id/checkpoints: Flink's CheckpointingStatistics, which weir's API
// serves too) to ckpts, by id. A process not yet or no longer answering is
// not an error: the next poll tries again.
func pollCheckpoints(c *http.Client, port int, ckpts map[int64]CheckpointStat) {
	base := fmt.Sprintf("http://localhost:%d", port)
	var jobs struct {
		Jobs []struct {
			ID string `json:"id"`
		} `json:"jobs"`
	}
	if getJSON(c, base+"/jobs", &jobs) != nil {
		return
	}
	for _, j := range jobs.Jobs {
		var stats struct {
			History []struct {
				ID       int64  `json:"id"`
				Status   string `json:"status"`
				EndToEnd int64  `json:"end_to_end_duration"`
				Size     int64  `json:"state_size"`
			} `json:"history"`
		}
		if getJSON(c, base+"/jobs/"+j.ID+"/checkpoints", &stats) != nil {
			continue
		}
		for _, h := range stats.History {
			if strings.EqualFold(h.Status, "COMPLETED") {
				ckpts[h.ID] = CheckpointStat{Duration: time.Duration(h.EndToEnd) * time.Millisecond, Size: h.Size}
			}
		}
	}
}

func getJSON(c *http.Client, url string, v any) error {
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New(resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// WatchPeakRSS polls the peak resident set (VmHWM) of process pid, a
// child that has exec'd, every 50 ms until stop is called, which returns
// the highest value read in bytes, 0 if none was (the process ended
// before the first read: the caller falls back to its rusage). Not
// ru_maxrss: Linux carries the high-water mark of the memory a process
// had before exec into it, and a child forked from a larger parent would
// report the parent's.
func WatchPeakRSS(pid int) (stop func() int64) {
	var peak atomic.Int64
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			if v, ok := vmHWM(pid); ok && v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-quit:
				return
			case <-t.C:
			}
		}
	}()
	return func() int64 {
		close(quit)
		<-done
		return peak.Load()
	}
}

// vmHWM returns process pid's peak resident set in bytes (VmHWM in
// /proc/PID/status), false once it is gone.
func vmHWM(pid int) (int64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			f := strings.Fields(v) // "1234 kB"
			if len(f) == 2 && f[1] == "kB" {
				if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil {
					return kb * 1024, true
				}
			}
		}
	}
	return 0, false
}

// freePort returns a TCP port free on localhost a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "localhost:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Summary figures of a side over its rounds.

// ProcessingWall is a run's wall time less the side's median start-up (its
// run over the empty input), at least a millisecond.
func (s SideResult) ProcessingWall(i int) time.Duration {
	return max(s.Runs[i].Wall-medianOf(s.Startup, func(r ProcessRun) time.Duration { return r.Wall }), time.Millisecond)
}

// ProcessingCPU is a run's CPU time less the side's median start-up CPU
// time, at least a millisecond.
func (s SideResult) ProcessingCPU(i int) time.Duration {
	return max(s.Runs[i].CPU-medianOf(s.Startup, func(r ProcessRun) time.Duration { return r.CPU }), time.Millisecond)
}

// Checkpoints returns every checkpoint duration of every run, sorted.
func (s SideResult) Checkpoints() []time.Duration {
	var all []time.Duration
	for _, r := range s.Runs {
		for _, c := range r.Checkpoints {
			all = append(all, c.Duration)
		}
	}
	slices.Sort(all)
	return all
}

// CheckpointStats returns every checkpoint of every run.
func (s SideResult) CheckpointStats() []CheckpointStat {
	var all []CheckpointStat
	for _, r := range s.Runs {
		all = append(all, r.Checkpoints...)
	}
	return all
}

func medianOf(runs []ProcessRun, f func(ProcessRun) time.Duration) time.Duration {
	if len(runs) == 0 {
		return 0
	}
	v := make([]time.Duration, len(runs))
	for i, r := range runs {
		v[i] = f(r)
	}
	return Quantile(v, 0.5)
}

// Spread is a median with its minimum and maximum.
type Spread struct{ Median, Min, Max float64 }

// SpreadOf returns the median, minimum and maximum of v (not empty).
func SpreadOf(v []float64) Spread {
	s := slices.Clone(v)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return Spread{Median: m, Min: s[0], Max: s[len(s)-1]}
}
