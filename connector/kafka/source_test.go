package kafka_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connector/kafka"
)

// readAll reads a bounded reader to its end and returns the values and
// the last fetch of each split.
func readAll(t *testing.T, r connector.Reader[string]) ([]string, map[string]connector.Fetch[string]) {
	t.Helper()
	ctx := testCtx(t)
	var got []string
	last := map[string]connector.Fetch[string]{}
	for {
		f, err := r.Fetch(ctx)
		if errors.Is(err, connector.ErrEndOfInput) {
			return got, last
		}
		if err != nil {
			t.Fatal(err)
		}
		if prev, ok := last[f.Split]; ok && prev.EndOfSplit {
			t.Fatalf("fetch from %s after its end", f.Split)
		}
		if len(f.Timestamps) != len(f.Records) {
			t.Fatalf("%d timestamps for %d records", len(f.Timestamps), len(f.Records))
		}
		for i, v := range f.Records {
			var p, n int
			fmt.Sscanf(v, "%d:%d", &p, &n)
			if f.Timestamps[i] != 1_000_000+int64(n) {
				t.Fatalf("record %s has timestamp %d, want %d", v, f.Timestamps[i], 1_000_000+n)
			}
		}
		got = append(got, f.Records...)
		last[f.Split] = f
	}
}

