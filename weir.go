// Package weir turns a Go program that defines jobs into a weir binary. A
// Go program cannot load code at run time, so a job ships inside the
// program that runs it, and the same program runs every role of a
// cluster:
//
//	func main() { weir.Main(wordcount.Job()) }
//
// gives the program these commands:
//
//	run JOB [-m ADDR] [-D key=value]... [-- ARGS]   run a job here, or submit it to a cluster
//	jobmanager --listen ADDR                         schedule jobs, coordinate checkpoints, serve REST
//	taskmanager --jobmanager ADDR --slots N          offer slots and run subtasks
//	list, cancel JOB_ID                              a cluster's jobs
//
// Options use Flink's names (execution.checkpointing.interval,
// restart-strategy.type, ...), from -D or a YAML file (--config).
package weir

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

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
	// Build adds the job's sources, transformations and sinks to env.
	// args are the job's own arguments (after "--" on the command line).
	// Every process of a cluster builds the job from the same arguments,
	// so paths among them must be reachable from every process.
	Build func(env *stream.Environment, args []string) error
}

// Main runs the command line of a program that carries jobs, until the
// command ends or the process is interrupted, and exits non-zero on an
// error.
func Main(jobs ...Job) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd := Command(filepath.Base(os.Args[0]), jobs...)
	if err := cmd.ExecuteContext(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", cmd.Name(), err)
		stop()
		os.Exit(1)
	}
}

// Command returns the command line Main runs, named name, for programs
// that add commands of their own.
func Command(name string, jobs ...Job) *cobra.Command {
	byName := make(map[string]Job, len(jobs))
	var names []string
	for _, j := range jobs {
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
	root.AddCommand(runCommand(byName, names),
		clustercli.JobManagerCommand(newJobs), clustercli.TaskManagerCommand(newJobs),
		clustercli.ListCommand(), clustercli.CancelCommand())
	return root
}

// submission is a job's arguments as they travel to a cluster.
type submission struct {
	Config []string `json:"config"`
	Args   []string `json:"args,omitempty"`
}

func runCommand(jobs map[string]Job, names []string) *cobra.Command {
	var f clustercli.ConfigFlags
	var jobManager, from string
	var detached bool
	cmd := &cobra.Command{
		Use:   "run JOB [flags] [-- ARGS]",
		Short: "Run a job in this process, or submit it to a cluster with -m",
		Long: `run runs a job in this process (job manager and task slots together) until
it ends or is interrupted, serving its REST API on rest.port; with -m it
submits the job to the cluster whose job manager is at ADDR and follows it
(-d: returns once submitted). Arguments after "--" go to the job.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			job, ok := jobs[args[0]]
			if !ok {
				return fmt.Errorf("unknown job %q (known: %s)", args[0], strings.Join(names, ", "))
			}
			jobArgs := args[1:]
			if len(jobArgs) > 0 && cmd.ArgsLenAtDash() != 1 {
				return fmt.Errorf("unexpected arguments %q: the job's own arguments go after --", jobArgs)
			}
			cfg, err := f.Config()
			if err != nil {
				return err
			}
			prog := cmd.Root().Name()
			if from != "" {
				if err := cfg.Set(config.KeyStateRecoveryPath, from); err != nil {
					return err
				}
			}
			if jobManager == "" {
				return runHere(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), prog, job, cfg, jobArgs)
			}
			// Every process of the cluster must find the paths it is given.
			for _, key := range []string{config.KeyCheckpointingDir, config.KeyStateRecoveryPath} {
				if p, ok := cfg.Get(key); ok {
					abs, err := clustercli.AbsPath(p)
					if err != nil {
						return err
					}
					if err := cfg.Set(key, abs); err != nil {
						return err
					}
				}
			}
			payload, err := json.Marshal(submission{Config: clustercli.Pairs(cfg), Args: jobArgs})
			if err != nil {
				return err
			}
			sub := cluster.Submission{JobID: clustercli.NewJobID(), Job: job.Name, Args: payload}
			return clustercli.Submit(cmd.Context(), cmd.OutOrStdout(), prog, jobManager, sub, detached, nil, clustercli.DialOptions(cfg)...)
		},
	}
	cmd.Flags().StringVarP(&jobManager, "jobmanager", "m", "", "submit the job to the cluster whose job manager is at this address")
	cmd.Flags().BoolVarP(&detached, "detached", "d", false, "with -m: return once the job is submitted")
	cmd.Flags().StringVar(&from, "from", "", "resume from a checkpoint, a savepoint, or a job's checkpoint directory (execution.state-recovery.path)")
	f.Add(cmd)
	return cmd
}

// runHere runs job in this process until it ends or ctx is done.
func runHere(ctx context.Context, stdout, stderr io.Writer, prog string, job Job, cfg *config.Configuration, args []string) error {
	logger := clustercli.NewLogger(stderr)
	env, err := buildEnv(job, cfg, args, clustercli.NewJobID(), logger)
	if err != nil {
		return err
	}
	// The REST API cancels the job through runCtx; a signal, through ctx.
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	client, err := env.ExecuteAsync(runCtx, job.Name)
	if err != nil {
		return err
	}
	addr, stopREST, err := clustercli.StartREST(ctx, client, cancel, cfg, cfg, logger)
	if err != nil {
		<-client.Done()
		return err
	}
	defer stopREST()
	fmt.Fprintf(stdout, "%s: running %s as job %s; REST API at http://%s\n", prog, job.Name, env.JobID(), addr)
	err = client.Wait()
	last := client.Metrics().LastCheckpoint
	switch {
	case err == nil:
		fmt.Fprintf(stdout, "%s: job %s finished\n", prog, env.JobID())
		return nil
	case runCtx.Err() != nil && errors.Is(err, runCtx.Err()):
		if last.ID > 0 {
			fmt.Fprintf(stdout, "%s: stopped; checkpoint %d is retained\n", prog, last.ID)
		} else {
			fmt.Fprintf(stdout, "%s: stopped\n", prog)
		}
		return nil
	}
	return err
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
