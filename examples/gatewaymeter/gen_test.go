package gatewaymeter

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// generate returns a trace's partitions as bytes.
func generate(t testing.TB, cfg GenConfig) ([][]byte, Manifest) {
	t.Helper()
	bufs := make([]bytes.Buffer, cfg.Partitions)
	m, err := Generate(cfg, func(p int) io.Writer { return &bufs[p] })
	if err != nil {
		t.Fatal(err)
	}
	out := make([][]byte, len(bufs))
	for p := range bufs {
		out[p] = bufs[p].Bytes()
	}
	return out, m
}

func lines(b []byte) [][]byte {
	if len(b) == 0 {
		return nil
	}
	return bytes.Split(bytes.TrimSuffix(b, []byte{'\n'}), []byte{'\n'})
}

func TestGenerateIsDeterministic(t *testing.T) {
	cfg := DefaultGenConfig()
	cfg.Requests = 20_000
	cfg.BadRate = 0.01
	a, ma := generate(t, cfg)
	b, mb := generate(t, cfg)
	for p := range a {
		if !bytes.Equal(a[p], b[p]) {
			t.Fatalf("partition %d differs between two runs of the same config", p)
		}
	}
	if !reflect.DeepEqual(ma, mb) {
		t.Fatalf("manifests differ:\n%+v\n%+v", ma, mb)
	}

	cfg.Seed++
	c, _ := generate(t, cfg)
	same := 0
	for p := range a {
		if bytes.Equal(a[p], c[p]) {
			same++
		}
	}
	if same > 0 {
		t.Fatalf("seeds %d and %d give %d identical partitions", cfg.Seed-1, cfg.Seed, same)
	}
}

// TestGenerateInvariants checks the properties the specification promises
// over a large trace.
func TestGenerateInvariants(t *testing.T) {
	cfg := DefaultGenConfig()
	cfg.Requests = 200_000
	if testing.Short() {
		cfg.Requests = 30_000
	}
	parts, m := generate(t, cfg)

	type half struct {
		ts   int64
		part int
	}
	// Indexed by request number; part -1 is not seen.
	requests := make([]half, cfg.Requests+1)
	responses := make([]half, cfg.Requests+1)
	for i := range requests {
		requests[i].part, responses[i].part = -1, -1
	}
	var nRequests, nResponses int64
	tenants := make(map[string]int64)
	models := make(map[string]int64)
	statuses := make(map[int]int64)
	var worstDisorder int64
	var minTS, maxTS int64 = 1<<63 - 1, 0
	for p, data := range parts {
		pm := m.Partitions[p]
		if pm.Partition != p || pm.Bytes != int64(len(data)) || pm.BadLines != 0 {
			t.Errorf("manifest of partition %d: %+v, but %d bytes", p, pm, len(data))
		}
		ls := lines(data)
		if int64(len(ls)) != pm.Lines || pm.Lines != pm.Events {
			t.Errorf("partition %d: %d lines, manifest %+v", p, len(ls), pm)
		}
		var running int64 = -1
		var partMin int64 = 1<<63 - 1
		for i, line := range ls {
			e, err := ParseEvent(line)
			if err != nil {
				t.Fatalf("partition %d line %d: %v: %s", p, i+1, err, line)
			}
			if got := e.AppendJSON(nil); !bytes.Equal(got, line) {
				t.Fatalf("partition %d line %d is not canonical:\n got %s\nwant %s", p, i+1, line, got)
			}
			if running >= 0 {
				worstDisorder = max(worstDisorder, running-e.TS)
			}
			running = max(running, e.TS)
			minTS, maxTS = min(minTS, e.TS), max(maxTS, e.TS)
			partMin = min(partMin, e.TS)
			n, err := strconv.ParseInt(strings.TrimPrefix(e.RequestID, "r-"), 10, 64)
			if err != nil || n < 1 || n > cfg.Requests || RequestID(n) != e.RequestID {
				t.Fatalf("request id %q", e.RequestID)
			}
			side, count := responses, &nResponses
			if e.Type == Request {
				side, count = requests, &nRequests
				tenants[e.TenantID]++
				models[e.Model]++
			} else {
				statuses[e.Status]++
			}
			if side[n].part >= 0 {
				t.Fatalf("%s %s twice", e.Type, e.RequestID)
			}
			side[n] = half{e.TS, p}
			*count++
		}
		if running != pm.MaxTS || partMin != pm.MinTS {
			t.Errorf("partition %d: ts in [%d, %d], manifest [%d, %d]", p, partMin, running, pm.MinTS, pm.MaxTS)
		}
	}
	t.Logf("worst per-partition disorder %d ms (bound %d)", worstDisorder, cfg.MaxDisorderMS)
	if worstDisorder > cfg.MaxDisorderMS {
		t.Errorf("a partition's ts goes back %d ms, more than %d", worstDisorder, cfg.MaxDisorderMS)
	}
	if worstDisorder < cfg.MaxDisorderMS*3/4 {
		t.Errorf("worst disorder %d ms: the trace hardly exercises the bound %d", worstDisorder, cfg.MaxDisorderMS)
	}

	if nRequests != cfg.Requests || nResponses != cfg.Requests-m.NoResponse {
		t.Fatalf("%d requests and %d responses; want %d and %d", nRequests, nResponses, cfg.Requests, cfg.Requests-m.NoResponse)
	}
	if lo, hi := cfg.Requests/2000, cfg.Requests/500; m.NoResponse < lo || m.NoResponse > hi {
		t.Errorf("%d requests without a response, want about 0.1%% of %d", m.NoResponse, cfg.Requests)
	}
	var split, maxLatency int64
	for n, resp := range responses {
		if resp.part < 0 {
			continue
		}
		req := requests[n]
		if req.part < 0 {
			t.Fatalf("response %s without a request", RequestID(int64(n)))
		}
		if resp.ts < req.ts {
			t.Fatalf("request %s: response at %d before the request at %d", RequestID(int64(n)), resp.ts, req.ts)
		}
		maxLatency = max(maxLatency, resp.ts-req.ts)
		if resp.part != req.part {
			split++
		}
	}
	if maxLatency > OrphanTimeout/2 {
		t.Errorf("largest latency %d ms: too close to the orphan timeout", maxLatency)
	}
	if f := float64(split) / float64(nResponses); f < 0.85 || f > 0.90 {
		t.Errorf("%.3f of requests have their events on different partitions, want about 7/8", f)
	}

	// About 24 events per second per partition in event time.
	seconds := float64(maxTS-minTS) / 1000
	if r := float64(nRequests+nResponses) / seconds / float64(cfg.Partitions); r < 22 || r > 26 {
		t.Errorf("%.1f events per second per partition, want about 24", r)
	}
	// Zipf-like: the first tenant about 1/H(100) ≈ 19 %, the last still present.
	if f := float64(tenants["tenant-0001"]) / float64(nRequests); f < 0.15 || f > 0.25 {
		t.Errorf("the largest tenant has %.3f of requests, want about 0.19", f)
	}
	if tenants["tenant-0100"] == 0 || len(tenants) != cfg.Tenants {
		t.Errorf("%d tenants seen; the smallest has %d requests", len(tenants), tenants["tenant-0100"])
	}
	for _, model := range Models() {
		if models[model] < nRequests/10 {
			t.Errorf("model %s: %d requests", model, models[model])
		}
	}
	if f := float64(statuses[200]) / float64(nResponses); f < 0.95 {
		t.Errorf("%.3f of responses are 200, want most", f)
	}
}

