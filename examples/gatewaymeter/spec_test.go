package gatewaymeter_test

import (
	"bytes"
	"cmp"
	"flag"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	gm "github.com/weirstream/weir/examples/gatewaymeter"
)

var (
	flagSeed = flag.Uint64("gm.seed", 0,
		"run the seeded GatewayMeter tests with this seed only (default: their fixed seeds and time-based ones)")
	flagSeeds = flag.Int("gm.seeds", 0,
		"how many time-based seeds the seeded GatewayMeter tests add to their fixed ones (default: each test's own)")
	flagBackend = flag.String("gm.backend", "",
		"run TestGatewayMeterExactlyOnce on this state backend only: hashmap, pebble or pebble-incremental (default: by seed)")
)

// testSeeds returns the seeds of a seeded test: only -gm.seed if given,
// else fixed followed by random seeds drawn from the clock (-gm.seeds
// overrides how many), which it logs so that a failure can be replayed.
func testSeeds(t *testing.T, fixed []uint64, random int) []uint64 {
	t.Helper()
	if *flagSeed != 0 {
		return []uint64{*flagSeed}
	}
	if *flagSeeds > 0 {
		random = *flagSeeds
	}
	seeds := slices.Clone(fixed)
	base := uint64(time.Now().UnixNano())
	for i := range random {
		seeds = append(seeds, base+uint64(i)*0x9e37_79b9_7f4a_7c15)
	}
	t.Logf("seeds: fixed %v, time-based %v; replay one with -gm.seed=N", fixed, seeds[len(fixed):])
	return seeds
}

// reproduce is the line that replays a failing seed.
func reproduce(test string, seed uint64) string {
	return fmt.Sprintf("seed %d; reproduce with: go test -race ./examples/gatewaymeter/ -run '^%s$' -gm.seed=%d", seed, test, seed)
}

// generateBytes returns a trace's partitions in memory.
func generateBytes(t testing.TB, cfg gm.GenConfig) [][]byte {
	t.Helper()
	bufs := make([]*bytes.Buffer, cfg.Partitions)
	for p := range bufs {
		bufs[p] = &bytes.Buffer{}
	}
	if _, err := gm.Generate(cfg, func(p int) io.Writer { return bufs[p] }); err != nil {
		t.Fatal(err)
	}
	parts := make([][]byte, len(bufs))
	for p, b := range bufs {
		parts[p] = b.Bytes()
	}
	return parts
}

// readTrace reads the partitions of a trace directory: the files
// part-NNNNN.jsonl, by the partition their name gives.
func readTrace(t testing.TB, dir string) [][]byte {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "part-*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var parts [][]byte
	for _, name := range names {
		var p int
		if _, err := fmt.Sscanf(filepath.Base(name), "part-%05d.jsonl", &p); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for len(parts) <= p {
			parts = append(parts, nil)
		}
		parts[p] = b
	}
	if len(parts) == 0 {
		t.Fatalf("%s: no trace files", dir)
	}
	return parts
}

