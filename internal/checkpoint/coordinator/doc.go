// Package coordinator is the checkpoint coordinator of a job, written as an
// I/O-free state machine in the manner of etcd raft's RawNode: no
// goroutines, channels, clocks, timers or storage inside. Time comes in as
// the now argument of every input; effects go out as Output values that the
// caller performs in order.
//
// A wrapper in the job manager owns the Coordinator on one goroutine. It
// calls Start when the job runs, Tick whenever NextDeadline passes, and
// feeds in what happens: acknowledgements and declines from tasks (Ack,
// Decline), the outcome of writing a checkpoint's metadata
// (MetadataWritten), tasks that finished (TaskFinished), failovers
// (Restart), restores (Restored) and user requests (TriggerManual). It
// performs the outputs: Trigger (start a checkpoint at the sources),
// WriteMetadata, NotifyComplete and NotifyAbort (to tasks), Discard (delete
// a retained checkpoint) and FailJob.
//
// # Life of a checkpoint
//
//	Trigger ─▶ pending ── every task acked ──▶ WriteMetadata ── MetadataWritten(ok) ──▶ completed
//	              │                                  │                                 NotifyComplete
//	              └──── decline, timeout, failover ──┴── write failed ──▶ aborted: NotifyAbort
//
// A checkpoint is complete only once its metadata is durable; until then
// it may still expire, be subsumed or be aborted by a failover. When a
// checkpoint completes, older pending checkpoints are subsumed (aborted
// without counting as failures), and completed checkpoints beyond
// num-retained are discarded. Savepoints are never subsumed or discarded,
// do not subsume, and, as in Flink, their completion is not announced to
// tasks.
//
// # Triggering
//
// Periodic checkpoints follow execution.checkpointing.interval at a fixed
// rate from Start. A periodic trigger that finds max-concurrent checkpoints
// pending waits until one ends; one that comes within min-pause of the last
// completion is rescheduled to the end of the pause (Flink's
// CheckpointRequestDecider). Manual checkpoints are refused rather than
// queued when max-concurrent are pending; savepoints bypass max-concurrent
// unless unaligned checkpoints are enabled.
//
// # Failures
//
// Every abort carries a Reason. Expiry, declines, asynchronous snapshot
// failures and failed metadata writes count towards
// tolerable-failed-checkpoints; the rest do not (Flink's
// CheckpointFailureManager). One counted failure more than tolerated emits
// FailJob and suspends checkpointing until Restart.
//
// # Statistics
//
// Stats returns counts, a summary over completed checkpoints, the latest
// of each outcome and a bounded history with per-vertex and per-subtask
// details, shaped like Flink's REST API so the web layer can serve them as
// they are.
package coordinator
