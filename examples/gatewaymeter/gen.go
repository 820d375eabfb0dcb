package gatewaymeter

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// DefaultStartMS is the event time of the first request of a trace unless
// configured otherwise: 2025-12-01T00:00:00Z.
const DefaultStartMS int64 = 1_764_547_200_000

// GenConfig configures Generate. Start from DefaultGenConfig: the zero value
// is not valid (it has no partitions and no rate).
//
// The trace is a pure function of the config: the same config gives
// byte-identical files on every run and every platform, since the generator
// draws every choice from seeded PCG streams, uses integer arithmetic only
// once the config is read (no floating point whose rounding could differ
// between platforms), and never reads the clock. Requests and malformed
// lines draw from separate streams, so the valid events of a trace do not
// depend on BadRate, except for those a malformed line replaces.
type GenConfig struct {
	// Seed selects the trace. Default 1.
	Seed uint64 `json:"seed"`
	// Requests is the number of requests. Default 100 000.
	Requests int64 `json:"requests"`
	// Partitions is the number of partitions of gateway-events. Default 8.
	Partitions int `json:"partitions"`
	// Tenants is the number of tenants; tenant k (from 1) sends a share of
	// requests proportional to 1/k. Default 100.
	Tenants int `json:"tenants"`
	// RequestsPerSecond is the request rate in event time, over all
	// partitions; each request makes two events. Default 96, which is the
	// lab's 24 events per second per partition on 8 partitions.
	RequestsPerSecond float64 `json:"requests_per_second"`
	// StartMS is the event time of the first request, Unix ms. Default
	// DefaultStartMS.
	StartMS int64 `json:"start_ms"`
	// MaxDisorderMS bounds how far, within a partition, an event's ts may be
	// behind a ts before it. At most OutOfOrderness, so that a trace has no
	// late data. Default 2000.
	MaxDisorderMS int64 `json:"max_disorder_ms"`
	// NoResponseRate is the fraction of requests that never get a
	// response. Default 0.001.
	NoResponseRate float64 `json:"no_response_rate"`
	// SpikeRate is the fraction of event-time minutes in which one tenant,
	// chosen uniformly, bursts: a thirty-second of the minute's requests go
	// to it, on the large model. Default 0.05.
	SpikeRate float64 `json:"spike_rate"`
	// BadRate is the probability that an event comes with a malformed line,
	// which either replaces the event's line (the event is lost, and its
	// partner becomes an orphan) or is inserted before it. Default 0.
	BadRate float64 `json:"bad_rate"`
	// Progress, if set, is called with the number of requests generated so
	// far, every 65 536 requests and once at the end.
	Progress func(requests int64) `json:"-"`
}

// DefaultGenConfig returns the lab's configuration.
func DefaultGenConfig() GenConfig {
	return GenConfig{
		Seed:              1,
		Requests:          100_000,
		Partitions:        8,
		Tenants:           100,
		RequestsPerSecond: 96,
		StartMS:           DefaultStartMS,
		MaxDisorderMS:     2_000,
		NoResponseRate:    0.001,
		SpikeRate:         0.05,
	}
}

