package gatewaymeter

import (
	"encoding/json"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
)

// Time constants of the job, in milliseconds of event time.
const (
	// WindowSize is the length of the tumbling windows of tenant-cost and
	// model-latency: one minute.
	WindowSize int64 = 60_000

	// OrphanTimeout is how long the assemble operator holds the first event
	// of a request for its partner: an event-time timer at the first event's
	// ts plus OrphanTimeout emits it to orphans.
	OrphanTimeout int64 = 5 * 60_000

	// OutOfOrderness is the bound of the job's watermark strategy: the
	// watermark of a partition is the largest ts seen minus OutOfOrderness
	// minus one, so an event at most OutOfOrderness behind is never late.
	OutOfOrderness int64 = 5_000
)

// EventType says which side of a request an Event is.
type EventType string

// The two event types.
const (
	Request  EventType = "request"
	Response EventType = "response"
)

// The models of the price table.
const (
	ModelSmall  = "small"
	ModelMedium = "medium"
	ModelLarge  = "large"
)

// Models returns the models of the price table, cheapest first.
func Models() []string { return []string{ModelSmall, ModelMedium, ModelLarge} }

// Price is a model's price in integer micro-dollars per token.
type Price struct {
	InputMicros  int64
	OutputMicros int64
}

// PriceOf returns the price of model and whether the model is in the table:
//
//	model   input  output   (micro-dollars per token)
//	small       1       2
//	medium      3      15
//	large      15      75
func PriceOf(model string) (Price, bool) {
	switch model {
	case ModelSmall:
		return Price{1, 2}, true
	case ModelMedium:
		return Price{3, 15}, true
	case ModelLarge:
		return Price{15, 75}, true
	}
	return Price{}, false
}

// Cost returns the cost of one request in micro-dollars: in × input price +
// out × output price. It panics on a model outside the price table, which
// ParseEvent never lets through.
func Cost(model string, in, out int64) int64 {
	p, ok := PriceOf(model)
	if !ok {
		panic(fmt.Sprintf("gatewaymeter: no price for model %q", model))
	}
	return in*p.InputMicros + out*p.OutputMicros
}

// WindowStart returns the start of the one-minute tumbling window holding
// ts: ts rounded down to a multiple of WindowSize (Unix ms, aligned to the
// epoch as Flink's TumblingEventTimeWindows with offset 0).
func WindowStart(ts int64) int64 {
	m := ts % WindowSize
	if m < 0 {
		m += WindowSize
	}
	return ts - m
}

// WindowEnd returns the exclusive end of the window holding ts:
// WindowStart(ts) + WindowSize. A record at exactly a window's end belongs
// to the next window.
func WindowEnd(ts int64) int64 { return WindowStart(ts) + WindowSize }

// Percentile returns the P-th percentile of sorted (ascending) by nearest
// rank: the k-th smallest value with k = ceil(P·n/100), computed in integers
// and clamped to [1, n]. It returns 0 for an empty sample.
func Percentile(sorted []int64, p int) int64 {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	k := (p*n + 99) / 100
	k = max(1, min(k, n))
	return sorted[k-1]
}

// Event is one line of the topic gateway-events: a request or a response.
// Fields of the other type are zero. ParseEvent reads it; AppendJSON writes
// it in the canonical form the generator uses.
type Event struct {
	Type      EventType `json:"type"`
	RequestID string    `json:"request_id"`
	// Request only.
	TenantID    string `json:"tenant_id,omitempty"`
	Model       string `json:"model,omitempty"`
	InputTokens int64  `json:"input_tokens,omitempty"`
	// Both.
	TS int64 `json:"ts"`
	// Response only.
	OutputTokens int64 `json:"output_tokens,omitempty"`
	Status       int   `json:"status,omitempty"`
}

// AppendJSON appends the event as one JSON object, without a newline, with
// the fields of its type in the order of the specification:
//
//	{"type":"request","request_id":…,"tenant_id":…,"model":…,"ts":…,"input_tokens":…}
//	{"type":"response","request_id":…,"ts":…,"output_tokens":…,"status":…}
func (e Event) AppendJSON(b []byte) []byte {
	b = append(b, `{"type":`...)
	b = appendJSONString(b, string(e.Type))
	b = append(b, `,"request_id":`...)
	b = appendJSONString(b, e.RequestID)
	if e.Type == Request {
		b = append(b, `,"tenant_id":`...)
		b = appendJSONString(b, e.TenantID)
		b = append(b, `,"model":`...)
		b = appendJSONString(b, e.Model)
		b = append(b, `,"ts":`...)
		b = strconv.AppendInt(b, e.TS, 10)
		b = append(b, `,"input_tokens":`...)
		b = strconv.AppendInt(b, e.InputTokens, 10)
	} else {
		b = append(b, `,"ts":`...)
		b = strconv.AppendInt(b, e.TS, 10)
		b = append(b, `,"output_tokens":`...)
		b = strconv.AppendInt(b, e.OutputTokens, 10)
		b = append(b, `,"status":`...)
		b = strconv.AppendInt(b, int64(e.Status), 10)
	}
	return append(b, '}')
}