func writeTrace(t testing.TB, dir string, parts [][]byte) {
	t.Helper()
	for p, b := range parts {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("part-%05d.jsonl", p)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func oracleOf(t testing.TB, parts [][]byte) gm.Outputs {
	t.Helper()
	rs := make([]io.Reader, len(parts))
	for p, b := range parts {
		rs[p] = bytes.NewReader(b)
	}
	out, err := gm.Oracle(rs)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The hand-written trace: windows of one minute from ht0, ending at hw(n).
const ht0 int64 = 1_764_547_200_000 // 2025-12-01T00:00:00Z, a multiple of a minute

func hw(n int64) int64 { return ht0 + n*60_000 }

func hreq(id, tenant, model string, ts, in int64) string {
	return fmt.Sprintf(`{"type":"request","request_id":%q,"tenant_id":%q,"model":%q,"ts":%d,"input_tokens":%d}`, id, tenant, model, ts, in)
}

func hresp(id string, ts, out, status int64) string {
	return fmt.Sprintf(`{"type":"response","request_id":%q,"ts":%d,"output_tokens":%d,"status":%d}`, id, ts, out, status)
}

type hline struct {
	part int
	ts   int64 // the order within the partition
	text string
	eol  string // "\n" unless set
}

// handTrace is a trace whose every output is computed by hand in
// handExpected. Lines are laid out per partition in ts order.
func handTrace() [][]byte {
	var ls []hline
	add := func(part int, ts int64, text string) { ls = append(ls, hline{part: part, ts: ts, text: text}) }
	pair := func(id, tenant, model string, start, end, in, out int64) {
		add(0, start, hreq(id, tenant, model, start, in))
		add(1, end, hresp(id, end, out, 200))
	}
	// acme and beta, in windows 1 and 2.
	pair("a1", "acme", "small", ht0+1000, ht0+1500, 100, 50) //  100·1 + 50·2  = 200, 500 ms
	pair("a2", "acme", "medium", ht0+2000, ht0+2300, 10, 10) //  10·3 + 10·15  = 180, 300 ms
	pair("a3", "acme", "large", ht0+59000, ht0+60000, 2, 1)  //  2·15 + 1·75   = 105, 1000 ms; ends on w1's end: in w2
	pair("b1", "beta", "small", ht0+3000, ht0+3100, 0, 0)    //  0, 100 ms
	// gamma: 20 requests ending in window 4, latencies 10, 20, ..., 200
	// in a shuffled order.
	for i, j := range []int64{7, 19, 3, 12, 0, 15, 9, 1, 18, 5, 11, 2, 16, 8, 14, 4, 17, 6, 10, 13} {
		start := hw(3) + 1000 + int64(i)*100
		pair(fmt.Sprintf("g%02d", i), "gamma", "small", start, start+10*(j+1), 1, 0)
	}
	// delta: one small request of 50 ms in windows 1, 2, 3, 5, 6, 7 and 9
	// costing its input tokens.
	for _, m := range []struct{ w, cost int64 }{{1, 100}, {2, 100}, {3, 100}, {5, 300}, {6, 451}, {7, 631}, {9, 949}} {
		start := hw(m.w-1) + 20_000
		pair(fmt.Sprintf("d%d", m.w), "delta", "small", start, start+50, m.cost, 0)
	}
	// Orphans: a request without a response, a response without a request.
	add(0, ht0+5000, hreq("o1", "acme", "small", ht0+5000, 7))
	add(1, ht0+6000, hresp("o2", ht0+6000, 5, 500))
	// Within a partition an event may be up to 5 s behind the largest ts
	// before it.
	add(1, ht0+4200, hresp("e1", ht0+9000, 3, 200)) // logged before o2 though later
	add(0, ht0+8000, hreq("e1", "beta", "large", ht0+8500, 1))
	// e1: 1·15 + 3·75 = 240, 500 ms, window 1.
	// Lines valid in unusual forms: unknown fields, one holding a "ts"
	// far in the future; whitespace; escapes; a CRLF line end.
	add(0, ht0+10_000, `{"type":"request","trace":{"ts":1999999999999,"span":[1,2.5e3,null]},"request_id":"u1","tenant_id":"beta","model":"small","ts":1764547210000,"input_tokens":4}`)
	add(1, ht0+10_010, ` { "type" : "response" , "request_id" : "u\u0031" , "ts" : 1764547210010 , "output_tokens" : 1 , "status" : 200 } `)
	ls = append(ls, hline{part: 0, ts: ht0 + 11_000, text: hreq("u2", "beta", "small", ht0+11_000, 2), eol: "\r\n"})
	add(1, ht0+11_020, hresp("u2", ht0+11_020, 2, 200))
	// u1: 4 + 2 = 6, 10 ms; u2: 2 + 4 = 6, 20 ms; both beta, window 1.
	// Malformed lines, one with a ts far in the future, one ending in CRLF.
	add(0, ht0+12_000, `{"type":"heartbeat","request_id":"x1","ts":1999999999999}`)
	add(1, ht0+12_000, `{"type":"request","request_id":"x2","tenant_id":"acme","model":"small","ts":1999999999999,"input_tokens":5,"status":200}`)
	add(0, ht0+12_500, `{"type":"request","request_id":"x3","tenant_id":"acme","mod`)
	ls = append(ls, hline{part: 1, ts: ht0 + 12_600, text: `{"type":"response","request_id":"x4","ts":1764547212600,"output_tokens":-1,"status":200}`, eol: "\r\n"})
	add(1, ht0+12_700, ``)
	add(0, ht0+12_800, `{"type":"request","request_id":"x5","tenant_id":"acme","model":"xl","ts":1764547212800,"input_tokens":5}`)

	slices.SortStableFunc(ls, func(a, b hline) int { return cmp.Compare(a.ts, b.ts) })
	parts := make([][]byte, 2)
	for _, l := range ls {
		eol := cmp.Or(l.eol, "\n")
		parts[l.part] = append(parts[l.part], l.text+eol...)
	}
	return parts
}

// handExpected is handTrace's output, computed by hand.
func handExpected(parts [][]byte) gm.Outputs {
	cost := func(tenant string, w, micros, n int64) gm.TenantCostMinute {
		return gm.TenantCostMinute{TenantID: tenant, WindowStart: hw(w - 1), WindowEnd: hw(w), CostMicros: micros, Requests: n}
	}
	lat := func(model string, w, n, p50, p95, p99, mx int64) gm.ModelLatencyMinute {
		return gm.ModelLatencyMinute{Model: model, WindowStart: hw(w - 1), WindowEnd: hw(w), Requests: n, P50MS: p50, P95MS: p95, P99MS: p99, MaxMS: mx}
	}
	// dead finds a line by a substring and gives its dead letter.
	dead := func(part int, substr string) gm.DeadLetter {
		off := 0
		for _, l := range strings.SplitAfter(string(parts[part]), "\n") {
			text := strings.TrimSuffix(strings.TrimSuffix(l, "\n"), "\r")
			if strings.Contains(text, substr) {
				return gm.DeadLetter{Partition: part, Offset: int64(off), Line: text, Reason: "(any)"}
			}
			off += len(l)
		}
		panic("no line holds " + substr)
	}
	return gm.Outputs{
		TenantCost: []gm.TenantCostMinute{
			cost("acme", 1, 200+180, 2),
			cost("acme", 2, 105, 1),
			cost("beta", 1, 0+240+6+6, 4),
			cost("delta", 1, 100, 1), cost("delta", 2, 100, 1), cost("delta", 3, 100, 1),
			cost("delta", 5, 300, 1), cost("delta", 6, 451, 1), cost("delta", 7, 631, 1), cost("delta", 9, 949, 1),
			cost("gamma", 4, 20, 20),
		},
		// Nearest rank k = ceil(P·n/100):
		//   small w1: [10 20 50 100 500] (u1 u2 d1 b1 a1): p50 k=3 → 50,
		//             p95 k=ceil(4.75)=5 → 500, p99 k=5 → 500
		//   small w4: 10..200 (n=20): p50 k=10 → 100, p95 k=19 → 190,
		//             p99 k=ceil(19.8)=20 → 200
		//   large w1: e1 500; large w2: a3 1000; medium w1: a2 300
		ModelLatency: []gm.ModelLatencyMinute{
			lat("large", 1, 1, 500, 500, 500, 500),
			lat("large", 2, 1, 1000, 1000, 1000, 1000),
			lat("medium", 1, 1, 300, 300, 300, 300),
			lat("small", 1, 5, 50, 500, 500, 500),
			lat("small", 2, 1, 50, 50, 50, 50),
			lat("small", 3, 1, 50, 50, 50, 50),
			lat("small", 4, 20, 100, 190, 200, 200),
			lat("small", 5, 1, 50, 50, 50, 50),
			lat("small", 6, 1, 50, 50, 50, 50),
			lat("small", 7, 1, 50, 50, 50, 50),
			lat("small", 9, 1, 50, 50, 50, 50),
		},
		// delta's minutes (a minute without requests emits nothing and is
		// not remembered):
		//   w5: [100 100 100], 300·3 = 900 is not > 3·300: no alert
		//   w6: [100 100 100 300], 451·4 = 1804 > 3·600 = 1800: baseline 150
		//   w7: [100 100 100 300 451], 631·5 = 3155 > 3·1051 = 3153: baseline 210
		//   w9: [100 100 300 451 631] (the oldest forgotten), 949·5 = 4745
		//       is not > 3·1582 = 4746: no alert (with six remembered it
		//       would fire)
		Alerts: []gm.Alert{
			{TenantID: "delta", WindowEnd: hw(6), CostMicros: 451, BaselineMicros: 150},
			{TenantID: "delta", WindowEnd: hw(7), CostMicros: 631, BaselineMicros: 210},
		},
		Orphans: []gm.Orphan{
			{RequestID: "o1", Type: "request", TS: ht0 + 5000, TenantID: "acme", Model: "small", InputTokens: 7},
			{RequestID: "o2", Type: "response", TS: ht0 + 6000, OutputTokens: 5, Status: 500},
		},
		DeadLetters: []gm.DeadLetter{
			dead(0, `"heartbeat"`),
			dead(0, `"x3"`),
			dead(0, `"xl"`),
			dead(1, `"x2"`),
			dead(1, `"x4"`),
			{Partition: 1, Offset: int64(bytes.Index(parts[1], []byte("\n\n")) + 1), Line: "", Reason: "(any)"},
		},
	}
}

// TestSpecOracleHandComputed checks the independent oracle, and the
// package's, on the hand-computed trace.
func TestSpecOracleHandComputed(t *testing.T) {
	parts := handTrace()
	want := handExpected(parts)
	res, err := specOracle(parts, specDefaultRules())
	if err != nil {
		t.Fatal(err)
	}
	if d := specDiff(want, res.out); len(d) > 0 {
		t.Fatalf("the independent oracle differs from the hand-computed outputs:\n%s", specReport(d))
	}
	if d := specDiff(want, oracleOf(t, parts)); len(d) > 0 {
		t.Fatalf("the package's oracle differs from the hand-computed outputs:\n%s", specReport(d))
	}
}

// TestSpecOracleRejectsUnpredictableTraces: on a trace outside the
// specification's assumptions the oracle fails rather than guess; at the
// bounds it computes.
func TestSpecOracleRejectsUnpredictableTraces(t *testing.T) {
	for _, tc := range []struct {
		name  string
		parts []string
		err   string
	}{
		{"late", []string{hreq("r1", "a", "small", ht0+10_000, 1) + "\n" + hreq("r2", "a", "small", ht0+4_999, 1) + "\n"}, "late data"},
		{"two requests", []string{hreq("r1", "a", "small", ht0, 1) + "\n", hreq("r1", "a", "small", ht0, 1) + "\n"}, "two events of one type"},
		{"response first", []string{hreq("r1", "a", "small", ht0+1, 1) + "\n", hresp("r1", ht0, 1, 200) + "\n"}, "before the request"},
		{"after the timer", []string{hreq("r1", "a", "small", ht0, 1) + "\n", hresp("r1", ht0+300_001, 1, 200) + "\n"}, "beyond the orphan timer"},
	} {
		parts := make([][]byte, len(tc.parts))
		for p, s := range tc.parts {
			parts[p] = []byte(s)
		}
		if _, err := specOracle(parts, specDefaultRules()); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.err)
		}
	}
	at := [][]byte{
		[]byte(hreq("r1", "a", "small", ht0+10_000, 1) + "\n" + hreq("r2", "a", "small", ht0+5_000, 1) + "\n"),
		[]byte(hresp("r2", ht0+5_000, 1, 200) + "\n" + hresp("r1", ht0+310_000, 1, 200) + "\n"),
	}
	res, err := specOracle(at, specDefaultRules())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.out.TenantCost) != 2 || len(res.out.Orphans) != 0 {
		t.Fatalf("at the bounds: %+v", res.out)
	}
}