// Validate reports the first invalid field.
func (c GenConfig) Validate() error {
	rate := func(name string, v float64) error {
		if !(v >= 0 && v <= 1) {
			return fmt.Errorf("gatewaymeter: %s must be in [0, 1], got %g", name, v)
		}
		return nil
	}
	switch {
	case c.Requests < 0 || c.Requests > 1e12:
		return fmt.Errorf("gatewaymeter: requests must be in [0, 1e12], got %d", c.Requests)
	case c.Partitions < 1 || c.Partitions > 99_999:
		return fmt.Errorf("gatewaymeter: partitions must be in [1, 99999], got %d", c.Partitions)
	case c.Tenants < 1 || c.Tenants > 1_000_000:
		return fmt.Errorf("gatewaymeter: tenants must be in [1, 1000000], got %d", c.Tenants)
	case !(c.RequestsPerSecond >= 0.001 && c.RequestsPerSecond <= 1e6):
		return fmt.Errorf("gatewaymeter: requests per second must be in [0.001, 1e6], got %g", c.RequestsPerSecond)
	case c.StartMS < 0 || c.StartMS > 1<<53:
		return fmt.Errorf("gatewaymeter: start must be in [0, 2^53] ms, got %d", c.StartMS)
	case c.MaxDisorderMS < 0 || c.MaxDisorderMS > OutOfOrderness:
		return fmt.Errorf("gatewaymeter: max disorder must be in [0, %d] ms (the watermark's bound), got %d", OutOfOrderness, c.MaxDisorderMS)
	}
	if err := rate("no-response rate", c.NoResponseRate); err != nil {
		return err
	}
	if err := rate("spike rate", c.SpikeRate); err != nil {
		return err
	}
	return rate("bad rate", c.BadRate)
}

// Manifest describes a generated trace: its config and what was written.
type Manifest struct {
	Config GenConfig `json:"config"`
	// Requests is the number of requests generated.
	Requests int64 `json:"requests"`
	// NoResponse is the number of requests generated without a response.
	NoResponse int64 `json:"no_response"`
	// Replaced is the number of events whose line was replaced by a
	// malformed one.
	Replaced int64 `json:"replaced"`
	// BadLines is the number of malformed lines, over all partitions.
	BadLines int64 `json:"bad_lines"`
	// BadKinds counts the malformed lines by kind (see BadKinds).
	BadKinds map[string]int64 `json:"bad_kinds,omitempty"`
	// Partitions has one entry per partition, in order.
	Partitions []PartitionManifest `json:"partitions"`
}

// PartitionManifest describes one partition of a trace.
type PartitionManifest struct {
	Partition int `json:"partition"`
	// File is the file's name within the trace directory (GenerateFiles).
	File string `json:"file,omitempty"`
	// Lines counts every line; Events the valid ones, BadLines the
	// malformed ones.
	Lines    int64 `json:"lines"`
	Events   int64 `json:"events"`
	BadLines int64 `json:"bad_lines"`
	Bytes    int64 `json:"bytes"`
	// MinTS and MaxTS bound the ts of the valid events (0 if none).
	MinTS int64 `json:"min_ts"`
	MaxTS int64 `json:"max_ts"`
}

// Kinds of malformed lines.
const (
	BadTruncated      = "truncated"       // a valid line cut short
	BadWrongType      = "wrong-type"      // one field's value of another JSON type
	BadUnknownType    = "unknown-type"    // a type that is neither request nor response
	BadMissingField   = "missing-field"   // one required field left out
	BadNegativeTokens = "negative-tokens" // a negative token count
	BadNotAnObject    = "not-an-object"   // a gateway error page, a log line, a JSON non-object
)

// BadKinds returns the kinds of malformed lines the generator writes.
func BadKinds() []string {
	return []string{BadTruncated, BadWrongType, BadUnknownType, BadMissingField, BadNegativeTokens, BadNotAnObject}
}

// TraceFileName is the name of partition p's file in a trace directory.
func TraceFileName(p int) string { return fmt.Sprintf("part-%05d.jsonl", p) }

// ManifestFileName is the name of the manifest in a trace directory.
const ManifestFileName = "manifest.json"

// GenerateFiles writes a trace into dir (created if needed): one file per
// partition, named by TraceFileName, and the manifest as ManifestFileName.
// It overwrites those files and leaves any other file alone.
func GenerateFiles(cfg GenConfig, dir string) (Manifest, error) {
	return GenerateFilesContext(context.Background(), cfg, dir)
}

// ReadManifest reads the manifest of the trace in dir.
func ReadManifest(dir string) (Manifest, error) {
	var m Manifest
	b, err := os.ReadFile(filepath.Join(dir, ManifestFileName))
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("gatewaymeter: %s: %w", filepath.Join(dir, ManifestFileName), err)
	}
	return m, nil
}

