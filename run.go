package weir

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/cluster"
	"github.com/weirstream/weir/internal/clustercli"
	"github.com/weirstream/weir/stream"
)

// runFlags are the flags of run that every job has.
type runFlags struct {
	config        clustercli.ConfigFlags
	jobManager    string
	detached      bool
	from          string
	claimMode     string
	allowDropped  bool
	checkpointDir string
	status        time.Duration
	failAfter     []string
}

// add registers the flags on fs.
func (f *runFlags) add(fs *pflag.FlagSet) {
	f.config.AddTo(fs)
	fs.StringVarP(&f.jobManager, "jobmanager", "m", "", "submit the job to the cluster whose job manager is at this address instead of running it here")
	fs.BoolVarP(&f.detached, "detached", "d", false, "with -m: return once the job is submitted instead of following it")
	fs.StringVarP(&f.from, "from", "s", "", "resume from a checkpoint, a savepoint, or a job's checkpoint directory (execution.state-recovery.path)")
	fs.StringVar(&f.claimMode, "claim-mode", "", "with --from: who owns what it resumes from (execution.state-recovery.claim-mode): no-claim (default) leaves it alone; claim makes a retained checkpoint the job's, deleted once subsumed (not a savepoint)")
	fs.BoolVarP(&f.allowDropped, "allow-non-restored-state", "n", false, "with --from: drop the state of operators the job no longer has instead of refusing it (execution.state-recovery.ignore-unclaimed-state)")
	fs.StringVar(&f.checkpointDir, "checkpoint-dir", "", "checkpoint directory or URL (execution.checkpointing.dir; set one or the other)")
	fs.DurationVar(&f.status, "status-interval", time.Second, "how often the status line refreshes (0: never)")
	fs.StringArrayVar(&f.failAfter, "fail-after", nil, "fail a subtask after a duration (30s) or a number of records (5000), optionally a named one: 30s@assemble[2] (repeatable)")
}

// notResumed are the flags of run that its resume line leaves out: what
// the run resumed from, whether it claimed that (a savepoint the line
// names cannot be claimed; the default, NO_CLAIM, always applies) and
// whether it dropped state of operators the job lacks (its own
// checkpoints hold none).
var notResumed = []string{"from", "claim-mode", "allow-non-restored-state", "fail-after"}

const runLong = `run runs a job in this process (job manager and task slots together) until
it ends or is interrupted, serving its REST API on rest.port and showing a
status line. Interrupted (Ctrl-C), it keeps the latest checkpoint and prints
the command that resumes from it (--from). With -m it submits the job to the
cluster whose job manager is at ADDR and follows it (-d: returns once
submitted). A job may have flags of its own (run JOB --help); arguments after
"--" go to the job.

Options use Flink's names: -D execution.checkpointing.interval=1s,
-D parallelism.default=2, -D restart-strategy.type=fixed-delay, ...
Tokens are best given in the environment, off the command line:
WEIR_REST_AUTH_TOKEN sets rest.auth-token, WEIR_CLUSTER_AUTH_TOKEN sets
cluster.auth-token, which -m needs for a cluster that requires it.`

// runCommand returns the run command, with a command of its own for each
// job.
func runCommand(jobs []Job) *cobra.Command {
	var names []string
	for _, j := range jobs {
		names = append(names, j.Name)
	}
	known := strings.Join(names, ", ")
	f := &runFlags{}
	cmd := &cobra.Command{
		Use:   "run JOB [flags] [-- ARGS]",
		Short: "Run a job in this process, or submit it to a cluster with -m",
		Long:  runLong,
		// A job is a command of its own; run reaches here without one.
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return fmt.Errorf("run needs a job (known: %s)", known)
			}
			return fmt.Errorf("unknown job %q (known: %s)", args[0], known)
		},
		RunE: func(*cobra.Command, []string) error { return nil },
	}
	f.add(cmd.PersistentFlags())
	for _, j := range jobs {
		cmd.AddCommand(jobCommand(j, f, cmd.PersistentFlags()))
	}
	return cmd
}

// jobCommand returns "run NAME" for job, with run's flags f (declared on
// shared) and the job's own.
func jobCommand(job Job, f *runFlags, shared *pflag.FlagSet) *cobra.Command {
	jobFlags := pflag.NewFlagSet(job.Name, pflag.ContinueOnError)
	if job.Flags != nil {
		job.Flags(jobFlags)
	}
	jobFlags.VisitAll(func(fl *pflag.Flag) {
		if shared.Lookup(fl.Name) != nil || fl.Shorthand != "" && shared.ShorthandLookup(fl.Shorthand) != nil {
			panic(fmt.Sprintf("weir.Command: job %s declares flag --%s (-%s), which run has", job.Name, fl.Name, fl.Shorthand))
		}
	})
	long := job.Long
	if long == "" {
		long = job.Short
	}
	cmd := &cobra.Command{
		Use:   job.Name + " [flags] [-- ARGS]",
		Short: job.Short,
		Long:  long,
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 && cmd.ArgsLenAtDash() != 0 {
				return fmt.Errorf("unexpected arguments %q: the job's own arguments go after --", args)
			}
			return run(cmd, job, f, jobFlags, args)
		},
	}
	cmd.Flags().AddFlagSet(jobFlags)
	return cmd
}