// edgeLines are lines the generator does not write that the parser must
// accept or reject as the specification and its contract say.
var edgeLines = []string{
	`{"type":"request","request_id":"r","tenant_id":"a","model":"small","ts":0,"input_tokens":0}`,
	`{"type":"request","request_id":"r","tenant_id":"a","model":"small","ts":-0,"input_tokens":1000000000}`,
	`{"type":"request","request_id":"r","tenant_id":"a","model":"small","ts":1,"input_tokens":1000000001}`,
	`{"type":"request","request_id":"r","tenant_id":"a","model":"small","ts":9223372036854775807,"input_tokens":1}`,
	`{"type":"request","request_id":"r","tenant_id":"a","model":"small","ts":9223372036854775808,"input_tokens":1}`,
	`{"type":"request","request_id":"r","tenant_id":"a","model":"small","ts":-9223372036854775808,"input_tokens":1}`,
	`{"type":"request","request_id":"r","tenant_id":"a","model":"small","ts":1.0,"input_tokens":1}`,
	`{"type":"request","request_id":"r","tenant_id":"a","model":"small","ts":1E2,"input_tokens":1}`,
	`{"type":"request","request_id":"r","tenant_id":"a","model":"small","ts":01,"input_tokens":1}`,
	`{"type":"request","request_id":"r","tenant_id":"a","model":"Small","ts":1,"input_tokens":1}`,
	`{"type":"request","request_id":"r","tenant_id":"a","model":"sm\u0061ll","ts":1,"input_tokens":1}`,
	`{"t\u0079pe":"request","request_id":"r","tenant_id":"a","model":"small","ts":1,"input_tokens":1}`,
	`{"type":"request","request_id":"\ud800","tenant_id":"\u00e9\"\\\/\b\f\n\r\t","model":"small","ts":1,"input_tokens":1}`,
	`{"type":"request","request_id":"r","tenant_id":"a","model":"small","ts":1,"input_tokens":1,"x":1,"x":[{}]}`,
	`{"type":"request","request_id":"r","tenant_id":"a","model":"small","ts":1,"input_tokens":1,"type":"request"}`,
	`{"type":"request","request_id":"r","tenant_id":"a","model":"small","ts":1,"input_tokens":1,"output_tokens":1}`,
	`{"type":"response","request_id":"r","ts":1,"output_tokens":1,"status":100}`,
	`{"type":"response","request_id":"r","ts":1,"output_tokens":1,"status":599}`,
	`{"type":"response","request_id":"r","ts":1,"output_tokens":1,"status":600}`,
	`{"type":"response","request_id":"r","ts":1,"output_tokens":1,"status":99}`,
	`{"type":"response","request_id":"r","ts":1,"output_tokens":1,"status":200,"tenant_id":"a"}`,
	`{"type":"response","request_id":"r","ts":1,"output_tokens":1,"status":200.0}`,
	`{"type":"response","request_id":"","ts":1,"output_tokens":1,"status":200}`,
	`{"type":"response","request_id":null,"ts":1,"output_tokens":1,"status":200}`,
	`{"type":null,"request_id":"r","ts":1,"output_tokens":1,"status":200}`,
	"\t{\"type\":\"response\",\"request_id\":\"r\",\"ts\":1,\"output_tokens\":1,\"status\":200}\r ",
	"{\"type\":\"response\",\"request_id\":\"r\xc3\",\"ts\":1,\"output_tokens\":1,\"status\":200}",
	"{\"type\":\"response\",\"request_id\":\"r\",\"ts\":1,\"output_tokens\":1,\"status\":200}\xff",
	`{"type":"response","request_id":"r","ts":1,"output_tokens":1,"status":200}{}`,
	`{"type":"response","request_id":"r","ts":1,"output_tokens":1,"status":200,}`,
	`{"type":"response","request_id":"r","ts":1,"output_tokens":1,"status":200,"x":tru}`,
	`{"type":"response","request_id":"r","ts":1,"output_tokens":1,"status":200,"x":"\x"}`,
	"\v{\"type\":\"response\",\"request_id\":\"r\",\"ts\":1,\"output_tokens\":1,\"status\":200}",
	`[{"type":"response","request_id":"r","ts":1,"output_tokens":1,"status":200}]`,
	`1`, `true`, `"x"`, ``, ` `, `{}`, `{"type":"request"}`,
}