// Generate writes a trace, one JSON-lines stream per partition to
// w(partition), which it calls once per partition before writing.
//
// The event-time layout: request i (from 1, id "r-" and i in nine or more
// digits) starts at StartMS plus the sum of i gaps drawn uniformly from
// [0, 2·10⁶/RequestsPerSecond] µs, so start times never decrease. Its
// latency follows its model and output tokens (a first-token time plus a
// per-token time; under 90 s, far below OrphanTimeout), and its
// response ends at start + latency. Each event goes to a partition drawn
// uniformly and independently (ingress and egress nodes differ), so with 8
// partitions 7 requests in 8 have their events on different partitions.
//
// Within a partition, events are written in the order of a log time: the
// event's ts plus a delay drawn uniformly from [0, MaxDisorderMS], as if
// each gateway node appended its events a little after they happened. Two
// events a before b in a partition then satisfy ts_a + d_a ≤ ts_b + d_b,
// so ts_b ≥ ts_a - MaxDisorderMS whatever the latencies: the per-partition
// disorder is bounded by MaxDisorderMS by construction. The latency bound
// only bounds memory: an event is held until no later request can log
// before it.
func Generate(cfg GenConfig, w func(partition int) io.Writer) (Manifest, error) {
	if err := cfg.Validate(); err != nil {
		return Manifest{}, err
	}
	g := newGenerator(cfg)
	for p := range g.parts {
		g.parts[p].w = w(p)
	}
	if err := g.run(); err != nil {
		return Manifest{}, err
	}
	m := Manifest{
		Config:     cfg,
		Requests:   cfg.Requests,
		NoResponse: g.noResponse,
		Replaced:   g.replaced,
		Partitions: make([]PartitionManifest, cfg.Partitions),
	}
	for p := range g.parts {
		m.Partitions[p] = g.parts[p].stats
		m.BadLines += g.parts[p].stats.BadLines
	}
	if m.BadLines > 0 {
		m.BadKinds = make(map[string]int64)
		for k, n := range g.badKinds {
			if n > 0 {
				m.BadKinds[BadKinds()[k]] = n
			}
		}
	}
	return m, nil
}

// genEvent is one event waiting in the generator's heap. It refers to the
// tenant and model by index, so holding it allocates nothing.
type genEvent struct {
	logTS  int64 // ts plus the logging delay: the order within a partition
	seq    int64 // tie-breaker: the order of creation
	ts     int64
	req    int64 // request number
	tokens int64 // input tokens of a request, output tokens of a response
	part   int32
	tenant int32
	status int16
	model  int8
	resp   bool
}

func (a *genEvent) before(b *genEvent) bool {
	return a.logTS < b.logTS || a.logTS == b.logTS && a.seq < b.seq
}

type genPart struct {
	w     io.Writer
	buf   []byte
	stats PartitionManifest
}

type generator struct {
	cfg     GenConfig
	rng     *rand.Rand // every choice about requests
	bad     *rand.Rand // every choice about malformed lines
	tenants []string
	zipf    []uint64 // cumulative tenant weights
	models  [3]string

	gapMaxUS   int64  // request gaps are uniform in [0, gapMaxUS] µs
	noRespPPB  uint64 // NoResponseRate in parts per billion
	spikePPB   uint64
	badPPB     uint64
	heap       []genEvent
	seq        int64
	parts      []genPart
	scratch    []byte
	noResponse int64
	replaced   int64
	badKinds   [6]int64
}

const (
	ppb         = 1_000_000_000
	flushAt     = 1 << 16
	progressLen = 1 << 16
)

func perBillion(r float64) uint64 { return uint64(math.Round(r * ppb)) }

