package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/weirstream/weir/examples/gatewaymeter"
	"github.com/weirstream/weir/examples/nexmark"
)

// jobArg accepts exactly one argument naming one of the jobs known.
func jobArg(known ...string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		names := strings.Join(known, ", ")
		switch {
		case len(args) == 0:
			return fmt.Errorf("missing job name (known: %s)", names)
		case len(args) > 1:
			return fmt.Errorf("want one job name, got %d arguments: %s", len(args), strings.Join(args, " "))
		case !slices.Contains(known, args[0]):
			return fmt.Errorf("unknown job %q (known: %s)", args[0], names)
		}
		return nil
	}
}

type genOptions struct {
	cfg gatewaymeter.GenConfig
	// nexmark is the configuration of `gen nexmark`.
	nexmark nexmark.GenConfig
	out     string
	force   bool
	// toKafka, if set, lists brokers to produce the trace to, into the
	// topic <topicPrefix>gateway-events.
	toKafka     string
	topicPrefix string
	// progress receives the progress line; nil draws none.
	progress io.Writer
}

func newGenCmd() *cobra.Command {
	o := genOptions{cfg: gatewaymeter.DefaultGenConfig(), nexmark: nexmark.DefaultGenConfig()}
	cmd := &cobra.Command{
		Use:   "gen JOB",
		Short: "Generate a seeded input trace for a job (gatewaymeter, nexmark)",
		Long: `gen writes a seeded trace of a job's input into --out: for gatewaymeter, one
JSON-lines file per partition of gateway-events (part-NNNNN.jsonl) and
manifest.json, which records the flags and what was written. The trace is a
pure function of the flags: the same flags give byte-identical files.

For nexmark it writes --events events of the reference generator (persons,
auctions and bids, 1/3/46), split i of --partitions into part-0000i.jsonl,
a row of nexmark-flink's datagen table per line, at --rate events per
second of event time on each split (defaults: the reference's, seed 1,
2 partitions, 10000 events per second); --to-kafka produces them into the
topic <prefix>nexmark-events instead, split i into partition i, each
record's timestamp its event's time. --requests, --tenants and --bad-rate
are gatewaymeter's; --events is nexmark's.

The trace is written into a hidden sibling directory of --out and renamed
to --out only once complete, so an interrupted run leaves nothing that
looks like a trace. An existing --out must be empty; --force replaces a
previous trace (a directory holding only part-*.jsonl and manifest.json).`,
		Example: `  weir gen gatewaymeter --seed 7 --requests 1000000 --out /tmp/trace
  weir gen gatewaymeter --seed 7 --requests 100000 --bad-rate 0.001 --out /tmp/trace --force
  weir gen nexmark --events 10000000 --partitions 4 --to-kafka localhost:9092`,
		Args: jobArg("gatewaymeter", "nexmark"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] == "nexmark" {
				return runGenNexmark(cmd, o)
			}
			if cmd.Flags().Changed("events") {
				return fmt.Errorf("--events is nexmark's: gatewaymeter's trace is --requests long")
			}
			if err := o.validate(); err != nil {
				return err
			}
			if cmd.ErrOrStderr() == os.Stderr && isCharDevice(os.Stderr) {
				o.progress = os.Stderr
			}
			if o.toKafka == "" {
				return runGen(cmd.Context(), cmd.OutOrStdout(), o)
			}
			return genToKafka(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.Uint64Var(&o.cfg.Seed, "seed", o.cfg.Seed, "seed of the trace")
	f.Int64Var(&o.cfg.Requests, "requests", o.cfg.Requests, "number of requests (each is a request and, mostly, a response event)")
	f.IntVar(&o.cfg.Partitions, "partitions", o.cfg.Partitions, "partitions of gateway-events: one file each")
	f.IntVar(&o.cfg.Tenants, "tenants", o.cfg.Tenants, "number of tenants (Zipf-like: tenant k sends a share proportional to 1/k)")
	f.Float64Var(&o.cfg.BadRate, "bad-rate", o.cfg.BadRate, "probability that an event comes with a malformed line")
	f.Float64Var(&o.cfg.RequestsPerSecond, "rate", o.cfg.RequestsPerSecond, "gatewaymeter: requests per second of event time, over all partitions; nexmark: events per second of event time on each partition (default 10000)")
	f.Int64Var(&o.nexmark.Events, "events", o.nexmark.Events, "nexmark: number of events, over all partitions")
	f.StringVar(&o.out, "out", "", "directory to write the trace into (required)")
	f.BoolVar(&o.force, "force", false, "replace a previous trace in --out")
	f.StringVar(&o.toKafka, "to-kafka", "", "produce the trace into Kafka (comma-separated brokers), topic <prefix>gateway-events, one partition per trace partition")
	f.StringVar(&o.topicPrefix, "topic-prefix", "", "prefix of the Kafka topics")
	return cmd
}

// validate checks the flags, naming the flag and its allowed range; the
// ranges are GenConfig.Validate's.
func (o genOptions) validate() error {
	c := o.cfg
	switch {
	case c.Requests < 0 || c.Requests > 1e12:
		return fmt.Errorf("--requests must be in [0, 1000000000000], got %d", c.Requests)
	case c.Partitions < 1 || c.Partitions > 99_999:
		return fmt.Errorf("--partitions must be in [1, 99999], got %d", c.Partitions)
	case c.Tenants < 1 || c.Tenants > 1_000_000:
		return fmt.Errorf("--tenants must be in [1, 1000000], got %d", c.Tenants)
	case !(c.BadRate >= 0 && c.BadRate <= 1):
		return fmt.Errorf("--bad-rate must be in [0, 1], got %g", c.BadRate)
	case !(c.RequestsPerSecond >= 0.001 && c.RequestsPerSecond <= 1e6):
		return fmt.Errorf("--rate must be in [0.001, 1000000] requests per second, got %g", c.RequestsPerSecond)
	case o.out == "" && o.toKafka == "":
		return errors.New("--out is required: the directory to write the trace into (or --to-kafka)")
	}
	return c.Validate()
}

func runGen(ctx context.Context, w io.Writer, o genOptions) error {
	var m gatewaymeter.Manifest
	out, err := writeTraceDir(o.out, o.force, func(tmp string) error {
		cfg := o.cfg
		var bar *progressLine
		if o.progress != nil {
			bar = &progressLine{w: o.progress, total: cfg.Requests, start: time.Now()}
			cfg.Progress = bar.update
		}
		var err error
		m, err = gatewaymeter.GenerateFilesContext(ctx, cfg, tmp)
		bar.clear()
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("gen interrupted; nothing written to %s", o.out)
			}
			return err
		}
		// GenerateFiles syncs the partition files; the manifest is made
		// durable here, so a renamed directory is complete after a crash
		// too.
		return syncFile(filepath.Join(tmp, gatewaymeter.ManifestFileName))
	})
	if err != nil {
		return err
	}
	fmt.Fprintln(w, genSummary(out, m))
	return nil
}

