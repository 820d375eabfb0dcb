package gatewaymeter

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// t0 starts the first window of the hand-written traces:
// 2025-12-01T00:00:00Z. Windows end at w(1), w(2), ...
const t0 = DefaultStartMS

func w(n int64) int64 { return t0 + n*WindowSize }

func req(id, tenant, model string, ts, in int64) string {
	return fmt.Sprintf(`{"type":"request","request_id":%q,"tenant_id":%q,"model":%q,"ts":%d,"input_tokens":%d}`, id, tenant, model, ts, in)
}

func resp(id string, ts, out int64, status int) string {
	return fmt.Sprintf(`{"type":"response","request_id":%q,"ts":%d,"output_tokens":%d,"status":%d}`, id, ts, out, status)
}

func readers(parts ...[]string) []io.Reader {
	rs := make([]io.Reader, len(parts))
	for p, ls := range parts {
		rs[p] = strings.NewReader(strings.Join(ls, "\n") + "\n")
	}
	return rs
}

// TestOracleHandComputed runs the oracle over a small trace on two
// partitions whose every output was computed by hand in the comments.
//
//	request  tenant  model   start    end      latency  in    out   cost                  window end
//	r01      acme    small   +1000    +1500    500      100   50    100·1+50·2    = 200   w1
//	r02      acme    medium  +2000    +2300    300      10    10    10·3+10·15    = 180   w1
//	r14      acme    small   +10000   +10250   250      20    10    20·1+10·2     = 40    w1
//	r03      acme    small   +61000   +61200   200      200   100   200+200       = 400   w2
//	r04      acme    small   +120500  +121000  500      100   100   100+200       = 300   w3
//	r05      acme    large   +180000  +182000  2000     100   100   100·15+100·75 = 9000  w4
//	r06      beta    small   +3000    +3100    100      100   0                   = 100   w1
//	r07      beta    small   +62000   +62700   700      100   0                   = 100   w2
//	r08      beta    small   +122000  +122050  50       100   0                   = 100   w3
//	r09      beta    small   +183000  +183900  900      100   100                 = 300   w4
//	r10      gamma   small   +4000    +4400    400      100   0                   = 100   w1
//	r11      gamma   medium  +59000   +60000   1000     1000  1000  3000+15000    = 18000 w2 (ends on w1: exclusive)
//	r12      acme    small   +5000    -        no response: an orphan request
//	r13      -       -       -        +6000    no request: an orphan response
func TestOracleHandComputed(t *testing.T) {
	p0 := []string{
		req("r01", "acme", "small", t0+1000, 100),
		resp("r06", t0+3100, 0, 200),
		req("r02", "acme", "medium", t0+2000, 10), // 1.1 s behind: within the bound
		req("r10", "gamma", "small", t0+4000, 100),
		req("r12", "acme", "small", t0+5000, 10),
		`{"type":"request","request_id":"r99","tenant_id":"acme","mod`, // truncated
		req("r14", "acme", "small", t0+10000, 20),
		resp("r11", t0+60000, 1000, 200),
		req("r03", "acme", "small", t0+61000, 200),
		resp("r07", t0+62700, 0, 200),
		req("r04", "acme", "small", t0+120500, 100),
		resp("r08", t0+122050, 0, 200),
		resp("r05", t0+182000, 100, 200),
		req("r09", "beta", "small", t0+183000, 100),
	}
	p1 := []string{
		resp("r01", t0+1500, 50, 200),
		resp("r02", t0+2300, 10, 200),
		req("r06", "beta", "small", t0+3000, 100),
		resp("r10", t0+4400, 0, 200),
		resp("r13", t0+6000, 5, 200),
		resp("r14", t0+10250, 10, 200),
		req("r11", "gamma", "medium", t0+59000, 1000),
		`{"type":"heartbeat","request_id":"r98","ts":1}`, // unknown type
		resp("r03", t0+61200, 100, 200),
		req("r07", "beta", "small", t0+62000, 100),
		resp("r04", t0+121000, 100, 200),
		req("r08", "beta", "small", t0+122000, 100),
		req("r05", "acme", "large", t0+180000, 100),
		resp("r09", t0+183900, 100, 200),
	}
	got, err := Oracle(readers(p0, p1))
	if err != nil {
		t.Fatal(err)
	}
	cost := func(tenant string, end, micros, n int64) TenantCostMinute {
		return TenantCostMinute{TenantID: tenant, WindowStart: end - WindowSize, WindowEnd: end, CostMicros: micros, Requests: n}
	}
	lat := func(model string, end, n, p50, p95, p99, mx int64) ModelLatencyMinute {
		return ModelLatencyMinute{Model: model, WindowStart: end - WindowSize, WindowEnd: end, Requests: n, P50MS: p50, P95MS: p95, P99MS: p99, MaxMS: mx}
	}
	offset := func(lines []string, i int) int64 {
		var n int64
		for _, l := range lines[:i] {
			n += int64(len(l)) + 1
		}
		return n
	}
	want := Outputs{
		TenantCost: []TenantCostMinute{
			cost("acme", w(1), 200+180+40, 3),
			cost("acme", w(2), 400, 1),
			cost("acme", w(3), 300, 1),
			cost("acme", w(4), 9000, 1),
			cost("beta", w(1), 100, 1),
			cost("beta", w(2), 100, 1),
			cost("beta", w(3), 100, 1),
			cost("beta", w(4), 300, 1),
			cost("gamma", w(1), 100, 1),
			cost("gamma", w(2), 18000, 1),
		},
		// Nearest rank, k = ceil(P·n/100):
		//   large w4:  [2000]
		//   medium w1: [300]; medium w2: [1000]
		//   small w1:  [100 250 400 500]  p50 k=2 → 250, p95 k=ceil(3.8)=4 → 500, p99 k=4 → 500
		//   small w2:  [200 700]          p50 k=1 → 200, p95 k=ceil(1.9)=2 → 700
		//   small w3:  [50 500]           p50 k=1 → 50,  p95 k=2 → 500
		//   small w4:  [900]
		ModelLatency: []ModelLatencyMinute{
			lat("large", w(4), 1, 2000, 2000, 2000, 2000),
			lat("medium", w(1), 1, 300, 300, 300, 300),
			lat("medium", w(2), 1, 1000, 1000, 1000, 1000),
			lat("small", w(1), 4, 250, 500, 500, 500),
			lat("small", w(2), 2, 200, 700, 700, 700),
			lat("small", w(3), 2, 50, 500, 500, 500),
			lat("small", w(4), 1, 900, 900, 900, 900),
		},
		// acme at w4: remembered [420 400 300], k=3, sum=1120;
		//   9000·3 = 27000 > 3·1120 = 3360: fires, baseline 1120/3 = 373.
		// beta at w4: remembered [100 100 100]; 300·3 = 900 is not > 900.
		// gamma at w2: 18000 is far above 100, but k=1 < 3.
		// acme at w2, w3: k = 1, 2 < 3.
		Alerts: []Alert{{TenantID: "acme", WindowEnd: w(4), CostMicros: 9000, BaselineMicros: 373}},
		Orphans: []Orphan{
			{RequestID: "r12", Type: Request, TS: t0 + 5000, TenantID: "acme", Model: "small", InputTokens: 10},
			{RequestID: "r13", Type: Response, TS: t0 + 6000, OutputTokens: 5, Status: 200},
		},
		DeadLetters: []DeadLetter{
			{Partition: 0, Offset: offset(p0, 5), Line: p0[5], Reason: "truncated JSON: the line ends at byte 60 inside the object"},
			{Partition: 1, Offset: offset(p1, 7), Line: p1[7], Reason: `unknown type "heartbeat"`},
		},
	}
	if r := Diff(want, got); !r.OK() {
		t.Fatalf("oracle differs from the hand-computed outputs:\n%s", r)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("oracle output not in key order:\n got %+v\nwant %+v", got, want)
	}
}