// run runs or submits job, as "run NAME" was given.
func run(cmd *cobra.Command, job Job, f *runFlags, jobFlags *pflag.FlagSet, args []string) error {
	ctx := cmd.Context()
	prog := cmd.Root().Name()
	submit := f.jobManager != ""
	// Prepare gets the job's flags as a set of their own, parsed from
	// those given.
	parsed := pflag.NewFlagSet(job.Name, pflag.ContinueOnError)
	if job.Flags != nil {
		job.Flags(parsed)
	}
	if err := parsed.Parse(flagArgs(jobFlags)); err != nil {
		return fmt.Errorf("the flags of %s: %w", job.Name, err)
	}
	r := &Run{JobID: clustercli.NewJobID(), Flags: parsed, Submit: submit, Program: program()}
	// The resume line repeats the flags as the user gave them, before
	// Prepare settles them.
	resume := resumeCommand(r.Program, cmd, append(slices.Clone(notResumed), job.NotResumed...))
	faults, err := parseFaults(f.failAfter)
	if err != nil {
		return err
	}
	if submit && len(f.failAfter) > 0 {
		return fmt.Errorf("--fail-after works in this process only; on a cluster, kill a task manager")
	}
	if r.Config, err = f.jobConfig(job.Defaults, cmd.Flags().Changed("checkpoint-dir")); err != nil {
		return err
	}
	if submit {
		// Every process of the cluster must find the paths it is given.
		for _, key := range []string{config.KeyCheckpointingDir, config.KeyStateRecoveryPath} {
			if p, ok := r.Config.Get(key); ok {
				abs, err := clustercli.AbsPath(p)
				if err != nil {
					return err
				}
				if err := r.Config.Set(key, abs); err != nil {
					return err
				}
			}
		}
	}
	if job.Prepare != nil {
		if err := job.Prepare(ctx, r); err != nil {
			return err
		}
	}
	jobArgs := append(flagArgs(parsed), args...)
	if submit {
		return submitJob(ctx, cmd.OutOrStdout(), prog, job, r, jobArgs, f)
	}
	return runHere(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), prog, job, r, jobArgs, faults, f.status, resume)
}

// jobConfig merges the job's defaults, the environment's secrets, the
// file and -D, and settles the checkpoint directory: --checkpoint-dir, or
// execution.checkpointing.dir (or its deprecated state.checkpoints.dir)
// from the file or -D, never two different ones; --from sets
// execution.state-recovery.path.
func (f *runFlags) jobConfig(defaults []string, checkpointDirSet bool) (*config.Configuration, error) {
	if checkpointDirSet {
		defaults = append(slices.Clone(defaults), config.KeyCheckpointingDir+"="+f.checkpointDir)
	}
	cfg, err := f.config.Config(defaults...)
	if err != nil {
		return nil, err
	}
	if dir := cfg.String(config.KeyCheckpointingDir); checkpointDirSet && !clustercli.SamePath(dir, f.checkpointDir) {
		return nil, fmt.Errorf("--checkpoint-dir %s and %s=%s (from --config or -D) disagree: set the checkpoint directory once", f.checkpointDir, config.KeyCheckpointingDir, dir)
	}
	if f.from != "" {
		if err := cfg.Set(config.KeyStateRecoveryPath, f.from); err != nil {
			return nil, fmt.Errorf("--from: %w", err)
		}
	}
	if f.claimMode != "" {
		// Set names the allowed values for another.
		if err := cfg.Set(config.KeyStateRecoveryClaimMode, f.claimMode); err != nil {
			return nil, fmt.Errorf("--claim-mode: %w", err)
		}
	}
	if f.allowDropped {
		if err := cfg.Set(config.KeyStateRecoveryIgnoreUnclaimedState, "true"); err != nil {
			return nil, fmt.Errorf("--allow-non-restored-state: %w", err)
		}
	}
	return cfg, cfg.Validate()
}