// writeTraceDir has write fill a hidden sibling directory of out and then
// renames it to out (replacing a previous trace with force, see
// checkGenOut), so that an interrupted write leaves nothing that looks
// like a trace. write must make its files durable. It returns out's
// absolute path.
func writeTraceDir(out string, force bool, write func(tmp string) error) (string, error) {
	out, err := filepath.Abs(out)
	if err != nil {
		return "", err
	}
	replace, err := checkGenOut(out, force)
	if err != nil {
		return "", err
	}
	parent := filepath.Dir(out)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", err
	}
	tmp, err := mkdirSibling(out, "tmp")
	if err != nil {
		return "", err
	}
	if err := write(tmp); err != nil {
		os.RemoveAll(tmp)
		return "", err
	}
	if err := publishDir(tmp, out, replace); err != nil {
		os.RemoveAll(tmp)
		return "", err
	}
	syncDir(parent)
	return out, nil
}

// checkGenOut checks that out may receive a trace, and reports whether an
// existing directory must be replaced.
func checkGenOut(out string, force bool) (replace bool, err error) {
	fi, err := os.Stat(out)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if !fi.IsDir() {
		return false, fmt.Errorf("--out %s exists and is not a directory", out)
	}
	entries, err := os.ReadDir(out)
	if err != nil {
		return false, err
	}
	if len(entries) == 0 {
		return true, nil
	}
	if !force {
		return false, fmt.Errorf("--out %s is not empty (%d entries); use --force to replace a previous trace", out, len(entries))
	}
	for _, e := range entries {
		if !isTraceEntry(e) {
			return false, fmt.Errorf("--out %s holds %s, which is not part of a trace: not replacing it, even with --force", out, e.Name())
		}
	}
	return true, nil
}

// isTraceEntry reports whether e is a file GenerateFiles writes.
func isTraceEntry(e fs.DirEntry) bool {
	if !e.Type().IsRegular() {
		return false
	}
	name := e.Name()
	num, ok := strings.CutPrefix(name, "part-")
	if num, ok2 := strings.CutSuffix(num, ".jsonl"); ok && ok2 && num != "" {
		return strings.Trim(num, "0123456789") == ""
	}
	return name == gatewaymeter.ManifestFileName
}

