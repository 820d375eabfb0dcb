package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connector/file"
	gm "github.com/weirstream/weir/examples/gatewaymeter"
	"github.com/weirstream/weir/internal/clustercli"
	"github.com/weirstream/weir/stream"
)

// defaultCheckpointDir is where "weir run gatewaymeter" checkpoints
// unless told.
const defaultCheckpointDir = "./weir-data/checkpoints"

const gatewayMeterLong = `run gatewaymeter runs GatewayMeter: per-tenant cost per minute, per-model
latency percentiles and cost-spike alerts over an API gateway's events.

With no other flag it reads a live generated trace at the lab's rate
(8 partitions × ~24 events/s, unbounded), checkpoints every 10 s to
./weir-data/checkpoints, writes its outputs as JSON lines under
./weir-data/out/<job-id>/, and shows a status line. Ctrl-C stops it and keeps
the latest checkpoint; the line it prints resumes from it (--from), writing
on into the same output, which the checkpoint records.

With --input DIR it reads a trace written by "weir gen gatewaymeter" and ends
when the trace does; "weir verify gatewaymeter" then checks the outputs.
With --kafka it reads gateway-events from and writes its outputs to Kafka.`

// gatewayMeterJob is GatewayMeter as the weir binary carries it.
func gatewayMeterJob() weir.Job {
	return weir.Job{
		Name:  "gatewaymeter",
		Short: "GatewayMeter: per-tenant cost, per-model latency and cost alerts over an API gateway's events",
		Long:  gatewayMeterLong,
		Defaults: []string{
			"parallelism.default=4",
			"execution.checkpointing.interval=10 s",
			"execution.checkpointing.num-retained=3",
			"execution.checkpointing.externalized-checkpoint-retention=RETAIN_ON_CANCELLATION",
			config.KeyCheckpointingDir + "=" + defaultCheckpointDir,
		},
		Flags: func(fs *pflag.FlagSet) { new(gatewayMeterOptions).declare(fs) },
		// The checkpoint records where the output is.
		NotResumed: []string{"output"},
		Prepare:    prepareGatewayMeter,
		Build:      buildGatewayMeter,
	}
}

// gatewayMeterOptions are GatewayMeter's own flags.
type gatewayMeterOptions struct {
	input, output                string
	kafka, topicPrefix, delivery string
	bounded                      bool
	seed                         uint64
	rate, inputRate              float64
}

// declare registers o's flags on fs.
func (o *gatewayMeterOptions) declare(fs *pflag.FlagSet) {
	fs.StringVar(&o.input, "input", "", "read this generated trace (bounded) instead of the live generator")
	fs.StringVar(&o.output, "output", "", "output directory (default ./weir-data/out/<job-id>)")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the live generator")
	fs.Float64Var(&o.rate, "rate", 24, "events per second per partition of the live generator")
	fs.StringVar(&o.kafka, "kafka", "", "read gateway-events from and write the outputs to Kafka (comma-separated brokers)")
	fs.StringVar(&o.topicPrefix, "topic-prefix", "", "prefix of the Kafka topics")
	fs.StringVar(&o.delivery, "delivery", "exactly-once", "Kafka sink delivery guarantee: exactly-once, at-least-once or none")
	fs.BoolVar(&o.bounded, "bounded", false, "with --kafka: stop at the offsets that were latest at start")
	fs.Float64Var(&o.inputRate, "input-rate", 0, "with --input: read each partition at this many lines per second (0: as fast as the job goes)")
}