func TestOracleRejectsUnpredictableTraces(t *testing.T) {
	for _, tc := range []struct {
		name   string
		parts  [][]string
		reason string
	}{
		{"two requests with one id",
			[][]string{{req("r1", "a", "small", t0, 1)}, {req("r1", "b", "small", t0+1, 1)}},
			`request id "r1" has two requests`},
		{"a response before its request",
			[][]string{{req("r1", "a", "small", t0+1000, 1)}, {resp("r1", t0+999, 1, 200)}},
			`response at 1764547200999 is before the request`},
		{"a response after the orphan timeout",
			[][]string{{req("r1", "a", "small", t0, 1)}, {resp("r1", t0+OrphanTimeout+1, 1, 200)}},
			`more than the orphan timeout`},
		{"an event the watermark makes late",
			[][]string{{req("r1", "a", "small", t0+10000, 1), req("r2", "a", "small", t0+4999, 1)}},
			`partition 0 offset 105: ts 1764547204999 is 5001 ms behind`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Oracle(readers(tc.parts...))
			if err == nil || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("error %v, want one containing %q", err, tc.reason)
			}
		})
	}

	// At the bounds, the trace is predictable.
	_, err := Oracle(readers(
		[]string{req("r1", "a", "small", t0+10000, 1), req("r2", "a", "small", t0+5000, 1)},
		[]string{resp("r2", t0+5000, 1, 200), resp("r1", t0+10000+OrphanTimeout, 1, 200)},
	))
	if err != nil {
		t.Fatal(err)
	}
}

