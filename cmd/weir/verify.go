package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/weirstream/weir/examples/gatewaymeter"
)

type verifyOptions struct {
	input, output string
	// kafka, if set, lists brokers: the trace and the outputs are read
	// from the topics <topicPrefix>gateway-events, tenant-cost, ...
	kafka, topicPrefix string
	atLeastOnce        bool
	max                int
}

func newVerifyCmd() *cobra.Command {
	o := verifyOptions{max: 10}
	cmd := &cobra.Command{
		Use:   "verify JOB",
		Short: "Diff a run's output against the failure-free oracle of its input trace",
		Long: `verify computes the exact output of a failure-free run over the trace in
--input (the oracle: a batch computation over the whole trace) and compares
it, output by output and key by key, with what a run materialized under
--output (<output>/tenant-cost/, model-latency/, alerts/, orphans/,
dead-letters/; hidden files, such as a sink's in-progress files, are
skipped).

It prints the number of records per output on each side, then the first
--max missing, extra, different and duplicated keys of each output with the
records on both sides, and exits with status 0 only on an exact match: the
same keys, each once, with equal records. With --at-least-once, keys written
more than once are tolerated as long as every copy equals the expected
record, which is what an at-least-once sink produces after a restore; their
number is printed.`,
		Example: `  weir verify gatewaymeter --input /tmp/trace --output /tmp/run
  weir verify gatewaymeter --input /tmp/trace --output /tmp/run --at-least-once --max 3`,
		Args: jobArg("gatewaymeter"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			return runVerify(cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.input, "input", "", "directory of the input trace, as weir gen wrote it (required)")
	f.StringVar(&o.output, "output", "", "directory of the run's outputs (required)")
	f.BoolVar(&o.atLeastOnce, "at-least-once", false, "tolerate keys written more than once if every copy equals the expected record")
	f.IntVar(&o.max, "max", o.max, "differences listed per output and kind")
	f.StringVar(&o.kafka, "kafka", "", "read the trace and the outputs from Kafka (comma-separated brokers) with read_committed instead of directories")
	f.StringVar(&o.topicPrefix, "topic-prefix", "", "prefix of the Kafka topics")
	return cmd
}

func (o verifyOptions) validate() error {
	if o.kafka != "" {
		if o.max < 0 {
			return fmt.Errorf("--max must be at least 0, got %d", o.max)
		}
		return nil
	}
	switch {
	case o.input == "":
		return errors.New("--input is required: the directory of the input trace")
	case o.output == "":
		return errors.New("--output is required: the directory of the run's outputs")
	case o.max < 0:
		return fmt.Errorf("--max must be at least 0, got %d", o.max)
	}
	if err := checkDir("--input", o.input); err != nil {
		return err
	}
	return checkDir("--output", o.output)
}

// checkDir returns one line naming the flag and the path unless dir is a
// directory.
func checkDir(flag, dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s %s: no such directory", flag, dir)
	case err != nil:
		return fmt.Errorf("%s %s: %w", flag, dir, errors.Unwrap(err))
	case !fi.IsDir():
		return fmt.Errorf("%s %s: not a directory", flag, dir)
	}
	return nil
}

func runVerify(w io.Writer, o verifyOptions) error {
	var expected, actual gatewaymeter.Outputs
	var err error
	if o.kafka != "" {
		expected, actual, err = verifyKafkaInputs(o)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "verify gatewaymeter: the oracle of topic %sgateway-events against the output topics on %s\n", o.topicPrefix, o.kafka)
	} else {
		if err := checkTrace(o.input); err != nil {
			return err
		}
		expected, err = gatewaymeter.OracleFiles(o.input)
		if err != nil {
			return fmt.Errorf("oracle of --input %s: %w", o.input, err)
		}
		actual, err = gatewaymeter.ReadOutputs(o.output)
		if err != nil {
			return fmt.Errorf("reading --output %s: %w", o.output, err)
		}
		fmt.Fprintf(w, "verify gatewaymeter: the oracle of %s against the outputs in %s\n", o.input, o.output)
	}
	if missing := missingOutputs(o.output); o.kafka == "" && len(missing) == len(gatewaymeter.OutputNames()) {
		fmt.Fprintf(w, "warning: %s has none of the output directories %s/: every record will be missing\n",
			o.output, strings.Join(missing, "/, "))
	}
	report := gatewaymeter.Diff(expected, actual)
	fmt.Fprint(w, report.Format(o.max))
	fmt.Fprintln(w)

	records := 0
	for _, r := range report.Outputs {
		records += r.Expected
	}
	switch {
	case report.OK():
		fmt.Fprintf(w, "verify: exact match: %d records in %d outputs\n", records, len(report.Outputs))
		return nil
	case o.atLeastOnce && report.OKExceptDuplicates():
		keys, copies := equalDuplicates(report)
		fmt.Fprintf(w, "verify: at-least-once match: %d records in %d outputs; %d keys duplicated (%d extra copies), every copy equal to the expected record\n",
			records, len(report.Outputs), keys, copies)
		return nil
	}
	parts := make([]string, len(report.Outputs))
	for i, r := range report.Outputs {
		n := differingKeys(r, o.atLeastOnce)
		parts[i] = fmt.Sprintf("%d in %s", n, r.Name)
		if i == 0 {
			noun := "differences"
			if n == 1 {
				noun = "difference"
			}
			parts[i] = fmt.Sprintf("%d %s in %s", n, noun, r.Name)
		}
	}
	msg := "verify: " + strings.Join(parts, ", ")
	if o.atLeastOnce {
		keys, copies := equalDuplicates(report)
		msg += fmt.Sprintf(" (not counting %d keys duplicated with equal copies, %d extra copies)", keys, copies)
	}
	return errors.New(msg)
}

