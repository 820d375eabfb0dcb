package gatewaymeter_test

// An oracle for GatewayMeter written from its specification
// (shared/gatewaymeter.md) alone. It shares no code with the job: it does not
// call the package's parser, Join, Cost, WindowStart, Percentile,
// CostHistory or Oracle, nor use its constants. It decides which lines are
// malformed with encoding/json, pairs events by request_id over the whole
// trace, prices them with its own copy of the price table, and computes the
// windows, the nearest-rank percentiles and the alert rule in its own way.
// The package's record types are used only to hold its results, so that
// they compare with a run's output field by field.
//
// Where the specification is silent on what makes a line malformed (empty
// identifiers, fields of the other event type, bounds of the integers), it
// follows the parser's documented contract, which is the job's interface.

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	gm "github.com/weirstream/weir/examples/gatewaymeter"
)

// The time rules of the specification, in milliseconds of event time.
const (
	specWindow        = 60_000     // tumbling one-minute windows
	specOrphanTimeout = 5 * 60_000 // "no partner 5 minutes of event time after its first event"
	specDisorderBound = 5_000      // "bounded out-of-orderness of 5 s"
	specMaxTokens     = 1_000_000_000
)

// specRules are the business rules of the specification. The oracle runs
// with specDefaultRules; the mutation test runs it with one rule changed, to
// stand for a job with that bug.
type specRules struct {
	// prices maps a model to its input and output price, in micro-dollars
	// per token.
	prices map[string][2]int64
	// rank is the 1-based rank of the P-th percentile in a sorted sample
	// of n.
	rank func(p, n int64) int64
	// eventTime is the time a request is windowed by.
	eventTime func(start, end int64) int64
	// The alert rule: remember up to history minutes; with at least
	// minHistory remembered, fire when cost × k > factor × sum.
	history, minHistory, factor int
}

func specDefaultRules() specRules {
	return specRules{
		prices: map[string][2]int64{
			"small":  {1, 2},
			"medium": {3, 15},
			"large":  {15, 75},
		},
		rank:       specNearestRank,
		eventTime:  func(_, end int64) int64 { return end },
		history:    5,
		minHistory: 3,
		factor:     3,
	}
}

// specNearestRank is k = ceil(P·n/100) in integers: the quotient, plus one
// if the division has a remainder.
func specNearestRank(p, n int64) int64 {
	k := p * n / 100
	if p*n%100 != 0 {
		k++
	}
	return k
}

// specEvent is one valid line.
type specEvent struct {
	response bool
	id       string
	tenant   string // request
	model    string // request
	ts       int64
	in       int64 // request
	out      int64 // response
	status   int64 // response
	part     int
	off      int64
}

type specLine struct {
	off  int64
	text []byte
}

// specSplitLines splits a partition into lines as the file source reads
// them: a line ends at "\n", and its text drops that "\n" and a "\r" just
// before it; a last line without a newline is still a line; the offset is
// that of the line's first byte.
func specSplitLines(data []byte) []specLine {
	var out []specLine
	var off int64
	for len(data) > 0 {
		n := bytes.IndexByte(data, '\n')
		text, size := data, len(data)
		if n >= 0 {
			text, size = data[:n], n+1
			if len(text) > 0 && text[len(text)-1] == '\r' {
				text = text[:len(text)-1]
			}
		}
		out = append(out, specLine{off: off, text: text})
		off += int64(size)
		data = data[size:]
	}
	return out
}

var specInteger = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)

// The fields of each event type, as in the specification's examples.
var (
	specRequestFields  = []string{"type", "request_id", "tenant_id", "model", "ts", "input_tokens"}
	specResponseFields = []string{"type", "request_id", "ts", "output_tokens", "status"}
)

