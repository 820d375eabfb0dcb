package gatewaymeter

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Outputs is the content of the job's five outputs, as the oracle computes
// it or as a run materialized it.
type Outputs struct {
	TenantCost   []TenantCostMinute
	ModelLatency []ModelLatencyMinute
	Alerts       []Alert
	Orphans      []Orphan
	DeadLetters  []DeadLetter
}

// Sort puts every output in the order of its key.
func (o *Outputs) Sort() {
	slices.SortStableFunc(o.TenantCost, func(a, b TenantCostMinute) int {
		return cmp.Or(cmp.Compare(a.TenantID, b.TenantID), cmp.Compare(a.WindowEnd, b.WindowEnd))
	})
	slices.SortStableFunc(o.ModelLatency, func(a, b ModelLatencyMinute) int {
		return cmp.Or(cmp.Compare(a.Model, b.Model), cmp.Compare(a.WindowEnd, b.WindowEnd))
	})
	slices.SortStableFunc(o.Alerts, func(a, b Alert) int {
		return cmp.Or(cmp.Compare(a.TenantID, b.TenantID), cmp.Compare(a.WindowEnd, b.WindowEnd))
	})
	slices.SortStableFunc(o.Orphans, func(a, b Orphan) int { return cmp.Compare(a.RequestID, b.RequestID) })
	slices.SortStableFunc(o.DeadLetters, func(a, b DeadLetter) int {
		return cmp.Or(cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset))
	})
}

// The names of the outputs: the sinks' names and the directories of a run's
// output directory.
const (
	OutTenantCost   = "tenant-cost"
	OutModelLatency = "model-latency"
	OutAlerts       = "alerts"
	OutOrphans      = "orphans"
	OutDeadLetters  = "dead-letters"
)

// OutputNames returns the names of the outputs in the order of reports.
func OutputNames() []string {
	return []string{OutTenantCost, OutModelLatency, OutAlerts, OutOrphans, OutDeadLetters}
}

// ReadOutputs reads a run's output directory: JSON lines under
// <dir>/tenant-cost/, model-latency/, alerts/, orphans/ and dead-letters/.
// Each directory may hold any number of files, in nested directories too;
// files and directories whose names start with "." (a sink's in-progress
// and pending files) are skipped, and so are empty lines. A missing output
// directory is an empty output. Records keep the order of the files
// (lexical by path) and of their lines; duplicates are kept.
//
// Decoding is strict: an unknown field or trailing data fails, naming the
// file and line, since it means the run and the verifier disagree on a
// schema.
func ReadOutputs(dir string) (Outputs, error) {
	var o Outputs
	if _, err := os.Stat(dir); err != nil {
		return o, err
	}
	var err error
	if o.TenantCost, err = readOutput[TenantCostMinute](dir, OutTenantCost); err != nil {
		return o, err
	}
	if o.ModelLatency, err = readOutput[ModelLatencyMinute](dir, OutModelLatency); err != nil {
		return o, err
	}
	if o.Alerts, err = readOutput[Alert](dir, OutAlerts); err != nil {
		return o, err
	}
	if o.Orphans, err = readOutput[Orphan](dir, OutOrphans); err != nil {
		return o, err
	}
	o.DeadLetters, err = readOutput[DeadLetter](dir, OutDeadLetters)
	return o, err
}

func readOutput[T any](dir, name string) ([]T, error) {
	root := filepath.Join(dir, name)
	var out []T
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path == root && errors.Is(err, fs.ErrNotExist) {
				return fs.SkipAll
			}
			return err
		}
		if path != root && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		recs, err := readJSONLines[T](path)
		out = append(out, recs...)
		return err
	})
	return out, err
}

func readJSONLines[T any](path string) ([]T, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []T
	lines := lineReader{r: newReader(f)}
	for n := 1; ; n++ {
		line, _, err := lines.next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("gatewaymeter: %s: %w", path, err)
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		var v T
		if err := dec.Decode(&v); err != nil {
			return out, fmt.Errorf("gatewaymeter: %s:%d: %w", path, n, err)
		}
		if dec.More() {
			return out, fmt.Errorf("gatewaymeter: %s:%d: data after the record", path, n)
		}
		out = append(out, v)
	}
}