// parseGatewayMeter parses GatewayMeter's flags from args.
func parseGatewayMeter(args []string) (*gatewayMeterOptions, error) {
	fs := pflag.NewFlagSet("gatewaymeter", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o := &gatewayMeterOptions{}
	o.declare(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q: gatewaymeter takes flags only", fs.Args())
	}
	return o, nil
}

// prepareGatewayMeter checks GatewayMeter's flags and settles its output:
// where the checkpoint of --from says the job wrote, else --output, else
// ./weir-data/out/<job-id>; a new run's output directory must be empty.
// Submitted to a cluster, its paths become absolute.
func prepareGatewayMeter(ctx context.Context, r *weir.Run) error {
	var given []string
	r.Flags.Visit(func(f *pflag.Flag) { given = append(given, "--"+f.Name+"="+f.Value.String()) })
	o, err := parseGatewayMeter(given)
	if err != nil {
		return err
	}
	if err := o.check(); err != nil {
		return err
	}
	resumed, err := resumeOutput(ctx, r.Config, o)
	if err != nil {
		return err
	}
	if resumed != "" {
		o.output = resumed
	}
	if o.kafka != "" {
		r.Output = "Kafka topics " + o.topicPrefix + "tenant-cost, ... on " + o.kafka
		r.Finished = fmt.Sprintf("verify with: %s verify gatewaymeter --kafka %s --topic-prefix '%s'", r.Program, o.kafka, o.topicPrefix)
		return nil
	}
	if o.output == "" {
		o.output = filepath.Join("weir-data", "out", r.JobID)
	}
	if r.Submit {
		// Every process of the cluster must find the trace and the output.
		if o.input, err = clustercli.AbsPath(o.input); err != nil {
			return err
		}
		if o.output, err = clustercli.AbsPath(o.output); err != nil {
			return err
		}
	}
	if err := checkOutputDir(o.output, r.Resuming()); err != nil {
		return err
	}
	for name, v := range map[string]string{"input": o.input, "output": o.output} {
		if v != "" {
			if err := r.Flags.Set(name, v); err != nil {
				return fmt.Errorf("--%s: %w", name, err)
			}
		}
	}
	r.Output = o.output
	if o.input != "" {
		r.Finished = fmt.Sprintf("verify with: %s verify gatewaymeter --input %s --output %s", r.Program, o.input, o.output)
	}
	return nil
}

// buildGatewayMeter builds GatewayMeter from its flags, as
// prepareGatewayMeter settled them.
func buildGatewayMeter(env *stream.Environment, args []string) error {
	o, err := parseGatewayMeter(args)
	if err != nil {
		return err
	}
	src, kafkaSinks, err := o.io()
	if err != nil {
		return err
	}
	var sinks gm.Sinks
	switch {
	case kafkaSinks != nil:
		sinks = *kafkaSinks
	case o.output == "":
		return errors.New("--output: no output directory")
	default:
		if sinks, err = gm.FileSinks(o.output); err != nil {
			return fmt.Errorf("--output: %w", err)
		}
	}
	gm.Build(env, src, sinks)
	return nil
}

// check refuses flags that do not go together, and an --input that is
// not a trace, before anything runs.
func (o *gatewayMeterOptions) check() error {
	if o.kafka != "" {
		if o.input != "" {
			return fmt.Errorf("--input and --kafka are exclusive: the job reads one or the other")
		}
		if _, err := connector.ParseDeliveryGuarantee(o.delivery); err != nil {
			return fmt.Errorf("--delivery: kafka: %w", err)
		}
	}
	if o.input != "" {
		if _, err := gm.TraceFiles(o.input); err != nil {
			return fmt.Errorf("--input: %w", err)
		}
	}
	return nil
}

// io makes the job's source from --kafka, --input or the live generator,
// and its sinks if they are Kafka topics (nil: files, in --output).
func (o *gatewayMeterOptions) io() (connector.Source[gm.Parsed], *gm.Sinks, error) {
	if err := o.check(); err != nil {
		return nil, nil, err
	}
	switch {
	case o.kafka != "":
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
		src, err := gm.FileSource(o.input, file.LinesPerSecond(o.inputRate))
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

// resumeOutput settles where a resumed run writes: where the checkpoint's
// job wrote, which the checkpoint records. A different --output is an
// error (it would split the output and lose the checkpoint's pending
// transactions). It returns "" when the run does not resume or writes to
// Kafka.
func resumeOutput(ctx context.Context, cfg *config.Configuration, o *gatewayMeterOptions) (string, error) {
	from, resuming := cfg.Get(config.KeyStateRecoveryPath)
	if !resuming || o.kafka != "" {
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
		return "", fmt.Errorf("--from %s: %w", from, err)
	}
	dir, found, err := gm.OutputDir(info.SinkLocations)
	if err != nil {
		return "", fmt.Errorf("--from %s: checkpoint %d: %w", from, info.CheckpointID, err)
	}
	switch {
	case !found && o.output == "":
		return "", fmt.Errorf("--from %s: checkpoint %d does not record where its job wrote; give its output directory with --output", from, info.CheckpointID)
	case !found:
		return o.output, nil
	case o.output != "" && !clustercli.SamePath(o.output, dir):
		return "", fmt.Errorf("--output %s: checkpoint %d of job %s wrote its output to %s; a resumed job continues that output: resume without --output (or with --output %s)", o.output, info.CheckpointID, info.JobID, dir, dir)
	}
	return dir, nil
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
