package bench

import (
	"bytes"
	"errors"
	"fmt"
	"html"
	"io/fs"
	"math"
	"os"
	"slices"
	"strings"
	"time"
)

// The report file (BENCHMARKS.md) is shared by the commands that write
// it: each owns a section between two markers and replaces only that
// section, so `weir bench nexmark --write` and `weir bench gatewaymeter
// --write` can each regenerate their part of one file.

// reportTitle and reportIntro start the report file; WriteSection
// rewrites them (everything before the first section) on every write, so
// the list of commands stays the one this code knows.
const (
	reportTitle = "# Benchmarks: weir and Apache Flink"
	reportIntro = "Every section below is written by the command its heading names, with `--write`; each command replaces its own section " +
		"(between its markers) and keeps the others, and nothing here is edited by hand. Rerun a command to check or refresh its figures " +
		"(from the repository's root, after `go build -o weir ./cmd/weir` and `mvn -q -f bench/flink/pom.xml package`; " +
		"each section lists its exact flags):\n\n" +
		"* `./weir bench gatewaymeter --vs-flink --write BENCHMARKS.md`: GatewayMeter, state on the heap on both sides (hashmap).\n" +
		"* `./weir bench gatewaymeter --vs-flink --backend rocksdb --write BENCHMARKS.md`: GatewayMeter, RocksDB on both sides (weir: pebble), incremental checkpoints.\n" +
		"* `./weir bench nexmark --vs-flink --write BENCHMARKS.md`: Nexmark, state on the heap on both sides (hashmap).\n" +
		"* `./weir bench nexmark --vs-flink --backend rocksdb --write BENCHMARKS.md`: Nexmark, RocksDB on both sides (weir: pebble), incremental checkpoints."
)

// Section names one command's section of the report file.
type Section struct {
	// Name is what its markers say; Heading its title; Command the
	// command line that writes it, as the section's header names it.
	Name, Heading, Command string
	// ChartPrefix starts the names of its charts' files, so that no two
	// sections draw into the same file.
	ChartPrefix string
}

// SectionOf returns the section of a side-by-side command (command its
// name, "weir bench nexmark"; heading and prefix its hashmap section's
// heading and chart prefix) for weir's backend and Flink's (nil: the
// same as weir's). Each of weir's backends has a section of its own, so
// the file holds a hashmap run and a rocksdb run side by side; hashmap's
// (and "", weir's default) keeps the command's plain name.
func SectionOf(command, heading, prefix, backend string, flink []string) Section {
	s := Section{Name: command, Heading: heading, Command: command + " --vs-flink --write", ChartPrefix: prefix}
	if backend == "" || backend == "hashmap" {
		return s
	}
	s.Name += " --backend " + backend
	s.Command = command + " --vs-flink --backend " + backend + " --write"
	s.ChartPrefix += "-" + backend
	desc, weir := backend, ""
	if backend == "rocksdb" {
		desc = "RocksDB"
	}
	if o, err := WeirBackendOptions(backend); err == nil {
		for _, kv := range o {
			if v, ok := strings.CutPrefix(kv, "state.backend.type="); ok && v != backend {
				weir = " (weir: " + v + ")"
			}
		}
	}
	if len(flink) == 0 || (len(flink) == 1 && flink[0] == backend) {
		s.Heading += ", " + desc + " on both sides" + weir
	} else {
		s.Heading += ", weir on " + desc + weir + ", Flink on " + strings.Join(flink, " and ")
	}
	return s
}

func sectionMarkers(name string) (begin, end string) {
	return "<!-- begin: " + name + " (written by the command; do not edit) -->", "<!-- end: " + name + " -->"
}

// WriteSection replaces section name of the report file path with body,
// or appends it if the file has no such section, creating the file with
// the report's title if it does not exist, and rewrites the report's
// title and introduction. A file whose markers for name are missing one
// half or out of order is an error, not overwritten.
func WriteSection(path, name string, body []byte) error {
	old, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		old, err = []byte(reportTitle+"\n"), nil
	}
	if err != nil {
		return err
	}
	out, err := replaceSection(old, name, body)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return os.WriteFile(path, out, 0o644)
}

// replaceSection is WriteSection on the file's contents.
func replaceSection(old []byte, name string, body []byte) ([]byte, error) {
	begin, end := sectionMarkers(name)
	var sec bytes.Buffer
	sec.WriteString(begin + "\n\n")
	sec.Write(bytes.TrimSpace(body))
	sec.WriteString("\n\n" + end + "\n")
	b, e := bytes.Index(old, []byte(begin)), bytes.Index(old, []byte(end))
	var out []byte
	switch {
	case b < 0 && e < 0:
		out = bytes.TrimRight(slices.Clone(old), "\n")
		out = append(out, "\n\n"...)
		out = append(out, sec.Bytes()...)
	case b < 0 || e < 0 || e < b:
		return nil, fmt.Errorf("the markers of section %q are incomplete or out of order: fix or remove them by hand", name)
	default:
		e += len(end)
		if e < len(old) && old[e] == '\n' {
			e++
		}
		out = append(slices.Clone(old[:b]), sec.Bytes()...)
		out = append(out, old[e:]...)
	}
	return withIntro(out), nil
}

// withIntro replaces what comes before the first section of a report
// that starts with the report's title by the title and the introduction;
// a file with another first line is left as it is.
func withIntro(report []byte) []byte {
	if !bytes.HasPrefix(report, []byte(reportTitle+"\n")) {
		return report
	}
	first := bytes.Index(report, []byte("<!-- begin: "))
	if first < 0 {
		first = len(report)
	}
	out := []byte(reportTitle + "\n\n" + reportIntro + "\n\n")
	return append(out, report[first:]...)
}

