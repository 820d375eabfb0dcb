package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/weirstream/weir/examples/nexmark"
)

// runGenNexmark is `weir gen nexmark`: the reference generator's events
// into files or a Kafka topic.
func runGenNexmark(cmd *cobra.Command, o genOptions) error {
	for _, name := range []string{"requests", "tenants", "bad-rate"} {
		if cmd.Flags().Changed(name) {
			return fmt.Errorf("--%s is gatewaymeter's: nexmark's events are --events, --partitions, --rate and --seed", name)
		}
	}
	c := o.nexmark
	// The flags' defaults are gatewaymeter's; nexmark's are the
	// reference's (DefaultGenConfig).
	if cmd.Flags().Changed("seed") {
		c.Seed = o.cfg.Seed
	}
	if cmd.Flags().Changed("partitions") {
		c.Splits = o.cfg.Partitions
	}
	if cmd.Flags().Changed("rate") {
		c.Rate = o.cfg.RequestsPerSecond
	}
	switch {
	case c.Events < 1:
		return fmt.Errorf("--events must be at least 1, got %d", c.Events)
	case c.Splits < 1 || int64(c.Splits) > c.Events:
		return fmt.Errorf("--partitions must be in [1, --events], got %d", c.Splits)
	case !(c.Rate > 0 && c.Rate <= 1e9):
		return fmt.Errorf("--rate must be in (0, 1000000000] events per second, got %g", c.Rate)
	case o.out == "" && o.toKafka == "":
		return fmt.Errorf("--out is required: the directory to write the events into (or --to-kafka)")
	}
	g, err := nexmark.NewGenerator(c)
	if err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	last := c.BaseTime
	for i := range c.Splits {
		if _, n := c.SplitRange(i); n > 0 {
			last = max(last, g.Event(i, n-1).Time())
		}
	}
	span := fmt.Sprintf("event time %s to %s", nexmark.FormatTime(c.BaseTime), nexmark.FormatTime(last))
	if o.toKafka != "" {
		brokers := brokerList(o.toKafka)
		if len(brokers) == 0 {
			return fmt.Errorf("--to-kafka: no brokers in %q", o.toKafka)
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Minute)
		defer cancel()
		topic := o.topicPrefix + nexmark.DefaultKafkaTopic
		n, err := g.ProduceKafka(ctx, brokers, topic)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "gen nexmark: produced %d events into %s (%d partitions) on %s, %s\n", n, topic, c.Splits, strings.Join(brokers, ","), span)
		if o.out == "" {
			return nil
		}
	}
	var names []string
	out, err := writeTraceDir(o.out, o.force, func(tmp string) error {
		var err error
		if names, err = g.WriteFiles(tmp); err != nil {
			return err
		}
		for _, name := range names {
			if err := syncFile(name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "gen nexmark: wrote %d events to %s (%d files), %s\n", c.Events, out, len(names), span)
	return nil
}
