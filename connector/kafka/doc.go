// Package kafka reads and writes Apache Kafka topics with franz-go
// (github.com/twmb/franz-go): a source whose positions live in weir's
// checkpoints, and a sink with Flink's three delivery guarantees, the
// strongest of which writes each checkpoint's records in a Kafka
// transaction that commits when the checkpoint completes.
//
// # Source
//
// NewSource reads the partitions of one or more topics. Each partition is
// a split named "<topic>-<partition>" (SplitID); when the job starts, the
// job manager assigns split i of the sorted list to subtask i mod
// parallelism, as Flink's enumerator does: readers consume their
// partitions directly and never join a consumer group. The job manager
// lists the partitions, so on a cluster it must reach the brokers too. A split's offset is a Kafka offset: a Fetch's Next is
// the offset after its last record, the engine stores it in every
// checkpoint, and a restore seeks each partition exactly there. A
// partition without a checkpointed offset starts where StartingOffsets
// says (Earliest by default, Latest, Committed or Timestamp), resolved
// once, when a reader first opens it: the resolved offset is part of every
// checkpoint until the partition's first record is read, so a restore from
// a checkpoint taken before that starts at the same offset and reads again
// what the failed run read after it (not the partition's end at the time
// of the restore). Record timestamps become the fetch's timestamps (Unix
// milliseconds).
//
// Transaction markers (control records) are never returned, but a Fetch
// moves Next past them, so a restore does not read them again and a
// bounded reader of a transactional topic reaches its end. With Bounded
// the source stops at the offsets that were the partitions' ends when it
// first listed them (the last stable offsets with read_committed
// isolation), and the job ends when every split has. The end offsets are
// part of every checkpoint, with the splits' offsets: a restore, whether
// in the same process, on a replacement task manager or in a job resumed
// from the checkpoint, stops where the original run would have, however
// far the topic has grown since.
//
// With a GroupID, the offsets of every completed checkpoint are committed
// to the group, so that Kafka's tools show the job's lag. They are for
// monitoring only: a restore uses the checkpoint's offsets, and the group's
// are read only by Committed starting offsets, for partitions that have no
// checkpointed offset.
//
// While the job runs, the job manager lists the partitions again every
// PartitionDiscoveryInterval (Flink's partition.discovery.interval.ms,
// default 5 minutes; never for a Bounded source) and gives each partition
// it had not seen to the subtask with the fewest, whose reader starts
// consuming it without a restart. A partition keeps its subtask: a
// subtask that restarts, alone or with its failover region, gets back the
// partitions it had, and the assignment is part of every checkpoint, so
// no partition is read by two subtasks or by none. A partition the job's
// first listing did not have (added while the job ran, or while it was
// down before it resumed from a checkpoint) starts at its beginning,
// whatever StartingOffsets says, as in Flink's KafkaSource: every record
// in it was written after the job chose where to start, and none is
// skipped because discovery came later than the records.
//
// A missing topic, or brokers that refuse connections or do not answer
// within RequestTimeout, fail the source's start with an error that names
// them; the job's restart strategy decides what happens next.
//
// # Sink
//
// NewSink writes one Kafka record per stream record, with the
// connector.DeliveryGuarantee its Guarantee option sets:
//
//   - None produces asynchronously and never waits (it flushes only when
//     the writer closes). A failure may lose or duplicate records.
//   - AtLeastOnce, the default, flushes at every checkpoint barrier and
//     fails the checkpoint if a record was not acknowledged, so everything
//     written before a completed checkpoint is in Kafka. A restart writes
//     the replayed records again. (Flink's default is None; weir's sinks
//     default to the strongest guarantee that needs no further
//     configuration, as connector.DeliveryGuarantee says.)
//   - ExactlyOnce writes in Kafka transactions, below, so that a consumer
//     with isolation level read_committed sees every record once, at the
//     cost of seeing them only after the checkpoint that covers them
//     completes.
//
// # Exactly-once
//
// Each subtask writes the records between two checkpoint barriers in one
// transaction, with its own franz-go producer whose transactional id is
//
//	<prefix>-<subtask>-<n>
//
// (TransactionalID), where prefix is TransactionalIDPrefix and n is one
// more than the id of the last checkpoint before the transaction began
// (the restored one after a restore; 0 on a fresh start) — so without
// failures transaction n is the one checkpoint n commits, as with Flink's
// INCREMENTING naming. At the barrier of checkpoint c,
// PrepareCommit flushes the producer, fails if any record was not
// acknowledged, and returns a committable holding the transactional id,
// the producer id and the epoch; the producer is closed, and the
// transaction stays open on the brokers. When c completes, Commit sends
// Kafka's EndTxn request with those three values. The transaction
// coordinator accepts it from any client, so a writer restored after a
// failure commits a transaction that a writer now gone prepared, which is
// what Flink's FlinkKafkaInternalProducer.resumeTransaction does.
// Committing a transaction that is already committed succeeds again and
// changes nothing (the engine commits the restored checkpoint's
// committables once more after every restore); committing one that was
// aborted is an error, because its records are lost.
//
// A failure leaves transactions open that no completed checkpoint holds:
// the one being written, and those prepared for checkpoints that did not
// complete. Their records never become visible, but until they end they
// hold back the last stable offset, and so every read_committed consumer
// of their partitions. Before its first transaction, a restored writer
// (after the engine has committed the restored checkpoint's transactions)
// lists the open transactions (ListTransactions) and aborts those of its
// prefix that belong to its subtask, or to a subtask s of an earlier run
// with s mod parallelism equal to its own — by initializing a producer for
// their transactional ids, which fences the old producer and aborts its
// transaction (Flink's LISTING abort strategy). A writer that closes
// after a failure aborts its open transaction itself. An exactly-once
// writer's idle checkpoints also return a committable, naming no
// transaction, so that a restored writer always learns the checkpoint it
// resumes from and names its transactions after it.
//
// What exactly-once needs from Kafka and from the job:
//
//   - Brokers of Kafka 3.0 or newer (ListTransactions), and, with ACLs,
//     WRITE and DESCRIBE on the transactional ids <prefix>-*.
//   - A prefix unique to the sink across every job writing to the
//     cluster: two sinks with one prefix fence and abort each other.
//   - TransactionTimeout (transaction.timeout.ms, default 15 minutes, the
//     brokers' default maximum) longer than the longest time from a
//     transaction's first record to its commit: the checkpoint interval,
//     plus the checkpoint's duration, plus — after a failure — the time to
//     restart and restore. A transaction that times out is aborted by the
//     brokers, and its commit fails loudly.
//   - Consumers that read with isolation level read_committed
//     (IsolationLevel(kgo.ReadCommitted()) on this package's source).
//   - Checkpointing: without it, records become visible only when a
//     bounded input ends, and an unbounded job's transactions time out.
//
// Every checkpoint creates a producer per subtask, and every transactional
// id the brokers have seen costs them a little memory until
// transactional.id.expiration.ms (7 days by default) after its last use.
//
// Records carry the stream record's event time as their Kafka timestamp,
// which is also what the brokers' time-based retention measures a
// record's age from: see NewSink for topics that keep less than the age
// of the data.
//
// ReadCommitted reads a whole topic as a read_committed consumer, for
// verifying an exactly-once job's output.
package kafka
