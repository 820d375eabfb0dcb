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
	"strconv"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connector/file"
	"github.com/weirstream/weir/connector/kafka"
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
}

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
	f.StringVar(&o.checkpointDir, "checkpoint-dir", "./weir-data/checkpoints", "checkpoint directory or URL (execution.checkpointing.dir)")
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

// jobConfig merges the defaults of weir run, the file and -D.
func (o runOptions) jobConfig() (*config.Configuration, error) {
	f := clustercli.ConfigFlags{File: o.configFile, Dynamic: o.dynamic}
	cfg, err := f.Config(
		"parallelism.default=4",
		"execution.checkpointing.interval=10 s",
		"execution.checkpointing.num-retained=3",
		"execution.checkpointing.externalized-checkpoint-retention=RETAIN_ON_CANCELLATION",
		"execution.checkpointing.dir="+o.checkpointDir,
	)
	if err != nil {
		return nil, err
	}
	if o.from != "" {
		if err := cfg.Set(config.KeyStateRecoveryPath, o.from); err != nil {
			return nil, err
		}
	}
	return cfg, cfg.Validate()
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
	src, kafkaSinks, err := o.gatewayMeterIO()
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	var mu sync.Mutex
	var events []stream.JobEvent
	env, err := stream.NewEnvironment(stream.WithConfig(cfg), stream.WithLogger(logger),
		stream.WithFaults(faults.fn), stream.WithEvents(func(e stream.JobEvent) {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
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

	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	client, err := env.ExecuteAsync(runCtx, "gatewaymeter")
	if err != nil {
		return err
	}
	faults.start(client)
	addr, stopREST, err := clustercli.StartREST(ctx, client, cfg, cfg, logger)
	if err != nil {
		stop(err)
		client.Wait()
		return err
	}
	defer stopREST()
	fmt.Fprintf(stdout, "weir: running gatewaymeter as job %s; outputs in %s, checkpoints in %s; REST API at http://%s\n", env.JobID(), out, o.checkpointDir, addr)
	st := newStatusLine(stdout, client)
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
	last := client.Metrics().LastCheckpoint
	switch {
	case err == nil && o.kafka != "":
		fmt.Fprintf(stdout, "weir: finished; verify with: weir verify gatewaymeter --kafka %s --topic-prefix '%s'\n", o.kafka, o.topicPrefix)
		return nil
	case err == nil:
		fmt.Fprintf(stdout, "weir: finished; verify with: weir verify gatewaymeter --input %s --output %s\n", o.input, out)
		return nil
	case ctx.Err() != nil:
		if last.ID > 0 {
			fmt.Fprintf(stdout, "weir: stopped; checkpoint %d is retained; resume with: weir run gatewaymeter --from %s\n",
				last.ID, filepath.Join(o.checkpointDir, env.JobID()))
		} else {
			fmt.Fprintln(stdout, "weir: stopped before the first checkpoint completed")
		}
		return nil
	}
	return err
}

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
		g, err := kafka.ParseDeliveryGuarantee(o.delivery)
		if err != nil {
			return nil, nil, fmt.Errorf("--delivery: %w", err)
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

// statusLine shows throughput, event time and checkpoints.
type statusLine struct {
	w        io.Writer
	c        *stream.JobClient
	tty      bool
	last     stream.JobMetrics
	lastAt   time.Time
	printed  bool
	lastShow time.Time
}

func newStatusLine(w io.Writer, c *stream.JobClient) *statusLine {
	s := &statusLine{w: w, c: c, lastAt: time.Now()}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			s.tty = true
		}
	}
	return s
}

func (s *statusLine) refresh() {
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
	line := fmt.Sprintf("in %.0f/s  out %.0f/s  watermark %s  checkpoint %s  restarts %d", in, out, wm, ck, m.Restarts)
	if s.tty {
		fmt.Fprintf(s.w, "\r\033[K%s", line)
		s.printed = true
		return
	}
	if now.Sub(s.lastShow) >= 10*time.Second {
		fmt.Fprintln(s.w, line)
		s.lastShow = now
	}
}

func (s *statusLine) end() {
	if s.printed {
		fmt.Fprintln(s.w)
	}
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

func (p *faultPlan) start(*stream.JobClient) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.since, p.started = time.Now(), true
}

// event restarts the duration clock when the job is restored.
func (p *faultPlan) event(e stream.JobEvent) {
	if e.Kind != runtime.EventRestored {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.since = time.Now()
}

func (p *faultPlan) fn(task stream.TaskInfo, attempt int, records int64) error {
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