// checkTrace compares the trace files with the manifest, when there is
// one, so that a truncated or incomplete trace is reported as such rather
// than as differences.
func checkTrace(dir string) error {
	m, err := gatewaymeter.ReadManifest(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("--input %s: %w", dir, err)
	}
	for _, p := range m.Partitions {
		name := filepath.Join(dir, gatewaymeter.TraceFileName(p.Partition))
		fi, err := os.Stat(name)
		if err != nil {
			return fmt.Errorf("--input %s: partition %d: %w", dir, p.Partition, err)
		}
		if fi.Size() != p.Bytes {
			return fmt.Errorf("--input %s: %s has %d bytes, the manifest says %d: the trace is damaged", dir, filepath.Base(name), fi.Size(), p.Bytes)
		}
	}
	return nil
}

// missingOutputs returns the outputs without a directory under dir.
func missingOutputs(dir string) []string {
	var missing []string
	for _, name := range gatewaymeter.OutputNames() {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || !fi.IsDir() {
			missing = append(missing, name)
		}
	}
	return missing
}

// differingKeys counts the keys on which an output differs. A key can be
// listed under several kinds (duplicated and different, say); it counts
// once. With atLeastOnce, a key that is only duplicated, every copy equal
// to its one expected record, does not count.
func differingKeys(r gatewaymeter.OutputReport, atLeastOnce bool) int {
	keys := make(map[string]bool)
	for _, ds := range [][]gatewaymeter.Difference{r.Missing, r.Extra, r.Different} {
		for _, d := range ds {
			keys[d.Key] = true
		}
	}
	for _, d := range r.Duplicated {
		if atLeastOnce && len(d.Expected) == 1 {
			continue
		}
		keys[d.Key] = true
	}
	return len(keys)
}

// equalDuplicates counts the keys duplicated with every copy equal to the one
// expected record, and their surplus copies.
func equalDuplicates(report gatewaymeter.Report) (keys, copies int) {
	for _, r := range report.Outputs {
		bad := make(map[string]bool)
		for _, ds := range [][]gatewaymeter.Difference{r.Missing, r.Extra, r.Different} {
			for _, d := range ds {
				bad[d.Key] = true
			}
		}
		for _, d := range r.Duplicated {
			if len(d.Expected) == 1 && !bad[d.Key] {
				keys++
				copies += len(d.Actual) - 1
			}
		}
	}
	return keys, copies
}