// flagArgs returns the flags of fs that were set (on fs or on a set that
// shares its flags), as --name=value, in the order of their names; a
// slice flag gives one per value.
func flagArgs(fs *pflag.FlagSet) []string {
	var out []string
	fs.VisitAll(func(fl *pflag.Flag) {
		if !fl.Changed {
			return
		}
		if sv, ok := fl.Value.(pflag.SliceValue); ok {
			for _, v := range sv.GetSlice() {
				out = append(out, "--"+fl.Name+"="+v)
			}
			return
		}
		out = append(out, "--"+fl.Name+"="+fl.Value.String())
	})
	return out
}

// submitJob sends job to the cluster at f.jobManager and, unless
// detached, follows it.
func submitJob(ctx context.Context, stdout io.Writer, prog string, job Job, r *Run, args []string, f *runFlags) error {
	payload, err := json.Marshal(submission{Config: clustercli.Pairs(r.Config), Args: args})
	if err != nil {
		return err
	}
	var finished func()
	if r.Finished != "" {
		finished = func() { fmt.Fprintf(stdout, "%s: finished; %s\n", prog, r.Finished) }
	}
	sub := cluster.Submission{JobID: r.JobID, Job: job.Name, Args: payload}
	return clustercli.Submit(ctx, stdout, prog, f.jobManager, sub, f.detached, finished, r.Config)
}

// runHere runs job in this process until it ends or ctx is done, showing
// a status line every statusEvery (0: never). Interrupted, it prints
// resume and the directory of the job's checkpoints: the command that
// resumes it.
func runHere(ctx context.Context, stdout, stderr io.Writer, prog string, job Job, r *Run, args []string,
	faults *faultPlan, statusEvery time.Duration, resume []string) error {
	cfg := r.Config
	st := newStatusLine(stdout)
	logger := clustercli.NewLogger(st.logWriter(stderr))
	clustercli.WarnDeprecated(logger, cfg)
	var restored atomic.Bool // from a checkpoint, at least once
	env, err := buildEnv(job, cfg, args, r.JobID, logger, stream.WithFaults(faults.fn), stream.WithEvents(func(e stream.JobEvent) {
		if e.Kind == stream.EventRestored && e.Checkpoint > 0 {
			restored.Store(true)
		}
		faults.event(e)
	}))
	if err != nil {
		return err
	}
	plan, err := env.Plan(job.Name)
	if err != nil {
		return err
	}
	if err := faults.check(plan); err != nil {
		return err
	}
	cp, err := cfg.Checkpointing()
	if err != nil {
		return err
	}

	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	client, err := env.ExecuteAsync(runCtx, job.Name)
	if err != nil {
		return err
	}
	faults.start(client)
	addr, stopREST, err := clustercli.StartREST(ctx, client, func() { stop(errRESTCancel) }, cfg, cfg, logger)
	if err != nil {
		stop(err)
		client.Wait()
		return err
	}
	defer stopREST()
	line := fmt.Sprintf("running %s as job %s", job.Name, env.JobID())
	var where []string
	if r.Output != "" {
		where = append(where, "outputs in "+r.Output)
	}
	checkpoints := ""
	if cp.Dir != "" {
		checkpoints = jobCheckpointDir(cp.Dir, env.JobID())
		where = append(where, "checkpoints in "+checkpoints)
	}
	if len(where) > 0 {
		line += "; " + strings.Join(where, ", ")
	}
	fmt.Fprintf(stdout, "%s: %s; REST API at http://%s\n", prog, line, addr)
	st.follow(client)
	var tick <-chan time.Time
	if statusEvery > 0 {
		t := time.NewTicker(statusEvery)
		defer t.Stop()
		tick = t.C
	}
wait:
	for {
		select {
		case <-tick:
			st.refresh()
		case <-client.Done():
			break wait
		}
	}
	st.refresh()
	st.end()
	err = client.Wait()
	m := client.Metrics()
	last := m.LastCheckpoint
	switch {
	case err == nil && client.StoppedWith() != "":
		sp := client.StoppedWith()
		fmt.Fprintf(stdout, "%s: stopped with savepoint %s; resume with: %s\n", prog, sp, shellJoin(append(resume, "--from", sp)))
	case err == nil && r.Finished != "":
		fmt.Fprintf(stdout, "%s: finished; %s\n", prog, r.Finished)
	case err == nil:
		fmt.Fprintf(stdout, "%s: job %s finished\n", prog, env.JobID())
	case ctx.Err() != nil || errors.Is(context.Cause(runCtx), errRESTCancel):
		// Stopped: by a signal, or canceled through the REST API.
		retained := checkpoints != "" && cp.ExternalizedRetention == config.RetainOnCancellation
		switch {
		case last.ID > 0 && retained:
			fmt.Fprintf(stdout, "%s: stopped; checkpoint %d is retained; resume with: %s\n",
				prog, last.ID, shellJoin(append(resume, "--from", checkpoints)))
		case last.ID > 0:
			fmt.Fprintf(stdout, "%s: stopped after checkpoint %d, which is not retained (a checkpoint directory and %s=%s keep it)\n",
				prog, last.ID, config.KeyCheckpointingExternalizedRetention, config.RetainOnCancellation)
		case restored.Load():
			fmt.Fprintf(stdout, "%s: stopped before a new checkpoint completed; resume again with the same --from %s\n", prog, cfg.String(config.KeyStateRecoveryPath))
		default:
			fmt.Fprintf(stdout, "%s: stopped before the first checkpoint completed\n", prog)
		}
		if m.EndedFrom == stream.StatusRestarting && m.LastFailure != nil {
			fmt.Fprintf(stdout, "%s: the job was restarting after: %v\n", prog, m.LastFailure.Err)
		}
		return nil
	default:
		return err
	}
	if unstruck := faults.unstruck(); len(unstruck) > 0 {
		return fmt.Errorf("the run ended before %d of its %d --fail-after failures struck (%s): it did not test what it was asked to", len(unstruck), len(faults.faults), strings.Join(unstruck, ", "))
	}
	return nil
}

