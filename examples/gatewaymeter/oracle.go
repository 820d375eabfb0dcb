package gatewaymeter

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Oracle computes the exact output of a failure-free run of the job over a
// bounded trace, given as one reader per partition (partitions[p] is
// partition p; nil is an empty partition). At the end of a bounded input
// the watermark passes every window and every timer, so every window is
// emitted and every unpaired event is an orphan.
//
//   - Each line is parsed with ParseEvent; a rejected line is a dead letter
//     at (partition, byte offset of the line's first byte).
//   - Events are paired by request_id with Join; an event without a
//     partner in the whole trace is an orphan.
//   - Each RequestRecord falls in the one-minute window of its end_ts.
//     tenant-cost sums cost_micros and counts requests per (tenant_id,
//     window); model-latency takes exact nearest-rank percentiles of
//     latency_ms per (model, window).
//   - Each tenant's TenantCostMinutes, in window order, go through one
//     CostHistory: the alerts.
//
// It fails, naming the first offending event, on a trace for which the job's
// output depends on the order events arrive in (see the package
// documentation): a duplicate request id, a response before its request or
// more than OrphanTimeout after it, or an event more than OutOfOrderness
// behind its partition's largest ts before it. A request id used again after
// its pair completed is not detected: it would make an orphan.
//
// The partitions are read merged by ts, so memory holds the requests in
// flight, the window aggregates and one latency per request — not the
// trace.
func Oracle(partitions []io.Reader) (Outputs, error) { return oracleReaders(partitions, true) }

// oracleReaders is Oracle; crlf says whether a line's "\r\n" ending is dropped
// whole (file lines) or only its "\n" (a Kafka record written out as a
// line, whose value may end in "\r").
func oracleReaders(partitions []io.Reader, crlf bool) (Outputs, error) {
	o := newOracle()
	heads := make([]*traceHead, len(partitions))
	for p, r := range partitions {
		h := &traceHead{part: p, done: r == nil}
		if r != nil {
			h.lines = lineReader{r: newReader(r), crlf: crlf}
		}
		if err := o.advance(h); err != nil {
			return Outputs{}, err
		}
		heads[p] = h
	}
	for {
		var next *traceHead
		for _, h := range heads {
			if !h.done && (next == nil || h.ev.TS < next.ev.TS) {
				next = h
			}
		}
		if next == nil {
			break
		}
		if err := o.event(next); err != nil {
			return Outputs{}, err
		}
		if err := o.advance(next); err != nil {
			return Outputs{}, err
		}
	}
	return o.outputs(), nil
}

// TraceFiles returns the trace files in dir, indexed by partition: the
// files named part-NNNNN.jsonl, where NNNNN is the partition. A partition
// without a file below the largest one is "".
func TraceFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, e := range entries {
		name := e.Name()
		num, prefixed := strings.CutPrefix(name, "part-")
		num, suffixed := strings.CutSuffix(num, ".jsonl")
		if !prefixed || !suffixed || e.IsDir() {
			continue
		}
		p, err := strconv.Atoi(num)
		if err != nil || p < 0 || name != TraceFileName(p) {
			continue
		}
		for len(files) <= p {
			files = append(files, "")
		}
		files[p] = filepath.Join(dir, name)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("gatewaymeter: %s: no trace files (part-NNNNN.jsonl)", dir)
	}
	return files, nil
}

// OracleFiles runs Oracle over the trace in dir (see TraceFiles).
func OracleFiles(dir string) (Outputs, error) { return oracleFiles(dir, true) }

func oracleFiles(dir string, crlf bool) (Outputs, error) {
	names, err := TraceFiles(dir)
	if err != nil {
		return Outputs{}, err
	}
	readers := make([]io.Reader, len(names))
	for p, name := range names {
		if name == "" {
			continue
		}
		f, err := os.Open(name)
		if err != nil {
			return Outputs{}, err
		}
		defer f.Close()
		readers[p] = f
	}
	return oracleReaders(readers, crlf)
}

// bufSize is the read buffer of trace and output files.
const bufSize = 1 << 16

func newReader(r io.Reader) *bufio.Reader { return bufio.NewReaderSize(r, bufSize) }

// lineReader splits a stream into lines and tracks their byte offsets. A
// last line without a newline is still a line.
type lineReader struct {
	r    *bufio.Reader
	off  int64
	long []byte
	// crlf drops the "\r" of a "\r\n" line ending too.
	crlf bool
}

// next returns the next line without its line ending, and the offset of
// its first byte; io.EOF after the last.
func (l *lineReader) next() ([]byte, int64, error) {
	line, err := l.r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		l.long = append(l.long[:0], line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			line, err = l.r.ReadSlice('\n')
			l.long = append(l.long, line...)
		}
		line = l.long
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, 0, err
	}
	if len(line) == 0 {
		return nil, 0, io.EOF
	}
	off := l.off
	l.off += int64(len(line))
	if n := len(line); line[n-1] == '\n' {
		line = line[:n-1]
		if l.crlf && n > 1 && line[n-2] == '\r' {
			line = line[:n-2]
		}
	}
	return line, off, nil
}

