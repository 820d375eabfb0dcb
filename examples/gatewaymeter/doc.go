// Package gatewaymeter is everything about weir's flagship job except its
// dataflow: the record types, the price table, the parser of the gateway's
// JSON lines, a seeded generator of traces, the batch oracle that computes
// the exact expected output of a trace, and the verifier that diffs a run's
// materialized output against it.
//
// GatewayMeter meters an API gateway in front of hosted language models. Each
// request produces two events, a request and a response, usually on different
// partitions of the topic gateway-events. The job pairs them by request_id
// into RequestRecords and derives four outputs from them plus one from the
// parser:
//
//	tenant-cost    TenantCostMinute    per (tenant_id, window_end)
//	model-latency  ModelLatencyMinute  per (model, window_end)
//	alerts         Alert               per (tenant_id, window_end)
//	orphans        Orphan              per request_id
//	dead-letters   DeadLetter          per (partition, offset)
//
// The semantics the job and the oracle share are defined here once: [Cost],
// [WindowStart], [Percentile], [Join], [CostHistory.Observe] and [ParseEvent].
// The streaming job calls the same functions, so a difference reported by
// [Diff] is a difference in how records flowed (lost, duplicated, late,
// mis-keyed), not in arithmetic.
//
// # Files
//
//	model.go   records, prices, windows, percentiles, Join, the alert rule
//	parse.go   ParseEvent: the strict, allocation-light parser of one line;
//	           ParseLine, LineParser: a line into its event or dead letter
//	job.go     Build: the streaming job; FileSource: a trace's files,
//	           parsed as they are read
//	gen.go     Generate, GenerateFiles: seeded, byte-identical traces and
//	           their manifests
//	oracle.go  Oracle, OracleFiles: the failure-free expected output
//	verify.go  Outputs, ReadOutputs, WriteOutputs, Diff, Report
//
// # What the oracle assumes of a trace
//
// The oracle is exact only for traces on which the streaming job is
// deterministic. It checks these properties and returns an error naming the
// first violation rather than guessing:
//
//   - request ids are unique per event type;
//   - a response is never before its request;
//   - a response is at most [OrphanTimeout] after its request, so the
//     assemble operator's orphan timer cannot fire before the partner
//     arrives;
//   - within a partition, no event is more than [OutOfOrderness] behind the
//     largest ts before it, so the job's watermark never makes it late.
//
// Every trace [Generate] writes has these properties.
package gatewaymeter
