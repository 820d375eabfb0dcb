package gatewaymeter

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/weirstream/weir/connector/file"
)

// MaxTokens bounds input_tokens and output_tokens, so that no cost, nor any
// sum of costs over fewer than ten million requests, can overflow an int64.
const MaxTokens int64 = 1_000_000_000

// maxDepth bounds the nesting of values under unknown fields.
const maxDepth = 64

// ParseError is why ParseEvent rejected a line. Its text is the dead
// letter's reason; it is a pure function of the line, so the job and the
// oracle agree on it.
type ParseError struct {
	Reason string
	syntax bool // the line is not valid JSON
}

func (e *ParseError) Error() string { return e.Reason }

// fail is a valid JSON line that is not a valid event.
func fail(format string, args ...any) error {
	return &ParseError{Reason: fmt.Sprintf(format, args...)}
}

// invalid is a line that is not valid JSON.
func invalid(format string, args ...any) error {
	return &ParseError{Reason: fmt.Sprintf(format, args...), syntax: true}
}

func isSyntax(err error) bool {
	pe, ok := err.(*ParseError)
	return !ok || pe.syntax
}

// ParseEvent parses one line of gateway-events (without its newline). It
// accepts exactly one JSON object, with optional JSON whitespace around it,
// and rejects, with the reason as a *ParseError:
//
//   - anything that is not valid JSON: truncated lines, syntax errors,
//     invalid UTF-8, trailing data after the object;
//   - a known field with a value of the wrong type (a string for ts, a
//     fraction for a token count, null for model, ...) or given twice;
//   - a type other than "request" or "response", a model outside the price
//     table, an empty request_id or tenant_id;
//   - a missing field: a request needs type, request_id, tenant_id, model,
//     ts and input_tokens; a response needs type, request_id, ts,
//     output_tokens and status;
//   - a field of the other type (a status on a request, a model on a
//     response);
//   - a negative ts, a token count outside [0, MaxTokens], a status outside
//     [100, 599].
//
// Unknown fields are skipped (their values must still be valid JSON), so
// that the gateway may add fields without breaking the job.
//
// It is written for the hot path: a single pass without reflection, and no
// allocation on a valid line beyond the request_id and tenant_id strings.
func ParseEvent(line []byte) (Event, error) {
	p := parser{b: line}
	e, err := p.event()
	if err != nil {
		return Event{}, err
	}
	return e, nil
}

// Parsed is one line of gateway-events, parsed where the source read it:
// its event, or, for a line ParseEvent rejects, its dead letter.
type Parsed struct {
	Event Event
	// Dead is the line's dead letter, nil for a valid line.
	Dead *DeadLetter
}

// ParseLine parses a line of a trace partition's file (or of a Kafka
// partition, named as the trace file would be: TraceFileName): its event,
// or its dead letter with the partition and offset it came from. It keeps
// nothing of l. It fails only on a malformed line whose split does not
// name a partition (PartitionOf).
func ParseLine(l file.Line) (Parsed, error) {
	return parseLine(parser{b: l.Text}, l)
}

func parseLine(p parser, l file.Line) (Parsed, error) {
	e, err := p.event()
	if err == nil {
		return Parsed{Event: e}, nil
	}
	part, perr := PartitionOf(l.File)
	if perr != nil {
		return Parsed{}, perr
	}
	return Parsed{Dead: &DeadLetter{Partition: part, Offset: l.Offset, Line: jsonString(l.Text), Reason: err.Error()}}, nil
}

// LineParser is ParseLine with a cache of tenant ids: a tenant's id is
// allocated once per cache slot rather than once per request. Tenants are
// few next to requests, and the cache is bounded (a tenant that misses is
// allocated as ParseLine would), so it costs a few kilobytes whatever the
// input. A LineParser is for one goroutine.
type LineParser struct {
	tenants *tenantCache
}

// NewLineParser returns a LineParser's Parse, for file.Decode (a parser
// per reader).
func NewLineParser() func(file.Line) (Parsed, error) {
	lp := LineParser{tenants: new(tenantCache)}
	return lp.Parse
}

// Parse is ParseLine.
func (lp LineParser) Parse(l file.Line) (Parsed, error) {
	return parseLine(parser{b: l.Text, tenants: lp.tenants}, l)
}

// tenantSlots is the size of a tenantCache, a power of two.
const (
	tenantBits  = 10
	tenantSlots = 1 << tenantBits
)

