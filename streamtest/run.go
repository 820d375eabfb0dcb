package streamtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/stream"
)

// errTimeout is the cause with which Run cancels a job that has not ended
// within its timeout (see Timeout).
var errTimeout = errors.New("streamtest: the job did not end in time")

// errUntil is the cause with which Run cancels a job once its Until
// condition holds.
var errUntil = errors.New("streamtest: the run's condition holds")

// A RunOption configures Run.
type RunOption func(*runConfig)

type runConfig struct {
	kv      []string
	opts    []stream.Option
	faults  *Faults
	events  *Events
	jobID   string
	dir     string
	until   func([]stream.JobEvent) bool
	timeout time.Duration
	ctx     context.Context
}

// Config adds configuration, as key=value pairs (Flink option names), to
// the job's; later pairs win, and every pair wins over Run's defaults.
func Config(kv ...string) RunOption {
	return func(c *runConfig) { c.kv = append(c.kv, kv...) }
}

// Options adds environment options (a logger, a clock, a batch size) to
// the job's; they apply after Run's own, so a logger given here replaces
// the default, which discards. stream.WithEvents must not be among them:
// Run records the job's events (see WithEvents).
func Options(opts ...stream.Option) RunOption {
	return func(c *runConfig) { c.opts = append(c.opts, opts...) }
}

// WithFaults installs fs in the job.
func WithFaults(fs *Faults) RunOption { return func(c *runConfig) { c.faults = fs } }

// WithEvents records the job's events in ev rather than in a recorder of
// Run's own: a test waits on it from another goroutine while Run runs, or
// collects the events of several runs in one.
func WithEvents(ev *Events) RunOption { return func(c *runConfig) { c.events = ev } }

// JobID sets the job's id (default "job"). Its checkpoints are stored
// under it, in the checkpoint directory.
func JobID(id string) RunOption { return func(c *runConfig) { c.jobID = id } }

// Dir sets the checkpoint directory (execution.checkpointing.dir) rather
// than a new one in t.TempDir(): two runs share it.
func Dir(dir string) RunOption { return func(c *runConfig) { c.dir = dir } }

// Until cancels the job as soon as cond holds for its events so far (this
// run's, even if the recorder given to WithEvents holds others). cond
// is checked after every event, on the goroutine that reports it, before
// the job goes on: the job is canceled at that event, not some time
// later. It must not block, and is never called concurrently with itself.
func Until(cond func(events []stream.JobEvent) bool) RunOption {
	return func(c *runConfig) { c.until = cond }
}

// UntilCheckpoints cancels the job once n checkpoints have completed.
func UntilCheckpoints(n int) RunOption {
	return Until(func(evs []stream.JobEvent) bool { return count(evs, stream.EventCheckpointCompleted) >= n })
}

// Timeout bounds how long the job may run (default two minutes): a job
// still running then is canceled and the test fails, with the job's
// events, rather than hanging until the test binary's own timeout.
func Timeout(d time.Duration) RunOption { return func(c *runConfig) { c.timeout = d } }

// Context runs the job under ctx (default context.Background()):
// canceling it cancels the job.
func Context(ctx context.Context) RunOption { return func(c *runConfig) { c.ctx = ctx } }

// ResumeFrom restores the job from what a previous run retained: its
// latest completed checkpoint (execution.state-recovery.path names the
// previous job's directory of checkpoints).
func ResumeFrom(prev *Result) RunOption {
	return Config(config.KeyStateRecoveryPath + "=" + prev.JobDir())
}

// Result is what a Run ended with.
type Result struct {
	// Err is what the job's Execute returned: nil if it finished, an
	// error if it failed for good or was canceled (see Canceled).
	Err error
	// Canceled is whether Run canceled the job because Until held.
	Canceled bool
	// Events are the job's events.
	Events *Events
	// JobID is the job's id and Dir its checkpoint directory: the job's
	// checkpoints are under Dir/JobID (JobDir).
	JobID, Dir string
}

// JobDir is the directory of the job's checkpoints, chk-1, chk-2, …: what
// execution.state-recovery.path takes to resume from the latest.
func (r *Result) JobDir() string { return filepath.Join(r.Dir, r.JobID) }