// specParse returns the event of a line, or why the line is malformed.
func specParse(line []byte, prices map[string][2]int64) (specEvent, string) {
	var e specEvent
	if !utf8.Valid(line) {
		return e, "invalid UTF-8"
	}
	if !json.Valid(line) {
		return e, "not JSON"
	}
	if t := bytes.TrimLeft(line, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return e, "not a JSON object"
	}
	fields := map[string]json.RawMessage{}
	dec := json.NewDecoder(bytes.NewReader(line))
	if _, err := dec.Token(); err != nil { // '{'
		return e, err.Error()
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return e, err.Error()
		}
		name := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return e, err.Error()
		}
		if !slices.Contains(specRequestFields, name) && !slices.Contains(specResponseFields, name) {
			continue // unknown fields are allowed
		}
		if _, dup := fields[name]; dup {
			return e, "duplicate field " + name
		}
		fields[name] = bytes.TrimSpace(raw)
	}

	str := func(name string) (string, string) {
		raw := fields[name]
		if len(raw) == 0 || raw[0] != '"' {
			return "", name + " is not a string"
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", err.Error()
		}
		return s, ""
	}
	integer := func(name string, lo, hi int64) (int64, string) {
		raw := fields[name]
		if !specInteger.Match(raw) {
			return 0, name + " is not an integer"
		}
		v, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil {
			return 0, name + " is out of range"
		}
		if v < lo || v > hi {
			return 0, fmt.Sprintf("%s is %d, outside [%d, %d]", name, v, lo, hi)
		}
		return v, ""
	}

	if _, ok := fields["type"]; !ok {
		return e, "no type"
	}
	typ, why := str("type")
	if why != "" {
		return e, why
	}
	var want []string
	switch typ {
	case "request":
		want = specRequestFields
	case "response":
		want, e.response = specResponseFields, true
	default:
		return e, "unknown type " + typ
	}
	for name := range fields {
		if !slices.Contains(want, name) {
			return e, name + " does not belong in a " + typ
		}
	}
	for _, name := range want {
		if _, ok := fields[name]; !ok {
			return e, "missing " + name
		}
	}
	if e.id, why = str("request_id"); why != "" {
		return e, why
	}
	if e.id == "" {
		return e, "empty request_id"
	}
	if e.ts, why = integer("ts", 0, 1<<63-1); why != "" {
		return e, why
	}
	if e.response {
		if e.out, why = integer("output_tokens", 0, specMaxTokens); why != "" {
			return e, why
		}
		if e.status, why = integer("status", 100, 599); why != "" {
			return e, why
		}
		return e, ""
	}
	if e.tenant, why = str("tenant_id"); why != "" {
		return e, why
	}
	if e.tenant == "" {
		return e, "empty tenant_id"
	}
	if e.model, why = str("model"); why != "" {
		return e, why
	}
	if _, ok := prices[e.model]; !ok {
		return e, "no price for model " + e.model
	}
	if e.in, why = integer("input_tokens", 0, specMaxTokens); why != "" {
		return e, why
	}
	return e, ""
}

// specJSONString is a dead letter's line as it reads back from a sink's
// JSON output: the line as a JSON string, through encoding/json both ways.
func specJSONString(line []byte) string {
	b, err := json.Marshal(string(line))
	if err != nil {
		panic(err)
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		panic(err)
	}
	return s
}

type specTenantWindow struct {
	tenant string
	end    int64
}

type specModelWindow struct {
	model string
	end   int64
}

// specResult is the expected output of a trace, and the latency samples
// behind each model-latency record (for the mutation test).
type specResult struct {
	out       gm.Outputs
	latencies map[specModelWindow][]int64 // sorted
}

// specOracle computes every output of a failure-free run over a bounded
// trace, partitions[p] being partition p's bytes. At the end of a bounded
// input the watermark passes every window and timer, so every window is
// emitted and every unpaired event is an orphan.
//
// It fails on a trace outside the specification's assumptions, on which the
// job's output would depend on arrival order: an event more than the
// watermark's bound behind its partition's largest ts before it (the job
// would drop it as late), two requests or two responses with one id, a
// response before its request, or one more than the orphan timeout after
// it (the timer may fire before it arrives).
func specOracle(partitions [][]byte, rules specRules) (specResult, error) {
	tr, err := specRead(partitions, rules.prices)
	if err != nil {
		return specResult{}, err
	}
	return specCompute(tr, rules)
}

// specTrace is a trace read: its dead letters and its events by request
// id, in the order the ids first appear.
type specTrace struct {
	dead  []gm.DeadLetter
	ids   []string
	pairs map[string]*specPair
}

type specPair struct{ req, resp *specEvent }