// tenantCache holds strings by a hash of their bytes, one per slot: a
// direct-mapped cache, whose newest string wins its slot.
type tenantCache [tenantSlots]string

// get returns b as a string, from the cache if it holds it.
func (c *tenantCache) get(b []byte) string {
	var h uint64
	if n := len(b); n >= 8 {
		// The first and last eight bytes (overlapping for shorter ids),
		// which hold a generated id's distinguishing digits.
		h = binary.LittleEndian.Uint64(b) ^ bits.RotateLeft64(binary.LittleEndian.Uint64(b[n-8:]), 29) ^ uint64(n)
	} else {
		for _, x := range b {
			h = h<<8 | uint64(x)
		}
	}
	h *= 0x9e3779b97f4a7c15
	slot := &c[h>>(64-tenantBits)]
	if *slot == string(b) { // compares without allocating
		return *slot
	}
	*slot = string(b)
	return *slot
}

// EventTS returns the ts of the event line holds, exactly as ParseEvent
// reads it, and false if ParseEvent rejects the line. It is the event time
// of the line: a "ts" nested in an unknown field, or the ts of a malformed
// line, is not: that returns 0, false. It allocates nothing on a valid
// line.
func EventTS(line []byte) (int64, bool) {
	p := parser{b: line, scan: true}
	e, err := p.event()
	if err != nil {
		return 0, false
	}
	return e.TS, true
}

// Field bits, in the canonical order of Event.AppendJSON.
const (
	fType uint = 1 << iota
	fRequestID
	fTenantID
	fModel
	fTS
	fInputTokens
	fOutputTokens
	fStatus
)

const (
	requestFields  = fType | fRequestID | fTenantID | fModel | fTS | fInputTokens
	responseFields = fType | fRequestID | fTS | fOutputTokens | fStatus
)

func fieldName(f uint) string {
	switch f {
	case fType:
		return "type"
	case fRequestID:
		return "request_id"
	case fTenantID:
		return "tenant_id"
	case fModel:
		return "model"
	case fTS:
		return "ts"
	case fInputTokens:
		return "input_tokens"
	case fOutputTokens:
		return "output_tokens"
	case fStatus:
		return "status"
	}
	return "?"
}

func fieldOf(name []byte) uint {
	switch string(name) {
	case "type":
		return fType
	case "request_id":
		return fRequestID
	case "tenant_id":
		return fTenantID
	case "model":
		return fModel
	case "ts":
		return fTS
	case "input_tokens":
		return fInputTokens
	case "output_tokens":
		return fOutputTokens
	case "status":
		return fStatus
	}
	return 0
}

type parser struct {
	b []byte
	i int
	// scan leaves RequestID and TenantID empty, so that a line is
	// validated without allocating (EventTS).
	scan bool
	// tenants, if set, caches tenant ids (LineParser).
	tenants *tenantCache
}

// ws skips JSON whitespace. The check for none, the usual case, is
// inlined.
func (p *parser) ws() {
	if p.i < len(p.b) && p.b[p.i] > ' ' {
		return
	}
	p.skipWS()
}

//go:noinline
func (p *parser) skipWS() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) truncated() error {
	return invalid("truncated JSON: the line ends at byte %d inside the object", len(p.b))
}

// unexpected reports the byte at p.i, or truncation at the end of the line.
func (p *parser) unexpected(want string) error {
	if p.i >= len(p.b) {
		return p.truncated()
	}
	c := p.b[p.i]
	if c >= 0x20 && c < 0x7f {
		return invalid("invalid JSON at byte %d: want %s, got %q", p.i, want, rune(c))
	}
	return invalid("invalid JSON at byte %d: want %s, got byte %#02x", p.i, want, c)
}

// event parses the line: its canonical form by canonical, any other by
// object.
func (p *parser) event() (Event, error) {
	var e Event
	if p.canonical(&e) {
		return e, nil
	}
	p.i = 0
	return p.object()
}