// CheckpointSeries is one side's completed checkpoints in one workload,
// for CheckpointSizeChartSVG.
type CheckpointSeries struct {
	Side, Workload string
	Points         []CheckpointStat
}

// CheckpointSeriesOf returns the checkpoints of every side of r.
func CheckpointSeriesOf(r SideBySide) []CheckpointSeries {
	out := make([]CheckpointSeries, len(r.Sides))
	for i, s := range r.Sides {
		out[i] = CheckpointSeries{Side: s.Name, Workload: r.Workload, Points: s.CheckpointStats()}
	}
	return out
}

// CheckpointSizeChartSVG draws checkpoint duration against state size,
// both on logarithmic axes: a dot per completed checkpoint, coloured by
// side, and each series' median labelled with its workload. Checkpoints
// of no state are left out (a logarithmic axis has no 0); durations
// under a millisecond are drawn at one. It returns "" without points.
func CheckpointSizeChartSVG(series []CheckpointSeries) string {
	const floor = time.Millisecond
	var sides []string
	xlo, xhi, ylo, yhi := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	n := 0
	for _, s := range series {
		if !slices.Contains(sides, s.Side) {
			sides = append(sides, s.Side)
		}
		for _, p := range s.Points {
			if p.Size <= 0 {
				continue
			}
			x, y := math.Log10(float64(p.Size)), math.Log10(float64(max(p.Duration, floor))/float64(time.Millisecond))
			xlo, xhi, ylo, yhi = min(xlo, x), max(xhi, x), min(ylo, y), max(yhi, y)
			n++
		}
	}
	if n == 0 {
		return ""
	}
	x0, x1 := math.Floor(xlo), math.Ceil(xhi)
	if x1 <= x0 {
		x1 = x0 + 1
	}
	y0, y1 := math.Floor(ylo), math.Ceil(yhi)
	if y1 <= y0 {
		y1 = y0 + 1
	}
	const (
		left, right, top, bottom = 70.0, 30.0, 50.0, 50.0
		width, height            = 760.0, 460.0
	)
	pw, ph := width-left-right, height-top-bottom
	px := func(size int64) float64 { return left + (math.Log10(float64(size))-x0)/(x1-x0)*pw }
	py := func(d time.Duration) float64 {
		return top + ph - (math.Log10(float64(max(d, floor))/float64(time.Millisecond))-y0)/(y1-y0)*ph
	}
	colors := []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728"}
	colorNames := []string{"blue", "orange", "green", "red"}
	color := func(side string) (string, string) {
		i := slices.Index(sides, side) % len(colors)
		return colors[i], colorNames[i]
	}
	var s strings.Builder
	fmt.Fprintf(&s, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&s, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	var legend []string
	for _, sd := range sides {
		_, name := color(sd)
		legend = append(legend, fmt.Sprintf("%s (%s)", html.EscapeString(sd), name))
	}
	fmt.Fprintf(&s, `<text x="%.0f" y="20" font-size="14">Checkpoint duration against state size (log scales): %s</text>`+"\n", left, strings.Join(legend, ", "))
	fmt.Fprintf(&s, `<text x="%.0f" y="36" font-size="11">a dot per completed checkpoint; a series' median labelled with its workload</text>`+"\n", left)
	for d := x0; d <= x1; d++ {
		xx := left + (d-x0)/(x1-x0)*pw
		fmt.Fprintf(&s, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#ccc"/>`+"\n", xx, top, xx, top+ph)
		fmt.Fprintf(&s, `<text x="%.1f" y="%.0f" text-anchor="middle">%s</text>`+"\n", xx, top+ph+18, siBytes(math.Pow(10, d)))
	}
	fmt.Fprintf(&s, `<text x="%.0f" y="%.0f" text-anchor="middle">state size</text>`+"\n", left+pw/2, top+ph+38)
	for d := y0; d <= y1; d++ {
		yy := top + ph - (d-y0)/(y1-y0)*ph
		fmt.Fprintf(&s, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#ccc"/>`+"\n", left, yy, left+pw, yy)
		fmt.Fprintf(&s, `<text x="%.0f" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, yy+4, ms(time.Duration(math.Pow(10, d)*float64(time.Millisecond))))
	}
	for _, sr := range series {
		c, _ := color(sr.Side)
		var sizes []float64
		var durs []time.Duration
		for _, p := range sr.Points {
			if p.Size <= 0 {
				continue
			}
			fmt.Fprintf(&s, `<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s" fill-opacity="0.45"/>`+"\n", px(p.Size), py(p.Duration), c)
			sizes, durs = append(sizes, float64(p.Size)), append(durs, p.Duration)
		}
		if len(sizes) == 0 {
			continue
		}
		slices.Sort(durs)
		mx, my := px(int64(median(sizes))), py(Quantile(durs, 0.5))
		fmt.Fprintf(&s, `<circle cx="%.1f" cy="%.1f" r="5" fill="none" stroke="%s" stroke-width="2"/>`+"\n", mx, my, c)
		fmt.Fprintf(&s, `<text x="%.1f" y="%.1f" font-size="11" fill="%s">%s</text>`+"\n", mx+7, my-5, c, html.EscapeString(sr.Workload))
	}
	s.WriteString("</svg>\n")
	return s.String()
}

// siBytes formats a byte count with decimal units.
func siBytes(v float64) string {
	switch {
	case v >= 1e9:
		return fmt.Sprintf("%.3g GB", v/1e9)
	case v >= 1e6:
		return fmt.Sprintf("%.3g MB", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.3g kB", v/1e3)
	}
	return fmt.Sprintf("%.3g B", v)
}
