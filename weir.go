// Package weir turns a Go program that defines jobs into a weir binary. A
// Go program cannot load code at run time, so a job ships inside the
// program that runs it, and the same program runs every role of a
// cluster:
//
//	func main() { weir.Main(wordcount.Job()) }
//
// gives the program these commands:
//
//	run JOB [flags] [-- ARGS]                       run a job here, or submit it to a cluster (-m)
//	jobmanager --listen ADDR                         schedule jobs, coordinate checkpoints, serve REST
//	taskmanager --jobmanager ADDR --slots N          offer slots and run subtasks
//	list, cancel JOB_ID                              a cluster's jobs
//
// "run JOB" takes the flags every job has (-m, -d, --from, --config, -D,
// --checkpoint-dir, --status-interval, --fail-after) and those the job
// declares itself (Job.Flags). Run here, it shows a status line and, when
// interrupted, prints the command that resumes the job from its retained
// checkpoint. The weir binary itself (cmd/weir) is such a program.
//
// Options use Flink's names (execution.checkpointing.interval,
// restart-strategy.type, ...), from -D or a YAML file (--config).
package weir

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/cluster"
	"github.com/weirstream/weir/internal/clustercli"
	"github.com/weirstream/weir/stream"
)

// Job is a job a program carries.
type Job struct {
	// Name names the job on the command line ("run NAME").
	Name string
	// Short describes the job in one line, for help.
	Short string
	// Long, if set, is the help of "run NAME".
	Long string
	// Defaults are options the job runs with unless --config, -D or
	// --checkpoint-dir say otherwise, as key=value with Flink's names
	// ("parallelism.default=4").
	Defaults []string
	// Flags, if set, declares the job's own flags on fs: "run NAME"
	// accepts them next to the flags every job has. The flags given (and
	// those Prepare sets) reach Build as the first of its args, each as
	// --name=value, so Build parses them with a flag set Flags declares
	// too. A job's flag must not take the name of one of run's.
	Flags func(fs *pflag.FlagSet)
	// NotResumed names the job's flags that the resume line run prints
	// when it is interrupted leaves out: those the checkpoint records
	// (where the output is) or that apply to one run only.
	NotResumed []string
	// Prepare, if set, runs once, in the process of the run command,
	// before the job is built here or submitted to a cluster: it checks
	// the job's flags and settles them (Run.Flags.Set) to what every
	// process is to build the job with.
	Prepare func(ctx context.Context, r *Run) error
	// Build adds the job's sources, transformations and sinks to env.
	// args are the job's flags (see Flags), then its own arguments
	// (after "--" on the command line). Every process of a cluster builds
	// the job from the same arguments, so paths among them must be
	// reachable from every process.
	Build func(env *stream.Environment, args []string) error
}

// Run is a run of a job that the run command is about to make, as a
// job's Prepare sees it.
type Run struct {
	// JobID is the id the job will run under.
	JobID string
	// Config is the job's configuration: its Defaults, the environment's
	// secrets, --config, -D, --checkpoint-dir and --from
	// (execution.state-recovery.path).
	Config *config.Configuration
	// Flags are the job's own flags, parsed. Those Prepare sets reach
	// Build.
	Flags *pflag.FlagSet
	// Submit says the job goes to a cluster (-m): the paths it is given
	// must then be reachable from every process (absolute, or URLs).
	Submit bool
	// Program is how the user ran this program, for commands the job
	// prints: "go run ./cmd/weir" when go run built it.
	Program string

	// Output, set by Prepare, says where the job writes, for the line
	// run prints when the job starts.
	Output string
	// Finished, set by Prepare, is printed when the job has finished,
	// after "finished; " (how to check its output, say).
	Finished string
}

// Resuming reports whether the run resumes from a checkpoint (--from).
func (r *Run) Resuming() bool {
	_, ok := r.Config.Get(config.KeyStateRecoveryPath)
	return ok
}

// Main runs the command line of a program that carries jobs, named after
// the program, until the command ends or the process is interrupted, and
// exits non-zero on an error.
func Main(jobs ...Job) {
	Execute(Command(filepath.Base(os.Args[0]), jobs...))
}

// Execute runs cmd (a Command, perhaps with commands of the program's
// own) until it ends or the process is interrupted (SIGINT, SIGTERM), and
// exits non-zero on an error, which it prints after the command's name.
func Execute(cmd *cobra.Command) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := cmd.ExecuteContext(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", cmd.Name(), err)
		stop()
		os.Exit(1)
	}
}

// Command returns the command line Main runs, named name, for programs
// that add commands of their own. It panics if two jobs share a name or
// a job declares a flag that run has.
func Command(name string, jobs ...Job) *cobra.Command {
	byName := make(map[string]Job, len(jobs))
	var names []string
	for _, j := range jobs {
		if _, dup := byName[j.Name]; dup {
			panic(fmt.Sprintf("weir.Command: two jobs are named %q", j.Name))
		}
		byName[j.Name] = j
		names = append(names, j.Name)
	}
	root := &cobra.Command{
		Use:           name,
		Short:         name + " runs stream processing jobs on weir: " + strings.Join(names, ", "),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	newJobs := func(logger *slog.Logger) cluster.Jobs {
		return clustercli.EnvJobs{Env: programEnv(byName), Logger: logger}
	}
	root.AddCommand(runCommand(jobs),
		clustercli.JobManagerCommand(newJobs), clustercli.TaskManagerCommand(newJobs),
		clustercli.ListCommand(), clustercli.CancelCommand(), clustercli.SavepointCommand(), clustercli.StopCommand())
	return root
}

// submission is a job's arguments as they travel to a cluster.
type submission struct {
	Config []string `json:"config"`
	Args   []string `json:"args,omitempty"`
}

// buildEnv makes job's environment with cfg and args.
func buildEnv(job Job, cfg *config.Configuration, args []string, jobID string, logger *slog.Logger, opts ...stream.Option) (*stream.Environment, error) {
	env, err := stream.NewEnvironment(append([]stream.Option{stream.WithConfig(cfg), stream.WithJobID(jobID), stream.WithLogger(logger)}, opts...)...)
	if err != nil {
		return nil, err
	}
	if err := job.Build(env, args); err != nil {
		return nil, fmt.Errorf("building job %s: %w", job.Name, err)
	}
	return env, nil
}

// programEnv builds a submitted job of jobs.
func programEnv(jobs map[string]Job) func(cluster.Submission, *slog.Logger, ...stream.Option) (*stream.Environment, error) {
	return func(sub cluster.Submission, logger *slog.Logger, opts ...stream.Option) (*stream.Environment, error) {
		job, ok := jobs[sub.Job]
		if !ok {
			return nil, fmt.Errorf("unknown job %q: this program does not carry it", sub.Job)
		}
		var s submission
		if err := json.Unmarshal(sub.Args, &s); err != nil {
			return nil, fmt.Errorf("the submission's arguments: %w", err)
		}
		cfg, err := config.ParseDynamic(s.Config)
		if err != nil {
			return nil, err
		}
		return buildEnv(job, cfg, s.Args, sub.JobID, logger, opts...)
	}
}
