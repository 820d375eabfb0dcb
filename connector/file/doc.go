// Package file reads line files and writes JSON-lines files, the latter
// exactly once through failures.
//
// # Source
//
// Lines reads every file of a directory (or every file a glob matches) as
// a bounded source of raw lines. Each file is one split, named by its path
// relative to the directory; its offset is the byte offset of the next
// line, so a restore seeks to exactly the first line not yet emitted. The
// source does not parse: a job decodes each Line itself and can send the
// lines it cannot decode, with their file and offset, to a dead-letter
// output instead of failing.
//
// Decode is the same source with the decoding done where the lines are
// read, on the reader's goroutine: the decoder turns each Line into the
// job's record straight from the read buffer, and each fetch's batch of
// records is reused once the job has emitted it, so reading allocates
// nothing per line.
//
// # Sink
//
// Sink writes one encoded record per line under a directory. With
// connector.ExactlyOnce (the default) it is a two-phase-commit sink:
//
//	<dir>/.inprogress/<uid>-<subtask>-<writer>-<n>.jsonl   staged, hidden from readers
//	<dir>/part-<uid>-<subtask>-<checkpoint>.jsonl          committed, immutable
//
// Each subtask writes the records between two checkpoint barriers to a
// fresh in-progress file (<writer> is a random token per writer, <n> counts
// its transactions). At the barrier of checkpoint c, PrepareCommit flushes,
// fsyncs and closes the file and returns a committable naming it, its size
// and its final name; the engine stores the committable in checkpoint c.
// Once c completes, Commit renames the file to its final name and fsyncs
// the directory. After a restore the engine commits the restored
// checkpoint's committables again: a committable whose in-progress file is
// gone and whose final file exists with the recorded size is already
// committed, and committing it is a no-op; one whose files are both
// missing is an error, because its records are lost.
//
// Records written after the last barrier before a failure stay in
// in-progress files that no checkpoint references, so they never become
// visible; the source replays them. A writer removes such leftovers of its
// own subtask once its first checkpoint completes (see Sink for why that
// is safe).
//
// With connector.AtLeastOnce each subtask appends to <dir>/part-<uid>-<subtask>.jsonl
// and flushes and fsyncs it at every barrier; records replayed after a
// restore appear again.
//
// ReadLines and ReadJSONLines read the committed part files of a
// directory, for verification and tests; Lines(dir + "/part-*.jsonl")
// reads them as a source.
package file