func newGenerator(cfg GenConfig) *generator {
	g := &generator{
		cfg:       cfg,
		rng:       rand.New(rand.NewPCG(cfg.Seed, 0x6761_7465_7761_7931)),
		bad:       rand.New(rand.NewPCG(cfg.Seed, 0x6761_7465_7761_7932)),
		models:    [3]string{ModelSmall, ModelMedium, ModelLarge},
		gapMaxUS:  int64(math.Round(2e6 / cfg.RequestsPerSecond)),
		noRespPPB: perBillion(cfg.NoResponseRate),
		spikePPB:  perBillion(cfg.SpikeRate),
		badPPB:    perBillion(cfg.BadRate),
		parts:     make([]genPart, cfg.Partitions),
	}
	width := max(4, len(strconv.Itoa(cfg.Tenants)))
	g.tenants = make([]string, cfg.Tenants)
	g.zipf = make([]uint64, cfg.Tenants)
	var cum uint64
	for k := range g.tenants {
		g.tenants[k] = fmt.Sprintf("tenant-%0*d", width, k+1)
		cum += (1 << 32) / uint64(k+1)
		g.zipf[k] = cum
	}
	for p := range g.parts {
		g.parts[p].stats.Partition = p
		g.parts[p].buf = make([]byte, 0, flushAt+4096)
	}
	return g
}

func (g *generator) chance(perBillion uint64) bool {
	return perBillion > 0 && g.rng.Uint64N(ppb) < perBillion
}

// skew draws from [0, n) with density falling towards n: the product of two
// uniform draws, scaled; its mean is about n/4.
func (g *generator) skew(n int64) int64 {
	return g.rng.Int64N(n) * g.rng.Int64N(n) / n
}

func (g *generator) run() error {
	cfg := g.cfg
	startUS := cfg.StartMS * 1000
	t := startUS
	minute, spike := int64(-1), -1
	for i := int64(1); i <= cfg.Requests; i++ {
		t += g.rng.Int64N(g.gapMaxUS + 1)
		start := t / 1000
		// Every event still to come logs at or after start: what logs
		// up to start is final.
		if err := g.flush(start); err != nil {
			return err
		}
		if m := (t - startUS) / 60_000_000; m != minute {
			minute, spike = m, -1
			if g.chance(g.spikePPB) {
				spike = g.rng.IntN(cfg.Tenants)
			}
		}

		var tenant, model int
		var in, out int64
		if spike >= 0 && g.rng.IntN(32) == 0 {
			tenant, model = spike, 2
			in, out = 2000+g.skew(12000), 200+g.skew(2000)
		} else {
			x := g.rng.Uint64N(g.zipf[len(g.zipf)-1])
			tenant, _ = slices.BinarySearch(g.zipf, x+1)
			switch r := g.rng.IntN(100); {
			case r < 50:
				model, in, out = 0, 20+g.skew(2000), 5+g.skew(500)
			case r < 85:
				model, in, out = 1, 50+g.skew(6000), 10+g.skew(1500)
			default:
				model, in, out = 2, 100+g.skew(12000), 20+g.skew(2000)
			}
		}
		ttft := [3]int64{20, 80, 200}[model] + g.rng.Int64N([3]int64{100, 320, 1000}[model])
		perToken := [3]int64{2, 8, 15}[model] + g.rng.Int64N([3]int64{5, 13, 26}[model])
		status := int16(200)
		var latency int64
		switch r := g.rng.IntN(1000); {
		case r < 975:
			latency = ttft + out*perToken
		case r < 990:
			status, out, latency = 429, 0, 2+g.rng.Int64N(30)
		case r < 995:
			status, out = 500, out/4
			latency = ttft + out*perToken
		default:
			status, out, latency = 400, 0, 5+g.rng.Int64N(50)
		}
		noResponse := g.chance(g.noRespPPB)

		g.push(genEvent{
			logTS: start + g.rng.Int64N(cfg.MaxDisorderMS+1), ts: start, req: i, tokens: in,
			part: int32(g.rng.IntN(cfg.Partitions)), tenant: int32(tenant), model: int8(model),
		})
		if noResponse {
			g.noResponse++
		} else {
			end := start + latency
			g.push(genEvent{
				logTS: end + g.rng.Int64N(cfg.MaxDisorderMS+1), ts: end, req: i, tokens: out,
				part: int32(g.rng.IntN(cfg.Partitions)), status: status, resp: true,
			})
		}
		if cfg.Progress != nil && i%progressLen == 0 {
			cfg.Progress(i)
		}
	}
	if err := g.flush(math.MaxInt64); err != nil {
		return err
	}
	for p := range g.parts {
		if err := g.drain(&g.parts[p]); err != nil {
			return err
		}
	}
	if cfg.Progress != nil && (cfg.Requests == 0 || cfg.Requests%progressLen != 0) {
		cfg.Progress(cfg.Requests)
	}
	return nil
}

