package main

import (
	"fmt"
	"io"
	"maps"
	"math/rand/v2"

	"github.com/spf13/cobra"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/mini"
)

type demoOptions struct {
	seed    uint64
	sources int
	events  int
	keys    int
	every   int
	failAt  []int
}

func newDemoCmd() *cobra.Command {
	o := demoOptions{}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Show checkpoint barriers at work: a keyed sum over several sources, failures, recovery, the oracle",
		Long: `demo runs a keyed running sum over several seeded sources into one task on
the reference processor (package mini), with a barrier every --every events,
fails the task after the given delivery steps, and recovers each time from the
latest completed checkpoint. It does so once with aligned (EXACTLY_ONCE) and
once with unaligned-by-omission (AT_LEAST_ONCE) barrier handling, prints each
checkpoint's cut (source positions S_n and state) and compares the final state
with the failure-free oracle.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			return runDemo(cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.Uint64Var(&o.seed, "seed", 7, "seed of the generated input and delivery order")
	f.IntVar(&o.sources, "sources", 3, "number of sources (input channels of the task)")
	f.IntVar(&o.events, "events", 40, "events per source")
	f.IntVar(&o.keys, "keys", 4, "number of distinct keys")
	f.IntVar(&o.every, "every", 5, "events between barriers at each source")
	f.IntSliceVar(&o.failAt, "fail-at", []int{37, 81}, "delivery steps after which the task fails (repeatable)")
	return cmd
}

func (o demoOptions) validate() error {
	switch {
	case o.sources < 1:
		return fmt.Errorf("--sources must be at least 1, got %d", o.sources)
	case o.events < 0:
		return fmt.Errorf("--events must be at least 0, got %d", o.events)
	case o.keys < 1 || o.keys > 26:
		return fmt.Errorf("--keys must be in [1, 26], got %d", o.keys)
	case o.every < 1:
		return fmt.Errorf("--every must be at least 1, got %d", o.every)
	}
	for _, s := range o.failAt {
		if s < 1 {
			return fmt.Errorf("--fail-at steps must be at least 1, got %d", s)
		}
	}
	return nil
}

func runDemo(w io.Writer, o demoOptions) error {
	r := rand.New(rand.NewPCG(o.seed, 0))
	cfg := mini.JobConfig{BarrierEvery: o.every, FailAt: o.failAt}
	total := 0
	for range o.sources {
		var src []mini.Element
		for range o.events {
			key := string(rune('a' + r.IntN(o.keys)))
			src = append(src, mini.Event{Key: key, Value: 1 + r.Int64N(9)})
		}
		cfg.Sources = append(cfg.Sources, src)
		total += o.events + o.events/o.every + 1
	}
	// A skewed delivery order: source 0 runs ahead, so alignment has
	// something to wait for.
	for range 2 * total {
		i := r.IntN(o.sources + 2)
		cfg.Schedule = append(cfg.Schedule, max(0, i-2))
	}
	oracle := map[string]int64{}
	for _, src := range cfg.Sources {
		maps.Copy(oracle, addMaps(oracle, mini.Fold(src, mini.ByKey, len(src))))
	}

	fmt.Fprintf(w, "weir demo: keyed running sum, %d sources x %d events, %d keys, a barrier every %d events, seed %d\n",
		o.sources, o.events, o.keys, o.every, o.seed)
	fmt.Fprintf(w, "the task fails after delivery steps %v and recovers from its latest completed checkpoint\n", o.failAt)
	fmt.Fprintf(w, "oracle (fold over all input): %s\n", mini.FormatState(oracle))

	for _, mode := range []config.CheckpointingMode{config.ExactlyOnce, config.AtLeastOnce} {
		cfg.Mode = mode
		res := mini.RunJob(cfg)
		fmt.Fprintf(w, "\n%s\n", mode)
		for attempt := 0; attempt <= len(res.Restores); attempt++ {
			if attempt > 0 {
				rs := res.Restores[attempt-1]
				fmt.Fprintf(w, "  task failed; restored checkpoint %d, sources reset to S=%v\n", rs.ID, rs.SourceOffsets)
			}
			for _, cp := range res.Checkpoints {
				if cp.Attempt != attempt {
					continue
				}
				want := foldPrefixes(cfg.Sources, cp.SourceOffsets)
				verdict := "= fold of the prefixes"
				if !maps.Equal(cp.State, want) {
					verdict = "but the prefixes fold to " + mini.FormatState(want) + ": records after the cut got in"
				}
				fmt.Fprintf(w, "  checkpoint %d  S=%v  state %s  %s\n", cp.ID, cp.SourceOffsets, mini.FormatState(cp.State), verdict)
			}
		}
		if maps.Equal(res.Final, oracle) {
			fmt.Fprintf(w, "  final %s  matches the oracle: exactly-once state\n", mini.FormatState(res.Final))
		} else {
			fmt.Fprintf(w, "  final %s  differs from the oracle: records were counted twice\n", mini.FormatState(res.Final))
		}
	}
	return nil
}

func foldPrefixes(sources [][]mini.Element, offsets []int) map[string]int64 {
	sum := map[string]int64{}
	for i, src := range sources {
		sum = addMaps(sum, mini.Fold(src, mini.ByKey, offsets[i]))
	}
	return sum
}

func addMaps(a, b map[string]int64) map[string]int64 {
	out := maps.Clone(a)
	for k, v := range b {
		out[k] += v
	}
	return out
}