// TestGenerateBadLines checks that the dead letters of a trace are exactly
// the malformed lines the manifest counts, per partition, and that injecting
// them changes nothing else: the valid lines are those of the clean trace,
// less the replaced ones.
func TestGenerateBadLines(t *testing.T) {
	cfg := DefaultGenConfig()
	cfg.Requests = 30_000
	cfg.BadRate = 0.02
	dir := t.TempDir()
	m, err := GenerateFiles(cfg, dir)
	if err != nil {
		t.Fatal(err)
	}
	read, err := ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(read, m) {
		t.Fatalf("manifest on disk differs:\n%+v\n%+v", read, m)
	}
	for _, k := range BadKinds() {
		if m.BadKinds[k] == 0 {
			t.Errorf("no malformed line of kind %s", k)
		}
	}
	if m.Replaced == 0 || m.Replaced == m.BadLines {
		t.Errorf("%d of %d malformed lines replaced an event: want some of both", m.Replaced, m.BadLines)
	}

	out, err := OracleFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	perPartition := make([]int64, cfg.Partitions)
	for _, d := range out.DeadLetters {
		perPartition[d.Partition]++
	}
	for p, pm := range m.Partitions {
		if perPartition[p] != pm.BadLines {
			t.Errorf("partition %d: %d dead letters, manifest says %d malformed lines", p, perPartition[p], pm.BadLines)
		}
		if pm.Lines != pm.Events+pm.BadLines {
			t.Errorf("partition %d: %+v", p, pm)
		}
	}
	if int64(len(out.Orphans)) > m.NoResponse+m.Replaced || len(out.Orphans) == 0 {
		t.Errorf("%d orphans; %d requests without response, %d replaced events", len(out.Orphans), m.NoResponse, m.Replaced)
	}

	// The same trace without malformed lines.
	cfg.BadRate = 0
	clean, _ := generate(t, cfg)
	var lost int64
	for p := range clean {
		data, err := os.ReadFile(filepath.Join(dir, TraceFileName(p)))
		if err != nil {
			t.Fatal(err)
		}
		var valid [][]byte
		for _, l := range lines(data) {
			if _, err := ParseEvent(l); err == nil {
				valid = append(valid, l)
			}
		}
		want := lines(clean[p])
		i := 0
		for _, l := range want {
			if i < len(valid) && bytes.Equal(valid[i], l) {
				i++
			} else {
				lost++
			}
		}
		if i != len(valid) {
			t.Fatalf("partition %d: valid line %d is not in the clean trace: %s", p, i+1, valid[i])
		}
	}
	if lost != m.Replaced {
		t.Errorf("%d events missing against the clean trace, manifest says %d replaced", lost, m.Replaced)
	}
}

