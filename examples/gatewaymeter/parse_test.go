package gatewaymeter

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math/bits"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connector/file"
)

const (
	specRequest  = `{"type":"request","request_id":"r-000000001","tenant_id":"acme","model":"medium","ts":1764504000123,"input_tokens":812}`
	specResponse = `{"type":"response","request_id":"r-000000001","ts":1764504001567,"output_tokens":233,"status":200}`
)

func TestParseSpecExamples(t *testing.T) {
	req, err := ParseEvent([]byte(specRequest))
	if err != nil {
		t.Fatal(err)
	}
	want := Event{Type: Request, RequestID: "r-000000001", TenantID: "acme", Model: ModelMedium, TS: 1764504000123, InputTokens: 812}
	if req != want {
		t.Fatalf("request: got %+v, want %+v", req, want)
	}
	resp, err := ParseEvent([]byte(specResponse))
	if err != nil {
		t.Fatal(err)
	}
	want = Event{Type: Response, RequestID: "r-000000001", TS: 1764504001567, OutputTokens: 233, Status: 200}
	if resp != want {
		t.Fatalf("response: got %+v, want %+v", resp, want)
	}
	for _, line := range []string{specRequest, specResponse} {
		e, _ := ParseEvent([]byte(line))
		if got := string(e.AppendJSON(nil)); got != line {
			t.Errorf("AppendJSON round trip:\n got %s\nwant %s", got, line)
		}
	}
	rec, err := Join(resp, req)
	if err != nil {
		t.Fatal(err)
	}
	// 812 × 3 + 233 × 15 = 2436 + 3495.
	if rec.CostMicros != 5931 || rec.LatencyMS != 1444 || rec.StartTS != req.TS || rec.EndTS != resp.TS {
		t.Fatalf("join: %+v", rec)
	}
}

func TestParseAccepts(t *testing.T) {
	for _, tc := range []struct {
		line string
		want Event
	}{
		{"  {\"ts\" : 5 ,\t\"type\":\"response\",\"status\":503,\"output_tokens\":0,\"request_id\":\"x\"}\r",
			Event{Type: Response, RequestID: "x", TS: 5, Status: 503}},
		{`{"type":"request","request_id":"a\"b\\c\u00e9\ud83d\ude00","tenant_id":"t\/1","model":"large","ts":0,"input_tokens":0}`,
			Event{Type: Request, RequestID: "a\"b\\cé😀", TenantID: "t/1", Model: ModelLarge}},
		{`{"type":"request","request_id":"r","tenant_id":"ü","model":"small","ts":7,"input_tokens":1000000000,"region":"eu","trace":{"a":[1,2.5e-3,true,null,{"b":"c"}]}}`,
			Event{Type: Request, RequestID: "r", TenantID: "ü", Model: ModelSmall, TS: 7, InputTokens: MaxTokens}},
		{`{"t\u0079pe":"response","request_id":"r","ts":9,"output_tokens":-0,"status":100}`,
			Event{Type: Response, RequestID: "r", TS: 9, Status: 100}},
	} {
		got, err := ParseEvent([]byte(tc.line))
		if err != nil {
			t.Errorf("%s: %v", tc.line, err)
			continue
		}
		if got != tc.want {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.line, got, tc.want)
		}
	}
}