// Checkpoints returns the ids of the completed checkpoints retained in
// JobDir (those whose _metadata is written), ascending.
func (r *Result) Checkpoints() []int64 {
	entries, _ := os.ReadDir(r.JobDir())
	var ids []int64
	for _, e := range entries {
		num, ok := strings.CutPrefix(e.Name(), "chk-")
		if !ok {
			continue
		}
		id, err := strconv.ParseInt(num, 10, 64)
		if err != nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(r.CheckpointDir(id), storage.MetadataFile)); err == nil {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// CheckpointDir returns the directory of checkpoint id (whether or not it
// was retained): what execution.state-recovery.path takes to resume from
// that one.
func (r *Result) CheckpointDir(id int64) string {
	return filepath.Join(r.JobDir(), fmt.Sprintf("chk-%d", id))
}

// Run builds a job with build and runs it in-process, on the test's
// goroutine, until it finishes, fails for good, or is canceled by Until,
// Context or Timeout. The job checkpoints to a directory of its own in
// t.TempDir() (see Dir) that it retains when it is canceled
// (execution.checkpointing.externalized-checkpoint-retention=RETAIN_ON_CANCELLATION),
// so that a later Run can resume from it (ResumeFrom); logs are
// discarded unless Options gives a logger. Run fails the test if the
// configuration or environment is invalid, or the job outlives its
// timeout; the job's own error is the Result's, for the test to judge.
//
//	first := streamtest.Run(t, build, streamtest.Config("execution.checkpointing.interval=10 ms"), streamtest.UntilCheckpoints(3))
//	if !first.Canceled {
//		t.Fatalf("the job ended before three checkpoints: %v", first.Err)
//	}
//	second := streamtest.Run(t, build, streamtest.ResumeFrom(first))
func Run(t testing.TB, build func(env *stream.Environment), opts ...RunOption) *Result {
	t.Helper()
	return Start(t, build, opts...).Wait()
}

// Running is a job Start started: Client acts on it while it runs (takes
// a savepoint, a checkpoint, stops it), Wait waits for its end.
type Running struct {
	// Client is the job's client.
	Client *stream.JobClient

	t        testing.TB
	res      *Result
	c        runConfig
	cancel   context.CancelCauseFunc
	mu       *sync.Mutex
	canceled *bool
	timer    *time.Timer
}

// Start is Run without the wait: it starts the job as Run does and
// returns at once. The timeout runs from Start; Wait must be called, from
// the test's goroutine.
//
//	job := streamtest.Start(t, build, streamtest.Config("execution.checkpointing.interval=10 ms"))
//	path, err := job.Client.StopWithSavepoint(ctx, "", false)
//	res := job.Wait()
func Start(t testing.TB, build func(env *stream.Environment), opts ...RunOption) *Running {
	t.Helper()
	c := runConfig{jobID: "job", timeout: 2 * time.Minute, ctx: context.Background()}
	for _, o := range opts {
		o(&c)
	}
	if c.dir == "" {
		c.dir = t.TempDir()
	}
	if c.events == nil {
		c.events = NewEvents()
	}
	kv := append([]string{config.KeyCheckpointingDir + "=" + c.dir,
		config.KeyCheckpointingExternalizedRetention + "=RETAIN_ON_CANCELLATION"}, c.kv...)
	cfg, err := config.ParseDynamic(kv)
	if err != nil {
		t.Fatalf("streamtest.Run: %v", err)
	}
	r := &Running{t: t, c: c, res: &Result{Events: c.events, JobID: c.jobID, Dir: c.dir}, mu: &sync.Mutex{}, canceled: new(bool)}

	ctx, cancel := context.WithCancelCause(c.ctx)
	r.cancel = cancel
	record := c.events.Record
	var seen []stream.JobEvent // guarded by r.mu
	if c.until != nil {
		record = func(ev stream.JobEvent) {
			c.events.Record(ev)
			r.mu.Lock()
			defer r.mu.Unlock()
			seen = append(seen, ev)
			if !*r.canceled && c.until(slices.Clone(seen)) {
				*r.canceled = true
				cancel(errUntil)
			}
		}
	}
	envOpts := []stream.Option{stream.WithConfig(cfg), stream.WithLogger(slog.New(slog.DiscardHandler)), stream.WithJobID(c.jobID)}
	if c.faults != nil {
		envOpts = append(envOpts, c.faults.Option())
	}
	envOpts = append(envOpts, c.opts...)
	envOpts = append(envOpts, stream.WithEvents(record))
	env, err := stream.NewEnvironment(envOpts...)
	if err != nil {
		cancel(nil)
		t.Fatalf("streamtest.Run: %v", err)
	}
	build(env)
	r.timer = time.NewTimer(c.timeout)
	client, err := env.ExecuteAsync(ctx, c.jobID)
	if err != nil {
		// The job did not start (an invalid graph or restore): the
		// Result says why.
		r.res.Err = err
		return r
	}
	r.Client = client
	return r
}

// Wait waits for the job to end and returns its Result; it fails the test
// if the job outlives its timeout.
func (r *Running) Wait() *Result {
	r.t.Helper()
	defer r.cancel(nil)
	defer r.timer.Stop()
	if r.Client == nil {
		return r.res // it never started
	}
	select {
	case <-r.Client.Done():
		r.res.Err = r.Client.Wait()
	case <-r.timer.C:
		r.cancel(errTimeout)
		select {
		case <-r.Client.Done():
			r.t.Fatalf("streamtest.Run: job %s had not ended after %v; events: %s", r.c.jobID, r.c.timeout, r.c.events)
		case <-time.After(10 * time.Second):
			r.t.Fatalf("streamtest.Run: job %s had not ended after %v, nor 10 s after it was canceled: a subtask hangs; events: %s",
				r.c.jobID, r.c.timeout, r.c.events)
		}
	}
	r.mu.Lock()
	r.res.Canceled = *r.canceled
	r.mu.Unlock()
	return r.res
}