// TestMalformedKindsAreRejected draws many malformed lines of every kind,
// from requests and responses, and checks ParseEvent rejects each for the
// reason its kind implies.
func TestMalformedKindsAreRejected(t *testing.T) {
	g := newGenerator(DefaultGenConfig())
	events := []genEvent{
		{ts: DefaultStartMS + 123, req: 7, tokens: 812, tenant: 3, model: 1},
		{ts: DefaultStartMS + 1567, req: 7, tokens: 233, status: 200, resp: true},
		{ts: DefaultStartMS, req: 1_234_567_890, tokens: 0, status: 429, resp: true},
	}
	reasons := map[string][]string{
		BadTruncated:      {"truncated JSON"},
		BadWrongType:      {"want a string", "want an integer"},
		BadUnknownType:    {"unknown type"},
		BadMissingField:   {"missing field"},
		BadNegativeTokens: {"is negative"},
		BadNotAnObject:    {"invalid JSON at byte 0", "not a JSON object", "empty line"},
	}
	for kind, name := range BadKinds() {
		for _, e := range events {
			valid := g.appendEvent(nil, &e)
			if _, err := ParseEvent(valid); err != nil {
				t.Fatalf("valid line %s: %v", valid, err)
			}
			for range 500 {
				line := g.malformed(kind, &e, valid)
				_, err := ParseEvent(line)
				if err == nil {
					t.Fatalf("%s: accepted %s", name, line)
				}
				if bytes.IndexByte(line, '\n') >= 0 {
					t.Fatalf("%s: a newline in %q", name, line)
				}
				ok := false
				for _, r := range reasons[name] {
					ok = ok || strings.Contains(err.Error(), r)
				}
				if !ok {
					t.Fatalf("%s: %s rejected for %q, want one of %q", name, line, err, reasons[name])
				}
			}
		}
	}
}

func TestGenerateProgressAndValidation(t *testing.T) {
	cfg := DefaultGenConfig()
	cfg.Requests = 200_000
	var seen []int64
	cfg.Progress = func(n int64) { seen = append(seen, n) }
	if _, err := Generate(cfg, func(int) io.Writer { return io.Discard }); err != nil {
		t.Fatal(err)
	}
	if want := []int64{65536, 131072, 196608, 200000}; !reflect.DeepEqual(seen, want) {
		t.Errorf("progress %v, want %v", seen, want)
	}

	for _, bad := range []func(*GenConfig){
		func(c *GenConfig) { c.Partitions = 0 },
		func(c *GenConfig) { c.Tenants = 0 },
		func(c *GenConfig) { c.Requests = -1 },
		func(c *GenConfig) { c.RequestsPerSecond = 0 },
		func(c *GenConfig) { c.MaxDisorderMS = OutOfOrderness + 1 },
		func(c *GenConfig) { c.BadRate = 1.5 },
		func(c *GenConfig) { c.NoResponseRate = -0.1 },
	} {
		cfg := DefaultGenConfig()
		bad(&cfg)
		if _, err := Generate(cfg, func(int) io.Writer { return io.Discard }); err == nil {
			t.Errorf("accepted %+v", cfg)
		}
	}
	if _, err := Generate(GenConfig{}, func(int) io.Writer { return io.Discard }); err == nil {
		t.Error("accepted the zero config")
	}
}

func TestGenerateSinglePartition(t *testing.T) {
	cfg := DefaultGenConfig()
	cfg.Requests, cfg.Partitions = 5_000, 1
	dir := t.TempDir()
	if _, err := GenerateFiles(cfg, dir); err != nil {
		t.Fatal(err)
	}
	out, err := OracleFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, c := range out.TenantCost {
		n += c.Requests
	}
	if n+int64(len(out.Orphans)) != cfg.Requests {
		t.Errorf("%d joined and %d orphans, want %d requests", n, len(out.Orphans), cfg.Requests)
	}
}

// BenchmarkGenerate reports the generator's throughput in MB/s of trace.
func BenchmarkGenerate(b *testing.B) {
	cfg := DefaultGenConfig()
	cfg.Requests = 100_000
	m, err := Generate(cfg, func(int) io.Writer { return io.Discard })
	if err != nil {
		b.Fatal(err)
	}
	var n int64
	for _, p := range m.Partitions {
		n += p.Bytes
	}
	b.SetBytes(n)
	for b.Loop() {
		if _, err := Generate(cfg, func(int) io.Writer { return io.Discard }); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(int64(b.N)*cfg.Requests*2), "ns/event")
}