// WriteOutputs writes o in the layout ReadOutputs reads: one file
// part-00000.jsonl per output directory, records in the order given.
func WriteOutputs(dir string, o Outputs) error {
	write := func(name string, n int, rec func(i int) any) error {
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			return err
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		for i := range n {
			if err := enc.Encode(rec(i)); err != nil {
				return err
			}
		}
		return os.WriteFile(filepath.Join(dir, name, "part-00000.jsonl"), buf.Bytes(), 0o644)
	}
	return errors.Join(
		write(OutTenantCost, len(o.TenantCost), func(i int) any { return o.TenantCost[i] }),
		write(OutModelLatency, len(o.ModelLatency), func(i int) any { return o.ModelLatency[i] }),
		write(OutAlerts, len(o.Alerts), func(i int) any { return o.Alerts[i] }),
		write(OutOrphans, len(o.Orphans), func(i int) any { return o.Orphans[i] }),
		write(OutDeadLetters, len(o.DeadLetters), func(i int) any { return o.DeadLetters[i] }),
	)
}

// Difference is one key on which expected and actual disagree, with every
// record under that key on each side, as JSON.
type Difference struct {
	Key      string
	Expected []string
	Actual   []string
}

// OutputReport is the comparison of one output.
type OutputReport struct {
	Name string
	// Expected and Actual count records, duplicates included.
	Expected, Actual int
	// Missing: keys expected and absent. Extra: keys present and not
	// expected. Different: keys on both sides whose records differ.
	// Duplicated: keys with more than one record on a side (an
	// at-least-once sink re-emitting after a restore); such a key may also
	// be listed as Extra or Different.
	Missing, Extra, Different, Duplicated []Difference
}

// OK reports whether the output matched exactly.
func (r OutputReport) OK() bool {
	return len(r.Missing)+len(r.Extra)+len(r.Different)+len(r.Duplicated) == 0
}

// Report is the comparison of all five outputs, in OutputNames order.
type Report struct {
	Outputs []OutputReport
}

// OK reports whether every output matched exactly: the same keys, each
// once, with equal records.
func (r Report) OK() bool {
	for _, o := range r.Outputs {
		if !o.OK() {
			return false
		}
	}
	return true
}

// OKExceptDuplicates reports whether the only differences are keys
// emitted more than once with every copy equal to the expected record —
// the exact result of an at-least-once sink.
func (r Report) OKExceptDuplicates() bool {
	for _, o := range r.Outputs {
		if len(o.Missing)+len(o.Extra)+len(o.Different) > 0 {
			return false
		}
		for _, d := range o.Duplicated {
			if len(d.Expected) != 1 {
				return false
			}
		}
	}
	return true
}

// String renders the report with up to 10 differences per kind and output.
func (r Report) String() string { return r.Format(10) }

// Format renders the report: a table of counts per output, then for each
// output and kind of difference the first n differences, each with its key
// and the records on both sides.
func (r Report) Format(n int) string {
	var b strings.Builder
	bad := 0
	for _, o := range r.Outputs {
		if !o.OK() {
			bad++
		}
	}
	if bad == 0 {
		fmt.Fprintf(&b, "verify: OK, all %d outputs match\n", len(r.Outputs))
	} else {
		fmt.Fprintf(&b, "verify: %d of %d outputs differ\n", bad, len(r.Outputs))
	}
	fmt.Fprintf(&b, "%-14s %9s %9s %8s %8s %10s %11s\n", "output", "expected", "actual", "missing", "extra", "different", "duplicated")
	for _, o := range r.Outputs {
		fmt.Fprintf(&b, "%-14s %9d %9d %8d %8d %10d %11d\n", o.Name, o.Expected, o.Actual, len(o.Missing), len(o.Extra), len(o.Different), len(o.Duplicated))
	}
	for _, o := range r.Outputs {
		for _, k := range []struct {
			name  string
			diffs []Difference
		}{{"missing", o.Missing}, {"extra", o.Extra}, {"different", o.Different}, {"duplicated", o.Duplicated}} {
			if len(k.diffs) == 0 {
				continue
			}
			shown := min(n, len(k.diffs))
			fmt.Fprintf(&b, "\n%s: %d %s", o.Name, len(k.diffs), k.name)
			if shown < len(k.diffs) {
				fmt.Fprintf(&b, " (first %d)", shown)
			}
			b.WriteString(":\n")
			for _, d := range k.diffs[:shown] {
				fmt.Fprintf(&b, "  %s\n", d.Key)
				for _, v := range d.Expected {
					fmt.Fprintf(&b, "    expected %s\n", v)
				}
				if len(d.Expected) == 0 {
					b.WriteString("    expected (none)\n")
				}
				for _, v := range d.Actual {
					fmt.Fprintf(&b, "    actual   %s\n", v)
				}
				if len(d.Actual) == 0 {
					b.WriteString("    actual   (none)\n")
				}
			}
		}
	}
	return b.String()
}

