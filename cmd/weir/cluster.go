package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/weirstream/weir/config"
	gm "github.com/weirstream/weir/examples/gatewaymeter"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/cluster"
	"github.com/weirstream/weir/internal/netio"
	"github.com/weirstream/weir/internal/runtime"
	"github.com/weirstream/weir/internal/web"
	"github.com/weirstream/weir/stream"
)

// defaultJobManager is where the job manager listens unless told
// otherwise (Flink's jobmanager.rpc.port is 6123).
const defaultJobManager = "localhost:6123"

// clusterFlags are the options of the cluster roles: a YAML file and -D.
type clusterFlags struct {
	configFile string
	dynamic    []string
}

func (f *clusterFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.configFile, "config", "", "YAML file of options (Flink's names)")
	cmd.Flags().StringArrayVarP(&f.dynamic, "define", "D", nil, "set an option: -D key=value (repeatable)")
}

func (f *clusterFlags) config() (*config.Configuration, error) {
	cfg := config.New()
	if f.configFile != "" {
		fh, err := os.Open(f.configFile)
		if err != nil {
			return nil, fmt.Errorf("--config: %w", err)
		}
		defer fh.Close()
		fc, err := config.LoadYAML(fh)
		if err != nil {
			return nil, fmt.Errorf("--config %s: %w", f.configFile, err)
		}
		cfg.Merge(fc)
	}
	dyn, err := config.ParseDynamic(f.dynamic)
	if err != nil {
		return nil, fmt.Errorf("-D: %w", err)
	}
	cfg.Merge(dyn)
	return cfg, cfg.Validate()
}

func newLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

func newJobManagerCmd() *cobra.Command {
	var listen string
	var f clusterFlags
	cmd := &cobra.Command{
		Use:   "jobmanager",
		Short: "Run a job manager: schedules jobs on task managers, coordinates checkpoints, serves REST",
		Long: `jobmanager runs the cluster's job manager. Task managers register with it
("weir taskmanager --jobmanager ADDR"), jobs are submitted to it ("weir run -m
ADDR JOB"), and it serves the REST API and web UI of all its jobs on
rest.port (default 8081; the UI opens the newest).

A task manager that misses heartbeats for heartbeat.timeout, or whose
connection breaks, is declared lost: its subtasks count as failed and the
restart strategy redeploys the job on the slots there are, waiting for a
replacement task manager if too few are left.

If the job manager itself stops, its jobs stop with it: task managers cancel
their subtasks and wait for a job manager to register with again. Resume a
job from its retained checkpoints with "weir run -m ADDR JOB --from DIR".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := f.config()
			if err != nil {
				return err
			}
			return runJobManager(cmd.Context(), cmd.ErrOrStderr(), listen, cfg)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", defaultJobManager, "address to listen on for task managers and clients")
	f.add(cmd)
	return cmd
}

func runJobManager(ctx context.Context, stderr io.Writer, listen string, cfg *config.Configuration) error {
	cl, err := cfg.Cluster()
	if err != nil {
		return err
	}
	logger := newLogger(stderr)
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", listen, err)
	}
	jobs := &binaryJobs{logger: logger}
	var jm *cluster.JobManager
	restAddr, addJob, stopREST, err := startDirectory(ctx, cfg, logger, func() web.ClusterInfo {
		tms, total, free := jm.Slots()
		return web.ClusterInfo{TaskManagers: tms, SlotsTotal: total, SlotsAvailable: free}
	})
	if err != nil {
		ln.Close()
		return err
	}
	defer stopREST()
	jm = cluster.NewJobManager(jobs,
		cluster.WithLogger(logger),
		cluster.WithHeartbeat(cl.HeartbeatInterval, cl.HeartbeatTimeout),
		cluster.WithJobStarted(func(sub cluster.Submission, job cluster.Job) {
			c, ok := job.(clientJob)
			if !ok {
				return
			}
			if err := addJob(c.JobClient, c.cfg); err != nil {
				logger.Error("REST API does not serve job", "job_id", sub.JobID, "err", err)
				return
			}
			logger.Info("REST API serves job", "job_id", sub.JobID, "addr", restAddr)
		}))
	fmt.Fprintf(stderr, "weir: job manager listening on %s; start task managers with: weir taskmanager --jobmanager %s\n", ln.Addr(), ln.Addr())
	return jm.Serve(ctx, ln)
}

func newTaskManagerCmd() *cobra.Command {
	var jmAddr, dataListen, id string
	var slots int
	var f clusterFlags
	cmd := &cobra.Command{
		Use:   "taskmanager",
		Short: "Run a task manager: offers task slots to a job manager and runs subtasks",
		Long: `taskmanager offers --slots task slots (taskmanager.numberOfTaskSlots) to the
job manager at --jobmanager and runs the subtasks it is given. It may start
before the job manager: it keeps trying to register. Records between task
managers travel over a TCP connection per pair, listening on --data-listen.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := f.config()
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("slots") {
				slots = cfg.Int(config.KeyTaskSlots)
			}
			if slots <= 0 {
				return fmt.Errorf("--slots %d: a task manager needs at least one slot", slots)
			}
			return runTaskManager(cmd.Context(), cmd.ErrOrStderr(), id, jmAddr, dataListen, slots)
		},
	}
	cmd.Flags().StringVar(&jmAddr, "jobmanager", defaultJobManager, "the job manager's address")
	cmd.Flags().IntVar(&slots, "slots", 1, "task slots to offer (default: taskmanager.numberOfTaskSlots)")
	cmd.Flags().StringVar(&dataListen, "data-listen", "127.0.0.1:0", "address the data plane listens on for other task managers")
	cmd.Flags().StringVar(&id, "id", "", "the task manager's id (default: tm-HOST-PID)")
	f.add(cmd)
	return cmd
}