// TestParseAgreesWithSpec compares the job's parser with the independent
// oracle's on edge lines and on many random corruptions of generated
// lines: the same lines are malformed, and valid ones mean the same event.
func TestParseAgreesWithSpec(t *testing.T) {
	prices := specDefaultRules().prices
	check := func(line []byte) {
		t.Helper()
		ev, err := gm.ParseEvent(line)
		se, why := specParse(line, prices)
		switch {
		case err == nil && why != "":
			t.Errorf("the parser accepts a line the specification rejects (%s): %q", why, line)
		case err != nil && why == "":
			t.Errorf("the parser rejects a line the specification accepts (%v): %q", err, line)
		case err == nil:
			got := specEvent{response: ev.Type == gm.Response, id: ev.RequestID, tenant: ev.TenantID, model: ev.Model,
				ts: ev.TS, in: ev.InputTokens, out: ev.OutputTokens, status: int64(ev.Status)}
			if got != se {
				t.Errorf("%q: the parser reads %+v, the specification %+v", line, got, se)
			}
		}
	}
	for _, l := range edgeLines {
		check([]byte(l))
	}
	for _, l := range strings.Split(strings.TrimSpace(string(bytes.Join(handTrace(), nil))), "\n") {
		check([]byte(l))
	}

	cfg := gm.DefaultGenConfig()
	cfg.Requests, cfg.Partitions, cfg.BadRate = 500, 1, 0.05
	var lines [][]byte
	for _, l := range bytes.Split(generateBytes(t, cfg)[0], []byte("\n")) {
		if len(l) > 0 {
			lines = append(lines, l)
		}
	}
	alphabet := []byte(`{}[]":,.-+eE0123456789 tfnulrsaq\/` + "\t\xc3\xa9\xff")
	r := rand.New(rand.NewPCG(7, 7))
	valid := 0
	for range 20_000 {
		l := slices.Clone(lines[r.IntN(len(lines))])
		for range 1 + r.IntN(3) {
			i := r.IntN(len(l) + 1)
			switch r.IntN(3) {
			case 0: // insert
				l = slices.Insert(l, i, alphabet[r.IntN(len(alphabet))])
			case 1: // delete
				if i < len(l) {
					l = slices.Delete(l, i, i+1)
				}
			default: // replace
				if i < len(l) {
					l[i] = alphabet[r.IntN(len(alphabet))]
				}
			}
		}
		if _, why := specParse(l, prices); why == "" {
			valid++
		}
		check(l)
	}
	// Corruptions that keep a line valid (a digit changed, a space added)
	// and ones that do not must both be common, or the check is weak.
	if valid < 1000 || valid > 19000 {
		t.Fatalf("%d of 20000 corrupted lines are valid", valid)
	}
}