// object parses the line as any JSON object, checks its fields and
// returns the event or the first reason to reject it.
func (p *parser) object() (Event, error) {
	var e Event
	p.ws()
	if p.i == len(p.b) {
		return e, fail("empty line")
	}
	if p.b[p.i] != '{' {
		if k := p.kind(); k != "" {
			if err := p.skipValue(0); err != nil {
				return e, err
			}
			return e, fail("not a JSON object: the line is %s", k)
		}
		return e, p.unexpected("a JSON object")
	}
	p.i++
	p.ws()
	// A line that is not valid JSON is rejected as such, even if a field
	// before the syntax error was already wrong: the first error that is
	// not a syntax error waits in bad until the whole line has been read.
	var seen uint
	var bad error
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
	} else {
		for {
			if p.i >= len(p.b) || p.b[p.i] != '"' {
				return e, p.unexpected("a field name")
			}
			key, err := p.str()
			if err != nil {
				return e, err
			}
			p.ws()
			if p.i >= len(p.b) || p.b[p.i] != ':' {
				return e, p.unexpected("':'")
			}
			p.i++
			p.ws()
			f := fieldOf(key)
			if f != 0 {
				if seen&f != 0 && bad == nil {
					bad = fail("duplicate field %q", fieldName(f))
				}
				seen |= f
			}
			if err := p.field(f, &e); err != nil {
				if isSyntax(err) {
					return e, err
				}
				if bad == nil {
					bad = err
				}
			}
			p.ws()
			if p.i >= len(p.b) {
				return e, p.truncated()
			}
			if c := p.b[p.i]; c == ',' {
				p.i++
				p.ws()
				continue
			} else if c == '}' {
				p.i++
				break
			}
			return e, p.unexpected("',' or '}'")
		}
	}
	p.ws()
	if p.i < len(p.b) {
		return e, p.unexpected("the end of the line after the object")
	}
	if bad != nil {
		return e, bad
	}

	if seen&fType == 0 {
		return e, fail("missing field %q", "type")
	}
	need, allowed := uint(requestFields), uint(requestFields)
	if e.Type == Response {
		need, allowed = responseFields, responseFields
	}
	if missing := need &^ seen; missing != 0 {
		return e, fail("missing field %q in a %s", fieldName(missing&-missing), e.Type)
	}
	if extra := seen &^ allowed; extra != 0 {
		return e, fail("field %q does not belong in a %s", fieldName(extra&-extra), e.Type)
	}
	return e, nil
}

// The beginnings of the lines Event.AppendJSON writes, up to the
// request_id's first byte.
const (
	canonicalRequest  = `{"type":"request","request_id":"`
	canonicalResponse = `{"type":"response","request_id":"`
)

// canonical parses a line written exactly as Event.AppendJSON writes one,
// with identifiers of plain ASCII and every value valid, into e and
// reports true; for any other line it reports false, having read part of
// it, and the general parse (object) decides. It accepts only lines the
// general parse accepts, with the same event, so it changes nothing but
// the time it takes: every line the gateway writes takes it, a fixed
// sequence of byte comparisons with no field-name dispatch.
func (p *parser) canonical(e *Event) bool {
	b := p.b
	switch {
	case len(b) > len(canonicalRequest) && string(b[:len(canonicalRequest)]) == canonicalRequest:
		e.Type, p.i = Request, len(canonicalRequest)
	case len(b) > len(canonicalResponse) && string(b[:len(canonicalResponse)]) == canonicalResponse:
		e.Type, p.i = Response, len(canonicalResponse)
	default:
		return false
	}
	id, ok := p.plainString(true)
	if !ok {
		return false
	}
	var tenant []byte
	if e.Type == Request {
		if tenant, ok = p.plainString(p.expect(`,"tenant_id":"`)); !ok {
			return false
		}
		model, ok := p.plainString(p.expect(`,"model":"`))
		if !ok {
			return false
		}
		if e.Model = modelOf(model); e.Model == "" {
			return false
		}
		if e.TS, ok = p.plainInt(p.expect(`,"ts":`)); !ok {
			return false
		}
		if e.InputTokens, ok = p.plainInt(p.expect(`,"input_tokens":`)); !ok || e.InputTokens > MaxTokens {
			return false
		}
	} else {
		if e.TS, ok = p.plainInt(p.expect(`,"ts":`)); !ok {
			return false
		}
		if e.OutputTokens, ok = p.plainInt(p.expect(`,"output_tokens":`)); !ok || e.OutputTokens > MaxTokens {
			return false
		}
		status, ok := p.plainInt(p.expect(`,"status":`))
		if !ok || status < 100 || status > 599 {
			return false
		}
		e.Status = int(status)
	}
	if !p.expect("}") || p.i != len(b) {
		return false
	}
	if p.scan {
		return true
	}
	e.RequestID = string(id)
	switch {
	case e.Type == Response:
	case p.tenants != nil:
		e.TenantID = p.tenants.get(tenant)
	default:
		e.TenantID = string(tenant)
	}
	return true
}

