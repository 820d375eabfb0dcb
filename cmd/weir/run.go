package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connector/file"
	gm "github.com/weirstream/weir/examples/gatewaymeter"
	"github.com/weirstream/weir/internal/clustercli"
	"github.com/weirstream/weir/internal/runtime"
	"github.com/weirstream/weir/stream"
)

type runOptions struct {
	input, output, checkpointDir, from, configFile string
	dynamic                                        []string
	failAfter                                      []string
	seed                                           uint64
	kafka, topicPrefix, delivery                   string
	bounded                                        bool
	rate                                           float64
	status                                         time.Duration
	jobManager                                     string
	inputRate                                      float64
	detached                                       bool
	// checkpointDirSet says --checkpoint-dir was given.
	checkpointDirSet bool
	// resume is the command line that resumes this run from its
	// checkpoints, less its --from.
	resume []string
}

// defaultCheckpointDir is where weir run checkpoints unless told.
const defaultCheckpointDir = "./weir-data/checkpoints"

func newRunCmd() *cobra.Command {
	o := runOptions{}
	cmd := &cobra.Command{
		Use:   "run JOB",
		Short: "Run a job (gatewaymeter) in this process, or submit it to a cluster with -m",
		Long: `run runs a job in this process: job manager and task slots together.

With no other flag, "weir run gatewaymeter" reads a live generated trace at
the lab's rate (8 partitions × ~24 events/s, unbounded), checkpoints every 10 s
to ./weir-data/checkpoints, writes its outputs as JSON lines under
./weir-data/out/<job-id>/, and shows a status line. Ctrl-C stops it and keeps
the latest checkpoint; --from resumes from it.

With --input DIR it reads a trace written by "weir gen gatewaymeter" and ends
when the trace does; "weir verify gatewaymeter" then checks the outputs.

Options use Flink's names: -D execution.checkpointing.interval=1s,
-D parallelism.default=2, -D restart-strategy.type=fixed-delay, ...
Tokens are best given in the environment, off the command line:
WEIR_REST_AUTH_TOKEN sets rest.auth-token, WEIR_CLUSTER_AUTH_TOKEN sets
cluster.auth-token, which -m needs for a cluster that requires it.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] != "gatewaymeter" {
				return fmt.Errorf("unknown job %q (known: gatewaymeter)", args[0])
			}
			o.checkpointDirSet = cmd.Flags().Changed("checkpoint-dir")
			o.resume = resumeCommand(cmd, args)
			if o.jobManager != "" {
				if len(o.failAfter) > 0 {
					return fmt.Errorf("--fail-after works in this process only; on a cluster, kill a task manager")
				}
				return submit(cmd.Context(), cmd.OutOrStdout(), o, args[0])
			}
			return runGatewayMeter(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.input, "input", "", "read this generated trace (bounded) instead of the live generator")
	f.StringVar(&o.output, "output", "", "output directory (default ./weir-data/out/<job-id>)")
	f.StringVar(&o.checkpointDir, "checkpoint-dir", defaultCheckpointDir, "checkpoint directory or URL (execution.checkpointing.dir; set one or the other)")
	f.StringVar(&o.from, "from", "", "resume from a checkpoint, a savepoint, or a job's checkpoint directory")
	f.StringVar(&o.configFile, "config", "", "YAML file of options (Flink's names)")
	f.StringArrayVarP(&o.dynamic, "define", "D", nil, "set an option: -D key=value (repeatable)")
	f.StringArrayVar(&o.failAfter, "fail-after", nil, "fail a subtask after a duration (30s) or a number of records (5000), optionally a named one: 30s@assemble[2] (repeatable)")
	f.Uint64Var(&o.seed, "seed", 1, "seed of the live generator")
	f.Float64Var(&o.rate, "rate", 24, "events per second per partition of the live generator")
	f.DurationVar(&o.status, "status-interval", time.Second, "how often the status line refreshes (0: never)")
	f.StringVar(&o.kafka, "kafka", "", "read gateway-events from and write the outputs to Kafka (comma-separated brokers)")
	f.StringVar(&o.topicPrefix, "topic-prefix", "", "prefix of the Kafka topics")
	f.StringVar(&o.delivery, "delivery", "exactly-once", "Kafka sink delivery guarantee: exactly-once, at-least-once or none")
	f.BoolVar(&o.bounded, "bounded", false, "with --kafka: stop at the offsets that were latest at start")
	f.Float64Var(&o.inputRate, "input-rate", 0, "with --input: read each partition at this many lines per second (0: as fast as the job goes)")
	f.StringVarP(&o.jobManager, "jobmanager", "m", "", "submit the job to the cluster whose job manager is at this address instead of running it here")
	f.BoolVarP(&o.detached, "detached", "d", false, "with -m: return once the job is submitted instead of following it")
	return cmd
}

// jobConfig merges the defaults of weir run, the file and -D, and settles
// the checkpoint directory: --checkpoint-dir, or execution.checkpointing.dir
// (or its deprecated state.checkpoints.dir) from the file or -D, never two
// different ones; o.checkpointDir is then the directory the job uses.
func (o *runOptions) jobConfig() (*config.Configuration, error) {
	f := clustercli.ConfigFlags{File: o.configFile, Dynamic: o.dynamic}
	cfg, err := f.Config(
		"parallelism.default=4",
		"execution.checkpointing.interval=10 s",
		"execution.checkpointing.num-retained=3",
		"execution.checkpointing.externalized-checkpoint-retention=RETAIN_ON_CANCELLATION",
	)
	if err != nil {
		return nil, err
	}
	dir, set := cfg.Get(config.KeyCheckpointingDir)
	switch {
	case set && o.checkpointDirSet && !samePath(dir, o.checkpointDir):
		return nil, fmt.Errorf("--checkpoint-dir %s and %s=%s (from --config or -D) disagree: set the checkpoint directory once", o.checkpointDir, config.KeyCheckpointingDir, dir)
	case set:
		o.checkpointDir = dir
	default:
		if err := cfg.Set(config.KeyCheckpointingDir, o.checkpointDir); err != nil {
			return nil, fmt.Errorf("--checkpoint-dir: %w", err)
		}
	}
	if o.from != "" {
		if err := cfg.Set(config.KeyStateRecoveryPath, o.from); err != nil {
			return nil, err
		}
	}
	return cfg, cfg.Validate()
}

// samePath reports whether two checkpoint locations name the same place.
func samePath(a, b string) bool {
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

// resumeOutput settles where a resumed run writes: where the checkpoint's
// job wrote, which the checkpoint records. A different --output is an
// error (it would split the output and lose the checkpoint's pending
// transactions). It returns "" when the run does not resume or writes to
// Kafka.
func resumeOutput(ctx context.Context, cfg *config.Configuration, o runOptions) (string, error) {
	if o.from == "" || o.kafka != "" {
		return "", nil
	}
	env, err := stream.NewEnvironment(stream.WithConfig(cfg), stream.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return "", err
	}
	uids := make([]string, 0, len(gm.OutputNames()))
	for _, out := range gm.OutputNames() {
		uids = append(uids, gm.SinkUID(out))
	}
	info, err := env.InspectRestore(ctx, uids...)
	if err != nil {
		return "", fmt.Errorf("--from %s: %w", o.from, err)
	}
	dir, found, err := gm.OutputDir(info.SinkLocations)
	if err != nil {
		return "", fmt.Errorf("--from %s: checkpoint %d: %w", o.from, info.CheckpointID, err)
	}
	switch {
	case !found && o.output == "":
		return "", fmt.Errorf("--from %s: checkpoint %d does not record where its job wrote; give its output directory with --output", o.from, info.CheckpointID)
	case !found:
		return o.output, nil
	case o.output != "" && !samePath(o.output, dir):
		return "", fmt.Errorf("--output %s: checkpoint %d of job %s wrote its output to %s; a resumed job continues that output: resume without --output (or with --output %s)", o.output, info.CheckpointID, info.JobID, dir, dir)
	}
	return dir, nil
}

func runGatewayMeter(ctx context.Context, stdout, stderr io.Writer, o runOptions) error {
	faults, err := parseFaults(o.failAfter)
	if err != nil {
		return err
	}
	cfg, err := o.jobConfig()
	if err != nil {
		return err
	}
	resumed, err := resumeOutput(ctx, cfg, o)
	if err != nil {
		return err
	}
	if resumed != "" {
		o.output = resumed
	}
	src, kafkaSinks, err := o.gatewayMeterIO()
	if err != nil {
		return err
	}
	st := newStatusLine(stdout)
	logger := slog.New(slog.NewTextHandler(st.logWriter(stderr), &slog.HandlerOptions{Level: slog.LevelInfo}))
	clustercli.WarnDeprecated(logger, cfg)
	var restored atomic.Bool // from a checkpoint, at least once
	env, err := stream.NewEnvironment(stream.WithConfig(cfg), stream.WithLogger(logger),
		stream.WithFaults(faults.fn), stream.WithEvents(func(e stream.JobEvent) {
			if e.Kind == stream.EventRestored && e.Checkpoint > 0 {
				restored.Store(true)
			}
			faults.event(e)
		}))
	if err != nil {
		return err
	}
	out := o.output
	var sinks gm.Sinks
	if kafkaSinks != nil {
		sinks, out = *kafkaSinks, "Kafka topics "+o.topicPrefix+"tenant-cost, ... on "+o.kafka
	} else {
		if out == "" {
			out = filepath.Join("weir-data", "out", env.JobID())
		}
		if err := checkOutputDir(out, o.from != ""); err != nil {
			return err
		}
		if sinks, err = gm.FileSinks(out); err != nil {
			return fmt.Errorf("--output: %w", err)
		}
	}
	gm.Build(env, src, sinks)
	plan, err := env.Plan("gatewaymeter")
	if err != nil {
		return err
	}
	if err := faults.check(plan); err != nil {
		return err
	}

	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	client, err := env.ExecuteAsync(runCtx, "gatewaymeter")
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
	fmt.Fprintf(stdout, "weir: running gatewaymeter as job %s; outputs in %s, checkpoints in %s; REST API at http://%s\n", env.JobID(), out, filepath.Join(o.checkpointDir, env.JobID()), addr)
	st.follow(client)
	var tick <-chan time.Time
	if o.status > 0 {
		t := time.NewTicker(o.status)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-tick:
			st.refresh()
			continue
		case <-client.Done():
		}
		break
	}
	st.refresh()
	st.end()
	err = client.Wait()
	m := client.Metrics()
	last := m.LastCheckpoint
	unstruck := faults.unstruck()
	switch {
	case err == nil && o.kafka != "":
		fmt.Fprintf(stdout, "weir: finished; verify with: %s verify gatewaymeter --kafka %s --topic-prefix '%s'\n", program(), o.kafka, o.topicPrefix)
	case err == nil:
		fmt.Fprintf(stdout, "weir: finished; verify with: %s verify gatewaymeter --input %s --output %s\n", program(), o.input, out)
	case ctx.Err() != nil || errors.Is(context.Cause(runCtx), errRESTCancel):
		// Stopped: by a signal, or canceled through the REST API.
		switch {
		case last.ID > 0:
			fmt.Fprintf(stdout, "weir: stopped; checkpoint %d is retained; resume with: %s\n",
				last.ID, shellJoin(append(o.resume, "--from", filepath.Join(o.checkpointDir, env.JobID()))))
		case restored.Load():
			fmt.Fprintf(stdout, "weir: stopped before a new checkpoint completed; resume again with the same --from %s\n", o.from)
		default:
			fmt.Fprintln(stdout, "weir: stopped before the first checkpoint completed")
		}
		if m.EndedFrom == stream.StatusRestarting && m.LastFailure != nil {
			fmt.Fprintf(stdout, "weir: the job was restarting after: %v\n", m.LastFailure.Err)
		}
		return nil
	default:
		return err
	}
	if len(unstruck) > 0 {
		return fmt.Errorf("the run ended before %d of its %d --fail-after failures struck (%s): it did not test what it was asked to", len(unstruck), len(faults.faults), strings.Join(unstruck, ", "))
	}
	return nil
}

// errRESTCancel is why a run canceled through its REST API stops.
var errRESTCancel = errors.New("canceled through the REST API")

// gatewayMeterIO makes the job's source from --kafka, --input or the live
// generator, and its sinks if they are Kafka topics (nil: files, which
// need the job's id).
func (o runOptions) gatewayMeterIO() (connector.Source[file.Line], *gm.Sinks, error) {
	switch {
	case o.kafka != "":
		if o.input != "" {
			return nil, nil, fmt.Errorf("--input and --kafka are exclusive: the job reads one or the other")
		}
		brokers := brokerList(o.kafka)
		g, err := connector.ParseDeliveryGuarantee(o.delivery)
		if err != nil {
			return nil, nil, fmt.Errorf("--delivery: kafka: %w", err)
		}
		topics := gm.DefaultKafkaTopics(o.topicPrefix)
		src, err := gm.KafkaSource(brokers, topics.Events, "weir-"+o.topicPrefix+"gatewaymeter", o.bounded)
		if err != nil {
			return nil, nil, fmt.Errorf("--kafka: %w", err)
		}
		s, err := gm.KafkaSinks(brokers, topics, g, "weir-"+o.topicPrefix+"gatewaymeter")
		if err != nil {
			return nil, nil, fmt.Errorf("--kafka: %w", err)
		}
		return src, &s, nil
	case o.input != "":
		if _, err := gm.TraceFiles(o.input); err != nil {
			return nil, nil, fmt.Errorf("--input: %w", err)
		}
		src, err := file.Lines(filepath.Join(o.input, "part-*.jsonl"), file.LinesPerSecond(o.inputRate))
		if err != nil {
			return nil, nil, fmt.Errorf("--input: %w", err)
		}
		return src, nil, nil
	}
	gc := gm.DefaultGenConfig()
	gc.Seed = o.seed
	src, err := gm.NewLiveSource(gc, o.rate)
	return src, nil, err
}

// checkOutputDir refuses to mix a new run's output with an old one's.
func checkOutputDir(dir string, resuming bool) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("--output %s: %w", dir, err)
	}
	if len(entries) > 0 && !resuming {
		return fmt.Errorf("--output %s is not empty: it holds another run's output; choose another directory (or resume that run with --from)", dir)
	}
	return nil
}

// statusLine shows the job's state, throughput, event time and
// checkpoints. On a terminal it redraws one line in place; log lines
// written through logWriter clear it first and redraw it after, so the
// two never run into each other.
type statusLine struct {
	w   io.Writer
	tty bool

	mu       sync.Mutex
	c        *stream.JobClient
	last     stream.JobMetrics
	lastAt   time.Time
	line     string // what the terminal shows, "" if nothing
	lastShow time.Time
}

func newStatusLine(w io.Writer) *statusLine {
	s := &statusLine{w: w, lastAt: time.Now()}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			s.tty = true
		}
	}
	return s
}

// follow starts showing c.
func (s *statusLine) follow(c *stream.JobClient) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.c, s.lastAt = c, time.Now()
}

func (s *statusLine) refresh() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c == nil {
		return
	}
	m := s.c.Metrics()
	now := time.Now()
	dt := now.Sub(s.lastAt).Seconds()
	in := float64(max(m.RecordsIn-s.last.RecordsIn, 0)) / dt
	out := float64(max(m.RecordsOut-s.last.RecordsOut, 0)) / dt
	s.last, s.lastAt = m, now
	wm := "-"
	if m.Watermark != runtime.MinWatermark && m.Watermark != runtime.MaxWatermark {
		wm = time.UnixMilli(m.Watermark).UTC().Format("2006-01-02T15:04:05Z")
	}
	ck := "none yet"
	if c := m.LastCheckpoint; c.ID > 0 {
		ck = fmt.Sprintf("%d (%v, %s) %v ago", c.ID, c.Duration.Round(time.Millisecond), bytesString(c.Size), now.Sub(c.At).Round(time.Second))
	}
	line := fmt.Sprintf("%s  in %.0f/s  out %.0f/s  watermark %s  checkpoint %s  restarts %d", m.Status, in, out, wm, ck, m.Restarts)
	if f := m.LastFailure; f != nil && (m.Status == stream.StatusRestarting || m.Status == stream.StatusFailing || ck == "none yet") {
		line += "  last failure: " + oneLine(f.Err.Error(), 160)
	}
	if s.tty {
		fmt.Fprintf(s.w, "\r\033[K%s", line)
		s.line = line
		return
	}
	if now.Sub(s.lastShow) >= 10*time.Second {
		fmt.Fprintln(s.w, line)
		s.lastShow = now
	}
}

func (s *statusLine) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.line != "" {
		fmt.Fprintln(s.w)
		s.line = ""
	}
}

// logWriter returns a writer for log lines to w that keeps them off the
// status line.
func (s *statusLine) logWriter(w io.Writer) io.Writer {
	if !s.tty {
		return w
	}
	return logWriter{s: s, w: w}
}

type logWriter struct {
	s *statusLine
	w io.Writer
}

func (l logWriter) Write(p []byte) (int, error) {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if l.s.line != "" {
		fmt.Fprint(l.s.w, "\r\033[K")
	}
	n, err := l.w.Write(p)
	if l.s.line != "" {
		fmt.Fprint(l.s.w, l.s.line)
	}
	return n, err
}

// oneLine shortens an error message for the status line.
func oneLine(msg string, max int) string {
	msg = strings.Join(strings.Fields(msg), " ")
	if len(msg) > max {
		msg = msg[:max] + "…"
	}
	return msg
}

// program is how the user ran this binary, for the commands weir prints:
// "go run ./cmd/weir" when go run built it, else the path it was run by.
func program() string {
	exe := os.Args[0]
	if strings.Contains(filepath.ToSlash(exe), "/go-build") {
		return "go run ./cmd/weir"
	}
	return exe
}

// resumeCommand is the command line that resumes the run cmd is about to
// make, less its --from: the program, the job, and every flag the user
// set except those that do not carry over (--from itself; --output, which
// the checkpoint records; --fail-after, which the lab applies to one run).
func resumeCommand(cmd *cobra.Command, args []string) []string {
	out := append(strings.Fields(program()), "run")
	out = append(out, args...)
	cmd.Flags().Visit(func(f *pflag.Flag) {
		switch f.Name {
		case "from", "output", "fail-after":
			return
		}
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			for _, v := range sv.GetSlice() {
				if f.Name == "define" && strings.HasPrefix(strings.TrimSpace(v), config.KeyStateRecoveryPath+"=") {
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

func bytesString(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// faultPlan is the --fail-after schedule: failure i strikes once failure
// i-1 has, after a duration since the (re)start or after a subtask has
// processed a number of records; on the named subtask or, if none is
// named, on whichever subtask gets there first.
type faultPlan struct {
	mu      sync.Mutex
	faults  []faultSpec
	struck  int
	since   time.Time
	started bool
	rnd     *rand.Rand
}

type faultSpec struct {
	after   time.Duration
	records int64
	vertex  string
	subtask int // -1: any
	text    string
}

var faultRE = regexp.MustCompile(`^([0-9]+|[0-9.]+[a-zµ]+)(?:@([A-Za-z0-9_.-]+)(?:\[([0-9]+)\])?)?$`)

func parseFaults(specs []string) (*faultPlan, error) {
	p := &faultPlan{rnd: rand.New(rand.NewPCG(rand.Uint64(), 0))}
	for _, s := range specs {
		m := faultRE.FindStringSubmatch(s)
		if m == nil {
			return nil, fmt.Errorf("--fail-after %q: want a duration (30s) or a record count (5000), optionally @vertex or @vertex[subtask]", s)
		}
		f := faultSpec{vertex: m[2], subtask: -1, text: s}
		if n, err := strconv.ParseInt(m[1], 10, 64); err == nil {
			f.records = n
		} else if d, err := time.ParseDuration(m[1]); err == nil {
			f.after = d
		} else {
			return nil, fmt.Errorf("--fail-after %q: %q is neither a record count nor a duration", s, m[1])
		}
		if m[3] != "" {
			f.subtask, _ = strconv.Atoi(m[3])
		}
		p.faults = append(p.faults, f)
	}
	return p, nil
}

// check makes sure every failure names a vertex of plan, and a subtask it
// has.
func (p *faultPlan) check(plan []stream.VertexInfo) error {
	var names []string
	for _, v := range plan {
		names = append(names, fmt.Sprintf("%s[0..%d]", v.UID, v.Parallelism-1))
	}
	for _, f := range p.faults {
		if f.vertex == "" {
			continue
		}
		i := slices.IndexFunc(plan, func(v stream.VertexInfo) bool { return v.UID == f.vertex })
		switch {
		case i < 0:
			return fmt.Errorf("--fail-after %s: the job has no vertex %q; its vertices (chains of operators, named by their first operator's uid) are %s", f.text, f.vertex, strings.Join(names, ", "))
		case f.subtask >= plan[i].Parallelism:
			return fmt.Errorf("--fail-after %s: vertex %s has subtasks 0 to %d (parallelism %d)", f.text, f.vertex, plan[i].Parallelism-1, plan[i].Parallelism)
		}
	}
	return nil
}

// unstruck returns the failures that have not struck.
func (p *faultPlan) unstruck() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, f := range p.faults[p.struck:] {
		out = append(out, f.text)
	}
	return out
}

func (p *faultPlan) start(*stream.JobClient) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.since, p.started = time.Now(), true
}

// event restarts the duration clock when the job is restored.
func (p *faultPlan) event(e stream.JobEvent) {
	if e.Kind != stream.EventRestored {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.since = time.Now()
}

// fn is the plan's stream.FaultFunc: failures strike between batches.
func (p *faultPlan) fn(_ context.Context, site stream.FaultSite) error {
	if site.Point != stream.FaultBatch {
		return nil
	}
	task, attempt, records := site.Task, site.Attempt, site.Records
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.started || p.struck >= len(p.faults) || attempt != p.struck {
		return nil
	}
	f := p.faults[p.struck]
	if f.vertex != "" && (task.Vertex != f.vertex || f.subtask >= 0 && task.Subtask != f.subtask) {
		return nil
	}
	if f.after > 0 && time.Since(p.since) < f.after || f.records > 0 && records < f.records {
		return nil
	}
	p.struck++
	return fmt.Errorf("injected failure %d (--fail-after %s) at %s[%d] after %d records", p.struck, f.text, task.Vertex, task.Subtask, records)
}
