package gatewaymeter

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// sample is a small set of outputs with every output non-empty.
func sample() Outputs {
	return Outputs{
		TenantCost: []TenantCostMinute{
			{TenantID: "acme", WindowStart: w(0), WindowEnd: w(1), CostMicros: 420, Requests: 3},
			{TenantID: "acme", WindowStart: w(1), WindowEnd: w(2), CostMicros: 400, Requests: 1},
			{TenantID: "beta", WindowStart: w(0), WindowEnd: w(1), CostMicros: 100, Requests: 1},
		},
		ModelLatency: []ModelLatencyMinute{
			{Model: "small", WindowStart: w(0), WindowEnd: w(1), Requests: 4, P50MS: 250, P95MS: 500, P99MS: 500, MaxMS: 500},
			{Model: "large", WindowStart: w(0), WindowEnd: w(1), Requests: 1, P50MS: 2000, P95MS: 2000, P99MS: 2000, MaxMS: 2000},
		},
		Alerts: []Alert{{TenantID: "acme", WindowEnd: w(4), CostMicros: 9000, BaselineMicros: 373}},
		Orphans: []Orphan{
			{RequestID: "r12", Type: Request, TS: t0 + 5000, TenantID: "acme", Model: "small", InputTokens: 10},
			{RequestID: "r13", Type: Response, TS: t0 + 6000, OutputTokens: 5, Status: 200},
		},
		DeadLetters: []DeadLetter{
			{Partition: 0, Offset: 533, Line: `{"type":"request","request_id":"r99","tenant_id":"acme","mod`, Reason: "truncated JSON"},
			{Partition: 1, Offset: 0, Line: `<html>502 Bad Gateway</html>`, Reason: "invalid JSON at byte 0"},
		},
	}
}

func clone(o Outputs) Outputs {
	return Outputs{
		TenantCost:   slices.Clone(o.TenantCost),
		ModelLatency: slices.Clone(o.ModelLatency),
		Alerts:       slices.Clone(o.Alerts),
		Orphans:      slices.Clone(o.Orphans),
		DeadLetters:  slices.Clone(o.DeadLetters),
	}
}

func TestDiffEqual(t *testing.T) {
	exp := sample()
	act := clone(exp)
	slices.Reverse(act.TenantCost) // order does not matter
	slices.Reverse(act.DeadLetters)
	r := Diff(exp, act)
	if !r.OK() || !r.OKExceptDuplicates() {
		t.Fatalf("equal outputs differ:\n%s", r)
	}
	if !strings.HasPrefix(r.String(), "verify: OK, all 5 outputs match\n") {
		t.Errorf("report:\n%s", r)
	}
	if r := Diff(Outputs{}, Outputs{}); !r.OK() {
		t.Fatalf("empty outputs differ:\n%s", r)
	}
	if !reflect.DeepEqual(exp, sample()) {
		t.Fatal("Diff modified its argument")
	}
}