// randomGenConfig draws a trace configuration from r: sizes, partitions,
// tenants, rates, disorder, spikes, time-outs and malformed lines.
func randomGenConfig(r *rand.Rand, seed uint64) gm.GenConfig {
	pick := func(vs ...float64) float64 { return vs[r.IntN(len(vs))] }
	cfg := gm.DefaultGenConfig()
	cfg.Seed = seed
	cfg.Requests = int64(pick(0, 1, 2, 10, 50, 200, 500, 2000))
	cfg.Partitions = int(pick(1, 2, 3, 8, 13))
	cfg.Tenants = int(pick(1, 2, 5, 20, 100, 1000))
	cfg.RequestsPerSecond = pick(0.02, 0.5, 5, 96, 1000, 50_000)
	cfg.MaxDisorderMS = int64(pick(0, 1, 2000, 5000))
	cfg.NoResponseRate = pick(0, 0.001, 0.05, 1)
	cfg.SpikeRate = pick(0, 0.05, 0.5, 1)
	cfg.BadRate = pick(0, 0, 0.002, 0.05, 0.5, 1)
	cfg.StartMS = int64(pick(float64(gm.DefaultStartMS), 0, 59_999, 1_000_000_007))
	return cfg
}

// reshapeTrace rewrites a trace's line ends as r draws: CRLF instead of LF,
// and the last line of a partition without its newline. Both are lines the
// file source reads.
func reshapeTrace(r *rand.Rand, parts [][]byte) (string, [][]byte) {
	var how []string
	if r.IntN(4) == 0 {
		how = append(how, "CRLF")
		for p := range parts {
			parts[p] = bytes.ReplaceAll(parts[p], []byte("\n"), []byte("\r\n"))
		}
	}
	if r.IntN(4) == 0 {
		how = append(how, "no final newline")
		for p := range parts {
			parts[p] = bytes.TrimSuffix(parts[p], []byte("\n"))
		}
	}
	return strings.Join(how, ", "), parts
}