// Diff compares a run's outputs with the expected ones, each output by its
// key: (tenant_id, window_end) for tenant-cost and alerts, (model,
// window_end) for model-latency, request_id for orphans, (partition, offset)
// for dead letters. Differences are listed in key order. Neither argument is
// modified.
func Diff(expected, actual Outputs) Report {
	return Report{Outputs: []OutputReport{
		diffOutput(OutTenantCost, expected.TenantCost, actual.TenantCost,
			func(m TenantCostMinute) tenantWindow { return tenantWindow{m.TenantID, m.WindowEnd} },
			cmpTenantWindow, fmtTenantWindow),
		diffOutput(OutModelLatency, expected.ModelLatency, actual.ModelLatency,
			func(m ModelLatencyMinute) modelWindow { return modelWindow{m.Model, m.WindowEnd} },
			func(a, b modelWindow) int { return cmp.Or(cmp.Compare(a.model, b.model), cmp.Compare(a.end, b.end)) },
			func(k modelWindow) string { return fmt.Sprintf("model=%s window_end=%s", k.model, fmtMillis(k.end)) }),
		diffOutput(OutAlerts, expected.Alerts, actual.Alerts,
			func(a Alert) tenantWindow { return tenantWindow{a.TenantID, a.WindowEnd} },
			cmpTenantWindow, fmtTenantWindow),
		diffOutput(OutOrphans, expected.Orphans, actual.Orphans,
			func(o Orphan) string { return o.RequestID },
			cmp.Compare[string],
			func(k string) string { return "request_id=" + k }),
		diffOutput(OutDeadLetters, expected.DeadLetters, actual.DeadLetters,
			func(d DeadLetter) [2]int64 { return [2]int64{int64(d.Partition), d.Offset} },
			func(a, b [2]int64) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) },
			func(k [2]int64) string { return fmt.Sprintf("partition=%d offset=%d", k[0], k[1]) }),
	}}
}

func cmpTenantWindow(a, b tenantWindow) int {
	return cmp.Or(cmp.Compare(a.tenant, b.tenant), cmp.Compare(a.end, b.end))
}

func fmtTenantWindow(k tenantWindow) string {
	return fmt.Sprintf("tenant_id=%s window_end=%s", k.tenant, fmtMillis(k.end))
}

// fmtMillis shows a window end as stored, and as a UTC time to read.
func fmtMillis(ms int64) string {
	return fmt.Sprintf("%d (%s)", ms, time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z"))
}

func diffOutput[T comparable, K comparable](name string, expected, actual []T, key func(T) K, cmpKey func(a, b K) int, keyString func(K) string) OutputReport {
	type sides struct{ exp, act []T }
	groups := make(map[K]*sides)
	var keys []K
	get := func(k K) *sides {
		s := groups[k]
		if s == nil {
			s = &sides{}
			groups[k] = s
			keys = append(keys, k)
		}
		return s
	}
	for _, v := range expected {
		s := get(key(v))
		s.exp = append(s.exp, v)
	}
	for _, v := range actual {
		s := get(key(v))
		s.act = append(s.act, v)
	}
	slices.SortFunc(keys, cmpKey)

	r := OutputReport{Name: name, Expected: len(expected), Actual: len(actual)}
	for _, k := range keys {
		s := groups[k]
		d := Difference{Key: keyString(k), Expected: render(s.exp), Actual: render(s.act)}
		switch {
		case len(s.act) == 0:
			r.Missing = append(r.Missing, d)
		case len(s.exp) == 0:
			r.Extra = append(r.Extra, d)
		case !sameValues(s.exp, s.act):
			r.Different = append(r.Different, d)
		}
		if len(s.exp) > 1 || len(s.act) > 1 {
			r.Duplicated = append(r.Duplicated, d)
		}
	}
	return r
}

// sameValues reports whether a and b hold the same distinct values.
func sameValues[T comparable](a, b []T) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	for _, x := range b {
		if !slices.Contains(a, x) {
			return false
		}
	}
	return true
}

func render[T any](vs []T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			out[i] = fmt.Sprintf("%+v", v)
			continue
		}
		out[i] = strings.TrimSuffix(buf.String(), "\n")
	}
	return out
}