func TestDiffFindsEachKind(t *testing.T) {
	exp := sample()
	act := clone(exp)
	// missing: acme's second minute.
	act.TenantCost = slices.Delete(act.TenantCost, 1, 2)
	// extra: an alert for beta.
	extraAlert := Alert{TenantID: "beta", WindowEnd: w(3), CostMicros: 1, BaselineMicros: 0}
	act.Alerts = append(act.Alerts, extraAlert)
	// different: small's p99.
	act.ModelLatency[0].P99MS = 499
	// duplicated, equal: orphan r13 twice.
	act.Orphans = append(act.Orphans, act.Orphans[1])
	// duplicated and different: a dead letter twice, once with another reason.
	dup := act.DeadLetters[1]
	dup.Reason = "something else"
	act.DeadLetters = append(act.DeadLetters, dup)

	r := Diff(exp, act)
	if r.OK() || r.OKExceptDuplicates() {
		t.Fatalf("report OK on different outputs:\n%s", r)
	}
	type counts struct{ exp, act, missing, extra, different, duplicated int }
	want := map[string]counts{
		OutTenantCost:   {3, 2, 1, 0, 0, 0},
		OutModelLatency: {2, 2, 0, 0, 1, 0},
		OutAlerts:       {1, 2, 0, 1, 0, 0},
		OutOrphans:      {2, 3, 0, 0, 0, 1},
		OutDeadLetters:  {2, 3, 0, 0, 1, 1},
	}
	if len(r.Outputs) != 5 {
		t.Fatalf("%d outputs in the report", len(r.Outputs))
	}
	for i, o := range r.Outputs {
		if o.Name != OutputNames()[i] {
			t.Errorf("output %d is %s, want %s", i, o.Name, OutputNames()[i])
		}
		got := counts{o.Expected, o.Actual, len(o.Missing), len(o.Extra), len(o.Different), len(o.Duplicated)}
		if got != want[o.Name] {
			t.Errorf("%s: %+v, want %+v", o.Name, got, want[o.Name])
		}
	}

	byName := map[string]OutputReport{}
	for _, o := range r.Outputs {
		byName[o.Name] = o
	}
	check := func(what string, d Difference, key string, exp, act int) {
		t.Helper()
		if d.Key != key || len(d.Expected) != exp || len(d.Actual) != act {
			t.Errorf("%s: %+v, want key %q with %d expected and %d actual records", what, d, key, exp, act)
		}
	}
	check("missing", byName[OutTenantCost].Missing[0], "tenant_id=acme window_end=1764547320000 (2025-12-01T00:02:00.000Z)", 1, 0)
	check("extra", byName[OutAlerts].Extra[0], "tenant_id=beta window_end=1764547380000 (2025-12-01T00:03:00.000Z)", 0, 1)
	check("different", byName[OutModelLatency].Different[0], "model=small window_end=1764547260000 (2025-12-01T00:01:00.000Z)", 1, 1)
	check("duplicated", byName[OutOrphans].Duplicated[0], "request_id=r13", 1, 2)
	check("duplicated and different", byName[OutDeadLetters].Different[0], "partition=1 offset=0", 1, 2)
	if d := byName[OutModelLatency].Different[0]; !strings.Contains(d.Expected[0], `"p99_ms":500`) || !strings.Contains(d.Actual[0], `"p99_ms":499`) {
		t.Errorf("different values: %+v", d)
	}

	s := r.String()
	for _, line := range []string{
		"verify: 5 of 5 outputs differ",
		"tenant-cost            3         2        1        0          0           0",
		"tenant-cost: 1 missing:\n  tenant_id=acme window_end=1764547320000 (2025-12-01T00:02:00.000Z)\n" +
			`    expected {"tenant_id":"acme","window_start":1764547260000,"window_end":1764547320000,"cost_micros":400,"requests":1}` + "\n    actual   (none)\n",
		"alerts: 1 extra:",
		"model-latency: 1 different:",
		"orphans: 1 duplicated:",
		`<html>502 Bad Gateway</html>`,
	} {
		if !strings.Contains(s, line) {
			t.Errorf("report lacks %q:\n%s", line, s)
		}
	}

	// Only the first n differences of a kind are shown.
	many := Outputs{}
	for i := range 25 {
		many.Orphans = append(many.Orphans, Orphan{RequestID: RequestID(int64(i)), Type: Request})
	}
	s = Diff(many, Outputs{}).Format(3)
	if !strings.Contains(s, "orphans: 25 missing (first 3):") || strings.Count(s, "request_id=") != 3 {
		t.Errorf("truncated report:\n%s", s)
	}
}

func TestOKExceptDuplicates(t *testing.T) {
	exp := sample()
	act := clone(exp)
	act.TenantCost = append(act.TenantCost, act.TenantCost...)
	act.Alerts = append(act.Alerts, act.Alerts[0], act.Alerts[0])
	r := Diff(exp, act)
	if r.OK() || !r.OKExceptDuplicates() {
		t.Fatalf("re-emitted equal records: OK %v, OKExceptDuplicates %v\n%s", r.OK(), r.OKExceptDuplicates(), r)
	}
	if got := len(r.Outputs[0].Duplicated); got != 3 {
		t.Errorf("%d duplicated tenant-cost keys, want 3", got)
	}
}

func TestReadOutputs(t *testing.T) {
	dir := t.TempDir()
	exp := sample()
	if err := WriteOutputs(dir, exp); err != nil {
		t.Fatal(err)
	}
	got, err := ReadOutputs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, exp) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, exp)
	}

	write := func(rel, content string) {
		t.Helper()
		path := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	alert := `{"tenant_id":"acme","window_end":1764547440000,"cost_micros":9000,"baseline_micros":373}`
	// A second part file in a bucket directory re-emits the alert; an
	// in-progress file and a hidden directory are skipped.
	write("alerts/2025-12-01--00/part-1-0.jsonl", "\n"+alert+"\n")
	write("alerts/.part-1-1.inprogress", alert+"\n")
	write("alerts/.staging/part-2-0.jsonl", alert+"\n")
	if err := os.RemoveAll(filepath.Join(dir, OutOrphans)); err != nil {
		t.Fatal(err)
	}
	got, err = ReadOutputs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Alerts) != 2 || got.Alerts[0] != got.Alerts[1] || len(got.Orphans) != 0 {
		t.Fatalf("alerts %+v, orphans %+v", got.Alerts, got.Orphans)
	}
	r := Diff(exp, got)
	if len(r.Outputs[2].Duplicated) != 1 || len(r.Outputs[3].Missing) != 2 {
		t.Fatalf("report:\n%s", r)
	}

	write("tenant-cost/part-9.jsonl", `{"tenant_id":"acme","window_end":1,"cost":5}`+"\n")
	if _, err := ReadOutputs(dir); err == nil || !strings.Contains(err.Error(), "part-9.jsonl:1") || !strings.Contains(err.Error(), `unknown field "cost"`) {
		t.Fatalf("unknown field: %v", err)
	}
	write("tenant-cost/part-9.jsonl", `{"tenant_id":"acme"} {}`+"\n")
	if _, err := ReadOutputs(dir); err == nil || !strings.Contains(err.Error(), "data after the record") {
		t.Fatalf("trailing data: %v", err)
	}
	if _, err := ReadOutputs(filepath.Join(dir, "nope")); err == nil {
		t.Fatal("read a missing directory")
	}
}