// flush writes, in log order, every held event that logs at or before t.
func (g *generator) flush(t int64) error {
	for len(g.heap) > 0 && g.heap[0].logTS <= t {
		e := g.pop()
		if err := g.write(&e); err != nil {
			return err
		}
	}
	return nil
}

func (g *generator) write(e *genEvent) error {
	p := &g.parts[e.part]
	if g.badPPB > 0 && g.bad.Uint64N(ppb) < g.badPPB {
		kind := g.bad.IntN(len(g.badKinds))
		replace := g.bad.IntN(2) == 0
		g.scratch = g.appendEvent(g.scratch[:0], e)
		bad := g.malformed(kind, e, g.scratch)
		p.buf = append(append(p.buf, bad...), '\n')
		p.stats.Lines++
		p.stats.BadLines++
		g.badKinds[kind]++
		if replace {
			g.replaced++
			return g.maybeDrain(p)
		}
	}
	p.buf = g.appendEvent(p.buf, e)
	p.buf = append(p.buf, '\n')
	p.stats.Lines++
	if p.stats.Events == 0 || e.ts < p.stats.MinTS {
		p.stats.MinTS = e.ts
	}
	p.stats.MaxTS = max(p.stats.MaxTS, e.ts)
	p.stats.Events++
	return g.maybeDrain(p)
}

func (g *generator) maybeDrain(p *genPart) error {
	if len(p.buf) < flushAt {
		return nil
	}
	return g.drain(p)
}

func (g *generator) drain(p *genPart) error {
	if len(p.buf) == 0 {
		return nil
	}
	n, err := p.w.Write(p.buf)
	p.stats.Bytes += int64(n)
	if err == nil && n < len(p.buf) {
		err = io.ErrShortWrite
	}
	if err != nil {
		return fmt.Errorf("gatewaymeter: writing partition %d: %w", p.stats.Partition, err)
	}
	p.buf = p.buf[:0]
	return nil
}

// appendEvent appends e's line, without its newline: the same bytes as
// Event.AppendJSON, written without building an Event.
func (g *generator) appendEvent(b []byte, e *genEvent) []byte {
	if e.resp {
		b = append(b, `{"type":"response","request_id":"r-`...)
		b = appendPadded(b, e.req)
		b = append(b, `","ts":`...)
		b = strconv.AppendInt(b, e.ts, 10)
		b = append(b, `,"output_tokens":`...)
		b = strconv.AppendInt(b, e.tokens, 10)
		b = append(b, `,"status":`...)
		b = strconv.AppendInt(b, int64(e.status), 10)
		return append(b, '}')
	}
	b = append(b, `{"type":"request","request_id":"r-`...)
	b = appendPadded(b, e.req)
	b = append(b, `","tenant_id":"`...)
	b = append(b, g.tenants[e.tenant]...)
	b = append(b, `","model":"`...)
	b = append(b, g.models[e.model]...)
	b = append(b, `","ts":`...)
	b = strconv.AppendInt(b, e.ts, 10)
	b = append(b, `,"input_tokens":`...)
	b = strconv.AppendInt(b, e.tokens, 10)
	return append(b, '}')
}