// MarshalJSON writes the canonical form of AppendJSON.
func (e Event) MarshalJSON() ([]byte, error) { return e.AppendJSON(nil), nil }

// UnmarshalJSON parses with ParseEvent, so it is exactly as strict.
func (e *Event) UnmarshalJSON(b []byte) error {
	ev, err := ParseEvent(b)
	if err != nil {
		return err
	}
	*e = ev
	return nil
}

// appendJSONString appends s as a JSON string. Identifiers are plain ASCII
// almost always; anything else goes through encoding/json's escaping.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// RequestRecord is one request with its response, as the assemble operator
// emits it. Its event time is EndTS.
type RequestRecord struct {
	RequestID    string `json:"request_id"`
	TenantID     string `json:"tenant_id"`
	Model        string `json:"model"`
	StartTS      int64  `json:"start_ts"`
	EndTS        int64  `json:"end_ts"`
	LatencyMS    int64  `json:"latency_ms"`
	InputTokens  int64  `json:"input_tokens"`
	OutputTokens int64  `json:"output_tokens"`
	Status       int    `json:"status"`
	CostMicros   int64  `json:"cost_micros"`
}

// Join pairs the two events of one request, given in either order: StartTS
// is the request's ts, EndTS the response's, and the cost is priced on the
// request's model. It fails unless one event is a request and the other a
// response with the same request id, and the response is not before the
// request.
func Join(a, b Event) (RequestRecord, error) {
	if a.Type == Response {
		a, b = b, a
	}
	switch {
	case a.Type != Request || b.Type != Response:
		return RequestRecord{}, fmt.Errorf("gatewaymeter: join of %s %q with %s %q: want a request and a response", a.Type, a.RequestID, b.Type, b.RequestID)
	case a.RequestID != b.RequestID:
		return RequestRecord{}, fmt.Errorf("gatewaymeter: join of request %q with the response of %q", a.RequestID, b.RequestID)
	case b.TS < a.TS:
		return RequestRecord{}, fmt.Errorf("gatewaymeter: request %q: response at %d is before the request at %d", a.RequestID, b.TS, a.TS)
	}
	return RequestRecord{
		RequestID:    a.RequestID,
		TenantID:     a.TenantID,
		Model:        a.Model,
		StartTS:      a.TS,
		EndTS:        b.TS,
		LatencyMS:    b.TS - a.TS,
		InputTokens:  a.InputTokens,
		OutputTokens: b.OutputTokens,
		Status:       b.Status,
		CostMicros:   Cost(a.Model, a.InputTokens, b.OutputTokens),
	}, nil
}

// TenantCostMinute is the output of tenant-cost: a tenant's cost over the
// requests that ended in one window. Key: (TenantID, WindowEnd).
type TenantCostMinute struct {
	TenantID    string `json:"tenant_id"`
	WindowStart int64  `json:"window_start"`
	WindowEnd   int64  `json:"window_end"`
	CostMicros  int64  `json:"cost_micros"`
	Requests    int64  `json:"requests"`
}

// ModelLatencyMinute is the output of model-latency: a model's latency
// distribution over the requests that ended in one window, exact by nearest
// rank. Key: (Model, WindowEnd).
type ModelLatencyMinute struct {
	Model       string `json:"model"`
	WindowStart int64  `json:"window_start"`
	WindowEnd   int64  `json:"window_end"`
	Requests    int64  `json:"requests"`
	P50MS       int64  `json:"p50_ms"`
	P95MS       int64  `json:"p95_ms"`
	P99MS       int64  `json:"p99_ms"`
	MaxMS       int64  `json:"max_ms"`
}

// NewModelLatencyMinute summarizes the latencies of one (model, window). It
// sorts latencies in place.
func NewModelLatencyMinute(model string, windowStart int64, latencies []int64) ModelLatencyMinute {
	m := ModelLatencyMinute{
		Model:       model,
		WindowStart: windowStart,
		WindowEnd:   windowStart + WindowSize,
		Requests:    int64(len(latencies)),
	}
	n := len(latencies)
	if n == 0 {
		return m
	}
	// Each rank by selection rather than a sort: the 99th percentile's
	// rank in the whole sample, then the lower ranks in what lies up to
	// it, and the maximum in what lies above. The values are those of
	// Percentile over the sorted sample.
	k99, k95, k50 := rank(n, 99), rank(n, 95), rank(n, 50)
	selectRank(latencies, k99)
	selectRank(latencies[:k99+1], k95)
	selectRank(latencies[:k95+1], k50)
	m.P50MS, m.P95MS, m.P99MS = latencies[k50], latencies[k95], latencies[k99]
	m.MaxMS = slices.Max(latencies[k99:])
	return m
}

// rank is the index in the sorted sample of n values of its P-th
// percentile, as Percentile takes it.
func rank(n, p int) int { return max(1, min((p*n+99)/100, n)) - 1 }

