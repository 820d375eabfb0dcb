package gatewaymeter

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connector/file"
	"github.com/weirstream/weir/state"
	"github.com/weirstream/weir/stream"
)

// Operator uids: state in checkpoints is stored under them.
const (
	UIDSource       = "gateway-events"
	UIDParse        = "parse"
	UIDAssemble     = "assemble"
	UIDTenantCost   = "tenant-cost"
	UIDModelLatency = "model-latency"
	UIDAlerts       = "alerts"
)

// The source's watermarks are aligned (stream.WatermarkStrategy's
// WithWatermarkAlignment): no partition reads more than AlignmentMaxDrift
// of event time past the lowest watermark of the source's subtasks, which
// report theirs every AlignmentUpdateInterval. A subtask that reads ahead
// would otherwise leave in the assemble operator's state every request
// the others have not yet reached the response of: replaying a 14-hour
// trace at parallelism 2, the subtasks drift hours apart and that state
// grows twenty-fold. One minute is the tenant window's length; the
// interval is short because a replay covers hours of event time a second.
const (
	AlignmentMaxDrift       = time.Minute
	AlignmentUpdateInterval = 10 * time.Millisecond
)

// Sinks are where the job writes its five outputs.
type Sinks struct {
	TenantCost   connector.Sink[TenantCostMinute]
	ModelLatency connector.Sink[ModelLatencyMinute]
	Alerts       connector.Sink[Alert]
	Orphans      connector.Sink[Orphan]
	DeadLetters  connector.Sink[DeadLetter]
}

// FileSinks returns exactly-once JSON-lines sinks under dir, one
// subdirectory per output (the layout ReadOutputs reads).
func FileSinks(dir string, opts ...file.SinkOption) (Sinks, error) {
	var s Sinks
	var err error
	sub := func(name string) string { return dir + "/" + name }
	if s.TenantCost, err = jsonSink[TenantCostMinute](sub(OutTenantCost), opts); err != nil {
		return s, err
	}
	if s.ModelLatency, err = jsonSink[ModelLatencyMinute](sub(OutModelLatency), opts); err != nil {
		return s, err
	}
	if s.Alerts, err = jsonSink[Alert](sub(OutAlerts), opts); err != nil {
		return s, err
	}
	if s.Orphans, err = jsonSink[Orphan](sub(OutOrphans), opts); err != nil {
		return s, err
	}
	s.DeadLetters, err = jsonSink[DeadLetter](sub(OutDeadLetters), opts)
	return s, err
}

// SinkUID returns the uid of the sink that writes output out (one of
// OutputNames()).
func SinkUID(out string) string { return out + "-sink" }

// OutputDir returns the directory whose subdirectories the file sinks
// wrote, given each sink's location by uid (stream.RestoreInfo), or false
// if no sink recorded one. The sinks must agree.
func OutputDir(locations map[string]string) (string, bool, error) {
	dir, found := "", false
	for _, out := range OutputNames() {
		loc, ok := locations[SinkUID(out)]
		if !ok {
			continue
		}
		if filepath.Base(loc) != out {
			return "", false, fmt.Errorf("sink %s wrote to %s, not to a directory named %s", SinkUID(out), loc, out)
		}
		d := filepath.Dir(loc)
		if found && d != dir {
			return "", false, fmt.Errorf("the sinks wrote to different directories, %s and %s", dir, d)
		}
		dir, found = d, true
	}
	return dir, found, nil
}