// expect reports whether lit comes next, and steps over it if so.
func (p *parser) expect(lit string) bool {
	if len(p.b)-p.i < len(lit) || string(p.b[p.i:p.i+len(lit)]) != lit {
		return false
	}
	p.i += len(lit)
	return true
}

// plainString reads a non-empty string content of plain ASCII (no
// escapes) up to its closing quote, which it steps over, if ok (the
// literal before it matched) and the string is one.
func (p *parser) plainString(ok bool) ([]byte, bool) {
	if !ok {
		return nil, false
	}
	b, start := p.b, p.i
	i := plainEnd(b, start)
	if i == start || i >= len(b) || b[i] != '"' {
		return nil, false
	}
	p.i = i + 1
	return b[start:i], true
}

// plainInt reads a non-negative integer without a leading zero (or 0
// itself) of at most 18 digits, if ok (the literal before it matched).
// What follows it is the next literal's to check: a fraction or an
// exponent fails there.
func (p *parser) plainInt(ok bool) (int64, bool) {
	if !ok {
		return 0, false
	}
	b, i := p.b, p.i
	var v int64
	for i < len(b) && b[i]-'0' <= 9 {
		v = v*10 + int64(b[i]-'0')
		i++
	}
	n := i - p.i
	if n == 0 || n > 18 || n > 1 && b[p.i] == '0' {
		return 0, false
	}
	p.i = i
	return v, true
}

// field parses the value of field f (0: an unknown field) into e.
func (p *parser) field(f uint, e *Event) error {
	switch f {
	case 0:
		return p.skipValue(0)
	case fType:
		s, err := p.strField(f)
		if err != nil {
			return err
		}
		switch string(s) {
		case "request":
			e.Type = Request
		case "response":
			e.Type = Response
		default:
			return fail("unknown type %q", s)
		}
	case fRequestID, fTenantID:
		s, err := p.strField(f)
		if err != nil {
			return err
		}
		if len(s) == 0 {
			return fail("field %q is empty", fieldName(f))
		}
		switch {
		case p.scan:
		case f == fRequestID:
			e.RequestID = string(s)
		case p.tenants != nil:
			e.TenantID = p.tenants.get(s)
		default:
			e.TenantID = string(s)
		}
	case fModel:
		s, err := p.strField(f)
		if err != nil {
			return err
		}
		if e.Model = modelOf(s); e.Model == "" {
			return fail("unknown model %q", s)
		}
	case fTS:
		v, err := p.intField(f)
		if err != nil {
			return err
		}
		if v < 0 {
			return fail("field %q is negative (%d)", "ts", v)
		}
		e.TS = v
	case fInputTokens, fOutputTokens:
		v, err := p.intField(f)
		if err != nil {
			return err
		}
		if v < 0 {
			return fail("field %q is negative (%d)", fieldName(f), v)
		}
		if v > MaxTokens {
			return fail("field %q is %d, above the maximum %d", fieldName(f), v, MaxTokens)
		}
		if f == fInputTokens {
			e.InputTokens = v
		} else {
			e.OutputTokens = v
		}
	case fStatus:
		v, err := p.intField(f)
		if err != nil {
			return err
		}
		if v < 100 || v > 599 {
			return fail("field %q is %d, not an HTTP status", "status", v)
		}
		e.Status = int(v)
	}
	return nil
}

// modelOf returns the model constant b names, or "" for none of the price
// table's (without allocating).
func modelOf(b []byte) string {
	switch string(b) {
	case ModelSmall:
		return ModelSmall
	case ModelMedium:
		return ModelMedium
	case ModelLarge:
		return ModelLarge
	}
	return ""
}

// kind names the JSON value starting at p.i, or returns "" if none can
// start there.
func (p *parser) kind() string {
	if p.i >= len(p.b) {
		return ""
	}
	switch c := p.b[p.i]; {
	case c == '"':
		return "a string"
	case c == '{':
		return "an object"
	case c == '[':
		return "an array"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == 'n':
		return "null"
	case c == '-' || c >= '0' && c <= '9':
		return "a number"
	}
	return ""
}

// wrongType rejects the value at p.i for field f, after checking that it
// is valid JSON (a syntax error is the better reason).
func (p *parser) wrongType(f uint, want string) error {
	k := p.kind()
	if k == "" {
		return p.unexpected("a value")
	}
	start := p.i
	if err := p.skipValue(0); err != nil {
		return err
	}
	if k == "a number" {
		return fail("field %q: want %s, got the number %s", fieldName(f), want, p.b[start:p.i])
	}
	return fail("field %q: want %s, got %s", fieldName(f), want, k)
}

