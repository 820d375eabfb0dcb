package bench

import (
	"fmt"
	"html"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/weirstream/weir/examples/nexmark"
)

// SideFigures are one side's figures over the rounds of a side-by-side
// run: per round (in order) and summarised.
type SideFigures struct {
	Name string
	// Per round: events per second and per CPU-second of processing (the
	// run less the side's median start-up), CPU-seconds, peak RSS in
	// bytes and wall seconds of the whole run.
	Rate, PerCPU, CPU, RSS, Wall []float64
	// Over every run's checkpoints.
	CkptP50, CkptP99 time.Duration
	Ckpts            int
	// StartWall and StartCPU are the median start-up (a run over no
	// events): process, job and shut-down.
	StartWall, StartCPU time.Duration
}

// FiguresOf returns each side's figures of r.
func FiguresOf(r SideBySide) []SideFigures {
	out := make([]SideFigures, len(r.Sides))
	for si, s := range r.Sides {
		f := &out[si]
		f.Name = s.Name
		startWall := medianOf(s.Startup, func(p ProcessRun) time.Duration { return p.Wall })
		for i, run := range s.Runs {
			// A run whose processing (the run less the start-up) took
			// less time than the start-up itself measures mostly the
			// start-up's noise (on a loaded machine, a second either way
			// makes any rate): no rate. Longer inputs give one.
			rate := math.NaN()
			if run.Wall >= 2*startWall {
				rate = float64(r.Events) / s.ProcessingWall(i).Seconds()
			}
			f.Rate = append(f.Rate, rate)
			f.PerCPU = append(f.PerCPU, float64(r.Events)/s.ProcessingCPU(i).Seconds())
			f.CPU = append(f.CPU, run.CPU.Seconds())
			f.RSS = append(f.RSS, float64(run.MaxRSS))
			f.Wall = append(f.Wall, run.Wall.Seconds())
		}
		ck := s.Checkpoints()
		f.CkptP50, f.CkptP99, f.Ckpts = Quantile(ck, 0.5), Quantile(ck, 0.99), len(ck)
		f.StartWall = medianOf(s.Startup, func(p ProcessRun) time.Duration { return p.Wall })
		f.StartCPU = medianOf(s.Startup, func(p ProcessRun) time.Duration { return p.CPU })
	}
	return out
}

// RatioOf is the spread of a[i]/b[i] over the rounds: each round's ratio
// taken within its pair.
func RatioOf(a, b []float64) Spread {
	var v []float64
	for i := range min(len(a), len(b)) {
		if r := a[i] / b[i]; !math.IsNaN(r) {
			v = append(v, r)
		}
	}
	if len(v) == 0 {
		return Spread{Median: math.NaN(), Min: math.NaN(), Max: math.NaN()}
	}
	return SpreadOf(v)
}

// median is the median of v's numbers (NaN: none).
func median(v []float64) float64 {
	var n []float64
	for _, x := range v {
		if !math.IsNaN(x) {
			n = append(n, x)
		}
	}
	if len(n) == 0 {
		return math.NaN()
	}
	return SpreadOf(n).Median
}

// noRate stands where a side has no events/s: its runs took less than
// twice its start-up (see FiguresOf).
const noRate = "n/a¹"

// noRateNote explains noRate under a table that shows it.
const noRateNote = "¹ No events/s: the side's runs took less than twice its start-up, so a rate would measure the start-up's noise. " +
	"Its events per CPU-second, from which the start-up's CPU is subtracted, stand; a longer input (--events) gives a rate.\n"

func times(s Spread) string {
	if math.IsNaN(s.Median) {
		return noRate
	}
	return fmt.Sprintf("%.2f× [%.2f–%.2f]", s.Median, s.Min, s.Max)
}

// rate is x as a whole number, or noRate when there is none.
func rate(x float64) string {
	if math.IsNaN(x) {
		return noRate
	}
	return fmt.Sprintf("%.0f", x)
}

func mibOf(b float64) string { return fmt.Sprintf("%.0f MiB", b/(1<<20)) }

