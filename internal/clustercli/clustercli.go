// Package clustercli holds the command-line side of a weir cluster that
// every binary shares, whatever jobs it carries: the jobmanager,
// taskmanager, list and cancel commands, the REST API's start, and
// following a submitted job. A binary brings its jobs as a cluster.Jobs.
package clustercli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/cluster"
	"github.com/weirstream/weir/internal/ha"
	"github.com/weirstream/weir/internal/launch"
	"github.com/weirstream/weir/internal/netio"
	"github.com/weirstream/weir/internal/objstore"
	"github.com/weirstream/weir/internal/runtime"
	"github.com/weirstream/weir/internal/web"
	"github.com/weirstream/weir/state"
	"github.com/weirstream/weir/stream"
)

// DefaultJobManager is where the job manager listens unless told
// otherwise (Flink's jobmanager.rpc.port is 6123).
const DefaultJobManager = "localhost:6123"

// NewJobs makes a binary's jobs for one process, logging to logger.
type NewJobs func(logger *slog.Logger) cluster.Jobs

// StartedJob is what a binary's cluster.Jobs.Start returns: the running
// job and its configuration, so that the job manager serves its REST API.
// It implements cluster.Job.
type StartedJob struct {
	*launch.Handle
	Config *config.Configuration
}

// NewLogger returns the text logger of the cluster's processes.
func NewLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// NewJobID returns a random job id: 32 hexadecimal digits, like Flink's.
func NewJobID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ConfigFlags are the options of a command: a YAML file and -D, and the
// secrets the environment gives (EnvSecrets).
type ConfigFlags struct {
	File    string
	Dynamic []string
	// Getenv reads the environment; nil means os.Getenv.
	Getenv func(string) string
}

// Add registers --config and -D on cmd.
func (f *ConfigFlags) Add(cmd *cobra.Command) { f.AddTo(cmd.Flags()) }

// AddTo registers --config and -D on fs.
func (f *ConfigFlags) AddTo(fs *pflag.FlagSet) {
	fs.StringVar(&f.File, "config", "", "YAML file of options (Flink's names)")
	fs.StringArrayVarP(&f.Dynamic, "define", "D", nil, "set an option: -D key=value (repeatable)")
}

// Environment variables that set the options holding secrets, so that
// they need not appear on a command line, where other users of the
// machine can read them.
const (
	EnvClusterAuthToken = "WEIR_CLUSTER_AUTH_TOKEN" // cluster.auth-token
	EnvRESTAuthToken    = "WEIR_REST_AUTH_TOKEN"    // rest.auth-token
)

// EnvSecrets returns the environment variables that set options, by
// variable: EnvClusterAuthToken and EnvRESTAuthToken.
func EnvSecrets() map[string]string {
	return map[string]string{
		EnvClusterAuthToken: config.KeyClusterAuthToken,
		EnvRESTAuthToken:    config.KeyRESTAuthToken,
	}
}