func runTaskManager(ctx context.Context, stderr io.Writer, id, jmAddr, dataListen string, slots int) error {
	logger := newLogger(stderr)
	if id == "" {
		host, _ := os.Hostname()
		id = fmt.Sprintf("tm-%s-%d", host, os.Getpid())
	}
	ln, err := net.Listen("tcp", dataListen)
	if err != nil {
		return fmt.Errorf("--data-listen %s: %w", dataListen, err)
	}
	peers := netio.NewPeers(id, ln, logger)
	defer peers.Close()
	tm := cluster.NewTaskManager(id, jmAddr, slots, &binaryJobs{logger: logger}, peers, logger)
	fmt.Fprintf(stderr, "weir: task manager %s with %d slots; data plane on %s; registering with %s\n", id, slots, peers.Addr(), jmAddr)
	return tm.Run(ctx)
}

// submittedRun is "weir run gatewaymeter" as it travels to a cluster:
// paths are absolute, and the configuration is complete.
type submittedRun struct {
	Input       string   `json:"input,omitempty"`
	Output      string   `json:"output,omitempty"`
	Kafka       string   `json:"kafka,omitempty"`
	TopicPrefix string   `json:"topic_prefix,omitempty"`
	Delivery    string   `json:"delivery,omitempty"`
	Bounded     bool     `json:"bounded,omitempty"`
	Seed        uint64   `json:"seed"`
	Rate        float64  `json:"rate"`
	InputRate   float64  `json:"input_rate,omitempty"`
	Config      []string `json:"config"`
}

func (s submittedRun) options() runOptions {
	return runOptions{input: s.Input, output: s.Output, kafka: s.Kafka, topicPrefix: s.TopicPrefix,
		delivery: s.Delivery, bounded: s.Bounded, seed: s.Seed, rate: s.Rate, inputRate: s.InputRate}
}

// binaryJobs builds the jobs this binary carries, on every role of a
// cluster.
type binaryJobs struct {
	logger *slog.Logger
}

// clientJob is a job started on the job manager.
type clientJob struct {
	*stream.JobClient
	cfg *config.Configuration
}

func (c clientJob) Master() *runtime.JobMaster { return c.JobClient.Master() }