func ms(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%d ms", d.Milliseconds())
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

// FormatNexmarkVsFlink writes the per-query table of a side-by-side
// Nexmark run: per side the medians over the rounds, then the ratios of
// the first side to the second with their min–max over the rounds, and
// whether the results agreed.
func FormatNexmarkVsFlink(out io.Writer, results []WorkloadResult) {
	fmt.Fprintf(out, "  %-5s %-6s %12s %13s %8s %10s %17s %9s %9s %6s\n",
		"query", "side", "events/s", "events/CPU-s", "CPU s", "peak RSS", "start-up wall,CPU", "ckpt p50", "ckpt p99", "ckpts")
	for _, r := range results {
		figs := FiguresOf(r.SideBySide)
		for i, f := range figs {
			q := ""
			if i == 0 {
				q = r.Query
			}
			fmt.Fprintf(out, "  %-5s %-6s %12s %13.0f %8.2f %10s %8.2fs,%6.2fs %9s %9s %6d\n", q, f.Name,
				rate(median(f.Rate)), median(f.PerCPU), median(f.CPU), mibOf(median(f.RSS)), f.StartWall.Seconds(), f.StartCPU.Seconds(),
				ms(f.CkptP50), ms(f.CkptP99), f.Ckpts)
		}
		for j := 1; j < len(figs) && len(figs[0].Rate) > 0; j++ {
			a, b := figs[0], figs[j]
			fmt.Fprintf(out, "  %-5s %s/%s per round, median [min–max]: events/s %s, events per CPU-second %s; peak RSS %s/%s %s\n", "",
				a.Name, b.Name, times(RatioOf(a.Rate, b.Rate)), times(RatioOf(a.PerCPU, b.PerCPU)), b.Name, a.Name, times(RatioOf(b.RSS, a.RSS)))
		}
		if l := r.LoopPerCPU(); l > 0 {
			fmt.Fprintf(out, "  %-5s hand-written loop (1 goroutine): %.0f events per CPU-second;", "", l)
			for _, f := range figs {
				fmt.Fprintf(out, " %s %.2f of it", f.Name, median(f.PerCPU)/l)
			}
			fmt.Fprintln(out)
		}
		if l := r.Latency; l != nil {
			fmt.Fprintf(out, "  %-5s latency %s\n", "", latencyLine(l))
		}
		fmt.Fprintf(out, "  %-5s results: %s\n", "", r.Check)
	}
}

// flinkName is how the report names a side: Flink for flink, Flink
// (BACKEND) for flink-BACKEND.
func flinkName(side string) string {
	if b, ok := strings.CutPrefix(side, "flink-"); ok {
		return "Flink (" + b + ")"
	}
	if side == "flink" {
		return "Flink"
	}
	return side
}

// latencyLine says a query's latency figures in a line.
func latencyLine(l *LatencyResult) string {
	if l.Skipped != "" {
		return "not measured: " + l.Skipped
	}
	var b strings.Builder
	fmt.Fprintf(&b, "at %.0f events/s (one run per side):", l.Rate)
	for i, s := range l.Sides {
		if i > 0 {
			b.WriteString(";")
		}
		fmt.Fprintf(&b, " %s p50 %s p99 %s (%d rows)", s.Name, latencyText(s.Hist.Quantile(0.5)), latencyText(s.Hist.Quantile(0.99)), s.Hist.Count())
	}
	return b.String()
}

// latencyText formats a latency to three significant digits or so.
func latencyText(d time.Duration) string {
	switch {
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

// latencyFrom says what a query's row's latency is measured from.
func latencyFrom(q string) string {
	spec, err := nexmark.LatencyOf(q)
	switch {
	case err != nil:
		return ""
	case spec.RoundMs > 1:
		return fmt.Sprintf("the end of its %d s window (%s rounded up)", spec.RoundMs/1000, spec.Column)
	case spec.OffsetMs > 0:
		return fmt.Sprintf("the end of its window (%s + %d s)", spec.Column, spec.OffsetMs/1000)
	case strings.HasSuffix(spec.Column, "endtime"):
		return "the end of its window (" + spec.Column + ")"
	}
	return "its bid's time (" + spec.Column + ")"
}

// Report is what one section of BENCHMARKS.md says around the figures
// (WriteSection puts it in the file).
type Report struct {
	// Heading names the section; Command is the command that writes it.
	Heading, Command string
	// Row names the table's first column: "query", "job".
	Row     string
	When    time.Time
	Machine []string // lines describing the machine and the versions
	Note    string   // said in the header as given (e.g. that the machine was shared)
	// LoadBefore and LoadAfter are /proc/loadavg at the start and end.
	LoadBefore, LoadAfter string
	Commands              []string // the command run, and each side's child command
	Config                []string // the run's configuration, a line each
	Output                string   // the command's own output
	ChartPerCPU           string   // the charts' paths relative to the report
	ChartRatio            string
	ChartCheckpoints      string
}

// WriteMarkdown writes a section of BENCHMARKS.md: its heading, the
// machine and versions, the commands, the table, the charts and the raw
// output.
func WriteMarkdown(out io.Writer, rep Report, results []WorkloadResult) {
	p := func(format string, args ...any) { fmt.Fprintf(out, format, args...) }
	row := rep.Row
	if row == "" {
		row = "query"
	}
	p("## %s\n\n", rep.Heading)
	p("Written by `%s`, on %s. ", rep.Command, rep.When.UTC().Format("2006-01-02 15:04 MST"))
	if rep.Note != "" {
		p("%s ", rep.Note)
	}
	p("Load average (1, 5, 15 min) at the start: %s; at the end: %s.\n\n", rep.LoadBefore, rep.LoadAfter)
	p("Each %s ran on weir and on Apache Flink in turn (weir, Flink, weir, Flink, …), each run a fresh child process over identical input; ", row)
	p("the ratios are taken within each round's pair, so what the machine's other work did to both sides cancels out as far as it can: ")
	p("the ratios, not the absolute rates, are the figures to read.\n\n")
	p("### Machine and versions\n\n")
	for _, m := range rep.Machine {
		p("* %s\n", m)
	}
	p("\n### Commands\n\n```sh\n")
	for _, c := range rep.Commands {
		p("%s\n", c)
	}
	p("```\n\n")
	for _, c := range rep.Config {
		p("* %s\n", c)
	}
	p("\n### Results\n\n")
	p("Medians over the rounds; ratios weir/Flink as median [min–max] of the per-round ratios. events/s and events/CPU-s leave each side's start-up out ")
	p("(the run's wall and CPU time less the side's median run over no events); CPU-seconds are the child process's user + system time as the kernel ")
	p("accounts it (rusage), peak RSS its VmHWM (/proc/PID/status, read every 50 ms).\n\n")
	// A table of weir against each other side (Flink with each backend).
	sides := 0
	for _, r := range results {
		sides = max(sides, len(r.Sides))
	}
	for j := 1; j < sides; j++ {
		name := "Flink"
		for _, r := range results {
			if len(r.Sides) > j {
				name = flinkName(r.Sides[j].Name)
				break
			}
		}
		if sides > 2 {
			p("\n#### weir and %s\n\n", name)
		}
		p("| %[2]s | weir events/s | %[1]s events/s | weir/%[1]s events/s | weir events/CPU-s | %[1]s events/CPU-s | weir/%[1]s events/CPU-s | peak RSS weir / %[1]s | checkpoint p50 / p99 weir | checkpoint p50 / p99 %[1]s | start-up weir / %[1]s (wall, CPU) | results |\n", name, row)
		p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
		noted := false
		for _, r := range results {
			figs := FiguresOf(r.SideBySide)
			if len(figs) <= j || len(figs[0].Rate) == 0 {
				continue
			}
			a, b := figs[0], figs[j]
			if math.IsNaN(median(a.Rate)) || math.IsNaN(median(b.Rate)) {
				noted = true
			}
			p("| %s | %s | %s | %s | %.0f | %.0f | **%s** | %s / %s | %s / %s | %s / %s | %.2f s, %.2f s / %.2f s, %.2f s | %s |\n",
				r.Query, rate(median(a.Rate)), rate(median(b.Rate)), times(RatioOf(a.Rate, b.Rate)), median(a.PerCPU), median(b.PerCPU),
				times(RatioOf(a.PerCPU, b.PerCPU)), mibOf(median(a.RSS)), mibOf(median(b.RSS)), ms(a.CkptP50), ms(a.CkptP99), ms(b.CkptP50), ms(b.CkptP99),
				a.StartWall.Seconds(), a.StartCPU.Seconds(), b.StartWall.Seconds(), b.StartCPU.Seconds(), strings.ReplaceAll(firstLine(r.Check), "|", "\\|"))
		}
		if noted {
			p("\n%s", noRateNote)
		}
	}
	var loops bool
	for _, r := range results {
		loops = loops || r.LoopPerCPU() > 0
	}
	if loops {
		p("\n#### Next to a hand-written loop\n\n")
		if row == "query" {
			p("The same query as a single-goroutine Go loop over the same events, generated the same way in the same order, with the same watermark ")
			p("(internal/bench's RunLoopQuery): the practical limit of one core. ")
		} else {
			p("The same computation as a single-goroutine Go loop over the same trace files, as the oracle does it (the partitions merged by time, ")
			p("each line parsed by the job's parser, requests paired with their responses in a map, costs and latencies folded per window; ")
			p("internal/bench's RunGatewayMeterLoop): the practical limit of one core. ")
		}
		p("Each side's events per CPU-second as a fraction of the loop's (median over the rounds; the loop's CPU time is its thread's).\n\n")
		var names []string
		for _, r := range results {
			if r.LoopPerCPU() > 0 && len(r.Sides) > len(names) {
				names = names[:0]
				for _, sd := range r.Sides {
					names = append(names, flinkName(sd.Name))
				}
			}
		}
		p("| %s | loop events/CPU-s |", row)
		for _, n := range names {
			p(" %s / loop |", n)
		}
		p("\n|---|---:|%s\n", strings.Repeat("---:|", len(names)))
		for _, r := range results {
			l := r.LoopPerCPU()
			figs := FiguresOf(r.SideBySide)
			if l == 0 || len(figs) != len(names) {
				continue
			}
			p("| %s | %.0f |", r.Query, l)
			for _, f := range figs {
				p(" %.2f |", median(f.PerCPU)/l)
			}
			p("\n")
		}
	}
	var costs bool
	for _, r := range results {
		costs = costs || r.CheckpointCost != nil
	}
	if costs {
		p("\n#### What checkpointing costs weir\n\n")
		p("weir's side ran again, as many rounds, with its checkpoint interval and with no checkpoint during the run (interval %v: only the one at the end of the input that commits the outputs, which every run takes), ", noCheckpoints)
		p("in turn, each run's outputs equal to the oracle's. Throughput lost and CPU time added by the checkpoints, in percent of the runs without, ")
		p("taken within each round's pair, median [min–max].\n\n")
		p("| %s | interval | throughput lost | CPU time added | checkpoints per run |\n|---|---:|---:|---:|---:|\n", row)
		for _, r := range results {
			c := r.CheckpointCost
			if c == nil {
				continue
			}
			t := "runs too short for a rate"
			if s := c.Throughput(); !math.IsNaN(s.Median) {
				t = percent(s)
			}
			p("| %s | %v | %s | %s | %d |\n", r.Query, c.Interval, t, percent(c.CPU()), c.Checkpoints())
		}
	}
	var lats bool
	for _, r := range results {
		lats = lats || r.Latency != nil
	}
	if lats {
		p("\n#### End-to-end latency at a fixed rate\n\n")
		p("After its timed rounds, each query ran once more per side over events generated for a fixed rate (by default half the slower side's median events/s), ")
		p("each released by the source at its event time on a wall clock shifted to the run's start, the same way on both sides (weir's source and sink; ")
		p("bench/flink's weir-paced source, which parses with Flink's JSON format, and weir-latency sink). A row's latency is the wall-clock time it reached the sink ")
		p("less the time it was due; a window's rows are due at the window's end, so their latency includes the watermark's 4 s delay. ")
		p("Rows due in the run's first seconds (warm-up) and last seconds (windows the end of the input fires) are not counted. ")
		p("Histograms in buckets within 1.6 %%; one run per side.\n\n")
		var names []string
		for _, r := range results {
			if l := r.Latency; l != nil && len(l.Sides) > len(names) {
				names = names[:0]
				for _, sd := range l.Sides {
					names = append(names, flinkName(sd.Name))
				}
			}
		}
		p("| query | events/s |")
		for _, n := range names {
			p(" %s p50 / p99 |", n)
		}
		p(" rows counted %s | a row is due at |\n|---|---:|%s---:|---|\n", strings.Join(names, " / "), strings.Repeat("---:|", len(names)))
		for _, r := range results {
			l := r.Latency
			if l == nil {
				continue
			}
			if l.Skipped != "" || len(l.Sides) != len(names) {
				p("| %s | — |%s — | not measured: %s |\n", r.Query, strings.Repeat(" — |", len(names)), l.Skipped)
				continue
			}
			p("| %s | %.0f |", r.Query, l.Rate)
			var counts []string
			for _, sd := range l.Sides {
				p(" %s / %s |", latencyText(sd.Hist.Quantile(0.5)), latencyText(sd.Hist.Quantile(0.99)))
				counts = append(counts, strconv.FormatInt(sd.Hist.Count(), 10))
			}
			p(" %s | %s |\n", strings.Join(counts, " / "), latencyFrom(r.Query))
		}
	}
	if rep.ChartPerCPU != "" {
		p("\n![events per CPU-second per %s, weir and Flink](%s)\n", row, rep.ChartPerCPU)
	}
	if rep.ChartRatio != "" {
		p("\n![weir/Flink events per CPU-second per %s, median and min–max over the rounds](%s)\n", row, rep.ChartRatio)
	}
	if rep.ChartCheckpoints != "" {
		p("\n![checkpoint duration against state size, a dot per completed checkpoint of the timed runs, weir and Flink](%s)\n", rep.ChartCheckpoints)
	}
	p("\n### The command's output\n\n```\n%s```\n", rep.Output)
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// Chart geometry.
const (
	chartLeft   = 60.0
	chartRight  = 30.0
	chartTop    = 40.0
	chartBottom = 40.0
	chartWidth  = 760.0
	rowHeight   = 34.0
)

// PerCPUChartSVG draws, per query, the two sides' median events per
// CPU-second as horizontal bars on a logarithmic axis.
func PerCPUChartSVG(results []WorkloadResult) string {
	type row struct {
		q     string
		v     []float64
		names []string
	}
	var rows []row
	lo, hi := math.Inf(1), 0.0
	for _, r := range results {
		figs := FiguresOf(r.SideBySide)
		if len(figs) < 2 || len(figs[0].PerCPU) == 0 {
			continue
		}
		rw := row{q: r.Query}
		for _, f := range figs {
			v := median(f.PerCPU)
			rw.v, rw.names = append(rw.v, v), append(rw.names, f.Name)
			lo, hi = min(lo, v), max(hi, v)
		}
		rows = append(rows, rw)
	}
	if len(rows) == 0 {
		return ""
	}
	d0, d1 := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if d1 <= d0 {
		d1 = d0 + 1
	}
	plotW := chartWidth - chartLeft - chartRight
	x := func(v float64) float64 { return chartLeft + (math.Log10(v)-d0)/(d1-d0)*plotW }
	bars := 0
	for _, r := range rows {
		bars = max(bars, len(r.v))
	}
	colors := []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728"}
	colorNames := []string{"blue", "orange", "green", "red"}
	bars = min(bars, len(colors))
	rowH := max(rowHeight, 8+13*float64(bars))
	height := chartTop + chartBottom + rowH*float64(len(rows))
	var s strings.Builder
	fmt.Fprintf(&s, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", chartWidth, height)
	fmt.Fprintf(&s, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	var legend []string
	for j, n := range rows[0].names[:min(len(rows[0].names), bars)] {
		legend = append(legend, fmt.Sprintf("%s (%s)", html.EscapeString(n), colorNames[j]))
	}
	fmt.Fprintf(&s, `<text x="%.0f" y="20" font-size="14">Events per CPU-second (log scale): %s</text>`+"\n", chartLeft, strings.Join(legend, ", "))
	for d := d0; d <= d1; d++ {
		xx := x(math.Pow(10, d))
		fmt.Fprintf(&s, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#ccc"/>`+"\n", xx, chartTop-5, xx, height-chartBottom+5)
		fmt.Fprintf(&s, `<text x="%.1f" y="%.0f" text-anchor="middle">%s</text>`+"\n", xx, height-chartBottom+20, siCount(math.Pow(10, d)))
	}
	for i, r := range rows {
		y := chartTop + rowH*float64(i)
		fmt.Fprintf(&s, `<text x="%.0f" y="%.1f" text-anchor="end">%s</text>`+"\n", chartLeft-8, y+rowH/2+4, html.EscapeString(r.q))
		for j, v := range r.v[:min(len(r.v), bars)] {
			color := colors[j]
			by := y + 3 + float64(j)*13
			fmt.Fprintf(&s, `<rect x="%.0f" y="%.1f" width="%.1f" height="12" fill="%s"/>`+"\n", chartLeft, by, max(x(v)-chartLeft, 1), color)
			fmt.Fprintf(&s, `<text x="%.1f" y="%.1f" font-size="10">%s</text>`+"\n", max(x(v), chartLeft)+4, by+10, siCount(v))
		}
	}
	s.WriteString("</svg>\n")
	return s.String()
}

// RatioChartSVG draws, per query, the median ratio of the first side's
// events per CPU-second to the second's, with its min–max over the
// rounds, on a logarithmic axis with 1× marked.
func RatioChartSVG(results []WorkloadResult) string {
	type row struct {
		q string
		s Spread
	}
	var rows []row
	var na, nb string
	lo, hi := 1.0, 1.0
	for _, r := range results {
		figs := FiguresOf(r.SideBySide)
		if len(figs) < 2 || len(figs[0].PerCPU) == 0 {
			continue
		}
		// Against each other side: a row each, named by the side when
		// there are more than one.
		for j := 1; j < len(figs); j++ {
			na, nb = figs[0].Name, figs[j].Name
			label := r.Query
			if len(figs) > 2 {
				label, nb = r.Query+" "+strings.TrimPrefix(figs[j].Name, "flink-"), "flink"
			}
			sp := RatioOf(figs[0].PerCPU, figs[j].PerCPU)
			rows = append(rows, row{label, sp})
			if !math.IsNaN(sp.Min) {
				lo, hi = min(lo, sp.Min), max(hi, sp.Max)
			}
		}
	}
	if len(rows) == 0 {
		return ""
	}
	left := chartLeft
	for _, r := range rows {
		left = max(left, 16+7*float64(len(r.q)))
	}
	l0, l1 := math.Floor(math.Log2(lo)), math.Ceil(math.Log2(hi))
	if l1 <= l0 {
		l1 = l0 + 1
	}
	plotW := chartWidth - left - chartRight
	x := func(v float64) float64 { return left + (math.Log2(v)-l0)/(l1-l0)*plotW }
	height := chartTop + chartBottom + rowHeight*float64(len(rows))
	var s strings.Builder
	fmt.Fprintf(&s, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", chartWidth, height)
	fmt.Fprintf(&s, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&s, `<text x="%.0f" y="20" font-size="14">%s/%s events per CPU-second (log scale): median, min–max over the rounds</text>`+"\n",
		left, html.EscapeString(na), html.EscapeString(nb))
	for l := l0; l <= l1; l++ {
		xx := x(math.Pow(2, l))
		stroke := "#ccc"
		if l == 0 {
			stroke = "#000"
		}
		fmt.Fprintf(&s, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="%s"/>`+"\n", xx, chartTop-5, xx, height-chartBottom+5, stroke)
		fmt.Fprintf(&s, `<text x="%.1f" y="%.0f" text-anchor="middle">%g×</text>`+"\n", xx, height-chartBottom+20, math.Pow(2, l))
	}
	for i, r := range rows {
		y := chartTop + rowHeight*float64(i) + rowHeight/2
		fmt.Fprintf(&s, `<text x="%.0f" y="%.1f" text-anchor="end">%s</text>`+"\n", left-8, y+4, html.EscapeString(r.q))
		fmt.Fprintf(&s, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#1f77b4" stroke-width="2"/>`+"\n", x(r.s.Min), y, x(r.s.Max), y)
		fmt.Fprintf(&s, `<circle cx="%.1f" cy="%.1f" r="5" fill="#1f77b4"/>`+"\n", x(r.s.Median), y)
		fmt.Fprintf(&s, `<text x="%.1f" y="%.1f" font-size="10">%.2f×</text>`+"\n", x(r.s.Max)+8, y+4, r.s.Median)
	}
	s.WriteString("</svg>\n")
	return s.String()
}

// siCount formats a count with k or M.
func siCount(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.3gM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.3gk", v/1e3)
	}
	return fmt.Sprintf("%.3g", v)
}