// TestOracleLinesAndOffsets checks line splitting: a last line without a
// newline, empty lines (dead letters too), lines longer than the read
// buffer, and nil partitions.
func TestOracleLinesAndOffsets(t *testing.T) {
	long := `{"type":"request","x":"` + strings.Repeat("y", 3*bufSize) + `"}`
	data := "\n" + long + "\n" + req("r1", "a", "small", t0, 1) + "\n" + resp("r1", t0+5, 1, 200)
	out, err := Oracle([]io.Reader{nil, strings.NewReader(data)})
	if err != nil {
		t.Fatal(err)
	}
	want := []DeadLetter{
		{Partition: 1, Offset: 0, Line: "", Reason: "empty line"},
		{Partition: 1, Offset: 1, Line: long, Reason: `missing field "request_id" in a request`},
	}
	if !reflect.DeepEqual(out.DeadLetters, want) {
		t.Fatalf("dead letters %+v", out.DeadLetters)
	}
	if len(out.TenantCost) != 1 || out.TenantCost[0].CostMicros != 3 || len(out.Orphans) != 0 {
		t.Fatalf("outputs %+v", out)
	}
}

// TestOracleCRLF: a "\r\n" line ending is not part of the line, as the
// file source reads it; a last line without "\n" keeps its "\r".
func TestOracleCRLF(t *testing.T) {
	data := "{\"type\":\"heartbeat\"}\r\n" + req("r1", "a", "small", t0, 1) + "\r\n" + resp("r1", t0+5, 1, 200) + "\r\n{\"x\r"
	out, err := Oracle([]io.Reader{strings.NewReader(data)})
	if err != nil {
		t.Fatal(err)
	}
	want := []DeadLetter{
		{Partition: 0, Offset: 0, Line: `{"type":"heartbeat"}`, Reason: `unknown type "heartbeat"`},
		{Partition: 0, Offset: int64(strings.LastIndex(data, "\n") + 1), Line: "{\"x\r", Reason: "invalid JSON at byte 3: want a string character, got byte 0x0d"},
	}
	if !reflect.DeepEqual(out.DeadLetters, want) {
		t.Fatalf("dead letters %+v, want %+v", out.DeadLetters, want)
	}
	if len(out.TenantCost) != 1 || len(out.Orphans) != 0 {
		t.Fatalf("outputs %+v", out)
	}
}

func TestPercentileNearestRank(t *testing.T) {
	s := []int64{15, 20, 35, 40, 50}
	for _, tc := range []struct {
		p    int
		want int64
	}{{0, 15}, {1, 15}, {20, 15}, {21, 20}, {30, 20}, {40, 20}, {50, 35}, {95, 50}, {99, 50}, {100, 50}} {
		if got := Percentile(s, tc.p); got != tc.want {
			t.Errorf("P%d of %v = %d, want %d", tc.p, s, got, tc.want)
		}
	}
	hundred := make([]int64, 100)
	for i := range hundred {
		hundred[i] = int64(i + 1)
	}
	if Percentile(hundred, 95) != 95 || Percentile(hundred, 99) != 99 || Percentile(hundred, 50) != 50 {
		t.Error("percentiles of 1..100")
	}
	if Percentile(nil, 50) != 0 {
		t.Error("percentile of nothing")
	}
}

func TestWindows(t *testing.T) {
	for _, tc := range []struct{ ts, start int64 }{
		{t0, t0}, {t0 + 59_999, t0}, {t0 + 60_000, t0 + 60_000}, {0, 0}, {-1, -60_000},
	} {
		if got := WindowStart(tc.ts); got != tc.start || WindowEnd(tc.ts) != tc.start+WindowSize {
			t.Errorf("WindowStart(%d) = %d, want %d", tc.ts, got, tc.start)
		}
	}
}