// program is how the user ran this binary, for the commands it prints:
// "go run ./cmd/weir" when go run built it, else the path it was run by.
func program() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return programName(os.Args[0], "", "")
	}
	return programName(os.Args[0], bi.Path, bi.Main.Path)
}

// programName is program for a binary run as arg0, built from the main
// package pkg of the module mod.
func programName(arg0, pkg, mod string) string {
	if !strings.Contains(filepath.ToSlash(arg0), "/go-build") || mod == "" {
		return arg0
	}
	switch rel, ok := strings.CutPrefix(pkg, mod); {
	case ok && rel == "":
		return "go run ."
	case ok && strings.HasPrefix(rel, "/"):
		return "go run ." + rel
	}
	return arg0
}

// jobCheckpointDir is the directory of job's checkpoints in the
// checkpoint directory dir, a path or a URL (s3://bucket/path?region=r).
func jobCheckpointDir(dir, job string) string {
	if !strings.Contains(dir, "://") {
		return filepath.Join(dir, job)
	}
	u, err := url.Parse(dir)
	if err != nil {
		return strings.TrimSuffix(dir, "/") + "/" + job
	}
	u.Path = path.Join("/", u.Path, job)
	return u.String()
}

// resumeCommand is the command line that resumes the run cmd is about to
// make, less its --from: the program, run and the job, and every flag the
// user set except those named in leaveOut (and a -D of
// execution.state-recovery.path, which --from replaces, or of its
// claim-mode, and of a
// sensitive option such as s3.secret-key, which the line would show: the
// environment gives those, AWS_SECRET_ACCESS_KEY for S3).
func resumeCommand(prog string, cmd *cobra.Command, leaveOut []string) []string {
	out := append(strings.Fields(prog), "run", cmd.Name())
	cmd.Flags().Visit(func(f *pflag.Flag) {
		for _, n := range leaveOut {
			if f.Name == n {
				return
			}
		}
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			for _, v := range sv.GetSlice() {
				if f.Name == "define" && (resumeDefine(v) || sensitiveDefine(v)) {
					continue
				}
				out = append(out, "--"+f.Name, v)
			}
			return
		}
		if f.Value.Type() == "bool" {
			out = append(out, "--"+f.Name+"="+f.Value.String())
			return
		}
		out = append(out, "--"+f.Name, f.Value.String())
	})
	return out
}

// resumeDefine reports whether the -D value key=value says what the run
// resumes from (execution.state-recovery.path, which --from replaces) or
// whether it claims it (execution.state-recovery.claim-mode, which the
// resume line leaves at its default, as --claim-mode).
func resumeDefine(v string) bool {
	v = strings.TrimSpace(v)
	return strings.HasPrefix(v, config.KeyStateRecoveryPath+"=") || strings.HasPrefix(v, config.KeyStateRecoveryClaimMode+"=")
}

// sensitiveDefine reports whether the -D value key=value sets an option
// whose value must not be shown.
func sensitiveDefine(kv string) bool {
	key, _, _ := strings.Cut(kv, "=")
	key = strings.TrimSpace(key)
	for _, o := range config.Options() {
		if o.Sensitive && (o.Key == key || slices.Contains(o.DeprecatedKeys, key)) {
			return true
		}
	}
	return false
}

// shellJoin quotes args for a POSIX shell.
func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,@%+") == "" {
			q[i] = a
			continue
		}
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

// errRESTCancel is why a run canceled through its REST API stops.
var errRESTCancel = errors.New("canceled through the REST API")