func (p *parser) strField(f uint) ([]byte, error) {
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return nil, p.wrongType(f, "a string")
	}
	return p.str()
}

// intField parses an integer; a fraction or an exponent is a wrong type.
func (p *parser) intField(f uint) (int64, error) {
	start := p.i
	neg := false
	if p.i < len(p.b) && p.b[p.i] == '-' {
		neg = true
		p.i++
	}
	if p.i >= len(p.b) {
		return 0, p.truncated()
	}
	c := p.b[p.i]
	if c < '0' || c > '9' {
		if neg {
			return 0, p.unexpected("a digit")
		}
		return 0, p.wrongType(f, "an integer")
	}
	var v uint64
	overflow := false
	if c == '0' {
		p.i++
	} else {
		b, i := p.b, p.i
		for i < len(b) && b[i]-'0' <= 9 {
			v = v*10 + uint64(b[i]-'0')
			i++
		}
		// Up to 18 digits fit in an int64; only a longer number needs
		// the exact check (and a division per digit).
		if i-p.i > 18 {
			v = 0
			for _, c := range b[p.i:i] {
				if v > (1<<63-1-uint64(c-'0'))/10 {
					overflow = true
				}
				v = v*10 + uint64(c-'0')
			}
		}
		p.i = i
	}
	if p.i >= len(p.b) {
		return 0, p.truncated() // the number may go on
	}
	if c := p.b[p.i]; c == '.' || c == 'e' || c == 'E' {
		p.i = start
		return 0, p.wrongType(f, "an integer")
	}
	if overflow {
		return 0, fail("field %q: %s is out of range", fieldName(f), p.b[start:p.i])
	}
	if neg {
		return -int64(v), nil
	}
	return int64(v), nil
}

// plainASCII holds the bytes a string may hold without a closer look:
// printable ASCII except '"' and '\\'.
const plainASCII = "" +
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" +
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" +
	"\x01\x01\x00\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01" +
	"\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01" +
	"\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01" +
	"\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x00\x01\x01\x01" +
	"\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01" +
	"\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01"

// Masks of SWAR byte tests on a 64-bit word.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// special returns a mask of the bytes of w (little-endian: the first byte
// is the lowest) that a string cannot hold without a closer look: control
// bytes, '"', '\\' and bytes from 0x80 on. The lowest set bit is exactly
// the first such byte (bits above it may be false positives), which is
// all str uses.
func special(w uint64) uint64 {
	q := w ^ (ones * '"')
	s := w ^ (ones * '\\')
	return ((w-ones*0x20) & ^w | (q-ones) & ^q | (s-ones) & ^s | w) & highs
}

// plainEnd returns the index of the first byte of b from i on that a
// string cannot hold without a closer look (special), or len(b): it reads
// eight bytes at a time.
func plainEnd(b []byte, i int) int {
	for i+8 <= len(b) {
		if m := special(binary.LittleEndian.Uint64(b[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
		i += 8
	}
	for i < len(b) && b[i] < 0x80 && plainASCII[b[i]] != 0 {
		i++
	}
	return i
}

// str parses the string at p.i (an opening quote) and returns its content,
// unescaped. Without escapes the content aliases the line.
func (p *parser) str() ([]byte, error) {
	// Fast path: plain ASCII up to the closing quote, as every identifier
	// the gateway writes, eight bytes at a time.
	b, start := p.b, p.i+1
	i := plainEnd(b, start)
	if i < len(b) && b[i] == '"' {
		p.i = i + 1
		return b[start:i], nil
	}
	p.i = i
	escaped, ascii := false, true
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			s := p.b[start:p.i]
			p.i++
			if !ascii && !utf8.Valid(s) {
				return nil, invalid("invalid UTF-8 in the string at byte %d", start-1)
			}
			if escaped {
				s = unescape(s)
			}
			return s, nil
		case c == '\\':
			escaped = true
			p.i++
			if p.i >= len(p.b) {
				return nil, p.truncated()
			}
			switch p.b[p.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				p.i++
			case 'u':
				p.i++
				for range 4 {
					if p.i >= len(p.b) {
						return nil, p.truncated()
					}
					if !isHex(p.b[p.i]) {
						return nil, p.unexpected("a hexadecimal digit")
					}
					p.i++
				}
			default:
				return nil, p.unexpected("an escape character")
			}
		case c < 0x20:
			return nil, p.unexpected("a string character")
		default:
			if c >= 0x80 {
				ascii = false
			}
			p.i++
		}
	}
	return nil, p.truncated()
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func hexVal(b []byte) rune {
	var r rune
	for _, c := range b {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		default:
			r |= rune(c - 'A' + 10)
		}
	}
	return r
}

// unescape decodes the escapes of a string content that str validated.
// Unpaired surrogates become U+FFFD, as in encoding/json.
func unescape(s []byte) []byte {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' {
			out = append(out, c)
			i++
			continue
		}
		switch s[i+1] {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r := hexVal(s[i+2 : i+6])
			i += 6
			if utf16.IsSurrogate(r) {
				r2 := utf8.RuneError
				if i+6 <= len(s) && s[i] == '\\' && s[i+1] == 'u' {
					r2 = hexVal(s[i+2 : i+6])
				}
				if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
					r = d
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
			out = utf8.AppendRune(out, r)
			continue
		default: // '"', '\\', '/'
			out = append(out, s[i+1])
		}
		i += 2
	}
	return out
}