// specRead reads a trace: it splits the lines, parses them, checks the
// disorder bound and groups the events by request id.
func specRead(partitions [][]byte, prices map[string][2]int64) (specTrace, error) {
	tr := specTrace{pairs: map[string]*specPair{}}
	for p, data := range partitions {
		var maxTS int64 = -1
		for _, l := range specSplitLines(data) {
			e, why := specParse(l.text, prices)
			if why != "" {
				tr.dead = append(tr.dead, gm.DeadLetter{
					Partition: p, Offset: l.off, Line: specJSONString(l.text), Reason: why})
				continue
			}
			if maxTS >= 0 && e.ts < maxTS-specDisorderBound {
				return tr, fmt.Errorf("partition %d offset %d: ts %d is more than %d ms behind %d: late data", p, l.off, e.ts, specDisorderBound, maxTS)
			}
			maxTS = max(maxTS, e.ts)
			e.part, e.off = p, l.off
			pr := tr.pairs[e.id]
			if pr == nil {
				pr = &specPair{}
				tr.pairs[e.id] = pr
				tr.ids = append(tr.ids, e.id)
			}
			side := &pr.req
			if e.response {
				side = &pr.resp
			}
			if *side != nil {
				return tr, fmt.Errorf("request id %q: two events of one type, partition %d offset %d and partition %d offset %d", e.id, (*side).part, (*side).off, p, l.off)
			}
			*side = &e
		}
	}
	return tr, nil
}

// specCompute computes the outputs of a trace read under rules.
func specCompute(tr specTrace, rules specRules) (specResult, error) {
	var res specResult
	res.out.DeadLetters = slices.Clone(tr.dead)
	type costSum struct{ cost, n int64 }
	costs := map[specTenantWindow]*costSum{}
	res.latencies = map[specModelWindow][]int64{}
	for _, id := range tr.ids {
		pr := tr.pairs[id]
		if pr.req == nil || pr.resp == nil {
			e := pr.req
			o := gm.Orphan{RequestID: id, Type: "request"}
			if e == nil {
				e = pr.resp
				o.Type, o.OutputTokens, o.Status = "response", e.out, int(e.status)
			} else {
				o.TenantID, o.Model, o.InputTokens = e.tenant, e.model, e.in
			}
			o.TS = e.ts
			res.out.Orphans = append(res.out.Orphans, o)
			continue
		}
		latency := pr.resp.ts - pr.req.ts
		if latency < 0 {
			return res, fmt.Errorf("request id %q: the response is %d ms before the request", id, -latency)
		}
		if latency > specOrphanTimeout {
			return res, fmt.Errorf("request id %q: the response is %d ms after the request, beyond the orphan timer", id, latency)
		}
		price := rules.prices[pr.req.model]
		cost := pr.req.in*price[0] + pr.resp.out*price[1]
		t := rules.eventTime(pr.req.ts, pr.resp.ts)
		end := (t/specWindow + 1) * specWindow // ts ≥ 0: integer division rounds down
		tw := specTenantWindow{pr.req.tenant, end}
		if costs[tw] == nil {
			costs[tw] = &costSum{}
		}
		costs[tw].cost += cost
		costs[tw].n++
		mw := specModelWindow{pr.req.model, end}
		res.latencies[mw] = append(res.latencies[mw], latency)
	}

	for tw, c := range costs {
		res.out.TenantCost = append(res.out.TenantCost, gm.TenantCostMinute{
			TenantID: tw.tenant, WindowStart: tw.end - specWindow, WindowEnd: tw.end, CostMicros: c.cost, Requests: c.n})
	}
	for mw, lat := range res.latencies {
		slices.Sort(lat)
		n := int64(len(lat))
		at := func(p int64) int64 { return lat[rules.rank(p, n)-1] }
		res.out.ModelLatency = append(res.out.ModelLatency, gm.ModelLatencyMinute{
			Model: mw.model, WindowStart: mw.end - specWindow, WindowEnd: mw.end, Requests: n,
			P50MS: at(50), P95MS: at(95), P99MS: at(99), MaxMS: lat[n-1]})
	}

	// Alerts: each tenant's minutes in window order.
	byTenant := map[string][]gm.TenantCostMinute{}
	for _, m := range res.out.TenantCost {
		byTenant[m.TenantID] = append(byTenant[m.TenantID], m)
	}
	for _, tenant := range slices.Sorted(maps.Keys(byTenant)) {
		minutes := byTenant[tenant]
		slices.SortFunc(minutes, func(a, b gm.TenantCostMinute) int { return cmp.Compare(a.WindowEnd, b.WindowEnd) })
		var remembered []int64
		for _, m := range minutes {
			var sum int64
			for _, c := range remembered {
				sum += c
			}
			k := int64(len(remembered))
			if len(remembered) >= rules.minHistory && m.CostMicros*k > int64(rules.factor)*sum {
				res.out.Alerts = append(res.out.Alerts, gm.Alert{TenantID: tenant, WindowEnd: m.WindowEnd, CostMicros: m.CostMicros, BaselineMicros: sum / k})
			}
			remembered = append(remembered, m.CostMicros)
			if len(remembered) > rules.history {
				remembered = remembered[1:]
			}
		}
	}
	return res, nil
}

