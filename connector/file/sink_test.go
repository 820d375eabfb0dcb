package file_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connector/file"
)

// event is a sink record; Pad makes each line longer than a small write
// buffer, so that every record reaches the file as it is written.
type event struct {
	ID  int    `json:"id"`
	Pad string `json:"pad,omitempty"`
}

var ctx = context.Background()

func newWriter(t *testing.T, s *file.Sink[event], subtask, parallelism int) connector.SinkWriter[event] {
	t.Helper()
	w, err := s.NewWriter(ctx, connector.WriterInfo{UID: "bill-sink", Subtask: subtask, Parallelism: parallelism, ExactlyOnce: true})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func write(t *testing.T, w connector.SinkWriter[event], from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		if err := w.Write(event{ID: i, Pad: "padding-padding"}, 0); err != nil {
			t.Fatal(err)
		}
	}
}

func prepare(t *testing.T, w connector.SinkWriter[event], id int64) [][]byte {
	t.Helper()
	cs, err := w.PrepareCommit(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func commit(t *testing.T, w connector.SinkWriter[event], cs [][]byte) {
	t.Helper()
	if err := w.(connector.Committer).Commit(ctx, cs); err != nil {
		t.Fatal(err)
	}
}

func notify(t *testing.T, w connector.SinkWriter[event], id int64) {
	t.Helper()
	if err := w.(connector.CheckpointListener).NotifyCheckpointComplete(ctx, id); err != nil {
		t.Fatal(err)
	}
}

// ids returns the ids of dir's committed records, in file order.
func ids(t *testing.T, dir string) []int {
	t.Helper()
	evs, err := file.ReadJSONLines[event](dir)
	if err != nil {
		t.Fatal(err)
	}
	out := []int{}
	for _, e := range evs {
		out = append(out, e.ID)
	}
	return out
}

func span(from, to int) []int {
	out := []int{}
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

func inProgress(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, ".inprogress"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// TestExactlyOnceAcrossCrashes drives the engine's protocol (see
// internal/ops/sink.go) through two crashes: the committed output is
// exactly the records of the completed checkpoints, each once.
func TestExactlyOnceAcrossCrashes(t *testing.T) {
	dir := t.TempDir()
	s, err := file.JSONLines[event](dir, file.WriteBufferSize(16))
	if err != nil {
		t.Fatal(err)
	}

	// Run 1: checkpoint 1 completes and commits; checkpoint 2 completes
	// but the subtask dies before committing it, with records written
	// after barrier 2 (the source's position S_2 is 20).
	w1 := newWriter(t, s, 0, 1)
	write(t, w1, 0, 10)
	if got := ids(t, dir); len(got) != 0 {
		t.Fatalf("records visible before any commit: %v", got)
	}
	cs1 := prepare(t, w1, 1)
	if len(cs1) != 1 {
		t.Fatalf("checkpoint 1: %d committables, want 1", len(cs1))
	}
	if got := ids(t, dir); len(got) != 0 {
		t.Fatalf("records visible before checkpoint 1 completed: %v", got)
	}
	commit(t, w1, cs1)
	notify(t, w1, 1)
	if got := ids(t, dir); !slices.Equal(got, span(0, 10)) {
		t.Fatalf("after checkpoint 1: %v", got)
	}
	write(t, w1, 10, 20)
	cs2 := prepare(t, w1, 2)
	write(t, w1, 20, 25) // after barrier 2; reaches the disk, never committed
	// crash: w1 is dropped without Close, Commit or notification
	if got := ids(t, dir); !slices.Equal(got, span(0, 10)) {
		t.Fatalf("after the crash: %v", got)
	}

	// Run 2 restores checkpoint 2: its committables (all of them, as the
	// engine stores every pending one) are committed before new writes.
	w2 := newWriter(t, s, 0, 1)
	commit(t, w2, cs1) // committed before: a no-op
	commit(t, w2, cs2)
	if got := ids(t, dir); !slices.Equal(got, span(0, 20)) {
		t.Fatalf("after restoring checkpoint 2: %v", got)
	}
	write(t, w2, 20, 30)
	cs3 := prepare(t, w2, 3)
	write(t, w2, 30, 33)
	// crash before checkpoint 3 completes: it is never committed

	// Run 3 restores checkpoint 2 again; its commit was done by run 2.
	w3 := newWriter(t, s, 0, 1)
	commit(t, w3, cs2)
	if got := ids(t, dir); !slices.Equal(got, span(0, 20)) {
		t.Fatalf("after restoring checkpoint 2 again: %v", got)
	}
	if n := len(inProgress(t, dir)); n != 3 {
		t.Fatalf("%d in-progress files before cleanup, want 3 (run 1's open file, run 2's prepared and open files)", n)
	}
	write(t, w3, 20, 30)
	cs4 := prepare(t, w3, 4)
	write(t, w3, 30, 40)
	cs5 := prepare(t, w3, 5)
	commit(t, w3, cs4)
	notify(t, w3, 4) // the first completed checkpoint removes stale in-progress files
	if got := inProgress(t, dir); len(got) != 1 {
		t.Fatalf("in-progress files after cleanup: %v, want only checkpoint 5's", got)
	}
	commit(t, w3, cs5)
	notify(t, w3, 5)
	if err := w3.Close(); err != nil {
		t.Fatal(err)
	}
	if got := ids(t, dir); !slices.Equal(got, span(0, 40)) {
		t.Fatalf("final output %v, want 0..39 once each", got)
	}
	if got := inProgress(t, dir); len(got) != 0 {
		t.Fatalf("in-progress files left: %v", got)
	}
	// Checkpoint 3 was abandoned: committing it now would be a bug in the
	// engine, and its records are gone.
	if err := w3.(connector.Committer).Commit(ctx, cs3); err == nil || !strings.Contains(err.Error(), "lost") {
		t.Fatalf("commit of an abandoned transaction: %v", err)
	}
	names, err := file.CommittedFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"part-bill-sink-0-1.jsonl", "part-bill-sink-0-2.jsonl", "part-bill-sink-0-4.jsonl", "part-bill-sink-0-5.jsonl"}
	if !slices.Equal(names, want) {
		t.Fatalf("part files %q, want %q", names, want)
	}
}

func TestCommitIsIdempotent(t *testing.T) {
	dir := t.TempDir()
	s, _ := file.JSONLines[event](dir)
	w := newWriter(t, s, 2, 4)
	write(t, w, 0, 5)
	cs := prepare(t, w, 7)
	commit(t, w, cs)
	commit(t, w, cs)
	other := newWriter(t, s, 2, 4) // another writer, as after a restore
	commit(t, other, cs)
	if got := ids(t, dir); !slices.Equal(got, span(0, 5)) {
		t.Fatalf("after three commits: %v", got)
	}
	if _, err := os.Stat(filepath.Join(dir, file.FinalName("bill-sink", 2, 7))); err != nil {
		t.Fatal(err)
	}
}

func TestCommitOfLostTransactionFails(t *testing.T) {
	dir := t.TempDir()
	s, _ := file.JSONLines[event](dir)
	w := newWriter(t, s, 0, 1)
	write(t, w, 0, 5)
	cs := prepare(t, w, 1)
	for _, name := range inProgress(t, dir) {
		os.Remove(filepath.Join(dir, ".inprogress", name))
	}
	err := w.(connector.Committer).Commit(ctx, cs)
	if err == nil || !strings.Contains(err.Error(), file.FinalName("bill-sink", 0, 1)) || !connector.IsPermanent(err) {
		t.Fatalf("commit with both files missing: %v, want a permanent error naming the file", err)
	}
}

func TestCommitChecksSize(t *testing.T) {
	dir := t.TempDir()
	s, _ := file.JSONLines[event](dir)
	w := newWriter(t, s, 0, 1)
	write(t, w, 0, 5)
	cs := prepare(t, w, 1)
	staged := filepath.Join(dir, ".inprogress", inProgress(t, dir)[0])
	if err := os.Truncate(staged, 10); err != nil {
		t.Fatal(err)
	}
	if err := w.(connector.Committer).Commit(ctx, cs); err == nil || !strings.Contains(err.Error(), "bytes") {
		t.Fatalf("commit of a truncated in-progress file: %v", err)
	}
	if got := ids(t, dir); len(got) != 0 {
		t.Fatalf("a truncated transaction became visible: %v", got)
	}
}

func TestEmptyTransactionsWriteNothing(t *testing.T) {
	dir := t.TempDir()
	s, _ := file.JSONLines[event](dir)
	w := newWriter(t, s, 0, 1)
	if cs := prepare(t, w, 1); cs != nil {
		t.Fatalf("empty checkpoint 1: committables %q", cs)
	}
	write(t, w, 0, 1)
	if cs := prepare(t, w, 2); len(cs) != 1 {
		t.Fatalf("checkpoint 2: %d committables", len(cs))
	}
	if cs := prepare(t, w, 3); cs != nil {
		t.Fatalf("empty checkpoint 3: committables %q", cs)
	}
	if _, err := w.PrepareCommit(ctx, 3); err == nil {
		t.Fatal("checkpoint 3 prepared twice")
	}
	if got := inProgress(t, dir); len(got) != 1 {
		t.Fatalf("in-progress files %v, want checkpoint 2's", got)
	}
}

// TestCloseAbandonsOnlyTheOpenTransaction: Close removes the file of
// records written after the last barrier and keeps prepared ones.
func TestCloseAbandonsOnlyTheOpenTransaction(t *testing.T) {
	dir := t.TempDir()
	s, _ := file.JSONLines[event](dir)
	w := newWriter(t, s, 0, 1)
	write(t, w, 0, 3)
	cs := prepare(t, w, 1)
	write(t, w, 3, 6)
	if n := len(inProgress(t, dir)); n != 2 {
		t.Fatalf("%d in-progress files, want 2", n)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(inProgress(t, dir)); n != 1 {
		t.Fatalf("%d in-progress files after Close, want 1", n)
	}
	commit(t, newWriter(t, s, 0, 1), cs)
	if got := ids(t, dir); !slices.Equal(got, span(0, 3)) {
		t.Fatalf("got %v", got)
	}
}

// TestCleanupAfterRescale: with the parallelism down from 4 to 2, subtask
// 1 takes over the files of former subtask 3 (the engine hands it their
// committables) and removes their stale in-progress files, and nothing
// of other subtasks or other sinks.
func TestCleanupAfterRescale(t *testing.T) {
	dir := t.TempDir()
	s, _ := file.JSONLines[event](dir)
	others, _ := file.JSONLines[event](dir)
	var pending [][]byte
	for sub := range 4 {
		w := newWriter(t, s, sub, 4)
		write(t, w, 10*sub, 10*sub+2)
		pending = append(pending, prepare(t, w, 1)...)
		write(t, w, 100, 101) // stale: after the barrier
	}
	o, err := others.NewWriter(ctx, connector.WriterInfo{UID: "other", Subtask: 3, Parallelism: 4})
	if err != nil {
		t.Fatal(err)
	}
	write(t, o, 0, 1)
	if n := len(inProgress(t, dir)); n != 9 {
		t.Fatalf("%d in-progress files, want 9", n)
	}
	// Restore with parallelism 2: old subtasks 1 and 3 go to new subtask 1.
	w := newWriter(t, s, 1, 2)
	commit(t, w, [][]byte{pending[1], pending[3]})
	write(t, w, 50, 51)
	notify(t, w, 2)
	left := inProgress(t, dir)
	var mine, kept []string
	for _, n := range left {
		switch {
		case strings.HasPrefix(n, "other-"):
			kept = append(kept, n)
		case strings.HasPrefix(n, "bill-sink-1-"), strings.HasPrefix(n, "bill-sink-3-"):
			mine = append(mine, n)
		}
	}
	// Left: subtask 0's prepared and stale files, subtask 2's, the other
	// sink's, and w's open file.
	if len(left) != 6 || len(kept) != 1 || len(mine) != 1 {
		t.Fatalf("in-progress files after cleanup: %v", left)
	}
	commit(t, w, [][]byte{pending[0], pending[2]})
	if got := ids(t, dir); !slices.Equal(got, []int{0, 1, 10, 11, 20, 21, 30, 31}) {
		t.Fatalf("got %v", got)
	}
}

func TestAtLeastOnceRepeatsAfterRestart(t *testing.T) {
	dir := t.TempDir()
	s, err := file.JSONLines[event](dir, file.Guarantee(connector.AtLeastOnce), file.WriteBufferSize(16))
	if err != nil {
		t.Fatal(err)
	}
	w1 := newWriter(t, s, 0, 1)
	write(t, w1, 0, 10)
	if cs := prepare(t, w1, 1); cs != nil {
		t.Fatalf("at-least-once committables %q", cs)
	}
	if got := ids(t, dir); !slices.Equal(got, span(0, 10)) {
		t.Fatalf("after checkpoint 1: %v", got)
	}
	write(t, w1, 10, 15)
	// crash mid-record: the last line is cut short
	path := filepath.Join(dir, file.AppendName("bill-sink", 0))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"id":15,"pa`)
	f.Close()

	// restore from checkpoint 1: the source replays from 10
	w2 := newWriter(t, s, 0, 1)
	write(t, w2, 10, 20)
	prepare(t, w2, 2)
	if err := w2.Close(); err != nil {
		t.Fatal(err)
	}
	want := append(span(0, 15), span(10, 20)...)
	if got := ids(t, dir); !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if _, err := os.Stat(filepath.Join(dir, ".inprogress")); !os.IsNotExist(err) {
		t.Fatalf("at-least-once sink made an in-progress directory: %v", err)
	}
}

// TestConcurrentSubtasks writes from several subtasks of two sinks into
// one directory at once, each committing its own checkpoints.
func TestConcurrentSubtasks(t *testing.T) {
	dir := t.TempDir()
	s, _ := file.JSONLines[event](dir)
	const subtasks, checkpoints, perCheckpoint = 4, 5, 200
	var wg sync.WaitGroup
	errs := make(chan error, 2*subtasks)
	for _, uid := range []string{"a", "b"} {
		for sub := range subtasks {
			wg.Go(func() {
				w, err := s.NewWriter(ctx, connector.WriterInfo{UID: uid, Subtask: sub, Parallelism: subtasks})
				if err != nil {
					errs <- err
					return
				}
				defer w.Close()
				next := 0
				for cp := int64(1); cp <= checkpoints; cp++ {
					for range perCheckpoint {
						if err := w.Write(event{ID: sub*1_000_000 + next}, 0); err != nil {
							errs <- err
							return
						}
						next++
					}
					cs, err := w.PrepareCommit(ctx, cp)
					if err == nil {
						err = w.(connector.Committer).Commit(ctx, cs)
					}
					if err == nil {
						err = w.(connector.CheckpointListener).NotifyCheckpointComplete(ctx, cp)
					}
					if err != nil {
						errs <- fmt.Errorf("%s/%d checkpoint %d: %w", uid, sub, cp, err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got := ids(t, dir)
	count := map[int]int{}
	for _, id := range got {
		count[id]++
	}
	if len(got) != 2*subtasks*checkpoints*perCheckpoint || len(count) != subtasks*checkpoints*perCheckpoint {
		t.Fatalf("%d records, %d distinct", len(got), len(count))
	}
	for _, id := range slices.Sorted(maps.Keys(count)) {
		if count[id] != 2 {
			t.Fatalf("record %d written %d times, want once per sink", id, count[id])
		}
	}
	// Within a subtask's files, records come in order.
	last := map[string]int{}
	lines, _ := file.ReadLines(dir)
	for _, l := range lines {
		var e event
		fmt.Sscanf(string(l.Text), `{"id":%d}`, &e.ID)
		key := l.File[:strings.LastIndexByte(l.File, '-')]
		if prev, ok := last[key]; ok && e.ID <= prev {
			t.Fatalf("%s: record %d after %d", l.File, e.ID, prev)
		}
		last[key] = e.ID
	}
}

func TestUnwritableDirectory(t *testing.T) {
	base := t.TempDir()
	blocker := filepath.Join(base, "a-file")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(blocker, "out")
	for _, g := range []connector.DeliveryGuarantee{connector.ExactlyOnce, connector.AtLeastOnce} {
		s, err := file.JSONLines[event](out, file.Guarantee(g))
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.NewWriter(ctx, connector.WriterInfo{UID: "u"})
		if err == nil || !strings.Contains(err.Error(), out) {
			t.Errorf("%v: NewWriter under a regular file: %v, want an error naming %s", g, err, out)
		}
	}
	if os.Geteuid() != 0 { // permissions do not stop root
		ro := filepath.Join(base, "read-only")
		if err := os.Mkdir(ro, 0o555); err != nil {
			t.Fatal(err)
		}
		s, _ := file.JSONLines[event](ro)
		if _, err := s.NewWriter(ctx, connector.WriterInfo{UID: "u"}); err == nil || !strings.Contains(err.Error(), ro) {
			t.Errorf("NewWriter in a read-only directory: %v, want an error naming %s", err, ro)
		}
	}
}

func TestSinkValidation(t *testing.T) {
	dir := t.TempDir()
	if _, err := file.JSONLines[event](""); err == nil {
		t.Error("empty directory accepted")
	}
	if _, err := file.JSONLines[event](dir, file.Guarantee("bogus")); err == nil {
		t.Error("unknown guarantee accepted")
	}
	if _, err := file.JSONLines[event](dir, file.Guarantee(connector.None)); err == nil {
		t.Error("guarantee none accepted")
	}
	s, _ := file.JSONLines[event](dir)
	if _, err := s.NewWriter(ctx, connector.WriterInfo{}); err == nil {
		t.Error("writer without a uid accepted")
	}
	raw, err := file.NewSink(dir, func(s string) ([]byte, error) { return []byte(s), nil })
	if err != nil {
		t.Fatal(err)
	}
	w, err := raw.NewWriter(ctx, connector.WriterInfo{UID: "raw"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Write("two\nlines", 0); err == nil {
		t.Error("a record with a newline accepted")
	}
}

// TestUIDsAreEscaped: a uid with a path separator stays one file name.
func TestUIDsAreEscaped(t *testing.T) {
	dir := t.TempDir()
	s, _ := file.JSONLines[event](dir)
	w, err := s.NewWriter(ctx, connector.WriterInfo{UID: "tenant/cost sink", Subtask: 1, Parallelism: 2})
	if err != nil {
		t.Fatal(err)
	}
	write(t, w, 0, 2)
	commit(t, w, prepare(t, w, 3))
	names, _ := file.CommittedFiles(dir)
	if want := []string{"part-tenant%2Fcost%20sink-1-3.jsonl"}; !slices.Equal(names, want) {
		t.Fatalf("files %q, want %q", names, want)
	}
	if got := ids(t, dir); !slices.Equal(got, span(0, 2)) {
		t.Fatalf("got %v", got)
	}
}

func TestReadJSONLinesErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := file.ReadJSONLines[event](filepath.Join(dir, "missing")); err == nil {
		t.Error("missing directory read")
	}
	writeFiles(t, dir, map[string]string{"part-x-0.jsonl": "{\"id\":1}\nnot json\n"})
	_, err := file.ReadJSONLines[event](dir)
	if err == nil || !strings.Contains(err.Error(), "part-x-0.jsonl at offset 9") {
		t.Errorf("malformed line: %v", err)
	}
}

// TestOutputAsSource reads a sink's committed output with Lines: the
// in-progress directory is skipped.
func TestOutputAsSource(t *testing.T) {
	dir := t.TempDir()
	s, _ := file.JSONLines[event](dir)
	w := newWriter(t, s, 0, 1)
	write(t, w, 0, 3)
	commit(t, w, prepare(t, w, 1))
	write(t, w, 3, 4) // stays in progress
	src, err := file.Lines(dir)
	if err != nil {
		t.Fatal(err)
	}
	splits, _ := src.Splits(ctx)
	if want := []string{file.FinalName("bill-sink", 0, 1)}; !slices.Equal(splits, want) {
		t.Fatalf("splits %q, want %q", splits, want)
	}
}

// TestRestoreFromAnOlderCheckpointReplacesLaterOutput: a writer restored
// from checkpoint 1 after checkpoints 2 and 3 had committed (a resume past
// a corrupt newest checkpoint) removes what 2 and 3 committed, for its own
// subtask and the former subtasks it inherits, and nothing else; the
// replay then writes those records once.
func TestRestoreFromAnOlderCheckpointReplacesLaterOutput(t *testing.T) {
	dir := t.TempDir()
	s, err := file.JSONLines[event](dir)
	if err != nil {
		t.Fatal(err)
	}
	// Three subtasks commit checkpoints 1 to 3.
	var ws []connector.SinkWriter[event]
	for sub := range 3 {
		ws = append(ws, newWriter(t, s, sub, 3))
	}
	var first [][]byte
	for id := int64(1); id <= 3; id++ {
		for sub, w := range ws {
			base := sub*1000 + int(id)*100
			write(t, w, base, base+10)
			cs := prepare(t, w, id)
			commit(t, w, cs)
			if id == 1 && sub == 0 {
				first = cs
			}
		}
	}
	for _, w := range ws {
		w.Close()
	}
	// Restored from checkpoint 1 at parallelism 2: subtask 0 inherits old
	// subtasks 0 and 2, subtask 1 old subtask 1.
	w0, err := s.NewWriter(ctx, connector.WriterInfo{UID: "bill-sink", Subtask: 0, Parallelism: 2, ExactlyOnce: true, RestoredCheckpointID: 1})
	if err != nil {
		t.Fatal(err)
	}
	got := ids(t, dir)
	slices.Sort(got)
	var want []int
	want = append(want, span(100, 110)...)   // subtask 0, checkpoint 1
	want = append(want, span(1100, 1110)...) // subtask 1, checkpoint 1
	want = append(want, span(1200, 1210)...) // subtask 1, checkpoint 2: its writer is not restored yet
	want = append(want, span(1300, 1310)...)
	want = append(want, span(2100, 2110)...) // subtask 2, checkpoint 1
	if !slices.Equal(got, want) {
		t.Fatalf("after subtask 0's restore the output holds %v, want %v", got, want)
	}
	// The restored checkpoint's own transaction commits again, idempotently.
	commit(t, w0, first)
	w1, err := s.NewWriter(ctx, connector.WriterInfo{UID: "bill-sink", Subtask: 1, Parallelism: 2, ExactlyOnce: true, RestoredCheckpointID: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer w1.Close()
	defer w0.Close()
	got = ids(t, dir)
	slices.Sort(got)
	want = slices.Concat(span(100, 110), span(1100, 1110), span(2100, 2110))
	if !slices.Equal(got, want) {
		t.Fatalf("after both restores the output holds %v, want %v", got, want)
	}
}

// TestCommitRefusesAnotherDirectory: a committable staged in another
// output directory is refused, as a failure no restart cures.
func TestCommitRefusesAnotherDirectory(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	sa, _ := file.JSONLines[event](a)
	sb, _ := file.JSONLines[event](b)
	wa := newWriter(t, sa, 0, 1)
	write(t, wa, 0, 3)
	cs := prepare(t, wa, 1)
	wb := newWriter(t, sb, 0, 1)
	err := wb.(connector.Committer).Commit(ctx, cs)
	if err == nil || !connector.IsPermanent(err) || !strings.Contains(err.Error(), a) {
		t.Fatalf("committing a's transaction from b's sink: %v, want a permanent error naming %s", err, a)
	}
	if sa.Location() != a {
		t.Fatalf("Location() = %q, want %q", sa.Location(), a)
	}
	rel, err := file.JSONLines[event]("relative/out")
	if err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(rel.Location()) {
		t.Fatalf("Location() of a relative directory is %q, want it absolute", rel.Location())
	}
}