// TestSpecOracleAgreesWithOracle: on many generated traces the independent
// oracle and the package's compute the same outputs.
func TestSpecOracleAgreesWithOracle(t *testing.T) {
	fixed := make([]uint64, 64)
	for i := range fixed {
		fixed[i] = uint64(i + 1)
	}
	var total gm.Outputs
	for _, seed := range testSeeds(t, fixed, 16) {
		r := rand.New(rand.NewPCG(seed, 0xa9))
		cfg := randomGenConfig(r, seed)
		how, parts := reshapeTrace(r, generateBytes(t, cfg))
		res, err := specOracle(parts, specDefaultRules())
		if err != nil {
			t.Fatalf("%s\nconfig %+v %s: %v", reproduce(t.Name(), seed), cfg, how, err)
		}
		if d := specDiff(res.out, oracleOf(t, parts)); len(d) > 0 {
			t.Fatalf("%s\nconfig %+v %s: the package's oracle differs from the independent one:\n%s", reproduce(t.Name(), seed), cfg, how, specReport(d))
		}
		total.TenantCost = append(total.TenantCost, res.out.TenantCost...)
		total.ModelLatency = append(total.ModelLatency, res.out.ModelLatency...)
		total.Alerts = append(total.Alerts, res.out.Alerts...)
		total.Orphans = append(total.Orphans, res.out.Orphans...)
		total.DeadLetters = append(total.DeadLetters, res.out.DeadLetters...)
	}
	t.Logf("compared %d tenant-cost, %d model-latency, %d alert, %d orphan and %d dead-letter records",
		len(total.TenantCost), len(total.ModelLatency), len(total.Alerts), len(total.Orphans), len(total.DeadLetters))
	if *flagSeed == 0 && (len(total.TenantCost) < 1000 || len(total.Alerts) < 10 || len(total.Orphans) < 100 || len(total.DeadLetters) < 100) {
		t.Fatal("the traces are too small to compare every output")
	}
}

func cloneOutputs(o gm.Outputs) gm.Outputs {
	return gm.Outputs{
		TenantCost:   slices.Clone(o.TenantCost),
		ModelLatency: slices.Clone(o.ModelLatency),
		Alerts:       slices.Clone(o.Alerts),
		Orphans:      slices.Clone(o.Orphans),
		DeadLetters:  slices.Clone(o.DeadLetters),
	}
}