// TestParseRejects covers every kind of malformed line the generator writes
// and more; each must be rejected with a reason that names the problem.
func TestParseRejects(t *testing.T) {
	for _, tc := range []struct{ line, reason string }{
		// Truncated JSON.
		{`{"type":"request","request_id":"r-1","tenant_id":"acme","model":"small","ts":1,"input_tokens":5`, "truncated JSON"},
		{`{"type":"request","request_id":"r-1","tenant_id":"ac`, "truncated JSON"},
		{`{"type":"request",`, "truncated JSON"},
		{`{"type":"request"`, "truncated JSON"},
		{`{"type`, "truncated JSON"},
		{`{`, "truncated JSON"},
		{`{"type":"request","x":{"y":[1,`, "truncated JSON"},
		{`{"type":"request","x":tr`, "truncated JSON"},
		{`{"type":"request","x":"\u12`, "truncated JSON"},
		{`{"type":"response","request_id":"r","ts":-`, "truncated JSON"},
		// Wrong types.
		{`{"type":"request","request_id":"r","tenant_id":"a","model":"small","ts":"1764504000123","input_tokens":5}`, `field "ts": want an integer, got a string`},
		{`{"type":"request","request_id":"r","tenant_id":"a","model":"small","ts":1,"input_tokens":5.5}`, `field "input_tokens": want an integer, got the number 5.5`},
		{`{"type":"request","request_id":"r","tenant_id":"a","model":"small","ts":1e3,"input_tokens":5}`, `field "ts": want an integer, got the number 1e3`},
		{`{"type":"request","request_id":42,"tenant_id":"a","model":"small","ts":1,"input_tokens":5}`, `field "request_id": want a string, got the number 42`},
		{`{"type":"request","request_id":"r","tenant_id":true,"model":"small","ts":1,"input_tokens":5}`, `field "tenant_id": want a string, got a boolean`},
		{`{"type":"request","request_id":"r","tenant_id":"a","model":null,"ts":1,"input_tokens":5}`, `field "model": want a string, got null`},
		{`{"type":["request"],"request_id":"r"}`, `field "type": want a string, got an array`},
		{`{"type":"response","request_id":"r","ts":1,"output_tokens":{},"status":200}`, `field "output_tokens": want an integer, got an object`},
		{`{"type":"response","request_id":"r","ts":1,"output_tokens":1,"status":"OK"}`, `field "status": want an integer, got a string`},
		{`{"type":"response","request_id":"r","ts":1,"output_tokens":1,"status":nul}`, `want "null"`},
		// Unknown type, unknown model, empty identifiers.
		{`{"type":"retry","request_id":"r","ts":1}`, `unknown type "retry"`},
		{`{"type":"","request_id":"r","ts":1}`, `unknown type ""`},
		{`{"type":"Request","request_id":"r","ts":1}`, `unknown type "Request"`},
		{`{"type":"request","request_id":"r","tenant_id":"a","model":"xl","ts":1,"input_tokens":5}`, `unknown model "xl"`},
		{`{"type":"request","request_id":"","tenant_id":"a","model":"small","ts":1,"input_tokens":5}`, `field "request_id" is empty`},
		{`{"type":"request","request_id":"r","tenant_id":"","model":"small","ts":1,"input_tokens":5}`, `field "tenant_id" is empty`},
		// Missing fields.
		{`{"type":"request","request_id":"r","tenant_id":"a","model":"small","input_tokens":5}`, `missing field "ts" in a request`},
		{`{"type":"response","request_id":"r","output_tokens":1,"status":200}`, `missing field "ts" in a response`},
		{`{"type":"request","tenant_id":"a","model":"small","ts":1,"input_tokens":5}`, `missing field "request_id" in a request`},
		{`{"type":"request","request_id":"r","model":"small","ts":1,"input_tokens":5}`, `missing field "tenant_id" in a request`},
		{`{"type":"request","request_id":"r","tenant_id":"a","ts":1,"input_tokens":5}`, `missing field "model" in a request`},
		{`{"type":"request","request_id":"r","tenant_id":"a","model":"small","ts":1}`, `missing field "input_tokens" in a request`},
		{`{"type":"response","request_id":"r","ts":1,"status":200}`, `missing field "output_tokens" in a response`},
		{`{"type":"response","request_id":"r","ts":1,"output_tokens":1}`, `missing field "status" in a response`},
		{`{"request_id":"r","ts":1,"output_tokens":1,"status":200}`, `missing field "type"`},
		{`{}`, `missing field "type"`},
		// Fields of the other type, duplicates.
		{`{"type":"request","request_id":"r","tenant_id":"a","model":"small","ts":1,"input_tokens":5,"status":200}`, `field "status" does not belong in a request`},
		{`{"type":"response","request_id":"r","model":"small","ts":1,"output_tokens":1,"status":200}`, `field "model" does not belong in a response`},
		{`{"type":"response","request_id":"r","ts":1,"ts":2,"output_tokens":1,"status":200}`, `duplicate field "ts"`},
		// Out of range.
		{`{"type":"request","request_id":"r","tenant_id":"a","model":"small","ts":1,"input_tokens":-5}`, `field "input_tokens" is negative (-5)`},
		{`{"type":"response","request_id":"r","ts":1,"output_tokens":-1,"status":200}`, `field "output_tokens" is negative (-1)`},
		{`{"type":"response","request_id":"r","ts":-1,"output_tokens":1,"status":200}`, `field "ts" is negative (-1)`},
		{`{"type":"response","request_id":"r","ts":1,"output_tokens":1000000001,"status":200}`, `above the maximum`},
		{`{"type":"response","request_id":"r","ts":99999999999999999999,"output_tokens":1,"status":200}`, `field "ts": 99999999999999999999 is out of range`},
		{`{"type":"response","request_id":"r","ts":1,"output_tokens":1,"status":42}`, `not an HTTP status`},
		// Not JSON, not an object, trailing data, bad strings.
		{``, "empty line"},
		{"  \t", "empty line"},
		{`<html><body>502 Bad Gateway</body></html>`, "invalid JSON at byte 0"},
		{`null`, "not a JSON object: the line is null"},
		{`[]`, "not a JSON object: the line is an array"},
		{`"request"`, "not a JSON object: the line is a string"},
		{specResponse + `}`, "invalid JSON at byte 98: want the end of the line"},
		{specResponse + specResponse, "want the end of the line"},
		{`{"type":"response",}`, "want a field name"},
		{`{"type":"response" "ts":1}`, "want ',' or '}'"},
		{`{"type" "response"}`, "want ':'"},
		{`{type:"response"}`, "want a field name"},
		{`{"type":"response","ts":01}`, "want ',' or '}'"},
		{`{"type":"response","x":+1}`, "want a value"},
		{`{"type":"response","x":"\q"}`, "want an escape character"},
		{"{\"type\":\"response\",\"x\":\"a\tb\"}", "want a string character"},
		{"{\"type\":\"response\",\"request_id\":\"\xff\"}", "invalid UTF-8"},
		{`{"x":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`, "nested deeper"},
	} {
		_, err := ParseEvent([]byte(tc.line))
		if err == nil {
			t.Errorf("accepted %s", tc.line)
			continue
		}
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Errorf("%s: error %T, want *ParseError", tc.line, err)
		}
		if !strings.Contains(err.Error(), tc.reason) {
			t.Errorf("%s:\n got reason %q\nwant one containing %q", tc.line, err, tc.reason)
		}
	}
}