// Config merges defaults (key=value), the environment (EnvSecrets; an
// empty variable counts as unset), the file and -D, in that order, and
// validates the result.
// Every problem of the file and of -D is reported, not only the first.
func (f *ConfigFlags) Config(defaults ...string) (*config.Configuration, error) {
	cfg, err := config.ParseDynamic(defaults)
	if err != nil {
		return nil, err
	}
	getenv := f.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	for env, key := range EnvSecrets() {
		if v := getenv(env); v != "" {
			if err := cfg.Set(key, v); err != nil {
				return nil, fmt.Errorf("$%s: %w", env, err)
			}
		}
	}
	var errs []error
	if f.File != "" {
		if fc, err := loadFile(f.File); err != nil {
			errs = append(errs, err)
		} else {
			cfg.Merge(fc)
		}
	}
	if dyn, err := config.ParseDynamic(f.Dynamic); err != nil {
		errs = append(errs, fmt.Errorf("-D: %w", err))
	} else {
		cfg.Merge(dyn)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return cfg, cfg.Validate()
}

func loadFile(path string) (*config.Configuration, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	defer fh.Close()
	fc, err := config.LoadYAML(fh)
	if err != nil {
		return nil, fmt.Errorf("--config %s: %w", path, err)
	}
	return fc, nil
}

// WarnDeprecated logs, once per key, each deprecated key cfg was given,
// with the key that replaces it.
func WarnDeprecated(logger *slog.Logger, cfg *config.Configuration) {
	for _, d := range cfg.Deprecations() {
		logger.Warn("deprecated configuration key", "deprecation", d)
	}
}

// AbsPath makes a local path absolute, so that every process of a
// cluster finds it; an empty path and a URL (scheme://...) stay as they
// are.
func AbsPath(p string) (string, error) {
	if p == "" || strings.Contains(p, "://") {
		return p, nil
	}
	return filepath.Abs(p)
}

// SamePath reports whether two checkpoint or output locations name the
// same place: URLs equal but for a trailing slash, or local paths equal
// once absolute.
func SamePath(a, b string) bool {
	if a == b {
		return true
	}
	if strings.Contains(a, "://") || strings.Contains(b, "://") {
		return strings.TrimSuffix(a, "/") == strings.TrimSuffix(b, "/")
	}
	aa, err1 := filepath.Abs(a)
	bb, err2 := filepath.Abs(b)
	return err1 == nil && err2 == nil && aa == bb
}

// Pairs returns cfg as key=value pairs, the form a submission carries.
// Sensitive options (the tokens) are left out: they are the processes'
// own, and a submission is no place for secrets.
func Pairs(cfg *config.Configuration) []string {
	secret := map[string]bool{}
	for _, o := range config.Options() {
		secret[o.Key] = o.Sensitive
	}
	var out []string
	for _, k := range cfg.Keys() {
		if secret[k] {
			continue
		}
		v, _ := cfg.Get(k)
		out = append(out, k+"="+v)
	}
	return out
}

// DialOptions returns how to connect to the job manager as cfg says: with
// cluster.auth-token, if set.
func DialOptions(cfg *config.Configuration) []cluster.DialOption {
	return []cluster.DialOption{cluster.WithToken(cfg.String(config.KeyClusterAuthToken))}
}

// authHint adds to an authentication failure where the token comes from.
func authHint(err error) error {
	if !errors.Is(err, cluster.ErrAuth) && !errors.Is(err, netio.ErrAuth) {
		return err
	}
	return fmt.Errorf("%w (set it with -D %s=..., in --config, or in the environment variable %s)",
		err, config.KeyClusterAuthToken, EnvClusterAuthToken)
}

// listenOn listens on addr, the value of flag, and refuses an address off
// loopback unless token is set (cluster.CheckListen).
func listenOn(flag, addr, token string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", flag, addr, err)
	}
	if err := cluster.CheckListen(ln.Addr(), token); err != nil {
		ln.Close()
		return nil, fmt.Errorf("%s %s: %w", flag, addr, err)
	}
	return ln, nil
}

// securityHelp is the part of a cluster command's help on the token.
const securityHelp = `
Off loopback, every process of the cluster needs the same secret,
cluster.auth-token: the job manager requires it of task managers and
clients, task managers of each other's data connections, and no process
sends it in clear (each proves it holds it with an HMAC). Give it in the
environment variable ` + EnvClusterAuthToken + ` rather than with -D, which
other users of the machine can read on the command line.`