// outputsOf returns the names of the outputs that differences are in.
func outputsOf(d []string) []string {
	var names []string
	for _, l := range d {
		name, _, _ := strings.Cut(l, " ")
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// TestSpecOracleCatchesWrongOutputs runs the job once, checks that its
// output matches the independent oracle, then perturbs that output the way
// a business-logic bug would and requires the diff to flag each
// perturbation in the right output: a cost off by one unit, a percentile
// from the wrong rank, a lost or invented alert, an orphan or a dead letter
// with a wrong field, and so on. It also computes what a job with a wrong
// rule (a price, the rank formula, the alert rule, the window's time)
// would output, and requires each to differ from the oracle's, so that
// the traces exercise the rule.
func TestSpecOracleCatchesWrongOutputs(t *testing.T) {
	cfg := gm.DefaultGenConfig()
	cfg.Requests, cfg.Partitions, cfg.Tenants, cfg.RequestsPerSecond = 3000, 4, 10, 5
	cfg.SpikeRate, cfg.BadRate, cfg.NoResponseRate = 0.5, 0.02, 0.01
	trace, out := t.TempDir(), t.TempDir()
	if _, err := gm.GenerateFiles(cfg, trace); err != nil {
		t.Fatal(err)
	}
	runJob(t, trace, out, nil)
	got, err := gm.ReadOutputs(out)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := specRead(readTrace(t, trace), specDefaultRules().prices)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := specCompute(tr, specDefaultRules())
	if err != nil {
		t.Fatal(err)
	}
	if d := specDiff(spec.out, got); len(d) > 0 {
		t.Fatalf("the job's output differs from the independent oracle:\n%s", specReport(d))
	}

	r := rand.New(rand.NewPCG(3, 3))
	// pick returns the index of a random record for which ok holds.
	pick := func(n int, ok func(i int) bool) int {
		var is []int
		for i := range n {
			if ok(i) {
				is = append(is, i)
			}
		}
		if len(is) == 0 {
			t.Fatal("the trace has no record to perturb this way")
		}
		return is[r.IntN(len(is))]
	}
	every := func(int) bool { return true }
	sample := func(m gm.ModelLatencyMinute) []int64 {
		return spec.latencies[specModelWindow{m.Model, m.WindowEnd}]
	}
	// wrongRank finds a model-latency record whose P-th percentile would
	// change were it taken at rank k+delta, and sets it so.
	wrongRank := func(o *gm.Outputs, p, delta int64, field func(*gm.ModelLatencyMinute) *int64) {
		ok := func(i int) bool {
			s := sample(o.ModelLatency[i])
			k := specNearestRank(p, int64(len(s))) + delta
			return k >= 1 && k <= int64(len(s)) && s[k-1] != *field(&o.ModelLatency[i])
		}
		i := pick(len(o.ModelLatency), ok)
		s := sample(o.ModelLatency[i])
		*field(&o.ModelLatency[i]) = s[specNearestRank(p, int64(len(s)))+delta-1]
	}
	isOrphan := func(typ gm.EventType) func(o *gm.Outputs) func(int) bool {
		return func(o *gm.Outputs) func(int) bool {
			return func(i int) bool { return o.Orphans[i].Type == typ }
		}
	}

	for _, m := range []struct {
		name, output string
		apply        func(o *gm.Outputs)
	}{
		{"a cost off by one micro-dollar", "tenant-cost", func(o *gm.Outputs) { o.TenantCost[pick(len(o.TenantCost), every)].CostMicros++ }},
		{"a request counted twice", "tenant-cost", func(o *gm.Outputs) { o.TenantCost[pick(len(o.TenantCost), every)].Requests++ }},
		{"a window start a minute early", "tenant-cost", func(o *gm.Outputs) { o.TenantCost[pick(len(o.TenantCost), every)].WindowStart -= 60_000 }},
		{"a minute lost", "tenant-cost", func(o *gm.Outputs) {
			i := pick(len(o.TenantCost), every)
			o.TenantCost = slices.Delete(o.TenantCost, i, i+1)
		}},
		{"a minute emitted twice", "tenant-cost", func(o *gm.Outputs) {
			o.TenantCost = append(o.TenantCost, o.TenantCost[pick(len(o.TenantCost), every)])
		}},
		{"p50 from rank k-1", "model-latency", func(o *gm.Outputs) {
			wrongRank(o, 50, -1, func(m *gm.ModelLatencyMinute) *int64 { return &m.P50MS })
		}},
		{"p50 from rank k+1", "model-latency", func(o *gm.Outputs) {
			wrongRank(o, 50, +1, func(m *gm.ModelLatencyMinute) *int64 { return &m.P50MS })
		}},
		{"p95 from rank k-1", "model-latency", func(o *gm.Outputs) {
			wrongRank(o, 95, -1, func(m *gm.ModelLatencyMinute) *int64 { return &m.P95MS })
		}},
		{"p95 from rank k+1", "model-latency", func(o *gm.Outputs) {
			wrongRank(o, 95, +1, func(m *gm.ModelLatencyMinute) *int64 { return &m.P95MS })
		}},
		{"p99 from rank k-1", "model-latency", func(o *gm.Outputs) {
			wrongRank(o, 99, -1, func(m *gm.ModelLatencyMinute) *int64 { return &m.P99MS })
		}},
		{"max from the second largest", "model-latency", func(o *gm.Outputs) {
			i := pick(len(o.ModelLatency), func(i int) bool { s := sample(o.ModelLatency[i]); return len(s) > 1 && s[len(s)-2] != s[len(s)-1] })
			s := sample(o.ModelLatency[i])
			o.ModelLatency[i].MaxMS = s[len(s)-2]
		}},
		{"a latency sample short of one", "model-latency", func(o *gm.Outputs) { o.ModelLatency[pick(len(o.ModelLatency), every)].Requests-- }},
		{"a baseline off by one", "alerts", func(o *gm.Outputs) { o.Alerts[pick(len(o.Alerts), every)].BaselineMicros++ }},
		{"an alert's cost off by one", "alerts", func(o *gm.Outputs) { o.Alerts[pick(len(o.Alerts), every)].CostMicros-- }},
		{"an alert lost", "alerts", func(o *gm.Outputs) { o.Alerts = slices.Delete(o.Alerts, 0, 1) }},
		{"an alert on a quiet minute", "alerts", func(o *gm.Outputs) {
			alerted := map[string]bool{}
			for _, a := range o.Alerts {
				alerted[fmt.Sprint(a.TenantID, a.WindowEnd)] = true
			}
			m := o.TenantCost[pick(len(o.TenantCost), func(i int) bool { return !alerted[fmt.Sprint(o.TenantCost[i].TenantID, o.TenantCost[i].WindowEnd)] })]
			o.Alerts = append(o.Alerts, gm.Alert{TenantID: m.TenantID, WindowEnd: m.WindowEnd, CostMicros: m.CostMicros, BaselineMicros: m.CostMicros / 4})
		}},
		{"an orphan request's tokens off by one", "orphans", func(o *gm.Outputs) { o.Orphans[pick(len(o.Orphans), isOrphan(gm.Request)(o))].InputTokens++ }},
		{"an orphan request's tenant", "orphans", func(o *gm.Outputs) { o.Orphans[pick(len(o.Orphans), isOrphan(gm.Request)(o))].TenantID += "x" }},
		{"an orphan response's status", "orphans", func(o *gm.Outputs) { o.Orphans[pick(len(o.Orphans), isOrphan(gm.Response)(o))].Status = 599 }},
		{"an orphan's ts", "orphans", func(o *gm.Outputs) { o.Orphans[pick(len(o.Orphans), every)].TS++ }},
		{"an orphan lost", "orphans", func(o *gm.Outputs) { o.Orphans = o.Orphans[1:] }},
		{"a paired request reported as an orphan", "orphans", func(o *gm.Outputs) {
			o.Orphans = append(o.Orphans, gm.Orphan{RequestID: gm.RequestID(1), Type: gm.Request, TS: cfg.StartMS})
		}},
		{"a dead letter's offset", "dead-letters", func(o *gm.Outputs) { o.DeadLetters[pick(len(o.DeadLetters), every)].Offset++ }},
		{"a dead letter's partition", "dead-letters", func(o *gm.Outputs) {
			o.DeadLetters[pick(len(o.DeadLetters), every)].Partition = cfg.Partitions
		}},
		{"a dead letter's line cut short", "dead-letters", func(o *gm.Outputs) {
			d := &o.DeadLetters[pick(len(o.DeadLetters), func(i int) bool { return len(o.DeadLetters[i].Line) > 1 })]
			d.Line = d.Line[:len(d.Line)-1]
		}},
		{"a dead letter without a reason", "dead-letters", func(o *gm.Outputs) { o.DeadLetters[pick(len(o.DeadLetters), every)].Reason = "" }},
		{"a dead letter lost", "dead-letters", func(o *gm.Outputs) { o.DeadLetters = o.DeadLetters[:len(o.DeadLetters)-1] }},
	} {
		bad := cloneOutputs(got)
		m.apply(&bad)
		d := specDiff(spec.out, bad)
		if names := outputsOf(d); !slices.Equal(names, []string{m.output}) {
			t.Errorf("%s: the diff flags %v, want [%s]:\n%s", m.name, names, m.output, specReport(d))
		}
	}

	withRule := func(change func(*specRules)) gm.Outputs {
		rules := specDefaultRules()
		rules.prices = maps.Clone(rules.prices)
		change(&rules)
		res, err := specCompute(tr, rules)
		if err != nil {
			t.Fatal(err)
		}
		return res.out
	}
	for _, m := range []struct {
		name    string
		outputs []string
		change  func(*specRules)
	}{
		{"medium output priced 14", []string{"alerts", "tenant-cost"}, func(r *specRules) { r.prices["medium"] = [2]int64{3, 14} }},
		{"large input and output prices swapped", []string{"alerts", "tenant-cost"}, func(r *specRules) { r.prices["large"] = [2]int64{75, 15} }},
		{"small input priced 2", []string{"alerts", "tenant-cost"}, func(r *specRules) { r.prices["small"] = [2]int64{2, 2} }},
		{"rank rounded down", []string{"model-latency"}, func(r *specRules) { r.rank = func(p, n int64) int64 { return max(1, p*n/100) } }},
		{"rank (P·n+50)/100", []string{"model-latency"}, func(r *specRules) { r.rank = func(p, n int64) int64 { return max(1, (p*n+50)/100) } }},
		{"rank one too high", []string{"model-latency"}, func(r *specRules) { r.rank = func(p, n int64) int64 { return min(n, specNearestRank(p, n)+1) } }},
		{"alerts over 4 minutes", []string{"alerts"}, func(r *specRules) { r.history = 4 }},
		{"alerts from 4 minutes", []string{"alerts"}, func(r *specRules) { r.minHistory = 4 }},
		{"alerts above 2× the mean", []string{"alerts"}, func(r *specRules) { r.factor = 2 }},
		{"windows by start_ts", []string{"alerts", "model-latency", "tenant-cost"}, func(r *specRules) {
			r.eventTime = func(start, _ int64) int64 { return start }
		}},
	} {
		d := specDiff(spec.out, withRule(m.change))
		if names := outputsOf(d); !slices.Equal(names, m.outputs) {
			t.Errorf("a job with %s: the diff flags %v, want %v:\n%s", m.name, names, m.outputs, specReport(d))
		}
	}
}