// TestParseRejectsEveryPrefix checks that every proper prefix of a valid
// line is rejected: a truncated line never parses.
func TestParseRejectsEveryPrefix(t *testing.T) {
	for _, line := range []string{specRequest, specResponse, `{"type":"request","request_id":"r","tenant_id":"é\u00e9","model":"small","ts":1,"input_tokens":5,"x":[1.5e+3,{"y":null}]}`} {
		if _, err := ParseEvent([]byte(line)); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		for i := range len(line) {
			if e, err := ParseEvent([]byte(line[:i])); err == nil {
				t.Errorf("prefix %q accepted as %+v", line[:i], e)
			}
		}
	}
}

func TestPlainASCIITable(t *testing.T) {
	for c := range 0x80 {
		want := c >= 0x20 && c != '"' && c != '\\'
		if got := plainASCII[c] != 0; got != want {
			t.Errorf("plainASCII[%#02x] = %v, want %v", c, got, want)
		}
	}
	if len(plainASCII) != 0x80 {
		t.Errorf("plainASCII has %d entries", len(plainASCII))
	}
}

// TestSpecialFindsTheFirstSpecialByte: the lowest byte special flags in a
// word is the first byte plainASCII rejects, whatever the bytes around it:
// every byte value at every position, among plain bytes and among random
// ones (which flag false positives above the first).
func TestSpecialFindsTheFirstSpecialByte(t *testing.T) {
	first := func(w [8]byte) int {
		for k, c := range w {
			if c >= 0x80 || plainASCII[c] == 0 {
				return k
			}
		}
		return 8
	}
	got := func(w [8]byte) int {
		m := special(binary.LittleEndian.Uint64(w[:]))
		if m == 0 {
			return 8
		}
		return bits.TrailingZeros64(m) / 8
	}
	for k := range 8 {
		for c := range 256 {
			var w [8]byte
			for j := range w {
				w[j] = 'a'
			}
			w[k] = byte(c)
			if g, want := got(w), first(w); g != want {
				t.Fatalf("%q: special says byte %d, want %d", w, g, want)
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200_000 {
		var w [8]byte
		for j := range w {
			w[j] = byte(rng.IntN(256))
			if rng.IntN(2) == 0 {
				w[j] = byte(0x20 + rng.IntN(0x60)) // mostly plain
			}
		}
		if g, want := got(w), first(w); g != want {
			t.Fatalf("%q: special says byte %d, want %d", w, g, want)
		}
	}
}

// TestIntFieldBounds: integers up to the int64 range parse, one beyond
// does not, at every length.
func TestIntFieldBounds(t *testing.T) {
	for _, tc := range []struct {
		n  string
		ok bool
	}{
		{"0", true}, {"7", true}, {"999999999999999999", true}, {"1000000000000000000", true},
		{"9223372036854775807", true}, {"9223372036854775808", false}, {"10000000000000000000", false},
		{"99999999999999999999", false}, {"18446744073709551617", false}, {"-9223372036854775807", true},
	} {
		p := parser{b: []byte(tc.n + ",")}
		v, err := p.intField(fTS)
		if (err == nil) != tc.ok {
			t.Errorf("%s: %d, %v; want ok %v", tc.n, v, err, tc.ok)
			continue
		}
		if tc.ok && strconv.FormatInt(v, 10) != tc.n {
			t.Errorf("%s parses to %d", tc.n, v)
		}
	}
}

// FuzzParseEvent checks ParseEvent against encoding/json: whatever it
// accepts is valid JSON and decodes to the same fields.
func FuzzParseEvent(f *testing.F) {
	for _, s := range []string{specRequest, specResponse, `{"type":"request","x":[1,{"y":"\u00e9"}]}`, `{"ts":1e3}`, `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		e, err := ParseEvent(line)
		if ts, ok := EventTS(line); ok != (err == nil) || ts != e.TS {
			t.Fatalf("%q: EventTS %d, %v; ParseEvent %+v, %v", line, ts, ok, e, err)
		}
		if err != nil {
			return
		}
		if !json.Valid(line) {
			t.Fatalf("accepted invalid JSON %q", line)
		}
		var raw map[string]any
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.UseNumber()
		if err := dec.Decode(&raw); err != nil {
			t.Fatalf("accepted %q, which encoding/json rejects: %v", line, err)
		}
		if raw["type"] != string(e.Type) || raw["request_id"] != e.RequestID {
			t.Fatalf("%q: parsed %+v, encoding/json %v", line, e, raw)
		}
		if ts, _ := raw["ts"].(json.Number).Int64(); ts != e.TS {
			t.Fatalf("%q: ts %d, encoding/json %v", line, e.TS, raw["ts"])
		}
		again, err := ParseEvent(e.AppendJSON(nil))
		if err != nil || again != e {
			t.Fatalf("%q: canonical form %s parses to %+v, %v", line, e.AppendJSON(nil), again, err)
		}
	})
}

func TestParseDoesNotAllocateBeyondIdentifiers(t *testing.T) {
	req, resp := []byte(specRequest), []byte(specResponse)
	if n := testing.AllocsPerRun(100, func() { _, _ = ParseEvent(req) }); n > 2 {
		t.Errorf("request: %v allocations, want at most 2 (request_id, tenant_id)", n)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = ParseEvent(resp) }); n > 1 {
		t.Errorf("response: %v allocations, want at most 1 (request_id)", n)
	}
}

// TestEventTS: a line's event time is its event's ts, and a malformed line
// has none, whatever "ts" it holds.
func TestEventTS(t *testing.T) {
	for _, tc := range []struct {
		line string
		ts   int64
		ok   bool
	}{
		{specRequest, 1764504000123, true},
		{specResponse, 1764504001567, true},
		{`{"type":"response","x":{"ts":9},"request_id":"r","ts":7,"output_tokens":1,"status":200}`, 7, true},
		{`{"type":"response","request_id":"\"ts\":9","ts" :` + "\t7" + `,"output_tokens":1,"status":200}`, 7, true},
		{`{"type":"heartbeat","request_id":"r","ts":9}`, 0, false},
		{`{"type":"response","request_id":"r","ts":9,"output_tokens":1}`, 0, false},
		{`{"type":"response","request_id":"r","ts":9,`, 0, false},
	} {
		ts, ok := EventTS([]byte(tc.line))
		if ts != tc.ts || ok != tc.ok {
			t.Errorf("EventTS(%s) = %d, %v; want %d, %v", tc.line, ts, ok, tc.ts, tc.ok)
		}
	}
	req := []byte(specRequest)
	if n := testing.AllocsPerRun(100, func() { _, _ = EventTS(req) }); n > 0 {
		t.Errorf("EventTS: %v allocations, want none", n)
	}
}

// BenchmarkEventTS is the watermark's share of the per-line cost.
func BenchmarkEventTS(b *testing.B) {
	line := []byte(specRequest)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := EventTS(line); !ok {
			b.Fatal("no ts")
		}
	}
}

// BenchmarkParseEvent parses a generated trace; ns/op is per line.
func BenchmarkParseEvent(b *testing.B) {
	cfg := DefaultGenConfig()
	cfg.Requests = 10_000
	var buf bytes.Buffer
	if _, err := Generate(cfg, func(int) io.Writer { return &buf }); err != nil {
		b.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), []byte{'\n'})
	b.SetBytes(int64(buf.Len() / len(lines)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := ParseEvent(lines[i%len(lines)]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseEventEncodingJSON is the baseline: encoding/json into a
// struct, with none of ParseEvent's validation.
func BenchmarkParseEventEncodingJSON(b *testing.B) {
	cfg := DefaultGenConfig()
	cfg.Requests = 10_000
	var buf bytes.Buffer
	if _, err := Generate(cfg, func(int) io.Writer { return &buf }); err != nil {
		b.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), []byte{'\n'})
	type plain struct {
		Type         string `json:"type"`
		RequestID    string `json:"request_id"`
		TenantID     string `json:"tenant_id"`
		Model        string `json:"model"`
		TS           int64  `json:"ts"`
		InputTokens  int64  `json:"input_tokens"`
		OutputTokens int64  `json:"output_tokens"`
		Status       int    `json:"status"`
	}
	b.SetBytes(int64(buf.Len() / len(lines)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		var e plain
		if err := json.Unmarshal(lines[i%len(lines)], &e); err != nil {
			b.Fatal(err)
		}
	}
}

// TestLineParserAgreesWithParseEvent: over a trace with malformed lines
// and more tenants than the tenant cache has slots, ParseLine and a
// LineParser return what ParseEvent does: the event of a valid line, the
// dead letter (partition, offset, line, reason) of a malformed one.
func TestLineParserAgreesWithParseEvent(t *testing.T) {
	cfg := DefaultGenConfig()
	cfg.Requests, cfg.Tenants, cfg.BadRate, cfg.Partitions = 20_000, 5*tenantSlots, 0.02, 1
	var buf bytes.Buffer
	if _, err := Generate(cfg, func(int) io.Writer { return &buf }); err != nil {
		t.Fatal(err)
	}
	parse := NewLineParser()
	var off int64
	bad := 0
	for _, line := range bytes.SplitAfter(buf.Bytes(), []byte("\n")) {
		l := file.Line{File: TraceFileName(3), Offset: off, Text: bytes.TrimSuffix(line, []byte("\n"))}
		off += int64(len(line))
		e, err := ParseEvent(l.Text)
		want := Parsed{Event: e}
		if err != nil {
			bad++
			want = Parsed{Dead: &DeadLetter{Partition: 3, Offset: l.Offset, Line: jsonString(l.Text), Reason: err.Error()}}
		}
		for name, got := range map[string]func(file.Line) (Parsed, error){"ParseLine": ParseLine, "LineParser": parse} {
			p, err := got(l)
			if err != nil {
				t.Fatalf("%s(%s): %v", name, l.Text, err)
			}
			if p.Event != want.Event || (p.Dead == nil) != (want.Dead == nil) || p.Dead != nil && *p.Dead != *want.Dead {
				t.Fatalf("%s(%s) = %+v %+v, want %+v %+v", name, l.Text, p.Event, p.Dead, want.Event, want.Dead)
			}
		}
	}
	if bad == 0 {
		t.Fatal("the trace has no malformed line")
	}
	if _, err := ParseLine(file.Line{File: "events.log", Text: []byte("{")}); err == nil {
		t.Fatal("a malformed line of a split that names no partition: no error")
	}
	if p, err := ParseLine(file.Line{File: "events.log", Text: []byte(specRequest)}); err != nil || p.Dead != nil {
		t.Fatalf("a valid line of a split that names no partition: %v, %+v", err, p.Dead)
	}
}

// TestLineParserAllocatesOnlyTheRequestID: once a tenant is cached, a
// request allocates its request_id alone, and a response too.
func TestLineParserAllocatesOnlyTheRequestID(t *testing.T) {
	parse := NewLineParser()
	req := file.Line{File: TraceFileName(0), Text: []byte(specRequest)}
	resp := file.Line{File: TraceFileName(0), Text: []byte(specResponse)}
	if _, err := parse(req); err != nil {
		t.Fatal(err)
	}
	for name, l := range map[string]file.Line{"request": req, "response": resp} {
		if n := testing.AllocsPerRun(100, func() { _, _ = parse(l) }); n != 1 {
			t.Errorf("%s: %v allocations, want 1 (its request_id)", name, n)
		}
	}
}

// BenchmarkLineParser parses a generated trace as the job's source does;
// ns/op and allocs/op are per line.
func BenchmarkLineParser(b *testing.B) {
	cfg := DefaultGenConfig()
	cfg.Requests = 10_000
	var buf bytes.Buffer
	if _, err := Generate(cfg, func(int) io.Writer { return &buf }); err != nil {
		b.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), []byte{'\n'})
	parse := NewLineParser()
	b.SetBytes(int64(buf.Len() / len(lines)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := parse(file.Line{File: "part-00000.jsonl", Text: lines[i%len(lines)]}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadTrace reads and parses a trace file as the job's source
// does (FileSource: file.Decode with a LineParser), and, for comparison,
// as a job that reads raw lines (file.Lines) and parses them downstream
// with ParseEvent, after the watermark's EventTS. Reported per line: time,
// bytes and allocations.
func BenchmarkReadTrace(b *testing.B) {
	cfg := DefaultGenConfig()
	cfg.Requests, cfg.Partitions = 50_000, 1
	dir := b.TempDir()
	m, err := GenerateFiles(cfg, dir)
	if err != nil {
		b.Fatal(err)
	}
	lines := m.Partitions[0].Lines
	split := []connector.SplitStart{{Split: TraceFileName(0), Offset: connector.StartDefault}}
	perLine := func(b *testing.B, read func()) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		b.ResetTimer()
		n := 0
		for b.Loop() {
			read()
			n++
		}
		b.StopTimer()
		runtime.ReadMemStats(&after)
		total := float64(n) * float64(lines)
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/total, "ns/line")
		b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/total, "B/line")
		b.ReportMetric(float64(after.Mallocs-before.Mallocs)/total, "allocs/line")
	}
	b.Run("FileSource", func(b *testing.B) {
		src, err := FileSource(dir)
		if err != nil {
			b.Fatal(err)
		}
		perLine(b, func() {
			r, err := src.NewReader(context.Background(), connector.ReaderInfo{}, split)
			if err != nil {
				b.Fatal(err)
			}
			for {
				f, err := r.Fetch(context.Background())
				if err != nil {
					break
				}
				for _, p := range f.Records {
					if p.Dead != nil {
						b.Fatal(p.Dead.Reason)
					}
				}
				f.Recycle()
			}
			r.Close()
		})
	})
	b.Run("Lines+EventTS+ParseEvent", func(b *testing.B) {
		src, err := file.Lines(filepath.Join(dir, "part-*.jsonl"))
		if err != nil {
			b.Fatal(err)
		}
		perLine(b, func() {
			r, err := src.NewReader(context.Background(), connector.ReaderInfo{}, split)
			if err != nil {
				b.Fatal(err)
			}
			for {
				f, err := r.Fetch(context.Background())
				if err != nil {
					break
				}
				for _, l := range f.Records {
					if _, ok := EventTS(l.Text); !ok {
						b.Fatal("no ts")
					}
					if _, err := ParseEvent(l.Text); err != nil {
						b.Fatal(err)
					}
				}
			}
			r.Close()
		})
	})
}

// checkCanonical fails t if canonical accepts line and the general parse
// (object) does not return the same event, with and without the tenant
// cache and in scan mode, and reports whether canonical accepted it.
func checkCanonical(t *testing.T, line []byte, tenants *tenantCache) bool {
	t.Helper()
	accepted := false
	for _, p := range []parser{{b: line}, {b: line, tenants: tenants}, {b: line, scan: true}} {
		var e Event
		if !p.canonical(&e) {
			continue
		}
		accepted = true
		q := p
		q.i = 0
		want, err := q.object()
		if err != nil || e != want {
			t.Fatalf("%q (scan %v, cache %v): canonical %+v; object %+v, %v", line, p.scan, p.tenants != nil, e, want, err)
		}
	}
	return accepted
}

// TestCanonicalAgreesWithObject: the canonical fast path accepts only
// lines the general parse accepts, with the same event. Lines of a
// generated trace (with malformed ones) are mutated a byte at a time
// (replaced, dropped, inserted, doubled) by a seeded generator; a failure
// names the line, and the seed reproduces the run.
func TestCanonicalAgreesWithObject(t *testing.T) {
	cfg := DefaultGenConfig()
	cfg.Requests, cfg.BadRate, cfg.Partitions = 2_000, 0.05, 1
	var buf bytes.Buffer
	if _, err := Generate(cfg, func(int) io.Writer { return &buf }); err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), []byte{'\n'})
	lines = append(lines, []byte(specRequest), []byte(specResponse),
		[]byte(`{"type":"request","request_id":"r","tenant_id":"t","model":"small","ts":0,"input_tokens":0}`),
		[]byte(`{"type":"response","request_id":"r","ts":0,"output_tokens":1000000000,"status":599}`))
	const alphabet = "0123456789-.eE+\"\\/:,{} \t\r\nabnrtu\x00\x1f\x7f\x80\xc3\xa9\xff"
	for seed := uint64(1); seed <= 4; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0))
		tenants := new(tenantCache)
		clean, mutated := 0, 0
		for _, line := range lines {
			if checkCanonical(t, line, tenants) {
				clean++
			}
			for range 20 {
				m := bytes.Clone(line)
				for range 1 + rng.IntN(2) {
					i := rng.IntN(len(m) + 1)
					c := alphabet[rng.IntN(len(alphabet))]
					switch rng.IntN(4) {
					case 0:
						if i < len(m) {
							m[i] = c
						}
					case 1:
						if i < len(m) {
							m = slices.Delete(m, i, i+1)
						}
					case 2:
						m = slices.Insert(m, i, c)
					default:
						j := min(len(m), i+1+rng.IntN(8))
						m = slices.Insert(m, j, m[i:j]...)
					}
				}
				if checkCanonical(t, m, tenants) {
					mutated++
				}
			}
		}
		// A path that accepted nothing would pass the comparison above
		// vacuously: the clean lines must take it, and mutations that
		// keep a line canonical (a digit for a digit) too.
		if clean < len(lines)*9/10 || mutated == 0 {
			t.Fatalf("seed %d: canonical accepted %d of %d lines and %d mutated ones", seed, clean, len(lines), mutated)
		}
	}
}

// FuzzCanonical: whatever canonical accepts, the general parse accepts
// with the same event.
func FuzzCanonical(f *testing.F) {
	for _, s := range []string{specRequest, specResponse, `{"type":"response","request_id":"r","ts":01,"output_tokens":1,"status":200}`} {
		f.Add([]byte(s))
	}
	tenants := new(tenantCache)
	f.Fuzz(func(t *testing.T, line []byte) { checkCanonical(t, line, tenants) })
}