// TestVerifyEndToEnd generates a trace with malformed lines, computes the
// oracle, materializes it as a run would — split over part files, and with
// a restore's re-emitted windows — and verifies it.
func TestVerifyEndToEnd(t *testing.T) {
	cfg := DefaultGenConfig()
	cfg.Requests = 50_000
	cfg.BadRate = 0.001
	trace := t.TempDir()
	if _, err := GenerateFiles(cfg, trace); err != nil {
		t.Fatal(err)
	}
	exp, err := OracleFiles(trace)
	if err != nil {
		t.Fatal(err)
	}
	if len(exp.TenantCost) == 0 || len(exp.ModelLatency) == 0 || len(exp.Alerts) == 0 || len(exp.Orphans) == 0 || len(exp.DeadLetters) == 0 {
		t.Fatalf("an empty output: %d %d %d %d %d", len(exp.TenantCost), len(exp.ModelLatency), len(exp.Alerts), len(exp.Orphans), len(exp.DeadLetters))
	}

	run := t.TempDir()
	half := len(exp.TenantCost) / 2
	first, second := clone(exp), Outputs{}
	first.TenantCost = exp.TenantCost[:half]
	// After a restore, an at-least-once sink writes the last ten minutes of
	// the first part again.
	second.TenantCost = exp.TenantCost[half-10:]
	if err := WriteOutputs(run, first); err != nil {
		t.Fatal(err)
	}
	if err := WriteOutputs(filepath.Join(run, "attempt-2"), second); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(run, "attempt-2", OutTenantCost, "part-00000.jsonl"), filepath.Join(run, OutTenantCost, "part-00001.jsonl")); err != nil {
		t.Fatal(err)
	}
	got, err := ReadOutputs(run)
	if err != nil {
		t.Fatal(err)
	}
	r := Diff(exp, got)
	if r.OK() || !r.OKExceptDuplicates() || len(r.Outputs[0].Duplicated) != 10 {
		t.Fatalf("at-least-once run:\n%s", r)
	}

	// A window lost and a cost off by one micro-dollar are found.
	got.TenantCost = slices.DeleteFunc(got.TenantCost, func(m TenantCostMinute) bool { return m == exp.TenantCost[0] })
	got.TenantCost[len(got.TenantCost)-1].CostMicros++
	r = Diff(exp, got)
	if len(r.Outputs[0].Missing) != 1 || len(r.Outputs[0].Different) != 1 || r.OKExceptDuplicates() {
		t.Fatalf("lossy run:\n%s", r)
	}
}

// TestDeadLetterInvalidUTF8 checks that a dead letter whose line is not
// valid UTF-8 survives a JSON sink: the oracle's line equals what is read
// back.
func TestDeadLetterInvalidUTF8(t *testing.T) {
	line := "{\"type\":\"request\",\"tenant_id\":\"\xff\xfe\xe2\x82\"}"
	exp, err := Oracle(readers([]string{line}))
	if err != nil {
		t.Fatal(err)
	}
	if len(exp.DeadLetters) != 1 || !strings.Contains(exp.DeadLetters[0].Reason, "invalid UTF-8") {
		t.Fatalf("dead letters %+v", exp.DeadLetters)
	}
	dir := t.TempDir()
	if err := WriteOutputs(dir, Outputs{DeadLetters: []DeadLetter{{Line: line}}}); err != nil {
		t.Fatal(err)
	}
	got, err := ReadOutputs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.DeadLetters[0].Line != exp.DeadLetters[0].Line {
		t.Fatalf("line read back %q, oracle %q", got.DeadLetters[0].Line, exp.DeadLetters[0].Line)
	}
}