func (j *binaryJobs) env(sub cluster.Submission, extra ...stream.Option) (*stream.Environment, error) {
	if sub.Job != "gatewaymeter" {
		return nil, fmt.Errorf("unknown job %q (known: gatewaymeter)", sub.Job)
	}
	var a submittedRun
	if err := json.Unmarshal(sub.Args, &a); err != nil {
		return nil, fmt.Errorf("the submission's arguments: %w", err)
	}
	cfg, err := config.ParseDynamic(a.Config)
	if err != nil {
		return nil, err
	}
	o := a.options()
	src, kafkaSinks, err := o.gatewayMeterIO()
	if err != nil {
		return nil, err
	}
	env, err := stream.NewEnvironment(append([]stream.Option{stream.WithConfig(cfg), stream.WithJobID(sub.JobID),
		stream.WithLogger(j.logger)}, extra...)...)
	if err != nil {
		return nil, err
	}
	var sinks gm.Sinks
	if kafkaSinks != nil {
		sinks = *kafkaSinks
	} else if sinks, err = gm.FileSinks(a.Output); err != nil {
		return nil, fmt.Errorf("--output: %w", err)
	}
	gm.Build(env, src, sinks)
	return env, nil
}

// Start implements cluster.Jobs.
func (j *binaryJobs) Start(ctx context.Context, sub cluster.Submission, newExec func(*runtime.JobGraph, runtime.Listener) (runtime.Executor, error)) (cluster.Job, error) {
	var env *stream.Environment
	env, err := j.env(sub, stream.WithExecutor(newExec), stream.WithEvents(func(e stream.JobEvent) {
		if e.Kind == runtime.EventRestored && e.Checkpoint > 0 {
			go j.logRestored(ctx, env, sub.JobID, e)
		}
	}))
	if err != nil {
		return nil, err
	}
	c, err := env.ExecuteAsync(ctx, sub.Job)
	if err != nil {
		return nil, err
	}
	return clientJob{JobClient: c, cfg: env.Config()}, nil
}

// logRestored logs the source positions of the checkpoint a job restored
// from: where every split resumes reading.
func (j *binaryJobs) logRestored(ctx context.Context, env *stream.Environment, jobID string, e stream.JobEvent) {
	log := j.logger.With("job_id", jobID, "checkpoint", e.Checkpoint)
	cp, err := env.Config().Checkpointing()
	if err != nil || cp.Dir == "" {
		return
	}
	st, err := storage.Open(ctx, cp.Dir, jobID)
	if err != nil {
		log.Warn("reading the restored checkpoint", "err", err)
		return
	}
	defer st.Close()
	snap, err := st.Resolve(ctx, e.Message)
	if err != nil {
		log.Warn("reading the restored checkpoint", "path", e.Message, "err", err)
		return
	}
	defer snap.Close()
	var parts []string
	for _, op := range snap.Metadata.Operators {
		offs, err := sourceOffsets(ctx, snap, op)
		if err != nil {
			log.Warn("reading the restored checkpoint's source positions", "operator", op.UID, "err", err)
			continue
		}
		for _, o := range offs {
			parts = append(parts, fmt.Sprintf("%s=%d", o.split, o.offset))
		}
	}
	log.Info("restored from checkpoint", "path", e.Message, "source_positions", strings.Join(parts, " "))
}

// Worker implements cluster.Jobs.
func (j *binaryJobs) Worker(ctx context.Context, sub cluster.Submission, peers runtime.Peers, l runtime.Listener) (cluster.Worker, error) {
	env, err := j.env(sub)
	if err != nil {
		return nil, err
	}
	return env.NewWorker(ctx, sub.Job, peers, l)
}