// selectRank reorders a so that a[k] holds the value sorted a would hold
// there, nothing after it smaller and nothing before it greater
// (quickselect, median-of-three pivots; a sort if the partitions keep
// coming out lopsided, so that no input makes it quadratic).
func selectRank(a []int64, k int) {
	lo, hi := 0, len(a)-1
	for budget := 2 * bits.Len(uint(len(a))); hi-lo > 16; budget-- {
		if budget == 0 {
			slices.Sort(a[lo : hi+1])
			return
		}
		mid := lo + (hi-lo)/2
		if a[mid] < a[lo] {
			a[mid], a[lo] = a[lo], a[mid]
		}
		if a[hi] < a[lo] {
			a[hi], a[lo] = a[lo], a[hi]
		}
		if a[hi] < a[mid] {
			a[hi], a[mid] = a[mid], a[hi]
		}
		p := a[mid]
		i, j := lo, hi
		for i <= j {
			for a[i] < p {
				i++
			}
			for a[j] > p {
				j--
			}
			if i <= j {
				a[i], a[j] = a[j], a[i]
				i++
				j--
			}
		}
		// a[lo..j] <= p, a[i..hi] >= p, and between them only p.
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return
		}
	}
	slices.Sort(a[lo : hi+1])
}

// Alert is the output of alerts: a tenant's minute that cost more than
// three times the mean of its remembered minutes. Key: (TenantID,
// WindowEnd).
type Alert struct {
	TenantID       string `json:"tenant_id"`
	WindowEnd      int64  `json:"window_end"`
	CostMicros     int64  `json:"cost_micros"`
	BaselineMicros int64  `json:"baseline_micros"`
}

// Parameters of the alert rule.
const (
	// AlertHistory is how many of a tenant's minutes the rule remembers.
	AlertHistory = 5
	// AlertMinHistory is how many it must remember before it may fire.
	AlertMinHistory = 3
	// AlertFactor is how many times the mean a minute must exceed.
	AlertFactor = 3
)

// CostHistory is the alert rule's state for one tenant: the costs of the
// tenant's last up-to-AlertHistory TenantCostMinutes, oldest first.
//
// The minutes that count are the tenant's previous TenantCostMinute
// windows, in window order — the windows tenant-cost emitted for the tenant,
// which are the minutes in which at least one of its requests ended. A
// minute without requests is not a zero-cost minute: it emits nothing and is
// skipped, so a tenant's history spans as much time as it takes to have five
// active minutes. The current minute is compared with the history before it
// joins it, and it joins whether or not it fired.
type CostHistory struct {
	Costs []int64 `json:"costs"`
}

// Observe applies the rule to the tenant's next minute m, which must follow
// every minute observed before in window order: with k remembered minutes
// summing to sum, it fires when k ≥ AlertMinHistory and
// m.CostMicros × k > AlertFactor × sum, with baseline sum / k (integer
// division). Then m's cost is remembered, forgetting the oldest beyond
// AlertHistory.
func (h *CostHistory) Observe(m TenantCostMinute) (Alert, bool) {
	var sum int64
	for _, c := range h.Costs {
		sum += c
	}
	k := int64(len(h.Costs))
	var a Alert
	fired := k >= AlertMinHistory && m.CostMicros*k > AlertFactor*sum
	if fired {
		a = Alert{TenantID: m.TenantID, WindowEnd: m.WindowEnd, CostMicros: m.CostMicros, BaselineMicros: sum / k}
	}
	if len(h.Costs) == AlertHistory {
		copy(h.Costs, h.Costs[1:])
		h.Costs[AlertHistory-1] = m.CostMicros
	} else {
		h.Costs = append(h.Costs, m.CostMicros)
	}
	return a, fired
}

// Orphan is the output of orphans: the one event of a request whose partner
// never arrived within OrphanTimeout — a request without a response (a
// time-out, or a response lost to a malformed line) or a response without a
// request. It carries everything that event knew; the fields of the other
// type are zero. Key: RequestID.
type Orphan struct {
	RequestID    string    `json:"request_id"`
	Type         EventType `json:"type"`
	TS           int64     `json:"ts"`
	TenantID     string    `json:"tenant_id,omitempty"`
	Model        string    `json:"model,omitempty"`
	InputTokens  int64     `json:"input_tokens,omitempty"`
	OutputTokens int64     `json:"output_tokens,omitempty"`
	Status       int       `json:"status,omitempty"`
}

// OrphanOf returns the orphan record of an unpaired event.
func OrphanOf(e Event) Orphan {
	return Orphan{
		RequestID:    e.RequestID,
		Type:         e.Type,
		TS:           e.TS,
		TenantID:     e.TenantID,
		Model:        e.Model,
		InputTokens:  e.InputTokens,
		OutputTokens: e.OutputTokens,
		Status:       e.Status,
	}
}

// DeadLetter is the output of dead-letters: a line ParseEvent rejected.
// Offset is the byte offset of the line's first byte in its partition; Line
// is the line without its newline; Reason is the parse error's text. Key:
// (Partition, Offset).
type DeadLetter struct {
	Partition int    `json:"partition"`
	Offset    int64  `json:"offset"`
	Line      string `json:"line"`
	Reason    string `json:"reason"`
}
