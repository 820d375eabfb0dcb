// Package mini is weir's reference stream processor: single-threaded,
// deterministic, small enough to read in one sitting. It is the executable
// specification of checkpoint barriers that the real engine is tested
// against, and the place to learn the protocol.
//
// # The problem
//
// A keyed operator after a shuffle receives records from several upstream
// channels. If it wrote its state to disk whenever it liked, the snapshot
// would mix records that, seen from one source, come after the point the
// source recorded with records that, seen from another, come before it.
// After a restore, some records would count twice and others not at all. The
// snapshot must be a consistent cut: for every source a position S_n, and
// for every operator exactly the state that the records before those
// positions produce.
//
// # Barriers
//
// A [Barrier] n is injected into every source's stream right behind the last
// record the source read; that point is S_n. Barriers flow with the records
// and never overtake them. [InjectBarriers] places them every so many
// events; [StatefulSumOperator] keeps a running sum per key, and on barrier
// n stores a copy of its state in Checkpoints[n] before forwarding the
// barrier. [RunWithCheckpoints] runs the two together and returns one
// [Checkpoint] per barrier: the snapshot and S_n as SourceOffset.
//
// The oracle: each checkpoint's state equals [Fold] over exactly the first
// SourceOffset events, not more and not fewer.
//
// # Recovery
//
// After a failure, the latest completed checkpoint k is restored: the
// operator gets k's state ([Restore]), the source is reset to S_k
// ([ReplayFrom]), and processing resumes. [RunWithFailure] does this for a
// failure at any event. The records after S_k are processed twice in all,
// but the second time against a state that never saw them, so the final
// state equals that of a run without failures: exactly-once state. What the
// operator emitted between S_k and the failure was emitted before, and is
// emitted again ([Recovery.Duplicates]): only a transactional sink makes the
// output exactly-once too.
//
// # Alignment
//
// An operator with several inputs has to see barrier n on all of them before
// it snapshots. The [Handler] follows four rules (aligned, EXACTLY_ONCE):
//
//  1. When barrier n arrives on an input, block that input: what follows
//     belongs to checkpoint n+1 and is held back.
//  2. When barrier n has arrived on the last input, emit pending output and
//     forward barrier n on every output,
//  3. snapshot the state,
//  4. resume, delivering the held-back input first.
//
// The handler also covers what a real system meets: a newer barrier
// arriving while an older checkpoint aligns (the older is aborted as
// subsumed), a late barrier of a checkpoint no longer pending (ignored), an
// input that ends during alignment (no longer waited for), an abort from the
// coordinator (all held input is released in order) and a failure (held
// input is dropped; the sources replay it).
//
// In AT_LEAST_ONCE mode the handler counts barriers but blocks nothing, so
// a record that arrives after barrier n on a fast input is in snapshot n
// and is replayed after a restore: counted twice. [RunJob] runs several
// sources into one [Task] under a given delivery schedule and failure
// points and shows the difference.
//
// The handler is an I/O-free state machine: elements in, [Action]s out. Its
// behaviour is written down as transcripts in testdata/align, one scenario
// per file, which the engine's barrier handler runs too.
package mini