func want(partitions []int, from, to int) []string {
	var w []string
	for _, p := range partitions {
		for i := from; i < to; i++ {
			w = append(w, fmt.Sprintf("%d:%d", p, i))
		}
	}
	return w
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// TestSourceBoundedSplitsOverSubtasks reads a seeded topic of three
// partitions with two subtasks' readers, split i going to subtask i mod
// 2, and checks that together they return every record once, with its
// timestamp, and end each split at the offset that was latest when the
// source listed its splits.
func TestSourceBoundedSplitsOverSubtasks(t *testing.T) {
	brokers := newCluster(t, 3, []string{"events"})
	produce(t, brokers, "events", 3, 200, 1_000_000)
	src, err := kafka.NewSource(value, kafka.BootstrapServers(brokers...), kafka.Topics("events"),
		kafka.Bounded(), kafka.MaxPollRecords(64))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	splits, err := src.Splits(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(splits, []string{"events-0", "events-1", "events-2"}) {
		t.Fatalf("splits %q", splits)
	}
	// Records written after the splits were listed are past the end.
	produce(t, brokers, "events", 3, 10, 2_000_000)

	var all []string
	for sub := range 2 {
		var starts []connector.SplitStart
		for i, s := range splits {
			if i%2 == sub {
				starts = append(starts, connector.SplitStart{Split: s, Offset: connector.StartDefault})
			}
		}
		r, err := src.NewReader(ctx, connector.ReaderInfo{Subtask: sub, Parallelism: 2}, starts)
		if err != nil {
			t.Fatal(err)
		}
		got, last := readAll(t, r)
		r.Close()
		if len(last) != len(starts) {
			t.Fatalf("subtask %d: fetches from %d splits, want %d", sub, len(last), len(starts))
		}
		for split, f := range last {
			if !f.EndOfSplit || f.Next != 200 {
				t.Fatalf("subtask %d: last fetch of %s: end %v next %d, want end at 200", sub, split, f.EndOfSplit, f.Next)
			}
		}
		all = append(all, got...)
	}
	if w := want([]int{0, 1, 2}, 0, 200); !slices.Equal(sorted(all), sorted(w)) {
		t.Fatalf("read %d records, want %d", len(all), len(w))
	}
}

// TestSourceRestoreFromOffsets restores a reader from mid-partition
// offsets (one split already at its end) and checks that it returns
// exactly the rest, in order per partition.
func TestSourceRestoreFromOffsets(t *testing.T) {
	brokers := newCluster(t, 3, []string{"events"})
	produce(t, brokers, "events", 3, 100, 1_000_000)
	src, err := kafka.NewSource(value, kafka.BootstrapServers(brokers...), kafka.Topics("events"), kafka.Bounded())
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	r, err := src.NewReader(ctx, connector.ReaderInfo{Parallelism: 1}, []connector.SplitStart{
		{Split: "events-0", Offset: 37}, {Split: "events-1", Offset: 0}, {Split: "events-2", Offset: 100},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, last := readAll(t, r)
	w := append(want([]int{0}, 37, 100), want([]int{1}, 0, 100)...)
	if !slices.Equal(sorted(got), sorted(w)) {
		t.Fatalf("read %d records, want %d: %q...", len(got), len(w), got[:min(5, len(got))])
	}
	next := map[int]int{0: 37, 1: 0}
	for _, v := range got {
		var p, n int
		fmt.Sscanf(v, "%d:%d", &p, &n)
		if n != next[p] {
			t.Fatalf("partition %d: record %d, want %d", p, n, next[p])
		}
		next[p]++
	}
	if f := last["events-2"]; !f.EndOfSplit || f.Next != 100 || len(f.Records) != 0 {
		t.Fatalf("split at its end: %+v", f)
	}
}

// TestSourceBoundedEndsSurviveRestore opens a bounded reader, keeps its
// split states as a checkpoint would, produces more records, and opens a
// reader of a new source (a new process) from the checkpointed offsets and
// states: it stops at the ends the first source fixed, not at the
// partitions' current ends.
func TestSourceBoundedEndsSurviveRestore(t *testing.T) {
	brokers := newCluster(t, 2, []string{"events"})
	produce(t, brokers, "events", 2, 100, 1_000_000)
	ctx := testCtx(t)
	newSource := func() *kafka.Source[string] {
		src, err := kafka.NewSource(value, kafka.BootstrapServers(brokers...), kafka.Topics("events"), kafka.Bounded())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := src.Splits(ctx); err != nil {
			t.Fatal(err)
		}
		return src
	}
	first, err := newSource().NewReader(ctx, connector.ReaderInfo{Parallelism: 1}, []connector.SplitStart{
		{Split: "events-0", Offset: connector.StartDefault}, {Split: "events-1", Offset: connector.StartDefault},
	})
	if err != nil {
		t.Fatal(err)
	}
	sr, ok := first.(connector.SplitStateReader)
	if !ok {
		t.Fatal("a bounded reader keeps no split state")
	}
	states := sr.SplitStates()
	first.Close()
	if len(states) != 2 || states["events-0"] == nil || states["events-1"] == nil {
		t.Fatalf("split states %q, want both splits'", states)
	}

	produce(t, brokers, "events", 2, 50, 1_000_100)
	r, err := newSource().NewReader(ctx, connector.ReaderInfo{Parallelism: 1}, []connector.SplitStart{
		{Split: "events-0", Offset: 40, State: states["events-0"]}, {Split: "events-1", Offset: 100, State: states["events-1"]},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if again := r.(connector.SplitStateReader).SplitStates(); !maps.EqualFunc(again, states, bytes.Equal) {
		t.Fatalf("restored reader's split states %q, want %q", again, states)
	}
	got, last := readAll(t, r)
	if w := want([]int{0}, 40, 100); !slices.Equal(got, w) {
		t.Fatalf("restored read %d records from %q, want %d from %q", len(got), got[:min(1, len(got))], len(w), w[0])
	}
	for split, f := range last {
		if !f.EndOfSplit || f.Next != 100 {
			t.Fatalf("last fetch of %s: end %v next %d, want end at 100", split, f.EndOfSplit, f.Next)
		}
	}
}

// TestSourceCommitsOffsetsForMonitoringOnly commits a completed
// checkpoint's offsets to the group, checks them with kadm, and checks
// that they are not where a reader starts: a restored split starts at its
// checkpointed offset, a split without one where StartingOffsets says
// (Earliest); only Committed starting offsets read them.
func TestSourceCommitsOffsetsForMonitoringOnly(t *testing.T) {
	brokers := newCluster(t, 2, []string{"events"})
	produce(t, brokers, "events", 2, 50, 1_000_000)
	ctx := testCtx(t)
	open := func(start kafka.Offsets, splits ...connector.SplitStart) connector.Reader[string] {
		t.Helper()
		src, err := kafka.NewSource(value, kafka.BootstrapServers(brokers...), kafka.Topics("events"),
			kafka.GroupID("monitor"), kafka.Bounded(), kafka.StartingOffsets(start))
		if err != nil {
			t.Fatal(err)
		}
		r, err := src.NewReader(ctx, connector.ReaderInfo{Parallelism: 1}, splits)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	}
	r := open(kafka.Earliest(), connector.SplitStart{Split: "events-0", Offset: 0}, connector.SplitStart{Split: "events-1", Offset: 0})
	oc, ok := r.(connector.OffsetCommitter)
	if !ok {
		t.Fatal("the reader does not commit offsets")
	}
	if err := oc.CommitOffsets(ctx, 7, map[string]int64{"events-0": 30, "events-1": 12}); err != nil {
		t.Fatal(err)
	}
	adm, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	offs, err := kadm.NewClient(adm).FetchOffsets(ctx, "monitor")
	if err != nil {
		t.Fatal(err)
	}
	for p, w := range []int64{30, 12} {
		if o, ok := offs.Lookup("events", int32(p)); !ok || o.At != w {
			t.Fatalf("committed offset of events-%d: %+v, want %d", p, o, w)
		}
	}

	// A restore uses the checkpointed offsets, not the committed ones.
	got, _ := readAll(t, open(kafka.Committed(kafka.Earliest()),
		connector.SplitStart{Split: "events-0", Offset: 45}, connector.SplitStart{Split: "events-1", Offset: 48}))
	if w := append(want([]int{0}, 45, 50), want([]int{1}, 48, 50)...); !slices.Equal(sorted(got), sorted(w)) {
		t.Fatalf("restored read %q, want %q", got, w)
	}
	// Without checkpointed offsets, Earliest ignores the group's.
	got, _ = readAll(t, open(kafka.Earliest(), connector.SplitStart{Split: "events-0", Offset: connector.StartDefault}))
	if len(got) != 50 {
		t.Fatalf("earliest read %d records, want 50", len(got))
	}
	// Committed starting offsets read them.
	got, _ = readAll(t, open(kafka.Committed(kafka.Earliest()),
		connector.SplitStart{Split: "events-0", Offset: connector.StartDefault}, connector.SplitStart{Split: "events-1", Offset: connector.StartDefault}))
	if w := append(want([]int{0}, 30, 50), want([]int{1}, 12, 50)...); !slices.Equal(sorted(got), sorted(w)) {
		t.Fatalf("committed read %d records, want %d", len(got), len(w))
	}
}

// TestSourceStartingOffsets checks Latest and Timestamp starting offsets.
func TestSourceStartingOffsets(t *testing.T) {
	brokers := newCluster(t, 1, []string{"events"})
	produce(t, brokers, "events", 1, 100, 1_000_000)
	ctx := testCtx(t)
	for _, c := range []struct {
		start kafka.Offsets
		from  int
	}{{kafka.Latest(), 100}, {kafka.Timestamp(time.UnixMilli(1_000_060)), 60}, {kafka.Timestamp(time.UnixMilli(5_000_000)), 100}} {
		src, err := kafka.NewSource(value, kafka.BootstrapServers(brokers...), kafka.Topics("events"), kafka.StartingOffsets(c.start), kafka.Bounded())
		if err != nil {
			t.Fatal(err)
		}
		r, err := src.NewReader(ctx, connector.ReaderInfo{Parallelism: 1}, []connector.SplitStart{{Split: "events-0", Offset: connector.StartDefault}})
		if err != nil {
			t.Fatal(err)
		}
		got, _ := readAll(t, r)
		r.Close()
		if w := want([]int{0}, c.from, 100); !slices.Equal(got, w) {
			t.Fatalf("%v: read %d records from %q, want %d from %q", c.start, len(got), got[:min(1, len(got))], len(w), w[:min(1, len(w))])
		}
	}
}

// TestSourceUnbounded reads records as they are produced and stops when
// its context ends.
func TestSourceUnbounded(t *testing.T) {
	brokers := newCluster(t, 1, []string{"events"})
	src, err := kafka.NewSource(value, kafka.BootstrapServers(brokers...), kafka.Topics("events"))
	if err != nil {
		t.Fatal(err)
	}
	if src.Bounded() {
		t.Fatal("bounded without Bounded()")
	}
	ctx, cancel := context.WithCancel(testCtx(t))
	r, err := src.NewReader(ctx, connector.ReaderInfo{Parallelism: 1}, []connector.SplitStart{{Split: "events-0", Offset: connector.StartDefault}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	produce(t, brokers, "events", 1, 10, 1_000_000)
	var got []string
	for len(got) < 10 {
		f, err := r.Fetch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, f.Records...)
		if f.Next != int64(len(got)) || f.EndOfSplit {
			t.Fatalf("fetch %+v after %d records", f, len(got))
		}
	}
	cancel()
	if _, err := r.Fetch(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("fetch after cancel: %v", err)
	}
}

// TestSourceErrors checks that a missing topic and unreachable brokers
// fail within the request timeout with errors that name them, and that a
// record the deserializer rejects fails the reader with its position.
func TestSourceErrors(t *testing.T) {
	brokers := newCluster(t, 1, []string{"events"})
	produce(t, brokers, "events", 1, 3, 1_000_000)
	ctx := testCtx(t)

	src, err := kafka.NewSource(value, kafka.BootstrapServers(brokers...), kafka.Topics("events", "nope"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := src.Splits(ctx); err == nil || !strings.Contains(err.Error(), `topic "nope" does not exist`) {
		t.Fatalf("missing topic: %v", err)
	}

	// A refused connection fails at once; a broker that accepts
	// connections but never answers fails after the request timeout.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	for _, down := range []string{"127.0.0.1:1", silent.Addr().String()} {
		src, err = kafka.NewSource(value, kafka.BootstrapServers(down), kafka.Topics("events"), kafka.RequestTimeout(300*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = src.Splits(ctx)
		if err == nil || !strings.Contains(err.Error(), down) {
			t.Fatalf("brokers %s down: %v", down, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("brokers %s down: failed after %v", down, d)
		}
		t.Log(err)
	}

	bad, err := kafka.NewSource(func(r *kgo.Record) (string, error) {
		if strings.HasSuffix(string(r.Value), ":1") {
			return "", errors.New("malformed")
		}
		return string(r.Value), nil
	}, kafka.BootstrapServers(brokers...), kafka.Topics("events"), kafka.Bounded())
	if err != nil {
		t.Fatal(err)
	}
	r, err := bad.NewReader(ctx, connector.ReaderInfo{Parallelism: 1}, []connector.SplitStart{{Split: "events-0", Offset: 0}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Fetch(ctx); err == nil || !strings.Contains(err.Error(), "offset 1 of events-0: malformed") {
		t.Fatalf("bad record: %v", err)
	}

	for _, c := range []struct {
		opts []kafka.SourceOption
		msg  string
	}{
		{[]kafka.SourceOption{kafka.Topics("t")}, "bootstrap servers"},
		{[]kafka.SourceOption{kafka.BootstrapServers("b:9092")}, "no topics"},
		{[]kafka.SourceOption{kafka.BootstrapServers("b:9092"), kafka.Topics("t"), kafka.StartingOffsets(kafka.Committed(kafka.Latest()))}, "group id"},
	} {
		if _, err := kafka.NewSource(value, c.opts...); err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("NewSource: %v, want an error about %s", err, c.msg)
		}
	}
}