func jsonSink[T any](dir string, opts []file.SinkOption) (connector.Sink[T], error) {
	s, err := file.JSONLines[T](dir, opts...)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Build adds GatewayMeter to env: source → parse (chained) →
// keyBy(request_id) → assemble → keyBy(tenant_id) → tenant-cost → sink,
// with the alerts, model-latency (over latency samples mapped from the
// records), orphans and dead-letter branches. src
// yields the lines of gateway-events parsed where it reads them
// (FileSource, KafkaSource, LiveSource), one split per partition, whose
// split ids name the partition (part-NNNNN.jsonl). A line's event time is
// its event's ts; a malformed line has none.
func Build(env *stream.Environment, src connector.Source[Parsed], sinks Sinks) {
	wm := stream.BoundedOutOfOrderness[Parsed](time.Duration(OutOfOrderness)*time.Millisecond).
		WithTimestamps(func(p Parsed, _ int64) int64 {
			if p.Dead != nil {
				// The parse operator routes it to the dead letters, and
				// whatever ts it may hold is not event time.
				return stream.NoTimestamp
			}
			return p.Event.TS
		}).
		WithWatermarkAlignment(UIDSource, AlignmentMaxDrift, AlignmentUpdateInterval)
	lines := stream.FromSource(env, src, UIDSource, wm, stream.Uid(UIDSource))

	deadTag := stream.NewOutputTag[DeadLetter]("dead-letters")
	events := stream.ProcessRecords(lines, stream.ProcessFunction[Parsed, Event](deadLetters{dead: deadTag}), stream.Uid(UIDParse))
	stream.SinkTo(stream.SideOutputOf(events, deadTag), sinks.DeadLetters, stream.Uid(SinkUID(OutDeadLetters)), stream.Parallelism(1))

	orphanTag := stream.NewOutputTag[Orphan]("orphans")
	byRequest := stream.KeyBy(events, func(e Event) string { return e.RequestID })
	requests := stream.Process(byRequest, stream.KeyedProcessFunction[string, Event, RequestRecord](&assembler{orphans: orphanTag}), stream.Uid(UIDAssemble))
	stream.SinkTo(stream.SideOutputOf(requests, orphanTag), sinks.Orphans, stream.Uid(SinkUID(OutOrphans)), stream.Parallelism(1))

	minute := stream.TumblingEventTimeWindows(time.Duration(WindowSize) * time.Millisecond)
	byTenant := stream.KeyBy(requests, func(r RequestRecord) string { return r.TenantID })
	costs := stream.Aggregate(stream.Windowed(byTenant, minute), stream.AggregateFunction[RequestRecord, costAcc, costAcc](costAgg{}),
		func(tenant string, w stream.Window, a costAcc) TenantCostMinute {
			return TenantCostMinute{TenantID: tenant, WindowStart: w.Start, WindowEnd: w.End, CostMicros: a.Cost, Requests: a.Requests}
		}, stream.Uid(UIDTenantCost))
	stream.SinkTo(costs, sinks.TenantCost, stream.Uid(SinkUID(OutTenantCost)))

	alerts := stream.Process(stream.KeyBy(costs, func(m TenantCostMinute) string { return m.TenantID }),
		stream.KeyedProcessFunction[string, TenantCostMinute, Alert](&alerter{}), stream.Uid(UIDAlerts))
	stream.SinkTo(alerts, sinks.Alerts, stream.Uid(SinkUID(OutAlerts)))

	// The window keeps what the percentiles need of each record, not the
	// record: its model and latency, at its event time (EndTS).
	samples := stream.Map(requests, func(r RequestRecord) LatencySample { return LatencySample{Model: r.Model, LatencyMS: r.LatencyMS} },
		stream.Name("latency-sample"))
	byModel := stream.KeyBy(samples, func(s LatencySample) string { return s.Model })
	latency := stream.ProcessWindow(stream.Windowed(byModel, minute),
		func(model string, w stream.Window, samples []LatencySample, emit func(ModelLatencyMinute) error) error {
			lat := make([]int64, len(samples))
			for i, s := range samples {
				lat[i] = s.LatencyMS
			}
			return emit(NewModelLatencyMinute(model, w.Start, lat))
		}, stream.Uid(UIDModelLatency))
	stream.SinkTo(latency, sinks.ModelLatency, stream.Uid(SinkUID(OutModelLatency)))
}

// deadLetters passes the events of the parsed lines on and sends the
// dead letters of the malformed ones to their output.
type deadLetters struct {
	dead stream.OutputTag[DeadLetter]
}

func (d deadLetters) ProcessElement(ctx *stream.RecordContext[Event], p Parsed) error {
	if p.Dead == nil {
		return ctx.Emit(p.Event)
	}
	return stream.SideOutput(ctx, d.dead, *p.Dead)
}

// FileSource reads the trace GenerateFiles wrote in dir (its files
// part-NNNNN.jsonl, one split each), each line parsed as it is read.
func FileSource(dir string, opts ...file.SourceOption) (*file.DecodedSource[Parsed], error) {
	return file.Decode(filepath.Join(dir, "part-*.jsonl"), NewLineParser, opts...)
}

// assembler holds the first event of a request until its partner arrives
// and emits the joined RequestRecord at the response's event time; a
// request without a partner OrphanTimeout after its first event becomes an
// orphan.
type assembler struct {
	orphans stream.OutputTag[Orphan]
	first   state.ValueState[Event]
}

func (a *assembler) Open(rc *stream.RuntimeContext[string]) error {
	var err error
	a.first, err = stream.ValueState[Event](rc, "first")
	return err
}

func (a *assembler) ProcessElement(ctx *stream.Context[string, RequestRecord], e Event) error {
	first, ok := a.first.Value()
	if !ok || first.Type == e.Type {
		a.first.Update(e)
		ctx.RegisterEventTimeTimer(e.TS + OrphanTimeout)
		return nil
	}
	rec, err := Join(first, e)
	if err != nil {
		return err
	}
	a.first.Clear()
	ctx.DeleteEventTimeTimer(first.TS + OrphanTimeout)
	return ctx.EmitAt(rec, rec.EndTS)
}

func (a *assembler) OnTimer(ctx *stream.Context[string, RequestRecord], t stream.Timer) error {
	first, ok := a.first.Value()
	if !ok || first.TS+OrphanTimeout != t.Timestamp {
		return nil
	}
	a.first.Clear()
	return stream.SideOutput(ctx, a.orphans, OrphanOf(first))
}

// LatencySample is what the model-latency window keeps of a
// RequestRecord; its event time is the record's, EndTS.
type LatencySample struct {
	Model     string
	LatencyMS int64
}

type costAcc struct {
	Cost, Requests int64
}

type costAgg struct{}

func (costAgg) CreateAccumulator() costAcc { return costAcc{} }
func (costAgg) Add(r RequestRecord, a costAcc) costAcc {
	return costAcc{a.Cost + r.CostMicros, a.Requests + 1}
}
func (costAgg) GetResult(a costAcc) costAcc { return a }
func (costAgg) Merge(a, b costAcc) costAcc  { return costAcc{a.Cost + b.Cost, a.Requests + b.Requests} }

// alerter remembers a tenant's recent minutes and raises cost-spike
// alerts (see CostHistory).
type alerter struct {
	history state.ValueState[CostHistory]
}

func (a *alerter) Open(rc *stream.RuntimeContext[string]) error {
	var err error
	a.history, err = stream.ValueState[CostHistory](rc, "history")
	return err
}

func (a *alerter) ProcessElement(ctx *stream.Context[string, Alert], m TenantCostMinute) error {
	h, _ := a.history.Value()
	h.Costs = append([]int64(nil), h.Costs...) // state values are not mutated in place
	alert, fire := h.Observe(m)
	a.history.Update(h)
	if fire {
		return ctx.Emit(alert)
	}
	return nil
}

// PartitionOf returns the partition a split id (part-NNNNN.jsonl) names.
func PartitionOf(split string) (int, error) {
	n, ok := strings.CutPrefix(split, "part-")
	n, ok2 := strings.CutSuffix(n, ".jsonl")
	if !ok || !ok2 {
		return 0, fmt.Errorf("gatewaymeter: split %q is not named part-NNNNN.jsonl", split)
	}
	return strconv.Atoi(n)
}