// TestCostHistory steps the alert rule through a tenant's minutes.
func TestCostHistory(t *testing.T) {
	var h CostHistory
	steps := []struct {
		cost     int64
		fires    bool
		baseline int64
	}{
		{100, false, 0},  // k=0
		{1000, false, 0}, // k=1: [100]
		{1000, false, 0}, // k=2: [100 1000]
		{701, false, 0},  // k=3: [100 1000 1000], sum 2100; 701·3 = 2103 is not > 6300
		{2801, true, 700},
		// k=4: [100 1000 1000 701], sum 2801; 2801·4 = 11204 > 8403; baseline 2801/4 = 700
		{3362, true, 1120},
		// k=5: [100 1000 1000 701 2801], sum 5602; 3362·5 = 16810 > 16806; baseline 5602/5 = 1120
		{5318, false, 0},
		// k=5, 100 forgotten: [1000 1000 701 2801 3362], sum 8864; 5318·5 = 26590 is not > 26592
	}
	for i, s := range steps {
		a, fired := h.Observe(TenantCostMinute{TenantID: "t", WindowEnd: w(int64(i + 1)), CostMicros: s.cost})
		if fired != s.fires || fired && (a.BaselineMicros != s.baseline || a.CostMicros != s.cost || a.WindowEnd != w(int64(i+1)) || a.TenantID != "t") {
			t.Errorf("minute %d cost %d: fired %v %+v, want %v baseline %d (history %v)", i+1, s.cost, fired, a, s.fires, s.baseline, h.Costs)
		}
	}
	if want := []int64{1000, 701, 2801, 3362, 5318}; !reflect.DeepEqual(h.Costs, want) {
		t.Errorf("history %v, want %v", h.Costs, want)
	}
}

func TestJoinRejects(t *testing.T) {
	r := Event{Type: Request, RequestID: "a", TenantID: "t", Model: ModelSmall, TS: 10}
	for _, tc := range []struct{ a, b Event }{
		{r, r},
		{r, Event{Type: Response, RequestID: "b", TS: 10}},
		{r, Event{Type: Response, RequestID: "a", TS: 9}},
	} {
		if rec, err := Join(tc.a, tc.b); err == nil {
			t.Errorf("Join(%+v, %+v) = %+v", tc.a, tc.b, rec)
		}
	}
}

// BenchmarkOracle reports the oracle's throughput in MB/s of trace.
func BenchmarkOracle(b *testing.B) {
	cfg := DefaultGenConfig()
	cfg.Requests = 100_000
	cfg.BadRate = 0.001
	parts, _ := generate(b, cfg)
	var n int64
	for _, p := range parts {
		n += int64(len(p))
	}
	b.SetBytes(n)
	for b.Loop() {
		rs := make([]io.Reader, len(parts))
		for p := range parts {
			rs[p] = bytes.NewReader(parts[p])
		}
		if _, err := Oracle(rs); err != nil {
			b.Fatal(err)
		}
	}
}

// TestModelLatencyMinuteBySelection: the percentiles and maximum that
// NewModelLatencyMinute selects equal Percentile's over the sorted
// sample, for seeded samples of every size up to 300 and some large ones,
// drawn wide, narrow (many duplicates), sorted, reversed and in organ-pipe
// order; a failure names its seed and size.
func TestModelLatencyMinuteBySelection(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0))
		sizes := []int{}
		for n := 0; n <= 300; n++ {
			sizes = append(sizes, n)
		}
		sizes = append(sizes, 1000, 4096, 20_011)
		for _, n := range sizes {
			for shape := range 5 {
				s := make([]int64, n)
				for i := range s {
					switch shape {
					case 0:
						s[i] = rng.Int64N(100_000)
					case 1:
						s[i] = rng.Int64N(4)
					case 2:
						s[i] = int64(i)
					case 3:
						s[i] = int64(n - i)
					default:
						s[i] = int64(min(i, n-i))
					}
				}
				sorted := slices.Sorted(slices.Values(s))
				got := NewModelLatencyMinute("m", 0, s)
				want := ModelLatencyMinute{Model: "m", WindowEnd: WindowSize, Requests: int64(n),
					P50MS: Percentile(sorted, 50), P95MS: Percentile(sorted, 95), P99MS: Percentile(sorted, 99)}
				if n > 0 {
					want.MaxMS = sorted[n-1]
				}
				if got != want {
					t.Fatalf("seed %d, %d values, shape %d: %+v, want %+v", seed, n, shape, got, want)
				}
				if !slices.Equal(slices.Sorted(slices.Values(s)), sorted) {
					t.Fatalf("seed %d, %d values, shape %d: the selection lost or made up values", seed, n, shape)
				}
			}
		}
	}
}