// appendPadded appends n in at least nine digits.
func appendPadded(b []byte, n int64) []byte {
	var d [20]byte
	i := len(d)
	for n > 0 || i > len(d)-9 {
		i--
		d[i] = byte('0' + n%10)
		n /= 10
	}
	return append(b, d[i:]...)
}

// RequestID returns the id the generator gives request n.
func RequestID(n int64) string { return string(appendPadded([]byte("r-"), n)) }

// malformed returns a malformed line of the given kind (an index into
// BadKinds) derived from e and its valid line. Every kind is rejected by
// ParseEvent; none contains a newline or invalid UTF-8.
func (g *generator) malformed(kind int, e *genEvent, valid []byte) []byte {
	r := g.bad
	switch BadKinds()[kind] {
	case BadTruncated:
		// Every proper prefix of an object lacks its closing brace.
		return slices.Clone(valid[:1+r.IntN(len(valid)-1)])
	case BadNotAnObject:
		lines := []string{
			`<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>`,
			`upstream connect error or disconnect/reset before headers. reset reason: connection termination`,
			`POST /v1/chat/completions HTTP/1.1`,
			`null`,
			`[]`,
			`"request"`,
			` `,
		}
		return []byte(lines[r.IntN(len(lines))])
	}
	fs := g.fields(e)
	switch BadKinds()[kind] {
	case BadWrongType:
		j := r.IntN(len(fs))
		if strings.HasPrefix(fs[j].v, `"`) {
			alts := []string{`42`, `null`, `true`, `["` + strings.Trim(fs[j].v, `"`) + `"]`, `{}`}
			fs[j].v = alts[r.IntN(len(alts))]
		} else {
			alts := []string{`"` + fs[j].v + `"`, fs[j].v + `.5`, `null`, `false`}
			fs[j].v = alts[r.IntN(len(alts))]
		}
	case BadUnknownType:
		alts := []string{`"retry"`, `"heartbeat"`, `"Request"`, `"responses"`, `""`}
		fs[0].v = alts[r.IntN(len(alts))]
	case BadMissingField:
		j := r.IntN(len(fs))
		fs = slices.Delete(fs, j, j+1)
	case BadNegativeTokens:
		j := len(fs) - 1 // input_tokens of a request
		if e.resp {
			j = len(fs) - 2 // output_tokens of a response
		}
		fs[j].v = "-" + strconv.FormatInt(1+r.Int64N(1000), 10)
	}
	var b []byte
	b = append(b, '{')
	for i, f := range fs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, f.k...)
		b = append(b, `":`...)
		b = append(b, f.v...)
	}
	return append(b, '}')
}

type field struct{ k, v string }

// fields returns e's fields with their JSON values, in canonical order.
func (g *generator) fields(e *genEvent) []field {
	id := `"` + RequestID(e.req) + `"`
	ts := strconv.FormatInt(e.ts, 10)
	tok := strconv.FormatInt(e.tokens, 10)
	if e.resp {
		return []field{{"type", `"response"`}, {"request_id", id}, {"ts", ts}, {"output_tokens", tok}, {"status", strconv.Itoa(int(e.status))}}
	}
	return []field{{"type", `"request"`}, {"request_id", id}, {"tenant_id", `"` + g.tenants[e.tenant] + `"`}, {"model", `"` + g.models[e.model] + `"`}, {"ts", ts}, {"input_tokens", tok}}
}

func (g *generator) push(e genEvent) {
	e.seq = g.seq
	g.seq++
	h := append(g.heap, e)
	i := len(h) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if !h[i].before(&h[parent]) {
			break
		}
		h[i], h[parent] = h[parent], h[i]
		i = parent
	}
	g.heap = h
}

func (g *generator) pop() genEvent {
	h := g.heap
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	for i := 0; ; {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && h[r].before(&h[l]) {
			m = r
		}
		if !h[m].before(&h[i]) {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	g.heap = h
	return top
}