// traceHead is a partition's next valid event.
type traceHead struct {
	part  int
	lines lineReader
	done  bool
	ev    Event
	off   int64
	seen  bool
	maxTS int64
}

type tenantWindow struct {
	tenant string
	end    int64
}

type modelWindow struct {
	model string
	end   int64
}

type heldEvent struct {
	ev   Event
	part int
	off  int64
}

type oracle struct {
	dead      []DeadLetter
	pending   map[string]heldEvent
	cost      map[tenantWindow]*TenantCostMinute
	latencies map[modelWindow][]int64
}

func newOracle() *oracle {
	return &oracle{
		pending:   make(map[string]heldEvent),
		cost:      make(map[tenantWindow]*TenantCostMinute),
		latencies: make(map[modelWindow][]int64),
	}
}

// advance reads h's partition up to its next valid event, recording dead
// letters on the way.
func (o *oracle) advance(h *traceHead) error {
	for !h.done {
		line, off, err := h.lines.next()
		if errors.Is(err, io.EOF) {
			h.done = true
			return nil
		}
		if err != nil {
			return fmt.Errorf("gatewaymeter: partition %d: %w", h.part, err)
		}
		ev, err := ParseEvent(line)
		if err != nil {
			o.dead = append(o.dead, DeadLetter{Partition: h.part, Offset: off, Line: jsonString(line), Reason: err.Error()})
			continue
		}
		if h.seen && ev.TS < h.maxTS-OutOfOrderness {
			return fmt.Errorf("gatewaymeter: trace: partition %d offset %d: ts %d is %d ms behind the partition's largest ts %d, more than the watermark's bound of %d ms: the job would drop it as late",
				h.part, off, ev.TS, h.maxTS-ev.TS, h.maxTS, OutOfOrderness)
		}
		h.seen, h.maxTS = true, max(h.maxTS, ev.TS)
		h.ev, h.off = ev, off
		return nil
	}
	return nil
}

// event pairs h's event or holds it for its partner.
func (o *oracle) event(h *traceHead) error {
	ev := h.ev
	held, ok := o.pending[ev.RequestID]
	if !ok {
		o.pending[ev.RequestID] = heldEvent{ev: ev, part: h.part, off: h.off}
		return nil
	}
	if held.ev.Type == ev.Type {
		return fmt.Errorf("gatewaymeter: trace: request id %q has two %ss: partition %d offset %d and partition %d offset %d",
			ev.RequestID, ev.Type, held.part, held.off, h.part, h.off)
	}
	rec, err := Join(held.ev, ev)
	if err != nil {
		return fmt.Errorf("gatewaymeter: trace: %w", err)
	}
	if rec.LatencyMS > OrphanTimeout {
		return fmt.Errorf("gatewaymeter: trace: request %q: the response is %d ms after the request, more than the orphan timeout of %d ms: whether the job pairs them depends on arrival order",
			rec.RequestID, rec.LatencyMS, OrphanTimeout)
	}
	delete(o.pending, ev.RequestID)
	o.record(rec)
	return nil
}

func (o *oracle) record(r RequestRecord) {
	start := WindowStart(r.EndTS)
	tw := tenantWindow{r.TenantID, start + WindowSize}
	c := o.cost[tw]
	if c == nil {
		c = &TenantCostMinute{TenantID: r.TenantID, WindowStart: start, WindowEnd: start + WindowSize}
		o.cost[tw] = c
	}
	c.CostMicros += r.CostMicros
	c.Requests++
	mw := modelWindow{r.Model, start + WindowSize}
	o.latencies[mw] = append(o.latencies[mw], r.LatencyMS)
}

func (o *oracle) outputs() Outputs {
	var out Outputs
	for _, c := range o.cost {
		out.TenantCost = append(out.TenantCost, *c)
	}
	for mw, lat := range o.latencies {
		out.ModelLatency = append(out.ModelLatency, NewModelLatencyMinute(mw.model, mw.end-WindowSize, lat))
	}
	for _, h := range o.pending {
		out.Orphans = append(out.Orphans, OrphanOf(h.ev))
	}
	out.DeadLetters = o.dead
	out.Sort()

	// TenantCost is sorted by tenant, then window: each tenant's run is its
	// minutes in window order.
	var hist CostHistory
	for i, m := range out.TenantCost {
		if i == 0 || m.TenantID != out.TenantCost[i-1].TenantID {
			hist = CostHistory{}
		}
		if a, ok := hist.Observe(m); ok {
			out.Alerts = append(out.Alerts, a)
		}
	}
	return out
}

// jsonString returns line as a JSON string holds it once encoding/json has
// written it: each byte that is not part of valid UTF-8 becomes U+FFFD. A
// dead letter's line read back from a sink's output then equals the
// oracle's.
func jsonString(line []byte) string {
	if utf8.Valid(line) {
		return string(line)
	}
	var b strings.Builder
	for len(line) > 0 {
		r, n := utf8.DecodeRune(line)
		b.WriteRune(r) // utf8.RuneError for an invalid byte, with n == 1
		line = line[n:]
	}
	return b.String()
}