// JobManagerCommand returns the jobmanager command.
func JobManagerCommand(newJobs NewJobs) *cobra.Command {
	var listen, advertise string
	var exitAfter int64
	var f ConfigFlags
	cmd := &cobra.Command{
		Use:   "jobmanager",
		Short: "Run a job manager: schedules jobs on task managers, coordinates checkpoints, serves REST",
		Long: `jobmanager runs the cluster's job manager. Task managers register with it
("taskmanager --jobmanager ADDR"), jobs are submitted to it ("run -m ADDR
JOB"), and it serves the REST API and web UI of all its jobs on rest.port
(default 8081; the UI opens the newest).

A task manager that misses heartbeats for heartbeat.timeout, or whose
connection breaks, is declared lost: its subtasks count as failed and the
restart strategy redeploys the job on the slots there are, waiting for a
replacement task manager if too few are left.
` + securityHelp + `

If the job manager itself stops, its jobs stop with it: task managers cancel
their subtasks and wait for a job manager to register with again. Resume a
job from its retained checkpoints with "run -m ADDR JOB --from DIR".

With high-availability.type etcd or kubernetes, run several job managers:
one is elected leader through etcd (high-availability.etcd.endpoints) or a
Kubernetes Lease (kubernetes.cluster-id, kubernetes.namespace) and
publishes its --advertise address and its REST address (rest.address)
there; the others wait as standbys, answering clients with the leader's
address. The leader records each submitted job and each completed
checkpoint in etcd or ConfigMaps before acting on it. When its lease
(high-availability.etcd.lease-ttl, or
high-availability.kubernetes.leader-election.lease-duration) expires, a
standby takes over and
recovers every job from its latest completed checkpoint. A job manager
that loses its leadership, or is stopped, exits without canceling its
jobs: they are its successor's.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := f.Config()
			if err != nil {
				return err
			}
			var opts []cluster.JobManagerOption
			if exitAfter > 0 {
				opts = append(opts, cluster.WithCheckpointRecorded(func(jobID string, id int64) {
					if id >= exitAfter {
						fmt.Fprintf(cmd.ErrOrStderr(), "%s: exiting at once after recording checkpoint %d of job %s, before any sink commits it (--exit-after-recording)\n", cmd.Root().Name(), id, jobID)
						os.Exit(3)
					}
				}))
			}
			return runJobManager(cmd.Context(), cmd.Root().Name(), cmd.ErrOrStderr(), listen, advertise, cfg, newJobs, os.Exit, opts...)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", DefaultJobManager, "address to listen on for task managers and clients")
	cmd.Flags().StringVar(&advertise, "advertise", "", "with high availability, the address task managers and clients reach this job manager at (default: the address it listens on)")
	cmd.Flags().Int64Var(&exitAfter, "exit-after-recording", 0, "fault injection: exit at once, as if killed, after recording checkpoint N (or a later one) in the HA store, before the sinks commit it")
	_ = cmd.Flags().MarkHidden("exit-after-recording")
	f.Add(cmd)
	return cmd
}

// runJobManager runs the job manager; exit ends the process (os.Exit)
// when, highly available, it loses its leadership or is stopped.
func runJobManager(ctx context.Context, prog string, stderr io.Writer, listen, advertise string, cfg *config.Configuration, newJobs NewJobs, exit func(int), extra ...cluster.JobManagerOption) error {
	cl, err := cfg.Cluster()
	if err != nil {
		return err
	}
	logger := NewLogger(stderr)
	WarnDeprecated(logger, cfg)
	if _, err := launch.MemoryLimit(cfg, config.KeyJobManagerProcessSize, 0, nil, logger); err != nil {
		return err
	}
	ln, err := listenOn("--listen", listen, cl.AuthToken)
	if err != nil {
		return err
	}
	svc, err := openHA(ctx, cfg, logger)
	if err != nil {
		ln.Close()
		return err
	}
	if svc != nil && advertise == "" && ln.Addr().(*net.TCPAddr).IP.IsUnspecified() {
		svc.Close()
		ln.Close()
		return fmt.Errorf("--listen %s listens on every interface, which no task manager or client can dial: set --advertise to the address they reach this job manager at (in Kubernetes, the pod's IP)", listen)
	}
	var standby *standbyState
	var restExtra []web.Option
	if svc != nil {
		defer svc.Close()
		standby = watchLeader(ctx, svc)
		restExtra = append(restExtra, web.WithStandby(standby.rest))
	}
	// The REST directory starts first and may be asked about the cluster
	// before the job manager exists.
	var current atomic.Pointer[cluster.JobManager]
	restAddr, addJob, stopREST, err := StartDirectory(ctx, cfg, logger, func() web.ClusterInfo {
		jm := current.Load()
		if jm == nil {
			return web.ClusterInfo{Registered: []web.TaskManager{}}
		}
		tms, total, free := jm.Slots()
		info := web.ClusterInfo{TaskManagers: tms, SlotsTotal: total, SlotsAvailable: free, Registered: []web.TaskManager{}}
		for _, tm := range jm.TaskManagers() {
			info.Registered = append(info.Registered, web.TaskManager{ID: tm.ID, DataAddr: tm.DataAddr, Jobs: tm.Jobs, LastHeartbeat: tm.LastHeartbeat, Process: tm.Process})
		}
		return info
	}, restExtra...)
	if err != nil {
		ln.Close()
		return err
	}
	defer stopREST()
	var jm *cluster.JobManager
	haOpts := extra
	if standby != nil {
		haOpts = append(haOpts, cluster.WithStandby(standby.rpc))
	}
	jm = cluster.NewJobManager(newJobs(logger), append(haOpts,
		cluster.WithLogger(logger),
		cluster.WithAuthToken(cl.AuthToken),
		cluster.WithHeartbeat(cl.HeartbeatInterval, cl.HeartbeatTimeout),
		cluster.WithJobStarted(func(sub cluster.Submission, job cluster.Job) {
			c, ok := job.(StartedJob)
			if !ok {
				return
			}
			if err := addJob(c.Handle, c.Config, func() { jm.CancelJob(sub.JobID) }); err != nil {
				logger.Error("REST API does not serve job", "job_id", sub.JobID, "err", err)
				return
			}
			logger.Info("REST API serves job", "job_id", sub.JobID, "addr", restAddr)
		}))...)
	current.Store(jm)
	same := ""
	if cl.AuthToken != "" {
		same = " (and the same " + config.KeyClusterAuthToken + ")"
	}
	if svc == nil {
		fmt.Fprintf(stderr, "%s: job manager listening on %s; start task managers with: %s taskmanager --jobmanager %s%s\n", prog, ln.Addr(), prog, ln.Addr(), same)
		return jm.Serve(ctx, ln)
	}
	if advertise == "" {
		advertise = ln.Addr().String()
	}
	restAdvertised, err := advertisedREST(restAddr, cl.RESTAddress)
	if err != nil {
		ln.Close()
		return err
	}
	hc, _ := cfg.HighAvailability()
	find := "-D " + config.KeyHAEtcdEndpoints + "=" + cfg.String(config.KeyHAEtcdEndpoints)
	if hc.Type == config.HAKubernetes {
		find = "-D " + config.KeyKubernetesClusterID + "=" + hc.Kubernetes.ClusterID
	}
	fmt.Fprintf(stderr, "%s: job manager listening on %s (advertised as %s), a standby until elected through %s; start task managers with: %s taskmanager -D %s=%s %s%s\n",
		prog, ln.Addr(), advertise, haWhere(cfg), prog, config.KeyHAType, hc.Type, find, same)
	served := make(chan error, 1)
	go func() { served <- jm.Serve(ctx, ln) }()
	return leadWhenElected(ctx, logger, svc, jm, standby, ha.LeaderInfo{Addr: advertise, RESTAddr: restAdvertised}, served, exit)
}

// TaskManagerCommand returns the taskmanager command.
func TaskManagerCommand(newJobs NewJobs) *cobra.Command {
	var jmAddr, dataListen, id string
	var slots int
	var hangChannelState, hangKeyedFile int64
	var f ConfigFlags
	cmd := &cobra.Command{
		Use:   "taskmanager",
		Short: "Run a task manager: offers task slots to a job manager and runs subtasks",
		Long: `taskmanager offers --slots task slots (taskmanager.numberOfTaskSlots) to the
job manager at --jobmanager and runs the subtasks it is given. It may start
before the job manager: it keeps trying to register, unless the job manager
refuses its credentials. Records between task managers travel over a TCP
connection per pair, listening on --data-listen.
` + securityHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := f.Config()
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("slots") {
				slots = cfg.Int(config.KeyTaskSlots)
			}
			if slots <= 0 {
				return fmt.Errorf("--slots %d: a task manager needs at least one slot", slots)
			}
			jobs := newJobs
			var faults []stream.FaultFunc
			if hangChannelState > 0 {
				faults = append(faults, hangWritingChannelState(hangChannelState, cmd.Root().Name(), cmd.ErrOrStderr()))
			}
			if hangKeyedFile > 0 {
				faults = append(faults, hangWritingKeyedFile(hangKeyedFile, cmd.Root().Name(), cmd.ErrOrStderr()))
			}
			if len(faults) > 0 {
				if jobs, err = withFaults(newJobs, faults); err != nil {
					return err
				}
			}
			return authHint(runTaskManager(cmd.Context(), cmd.Root().Name(), cmd.ErrOrStderr(), id, jmAddr, dataListen, slots, cfg, jobs))
		},
	}
	cmd.Flags().Int64Var(&hangChannelState, "hang-writing-channel-state", 0, "fault injection: the first write of a subtask's channel state for checkpoint N or a later one on this task manager, in the job's first attempt, says so on stderr and never ends, so that a test can kill the process while it is under way")
	_ = cmd.Flags().MarkHidden("hang-writing-channel-state")
	cmd.Flags().Int64Var(&hangKeyedFile, "hang-writing-keyed-file", 0, "fault injection: the first write of a file of a keyed state store (an incremental or native snapshot's) for checkpoint N or a later one on this task manager says so on stderr and never ends, so that a test can kill the process in the middle of a checkpoint's upload")
	_ = cmd.Flags().MarkHidden("hang-writing-keyed-file")
	cmd.Flags().StringVar(&jmAddr, "jobmanager", DefaultJobManager, "the job manager's address")
	cmd.Flags().IntVar(&slots, "slots", 1, "task slots to offer (default: taskmanager.numberOfTaskSlots)")
	cmd.Flags().StringVar(&dataListen, "data-listen", "127.0.0.1:0", "address the data plane listens on for other task managers")
	cmd.Flags().StringVar(&id, "id", "", "the task manager's id (default: tm-HOST-PID)")
	f.Add(cmd)
	return cmd
}

// hangWritingChannelState returns a fault injector that hangs the first
// write of a subtask's channel state (an unaligned checkpoint's records
// in flight into it, complete and about to be persisted) of checkpoint
// from or a later one, in the job's first attempt, once it has said so on
// stderr: the moment a test kills the task manager at
// (--hang-writing-channel-state).
func hangWritingChannelState(from int64, prog string, stderr io.Writer) stream.FaultFunc {
	var once sync.Once
	return func(ctx context.Context, site stream.FaultSite) error {
		if site.Point != stream.FaultAsync || site.Attempt != 0 || site.Checkpoint < from || !strings.HasSuffix(site.Path, "-channels") {
			return nil
		}
		hung := false
		once.Do(func() {
			hung = true
			fmt.Fprintf(stderr, "%s: writing the channel state %s of checkpoint %d; the write hangs (--hang-writing-channel-state)\n", prog, site.Path, site.Checkpoint)
		})
		if !hung {
			return nil
		}
		<-ctx.Done()
		return context.Cause(ctx)
	}
}

// hangWritingKeyedFile returns a fault injector that hangs the first
// write to checkpoint storage of a keyed state store's file (a file of an
// incremental or native snapshot, "<uid>-<subtask>-keyed-<name>") once
// the task manager has written state of checkpoint from or a later one,
// once it has said so on stderr: a subtask's keyed state blob is written
// before its store's files, so the write that hangs is one of that
// checkpoint's upload, with other files of it written already
// (--hang-writing-keyed-file).
func hangWritingKeyedFile(from int64, prog string, stderr io.Writer) stream.FaultFunc {
	var (
		mu       sync.Mutex
		reached  bool // a write of checkpoint from or later seen
		hungOnce bool
	)
	return func(ctx context.Context, site stream.FaultSite) error {
		if site.Point != stream.FaultStorageWrite {
			return nil
		}
		mu.Lock()
		if site.Checkpoint >= from {
			reached = true
		}
		hang := reached && !hungOnce && strings.Contains(path.Base(site.Path), "-keyed-")
		if hang {
			hungOnce = true
			fmt.Fprintf(stderr, "%s: writing the keyed state file %s; the write hangs (--hang-writing-keyed-file)\n", prog, site.Path)
		}
		mu.Unlock()
		if !hang {
			return nil
		}
		<-ctx.Done()
		return context.Cause(ctx)
	}
}

// withFaults wraps newJobs so that the jobs' environments inject the
// faults of fs, each asked in turn (--hang-* options).
func withFaults(newJobs NewJobs, fs []stream.FaultFunc) (NewJobs, error) {
	if _, ok := newJobs(slog.New(slog.DiscardHandler)).(EnvJobs); !ok {
		return nil, errors.New("--hang-*: this program's jobs take no fault injection")
	}
	f := func(ctx context.Context, site stream.FaultSite) error {
		for _, f := range fs {
			if err := f(ctx, site); err != nil {
				return err
			}
		}
		return nil
	}
	return func(logger *slog.Logger) cluster.Jobs {
		ej := newJobs(logger).(EnvJobs)
		env := ej.Env
		ej.Env = func(sub cluster.Submission, logger *slog.Logger, opts ...stream.Option) (*stream.Environment, error) {
			return env(sub, logger, append(opts, stream.WithFaults(f))...)
		}
		return ej
	}, nil
}

func runTaskManager(ctx context.Context, prog string, stderr io.Writer, id, jmAddr, dataListen string, slots int, cfg *config.Configuration, newJobs NewJobs) error {
	logger := NewLogger(stderr)
	WarnDeprecated(logger, cfg)
	if _, err := launch.MemoryLimit(cfg, config.KeyTaskManagerProcessSize, launch.OffHeapStores(cfg, slots, state.LSMMemoryOffHeap), nil, logger); err != nil {
		return err
	}
	if id == "" {
		host, _ := os.Hostname()
		id = fmt.Sprintf("tm-%s-%d", host, os.Getpid())
	}
	token := cfg.String(config.KeyClusterAuthToken)
	ln, err := listenOn("--data-listen", dataListen, token)
	if err != nil {
		return err
	}
	host := cfg.String(config.KeyTaskManagerHost)
	if ip := ln.Addr().(*net.TCPAddr).IP; host == "" && ip.IsUnspecified() {
		ln.Close()
		return fmt.Errorf("--data-listen %s listens on every interface, which other task managers cannot dial: set %s to the address they reach this one at (in Kubernetes, the pod's IP)", dataListen, config.KeyTaskManagerHost)
	}
	peers := netio.NewPeers(id, ln, logger, netio.AuthToken(token), netio.AdvertiseHost(host))
	defer peers.Close()
	tm := cluster.NewTaskManager(id, jmAddr, slots, newJobs(logger), peers, logger, DialOptions(cfg)...)
	svc, err := openHA(ctx, cfg, logger)
	if err != nil {
		return err
	}
	if svc != nil {
		defer svc.Close()
		tm.FollowLeader(svc.WatchLeader)
		jmAddr = "the leading job manager (" + haWhere(cfg) + ")"
	}
	fmt.Fprintf(stderr, "%s: task manager %s with %d slots; data plane on %s; registering with %s\n", prog, id, slots, peers.Addr(), jmAddr)
	return tm.Run(ctx)
}

// ListCommand returns the list command.
func ListCommand() *cobra.Command {
	var jmAddr string
	var f ConfigFlags
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List a cluster's jobs and task managers",
		Long:  "list shows the jobs and task managers of the cluster whose job manager is at -m.\n" + securityHelp,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := f.Config()
			if err != nil {
				return err
			}
			c, jmAddr, closeFn, err := dialJobManager(cmd.Context(), cfg, jmAddr)
			if err != nil {
				return err
			}
			defer closeFn()
			ov, err := c.List(cmd.Context())
			if err != nil {
				return authHint(fmt.Errorf("listing %s: %w", jmAddr, err))
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "JOB ID\tJOB\tSTATE\tSTARTED\tRESTARTS\tLAST CHECKPOINT")
			for _, j := range ov.Jobs {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%d\n", j.JobID, j.Job, j.State, j.Started.Format(time.RFC3339), j.Restarts, j.LastCheckpoint)
			}
			w.Flush()
			if hc, _ := cfg.HighAvailability(); hc.Enabled() {
				fmt.Fprintf(cmd.OutOrStdout(), "\nleading job manager %s (from %s)\n", jmAddr, haWhere(cfg))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "\n%d task managers, %d of %d slots in use\n", len(ov.TaskManagers), ov.SlotsOccupied, ov.SlotsTotal)
			for _, tm := range ov.TaskManagers {
				fmt.Fprintf(cmd.OutOrStdout(), "  %s  %d slots  data %s\n", tm.ID, tm.Slots, tm.DataAddr)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&jmAddr, "jobmanager", "m", DefaultJobManager, "the job manager's address")
	f.Add(cmd)
	return cmd
}

// CancelCommand returns the cancel command.
func CancelCommand() *cobra.Command {
	var jmAddr string
	var f ConfigFlags
	cmd := &cobra.Command{
		Use:   "cancel JOB_ID",
		Short: "Cancel a job on a cluster",
		Long:  "cancel cancels a job of the cluster whose job manager is at -m.\n" + securityHelp,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := f.Config()
			if err != nil {
				return err
			}
			c, _, closeFn, err := dialJobManager(cmd.Context(), cfg, jmAddr)
			if err != nil {
				return err
			}
			defer closeFn()
			if err := c.Cancel(cmd.Context(), args[0]); err != nil {
				if st, ok := status.FromError(err); ok && st.Code() == codes.FailedPrecondition {
					return fmt.Errorf("canceling %s: %s", args[0], st.Message())
				}
				return authHint(fmt.Errorf("canceling %s: %w", args[0], err))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: job %s canceled\n", cmd.Root().Name(), args[0])
			return nil
		},
	}
	cmd.Flags().StringVarP(&jmAddr, "jobmanager", "m", DefaultJobManager, "the job manager's address")
	f.Add(cmd)
	return cmd
}

// SavepointCommand returns the savepoint command.
func SavepointCommand() *cobra.Command {
	var jmAddr, format string
	var f ConfigFlags
	cmd := &cobra.Command{
		Use:   "savepoint JOB_ID [DIR]",
		Short: "Take a savepoint of a job on a cluster",
		Long: "savepoint takes a savepoint of a running job of the cluster whose job manager is at -m, into a new\n" +
			"savepoint-* directory under DIR (a path or URL; default: the job's execution.checkpointing.savepoint-dir),\n" +
			"and prints its path once it is complete. The job keeps running; a savepoint is always aligned, weir never\n" +
			"deletes it, and a job resumes from it with -D execution.state-recovery.path=PATH.\n" + securityHelp,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := ""
			if len(args) == 2 {
				dir = args[1]
			}
			sf, err := checkpoint.ParseSavepointFormat(format)
			if err != nil {
				return fmt.Errorf("--type: %w", err)
			}
			return withClient(f, jmAddr, func(c *cluster.Client) error {
				path, err := c.Savepoint(cmd.Context(), args[0], dir, false, sf)
				if err != nil {
					return clientError("savepoint of "+args[0], err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: savepoint of job %s completed: %s\n", cmd.Root().Name(), args[0], path)
				return nil
			})
		},
	}
	cmd.Flags().StringVarP(&jmAddr, "jobmanager", "m", DefaultJobManager, "the job manager's address")
	cmd.Flags().StringVarP(&format, "type", "t", "", typeHelp)
	f.Add(cmd)
	return cmd
}

// typeHelp describes the --type flag of savepoint and stop.
const typeHelp = "the savepoint's format: canonical (restores into either state backend) or native (the backend's own: " +
	"with pebble/rocksdb, the store's files, quicker to take and restore); default: the job's execution.savepoint.format (canonical unless set)"

// StopCommand returns the stop command.
func StopCommand() *cobra.Command {
	var jmAddr, dir, format string
	var drain bool
	var f ConfigFlags
	cmd := &cobra.Command{
		Use:   "stop [--savepoint-path DIR] JOB_ID",
		Short: "Stop a job on a cluster with a savepoint",
		Long: "stop stops a running job of the cluster whose job manager is at -m with a savepoint, as Flink's stop does:\n" +
			"a savepoint into a new savepoint-* directory under --savepoint-path (default: the job's\n" +
			"execution.checkpointing.savepoint-dir) with no checkpoint after it (with --drain, event time ends first:\n" +
			"every timer and window fires), the sinks commit what it holds, and the\n" +
			"job finishes. It prints the savepoint's path; resume with -D execution.state-recovery.path=PATH.\n" + securityHelp,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sf, err := checkpoint.ParseSavepointFormat(format)
			if err != nil {
				return fmt.Errorf("--type: %w", err)
			}
			return withClient(f, jmAddr, func(c *cluster.Client) error {
				path, err := c.StopWithSavepoint(cmd.Context(), args[0], dir, drain, sf)
				if err != nil {
					return clientError("stopping "+args[0], err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: job %s stopped with savepoint %s\n", cmd.Root().Name(), args[0], path)
				return nil
			})
		},
	}
	cmd.Flags().StringVarP(&jmAddr, "jobmanager", "m", DefaultJobManager, "the job manager's address")
	cmd.Flags().StringVarP(&dir, "savepoint-path", "p", "", "the directory the savepoint goes under (default: execution.checkpointing.savepoint-dir)")
	cmd.Flags().BoolVarP(&drain, "drain", "d", false, "end the job's event time before the savepoint, so that every timer and window fires (the savepoint is then for the record, not for resuming)")
	cmd.Flags().StringVarP(&format, "type", "t", "", typeHelp)
	f.Add(cmd)
	return cmd
}

// withClient connects to the job manager at jmAddr, configured by f, for
// do.
func withClient(f ConfigFlags, jmAddr string, do func(c *cluster.Client) error) error {
	cfg, err := f.Config()
	if err != nil {
		return err
	}
	c, _, closeFn, err := dialJobManager(context.Background(), cfg, jmAddr)
	if err != nil {
		return err
	}
	defer closeFn()
	return do(c)
}

// dialJobManager connects to the job manager at jmAddr, or, with high
// availability, to the elected leader, as cfg says; it returns the
// address it dialed.
func dialJobManager(ctx context.Context, cfg *config.Configuration, jmAddr string) (*cluster.Client, string, func(), error) {
	resolve, closeHA, err := resolver(ctx, cfg, jmAddr)
	if err != nil {
		return nil, "", nil, err
	}
	defer closeHA()
	addr, err := resolve(ctx)
	if err != nil {
		return nil, "", nil, err
	}
	c, err := cluster.Dial(addr, DialOptions(cfg)...)
	if err != nil {
		return nil, "", nil, err
	}
	return c, addr, func() { c.Close() }, nil
}

// clientError is the error of a call about a job, what: the job manager's
// own words when it refused (no such job, it has ended, the operation
// failed), a hint at the credentials otherwise.
func clientError(what string, err error) error {
	if st, ok := status.FromError(err); ok && (st.Code() == codes.FailedPrecondition || st.Code() == codes.NotFound) {
		return fmt.Errorf("%s: %s", what, st.Message())
	}
	return authHint(fmt.Errorf("%s: %w", what, err))
}

// Submit sends a job to the job manager at jmAddr, or, with high
// availability, to the leader, connecting as cfg says (DialOptions), and,
// unless detached, follows it until it ends: a FAILED job is an error.
// While it follows, a new leader is followed too. Ctrl-C (ctx) while
// following detaches; the job keeps running. finished, if set, runs when
// the job has finished.
func Submit(ctx context.Context, stdout io.Writer, prog, jmAddr string, sub cluster.Submission, detached bool, finished func(), cfg *config.Configuration) error {
	resolve, closeHA, err := resolver(ctx, cfg, jmAddr)
	if err != nil {
		return err
	}
	defer closeHA()
	if jmAddr, err = resolve(ctx); err != nil {
		return err
	}
	c, err := cluster.Dial(jmAddr, DialOptions(cfg)...)
	if err != nil {
		return err
	}
	defer func() { c.Close() }()
	id, err := c.Submit(ctx, sub)
	if err != nil {
		return authHint(fmt.Errorf("submitting to %s: %w", jmAddr, err))
	}
	fmt.Fprintf(stdout, "%s: submitted %s as job %s to %s\n", prog, sub.Job, id, jmAddr)
	if detached {
		return nil
	}
	hc, _ := cfg.HighAvailability()
	highlyAvailable := hc.Enabled()
	var failing time.Time
	last := ""
	for {
		ov, err := c.List(ctx)
		if ctx.Err() != nil {
			fmt.Fprintf(stdout, "%s: detached; job %s keeps running (%s cancel -m %s %s)\n", prog, id, prog, jmAddr, id)
			return nil
		}
		if err != nil {
			// With high availability, a new leader takes over once the
			// old one's lease expires: follow it there.
			if !highlyAvailable {
				return fmt.Errorf("following job %s: %w", id, err)
			}
			if failing.IsZero() {
				failing = time.Now()
			}
			if time.Since(failing) > 2*leaderWait {
				return fmt.Errorf("following job %s: %w", id, err)
			}
			if addr, rerr := resolve(ctx); rerr == nil && addr != jmAddr {
				if nc, derr := cluster.Dial(addr, DialOptions(cfg)...); derr == nil {
					c.Close()
					c, jmAddr = nc, addr
					fmt.Fprintf(stdout, "%s: following job %s on the new leader %s\n", prog, id, addr)
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		failing = time.Time{}
		for _, js := range ov.Jobs {
			if js.JobID != id {
				continue
			}
			line := fmt.Sprintf("job %s %s: restarts %d, last checkpoint %d", id, js.State, js.Restarts, js.LastCheckpoint)
			if js.LastFailure != "" && js.State != "RUNNING" {
				line += ", last failure: " + js.LastFailure
			}
			if line != last {
				fmt.Fprintf(stdout, "%s: %s\n", prog, line)
				last = line
			}
			switch js.State {
			case "FINISHED":
				if finished != nil {
					finished()
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

// LogRestored logs the source positions of the checkpoint a job restored
// from (e, an EventRestored): where every split resumes reading. It reads
// the checkpoint's metadata, so call it off the job master's goroutine.
func LogRestored(ctx context.Context, logger *slog.Logger, cfg *config.Configuration, jobID string, e stream.JobEvent) {
	log := logger.With("job_id", jobID, "checkpoint", e.Checkpoint)
	cp, err := cfg.Checkpointing()
	if err != nil || cp.Dir == "" {
		return
	}
	st, err := storage.Open(ctx, cp.Dir, jobID, storage.URLMux(objstore.URLMux(cfg)))
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
		offs, err := SourceOffsets(ctx, snap, op)
		if err != nil {
			log.Warn("reading the restored checkpoint's source positions", "operator", op.UID, "err", err)
			continue
		}
		for _, o := range offs {
			parts = append(parts, fmt.Sprintf("%s=%d", o.Split, o.Offset))
		}
	}
	log.Info("restored from checkpoint", "path", e.Message, "source_positions", strings.Join(parts, " "))
}

// EnvJobs implements cluster.Jobs for jobs built as stream environments:
// Env builds a submitted job with the options given (and the logger it
// is handed). On the job manager the job runs on the cluster's executor
// and every restore's source positions are logged; on a task manager Env
// builds the graph whose subtasks the worker runs.
type EnvJobs struct {
	Env    func(sub cluster.Submission, logger *slog.Logger, opts ...stream.Option) (*stream.Environment, error)
	Logger *slog.Logger
}

// Start implements cluster.Jobs.
func (j EnvJobs) Start(ctx context.Context, sub cluster.Submission, newExec func(*runtime.JobGraph, runtime.Listener) (runtime.Executor, error)) (cluster.Job, error) {
	var cfg *config.Configuration
	env, err := j.Env(sub, j.Logger, stream.WithEvents(func(e stream.JobEvent) {
		if e.Kind == stream.EventRestored && e.Checkpoint > 0 {
			go LogRestored(ctx, j.Logger, cfg, sub.JobID, e)
		}
	}))
	if err != nil {
		return nil, err
	}
	cfg = env.Config()
	job, err := launch.Describe(env, sub.Job)
	if err != nil {
		return nil, err
	}
	if sub.RecoverFrom != "" {
		// A new leader resumes the job from its latest completed
		// checkpoint, whatever it was first submitted with. That
		// checkpoint is the job's own (CLAIM): it is retained, counted
		// among num-retained and deleted once subsumed, as it would have
		// been had the leader lived, and the job's incremental
		// checkpoints build on it.
		if err := job.Config.Set(config.KeyStateRecoveryPath, sub.RecoverFrom); err != nil {
			return nil, err
		}
		if err := job.Config.Set(config.KeyStateRecoveryClaimMode, string(config.Claim)); err != nil {
			return nil, err
		}
	}
	job.FirstCheckpointID = sub.FirstCheckpointID
	job.NewExecutor = newExec
	h, err := launch.Start(ctx, job)
	if err != nil {
		return nil, err
	}
	return StartedJob{Handle: h, Config: cfg}, nil
}

// Worker implements cluster.Jobs.
func (j EnvJobs) Worker(ctx context.Context, sub cluster.Submission, peers runtime.Peers, l runtime.Listener) (cluster.Worker, error) {
	env, err := j.Env(sub, j.Logger)
	if err != nil {
		return nil, err
	}
	job, err := launch.Describe(env, sub.Job)
	if err != nil {
		return nil, err
	}
	return launch.NewWorker(ctx, job, peers, l)
}