// publishDir renames the complete directory tmp to out. If replace, out
// exists and is moved aside first, then removed; should the final rename
// fail, it is moved back.
func publishDir(tmp, out string, replace bool) error {
	if !replace {
		return os.Rename(tmp, out)
	}
	old, err := mkdirSibling(out, "old")
	if err != nil {
		return err
	}
	// Renaming a directory onto an empty one is not portable: remove the
	// name's placeholder first. The name is random, so nothing takes it
	// in between.
	if err := os.Remove(old); err != nil {
		return err
	}
	if err := os.Rename(out, old); err != nil {
		return fmt.Errorf("replacing %s: %w", out, err)
	}
	if err := os.Rename(tmp, out); err != nil {
		if rerr := os.Rename(old, out); rerr != nil {
			return fmt.Errorf("replacing %s: %w (and the previous trace is left in %s: %v)", out, err, old, rerr)
		}
		return fmt.Errorf("replacing %s: %w", out, err)
	}
	if err := os.RemoveAll(old); err != nil {
		return fmt.Errorf("wrote %s, but could not remove the previous trace, moved to %s: %w", out, old, err)
	}
	return nil
}

// mkdirSibling creates a new hidden directory next to dir, named after it
// and tag: .<base>.<tag>-<random>. Unlike os.MkdirTemp, it creates it with
// the usual permissions (0755 less the umask), which the trace keeps once
// renamed.
func mkdirSibling(dir, tag string) (string, error) {
	for {
		name := filepath.Join(filepath.Dir(dir), fmt.Sprintf(".%s.%s-%08x", filepath.Base(dir), tag, rand.Uint32()))
		err := os.Mkdir(name, 0o755)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return name, err
	}
}

func syncFile(name string) error {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// syncDir makes a directory's entries durable. Errors are ignored: some
// file systems cannot sync a directory.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
}

// genSummary is gen's one-line report of what it wrote.
func genSummary(out string, m gatewaymeter.Manifest) string {
	var events, bytes int64
	var minTS, maxTS int64
	seen := false
	for _, p := range m.Partitions {
		events += p.Events
		bytes += p.Bytes
		if p.Events == 0 {
			continue
		}
		if !seen || p.MinTS < minTS {
			minTS = p.MinTS
		}
		if !seen || p.MaxTS > maxTS {
			maxTS = p.MaxTS
		}
		seen = true
	}
	span := "no events"
	if seen {
		span = fmt.Sprintf("event time %s to %s (%v)", fmtTime(time.UnixMilli(minTS)), fmtTime(time.UnixMilli(maxTS)),
			time.Duration(maxTS-minTS)*time.Millisecond)
	}
	return fmt.Sprintf("gen gatewaymeter: wrote %s: %d partition files + %s (%s), %d requests (%d without response), %d events, %d bad lines, %s",
		out, len(m.Partitions), gatewaymeter.ManifestFileName, fmtBytes(bytes), m.Requests, m.NoResponse, events, m.BadLines, span)
}

// fmtTime shows a time in UTC to the millisecond.
func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

// fmtBytes shows a size in bytes with a binary unit.
func fmtBytes(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	v, unit := float64(n)/1024, "KiB"
	for _, u := range []string{"MiB", "GiB", "TiB"} {
		if v < 1024 {
			break
		}
		v, unit = v/1024, u
	}
	return fmt.Sprintf("%.1f %s", v, unit)
}

// isCharDevice reports whether f is a terminal (a character device).
func isCharDevice(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// progressLine draws a one-line progress report, redrawn in place with a
// carriage return, at most ten times a second.
type progressLine struct {
	w     io.Writer
	total int64
	start time.Time
	last  time.Time
	drawn bool
}

func (p *progressLine) update(n int64) {
	now := time.Now()
	if p.drawn && now.Sub(p.last) < 100*time.Millisecond && n < p.total {
		return
	}
	p.last, p.drawn = now, true
	pct := 100.0
	if p.total > 0 {
		pct = 100 * float64(n) / float64(p.total)
	}
	elapsed := now.Sub(p.start)
	eta := ""
	if n > 0 && n < p.total {
		eta = fmt.Sprintf(", %v left", (time.Duration(float64(elapsed) * float64(p.total-n) / float64(n))).Round(time.Second))
	}
	fmt.Fprintf(p.w, "\r\x1b[Kgen: %d/%d requests (%.0f%%), %v%s", n, p.total, pct, elapsed.Round(time.Second), eta)
}

// clear erases the line, if one was drawn. A nil progressLine does nothing.
func (p *progressLine) clear() {
	if p != nil && p.drawn {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
}