// specDiff compares got with want output by output, by the keys of the
// specification, field by field, and returns one line per difference
// (missing, extra, duplicated or different record), sorted; none if they
// are equal. A dead letter's reason is free text: it must be non-empty,
// and is not compared.
func specDiff(want, got gm.Outputs) []string {
	var d []string
	d = append(d, specDiffOutput("tenant-cost", want.TenantCost, got.TenantCost,
		func(m gm.TenantCostMinute) string {
			return fmt.Sprintf("tenant_id=%s window_end=%d", m.TenantID, m.WindowEnd)
		}, nil)...)
	d = append(d, specDiffOutput("model-latency", want.ModelLatency, got.ModelLatency,
		func(m gm.ModelLatencyMinute) string {
			return fmt.Sprintf("model=%s window_end=%d", m.Model, m.WindowEnd)
		}, nil)...)
	d = append(d, specDiffOutput("alerts", want.Alerts, got.Alerts,
		func(a gm.Alert) string { return fmt.Sprintf("tenant_id=%s window_end=%d", a.TenantID, a.WindowEnd) }, nil)...)
	d = append(d, specDiffOutput("orphans", want.Orphans, got.Orphans,
		func(o gm.Orphan) string { return "request_id=" + o.RequestID }, nil)...)
	d = append(d, specDiffOutput("dead-letters", want.DeadLetters, got.DeadLetters,
		func(l gm.DeadLetter) string { return fmt.Sprintf("partition=%d offset=%d", l.Partition, l.Offset) },
		func(l gm.DeadLetter) (gm.DeadLetter, string) {
			why := ""
			if l.Reason == "" {
				why = "no reason"
			}
			l.Reason = ""
			return l, why
		})...)
	return d
}

// specDiffOutput diffs one output by key. norm, if set, returns the part
// of a record that is compared, and what is wrong with the record on its
// own.
func specDiffOutput[T comparable](name string, want, got []T, key func(T) string, norm func(T) (T, string)) []string {
	if norm == nil {
		norm = func(v T) (T, string) { return v, "" }
	}
	var d []string
	expected := map[string]T{}
	for _, v := range want {
		k := key(v)
		if _, dup := expected[k]; dup {
			d = append(d, fmt.Sprintf("%s %s: the expected output has the key twice", name, k))
		}
		expected[k] = v
	}
	seen := map[string]int{}
	for _, v := range got {
		k := key(v)
		seen[k]++
		if seen[k] == 2 {
			d = append(d, fmt.Sprintf("%s %s: duplicated", name, k))
		}
		w, ok := expected[k]
		if !ok {
			d = append(d, fmt.Sprintf("%s %s: extra %s", name, k, specJSON(v)))
			continue
		}
		nv, why := norm(v)
		if why != "" {
			d = append(d, fmt.Sprintf("%s %s: %s: %s", name, k, why, specJSON(v)))
		}
		if nw, _ := norm(w); nv != nw {
			d = append(d, fmt.Sprintf("%s %s: different\n\twant %s\n\tgot  %s", name, k, specJSON(w), specJSON(v)))
		}
	}
	for k, w := range expected {
		if seen[k] == 0 {
			d = append(d, fmt.Sprintf("%s %s: missing %s", name, k, specJSON(w)))
		}
	}
	slices.Sort(d)
	return d
}

// specJSON shows a record as JSON, so that every byte of its strings shows.
func specJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%+v", v)
	}
	return string(b)
}

// specReport renders up to 20 differences.
func specReport(d []string) string {
	if len(d) > 20 {
		return strings.Join(d[:20], "\n") + fmt.Sprintf("\n... and %d more", len(d)-20)
	}
	return strings.Join(d, "\n")
}