// submit sends "weir run" to the cluster at o.jobManager.
func submit(ctx context.Context, stdout io.Writer, o runOptions, job string) error {
	if o.input != "" {
		if _, err := gm.TraceFiles(o.input); err != nil {
			return fmt.Errorf("--input: %w", err)
		}
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	jobID := hex.EncodeToString(b[:])
	abs := func(p string) (string, error) {
		if p == "" || strings.Contains(p, "://") {
			return p, nil
		}
		return filepath.Abs(p)
	}
	var err error
	if o.checkpointDir, err = abs(o.checkpointDir); err != nil {
		return err
	}
	if o.from, err = abs(o.from); err != nil {
		return err
	}
	cfg, err := o.jobConfig()
	if err != nil {
		return err
	}
	run := submittedRun{Kafka: o.kafka, TopicPrefix: o.topicPrefix, Delivery: o.delivery, Bounded: o.bounded, Seed: o.seed, Rate: o.rate, InputRate: o.inputRate}
	if run.Input, err = abs(o.input); err != nil {
		return err
	}
	if o.kafka == "" {
		out := o.output
		if out == "" {
			out = filepath.Join("weir-data", "out", jobID)
		}
		if run.Output, err = abs(out); err != nil {
			return err
		}
		if err := checkOutputDir(run.Output, o.from != ""); err != nil {
			return err
		}
	}
	for _, k := range cfg.Keys() {
		v, _ := cfg.Get(k)
		run.Config = append(run.Config, k+"="+v)
	}
	args, err := json.Marshal(run)
	if err != nil {
		return err
	}
	c, err := cluster.Dial(o.jobManager)
	if err != nil {
		return err
	}
	defer c.Close()
	id, err := c.Submit(ctx, cluster.Submission{JobID: jobID, Job: job, Args: args})
	if err != nil {
		return fmt.Errorf("submitting to %s: %w", o.jobManager, err)
	}
	fmt.Fprintf(stdout, "weir: submitted %s as job %s to %s\n", job, id, o.jobManager)
	if o.detached {
		return nil
	}
	// Attached: follow the job until it ends. Ctrl-C detaches; the job
	// keeps running.
	last := ""
	for {
		ov, err := c.List(ctx)
		if ctx.Err() != nil {
			fmt.Fprintf(stdout, "weir: detached; job %s keeps running (weir cancel -m %s %s)\n", id, o.jobManager, id)
			return nil
		}
		if err != nil {
			return fmt.Errorf("following job %s: %w", id, err)
		}
		for _, js := range ov.Jobs {
			if js.JobID != id {
				continue
			}
			line := fmt.Sprintf("job %s %s: restarts %d, last checkpoint %d", id, js.State, js.Restarts, js.LastCheckpoint)
			if line != last {
				fmt.Fprintln(stdout, "weir:", line)
				last = line
			}
			switch js.State {
			case "FINISHED":
				if o.kafka == "" && o.input != "" {
					fmt.Fprintf(stdout, "weir: finished; verify with: weir verify gatewaymeter --input %s --output %s\n", run.Input, run.Output)
				}
				return nil
			case "FAILED":
				return fmt.Errorf("job %s failed: %s", id, js.Error)
			case "CANCELED":
				return nil
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func newListCmd() *cobra.Command {
	var jmAddr string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List a cluster's jobs and task managers",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cluster.Dial(jmAddr)
			if err != nil {
				return err
			}
			defer c.Close()
			ov, err := c.List(cmd.Context())
			if err != nil {
				return fmt.Errorf("listing %s: %w", jmAddr, err)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "JOB ID\tJOB\tSTATE\tSTARTED\tRESTARTS\tLAST CHECKPOINT")
			for _, j := range ov.Jobs {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%d\n", j.JobID, j.Job, j.State, j.Started.Format(time.RFC3339), j.Restarts, j.LastCheckpoint)
			}
			w.Flush()
			fmt.Fprintf(cmd.OutOrStdout(), "\n%d task managers, %d of %d slots in use\n", len(ov.TaskManagers), ov.SlotsOccupied, ov.SlotsTotal)
			for _, tm := range ov.TaskManagers {
				fmt.Fprintf(cmd.OutOrStdout(), "  %s  %d slots  data %s\n", tm.ID, tm.Slots, tm.DataAddr)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&jmAddr, "jobmanager", "m", defaultJobManager, "the job manager's address")
	return cmd
}

func newCancelCmd() *cobra.Command {
	var jmAddr string
	cmd := &cobra.Command{
		Use:   "cancel JOB_ID",
		Short: "Cancel a job on a cluster",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cluster.Dial(jmAddr)
			if err != nil {
				return err
			}
			defer c.Close()
			if err := c.Cancel(cmd.Context(), args[0]); err != nil {
				return fmt.Errorf("canceling %s: %w", args[0], err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "weir: job %s canceled\n", args[0])
			return nil
		},
	}
	cmd.Flags().StringVarP(&jmAddr, "jobmanager", "m", defaultJobManager, "the job manager's address")
	return cmd
}