// skipValue validates and skips one JSON value.
func (p *parser) skipValue(depth int) error {
	if depth > maxDepth {
		return invalid("invalid JSON at byte %d: nested deeper than %d", p.i, maxDepth)
	}
	if p.i >= len(p.b) {
		return p.truncated()
	}
	switch c := p.b[p.i]; {
	case c == '"':
		_, err := p.str()
		return err
	case c == '{':
		p.i++
		p.ws()
		if p.i < len(p.b) && p.b[p.i] == '}' {
			p.i++
			return nil
		}
		for {
			if p.i >= len(p.b) || p.b[p.i] != '"' {
				return p.unexpected("a field name")
			}
			if _, err := p.str(); err != nil {
				return err
			}
			p.ws()
			if p.i >= len(p.b) || p.b[p.i] != ':' {
				return p.unexpected("':'")
			}
			p.i++
			p.ws()
			if err := p.skipValue(depth + 1); err != nil {
				return err
			}
			if done, err := p.separator('}'); done || err != nil {
				return err
			}
		}
	case c == '[':
		p.i++
		p.ws()
		if p.i < len(p.b) && p.b[p.i] == ']' {
			p.i++
			return nil
		}
		for {
			if err := p.skipValue(depth + 1); err != nil {
				return err
			}
			if done, err := p.separator(']'); done || err != nil {
				return err
			}
		}
	case c == 't':
		return p.literal("true")
	case c == 'f':
		return p.literal("false")
	case c == 'n':
		return p.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	}
	return p.unexpected("a value")
}

func (p *parser) literal(lit string) error {
	for j := 0; j < len(lit); j++ {
		if p.i >= len(p.b) {
			return p.truncated()
		}
		if p.b[p.i] != lit[j] {
			return p.unexpected(strconv.Quote(lit))
		}
		p.i++
	}
	return nil
}

// number skips a JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (p *parser) number() error {
	if p.b[p.i] == '-' {
		p.i++
	}
	if p.i >= len(p.b) {
		return p.truncated()
	}
	switch c := p.b[p.i]; {
	case c == '0':
		p.i++
	case c >= '1' && c <= '9':
		p.digits()
	default:
		return p.unexpected("a digit")
	}
	if p.i < len(p.b) && p.b[p.i] == '.' {
		p.i++
		if err := p.someDigits(); err != nil {
			return err
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		if err := p.someDigits(); err != nil {
			return err
		}
	}
	return nil
}

func (p *parser) digits() {
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
}

func (p *parser) someDigits() error {
	if p.i >= len(p.b) {
		return p.truncated()
	}
	if c := p.b[p.i]; c < '0' || c > '9' {
		return p.unexpected("a digit")
	}
	p.digits()
	return nil
}

// separator reads what follows a member of an object or array: a comma
// (more follows) or the closing byte (done).
func (p *parser) separator(close byte) (done bool, err error) {
	p.ws()
	if p.i >= len(p.b) {
		return false, p.truncated()
	}
	switch p.b[p.i] {
	case ',':
		p.i++
		p.ws()
		return false, nil
	case close:
		p.i++
		return true, nil
	}
	return false, p.unexpected("',' or '" + string(close) + "'")
}
