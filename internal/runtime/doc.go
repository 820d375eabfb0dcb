// Package runtime runs a job's subtasks in one process: a subtask is a
// goroutine with a mailbox loop that reads batches from its input gate,
// passes them through its chain of operators and writes batches to bounded
// channels towards the next subtasks. Barriers, watermarks and end-of-data
// travel in the same channels, between batches, in order.
//
// The protocols inside a subtask are I/O-free state machines, tested on
// their own: the BarrierHandler (checkpoint alignment, checked against the
// transcripts of package mini) and the WatermarkValve. The JobMaster owns
// the execution: it deploys subtasks, drives the checkpoint coordinator,
// and on a failure asks the restart strategy whether and when, the failover
// strategy which subtasks, and redeploys them from the latest completed
// checkpoint.
//
// Concurrency: each subtask's state, operators and output buffers belong to
// its goroutine alone. Goroutines meet only at channels (data), mailboxes
// (control) and the job master's inbox; none of these is taken per record.
package runtime
