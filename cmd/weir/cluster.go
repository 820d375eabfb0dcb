package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"

	"github.com/weirstream/weir/config"
	gm "github.com/weirstream/weir/examples/gatewaymeter"
	"github.com/weirstream/weir/internal/cluster"
	"github.com/weirstream/weir/internal/clustercli"
	"github.com/weirstream/weir/stream"
)

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

// gatewayMeterEnv builds GatewayMeter as "weir run -m" submitted it, on
// every role of a cluster.
func gatewayMeterEnv(sub cluster.Submission, logger *slog.Logger, extra ...stream.Option) (*stream.Environment, error) {
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
		stream.WithLogger(logger)}, extra...)...)
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

// submit sends "weir run" to the cluster at o.jobManager.
func submit(ctx context.Context, stdout io.Writer, o runOptions, job string) error {
	if o.input != "" {
		if _, err := gm.TraceFiles(o.input); err != nil {
			return fmt.Errorf("--input: %w", err)
		}
	}
	jobID := clustercli.NewJobID()
	abs := clustercli.AbsPath
	var err error
	if o.from, err = abs(o.from); err != nil {
		return err
	}
	cfg, err := o.jobConfig()
	if err != nil {
		return err
	}
	// Every process of the cluster must find the checkpoints.
	if o.checkpointDir, err = abs(o.checkpointDir); err != nil {
		return err
	}
	if err := cfg.Set(config.KeyCheckpointingDir, o.checkpointDir); err != nil {
		return err
	}
	resumed, err := resumeOutput(ctx, cfg, o)
	if err != nil {
		return err
	}
	if resumed != "" {
		o.output = resumed
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
	run.Config = clustercli.Pairs(cfg)
	args, err := json.Marshal(run)
	if err != nil {
		return err
	}
	var finished func()
	if o.kafka == "" && o.input != "" {
		finished = func() {
			fmt.Fprintf(stdout, "weir: finished; verify with: weir verify gatewaymeter --input %s --output %s\n", run.Input, run.Output)
		}
	}
	return clustercli.Submit(ctx, stdout, "weir", o.jobManager, cluster.Submission{JobID: jobID, Job: job, Args: args}, o.detached, finished,
		clustercli.DialOptions(cfg)...)
}

// newBinaryJobs returns the jobs this binary carries, for one process of a
// cluster.
func newBinaryJobs(logger *slog.Logger) cluster.Jobs {
	return clustercli.EnvJobs{Env: gatewayMeterEnv, Logger: logger}
}
