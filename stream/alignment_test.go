package stream_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

// skewRec is record Seq of split Split, at event time TS.
type skewRec struct {
	Split int
	Seq   int64
	TS    int64
}

// skewSource has one split per step, "s0", "s1", …: split i holds
// span/steps[i] records, record k at event time k·steps[i] ms, so that
// every split covers the same span of event time at its own pace. Its
// readers read their splits in turn, batch records from each, and tell
// mon every fetch. A pausable source's readers implement
// connector.SplitPauser.
type skewSource struct {
	steps    []int64
	span     int64
	batch    int
	pausable bool
	mon      *skewMonitor
	// hold, if set, is called before a split's last batch is fetched
	// and may wait.
	hold func(ctx context.Context) error
}

func (s *skewSource) Splits(context.Context) ([]string, error) {
	ids := make([]string, len(s.steps))
	for i := range ids {
		ids[i] = "s" + strconv.Itoa(i)
	}
	return ids, nil
}

func (s *skewSource) Bounded() bool { return true }

func (s *skewSource) count(i int) int64 { return s.span / s.steps[i] }

func (s *skewSource) NewReader(_ context.Context, _ connector.ReaderInfo, starts []connector.SplitStart) (connector.Reader[skewRec], error) {
	r := &skewReader{src: s}
	for _, st := range starts {
		i, err := strconv.Atoi(strings.TrimPrefix(st.Split, "s"))
		if err != nil {
			return nil, err
		}
		next := max(st.Offset, 0)
		r.splits = append(r.splits, &skewSplit{id: st.Split, i: i, next: next, done: next >= s.count(i)})
	}
	if s.pausable {
		return &pausableSkewReader{r}, nil
	}
	return r, nil
}

type skewSplit struct {
	id     string
	i      int
	next   int64
	done   bool
	paused bool
}

type skewReader struct {
	src    *skewSource
	splits []*skewSplit
	rr     int
}

func (r *skewReader) Fetch(ctx context.Context) (connector.Fetch[skewRec], error) {
	if err := ctx.Err(); err != nil {
		return connector.Fetch[skewRec]{}, err
	}
	paused := false
	for range r.splits {
		sp := r.splits[r.rr]
		r.rr = (r.rr + 1) % len(r.splits)
		if sp.done {
			continue
		}
		if sp.paused {
			paused = true
			continue
		}
		n := min(int64(r.src.batch), r.src.count(sp.i)-sp.next)
		if r.src.hold != nil && sp.next+n == r.src.count(sp.i) {
			if err := r.src.hold(ctx); err != nil {
				return connector.Fetch[skewRec]{}, err
			}
		}
		recs := make([]skewRec, n)
		for k := range recs {
			seq := sp.next + int64(k)
			recs[k] = skewRec{Split: sp.i, Seq: seq, TS: seq * r.src.steps[sp.i]}
		}
		sp.next += n
		sp.done = sp.next == r.src.count(sp.i)
		r.src.mon.fetched(sp.i, recs[n-1].TS, sp.done)
		return connector.Fetch[skewRec]{Split: sp.id, Records: recs, Next: sp.next, EndOfSplit: sp.done}, nil
	}
	if paused {
		return connector.Fetch[skewRec]{}, connector.ErrSplitsPaused
	}
	return connector.Fetch[skewRec]{}, connector.ErrEndOfInput
}

func (r *skewReader) Close() error { return nil }

type pausableSkewReader struct{ *skewReader }

func (r *pausableSkewReader) PauseOrResumeSplits(pause, resume []string) error {
	for _, sp := range r.splits {
		switch {
		case slices.Contains(pause, sp.id):
			sp.paused = true
		case slices.Contains(resume, sp.id):
			sp.paused = false
		}
	}
	return nil
}

// skewMonitor follows how far each split has been read in event time, and
// the most that a fetch took a split past the least read of the splits
// not yet ended, over the fetches made while every split had been read
// from.
type skewMonitor struct {
	mu     sync.Mutex
	pos    map[int]int64 // event time of the last record fetched, by split
	ended  map[int]bool
	splits int
	// worst is the greatest lead, lead[i] a fetch of split i's.
	worst     int64
	worstDesc string
}

func newSkewMonitor(splits int) *skewMonitor {
	return &skewMonitor{pos: map[int]int64{}, ended: map[int]bool{}, splits: splits}
}

func (m *skewMonitor) fetched(split int, ts int64, ended bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pos[split] = ts
	if len(m.pos) == m.splits {
		least, by := int64(-1), -1
		for i, p := range m.pos {
			if !m.ended[i] && i != split && (by < 0 || p < least) {
				least, by = p, i
			}
		}
		if by >= 0 && ts-least > m.worst {
			m.worst = ts - least
			m.worstDesc = fmt.Sprintf("split %d fetched up to %d ms while split %d was at %d ms", split, ts, by, least)
		}
	}
	if ended {
		m.ended[split] = true
	}
}

// TestWatermarkAlignment runs a source whose splits advance in event time
// at paces up to 20 times apart, and checks that with watermark alignment
// no split is read further ahead of the least read split than the drift
// plus the batches a reader fetches before the pause reaches it (the
// fetch that crossed the maximum, and those the fetcher had made ahead
// of the subtask); and that without it the skew goes far past that bound.
// Every record arrives exactly once either way.
func TestWatermarkAlignment(t *testing.T) {
	const (
		span   = 40_000 // ms of event time in every split
		batch  = 10
		drift  = 500 * time.Millisecond
		ooo    = 100 * time.Millisecond
		ahead  = 5 // batches a reader may be read ahead of its pause
		update = 5 * time.Millisecond
	)
	for _, tc := range []struct {
		name        string
		steps       []int64
		parallelism int
		pausable    bool
		aligned     bool
	}{
		// Subtask against subtask: each reader is paused as a whole.
		{"subtasks/whole-reader", []int64{1, 20}, 2, false, true},
		// Split against split of subtasks with two each.
		{"subtasks/splits", []int64{1, 20, 3, 7}, 2, true, true},
		// Split against split in one subtask: a group of one.
		{"one-subtask/splits", []int64{1, 20}, 1, true, true},
		{"one-subtask/unaligned", []int64{1, 20}, 1, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mon := newSkewMonitor(len(tc.steps))
			src := &skewSource{steps: tc.steps, span: span, batch: batch, pausable: tc.pausable, mon: mon}
			sink := streamtest.NewCollector[skewRec](true)
			res := streamtest.Run(t, func(env *stream.Environment) {
				wm := stream.BoundedOutOfOrderness[skewRec](ooo).WithTimestamps(func(r skewRec, _ int64) int64 { return r.TS })
				if tc.aligned {
					wm = wm.WithWatermarkAlignment("skew", drift, update)
				}
				stream.SinkTo(stream.FromSource(env, src, "skew", wm), sink, stream.Uid("sink"))
			}, streamtest.Config("parallelism.default="+strconv.Itoa(tc.parallelism), "execution.checkpointing.interval=20 ms"))
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			checkSkewOutput(t, src, sink.Results())

			var maxStep int64
			for _, s := range tc.steps {
				maxStep = max(maxStep, s)
			}
			bound := drift.Milliseconds() + ahead*batch*maxStep
			t.Logf("greatest lead %d ms (bound %d ms): %s", mon.worst, bound, mon.worstDesc)
			if tc.aligned && mon.worst > bound {
				t.Fatalf("%s: %d ms ahead, more than the drift and %d batches (%d ms)", mon.worstDesc, mon.worst, ahead, bound)
			}
			if !tc.aligned && mon.worst <= 10*bound {
				t.Fatalf("without alignment the greatest lead is %d ms, within 10 times the aligned bound (%d ms): the source does not skew", mon.worst, bound)
			}
		})
	}
}

// checkSkewOutput checks that got holds every record of src exactly once.
func checkSkewOutput(t *testing.T, src *skewSource, got []skewRec) {
	t.Helper()
	seen := map[[2]int64]int{}
	for _, r := range got {
		if r.Seq < 0 || r.Seq >= src.count(r.Split) || r.TS != r.Seq*src.steps[r.Split] {
			t.Fatalf("a record the source never held: %+v", r)
		}
		seen[[2]int64{int64(r.Split), r.Seq}]++
	}
	var want int64
	for i := range src.steps {
		want += src.count(i)
	}
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("split %d record %d arrived %d times", k[0], k[1], n)
		}
	}
	if int64(len(seen)) != want {
		t.Fatalf("%d distinct records arrived, want %d", len(seen), want)
	}
}

// TestWatermarkAlignmentRestore fails aligned source subtasks while they
// read, and while their readers open after a restart: they restore from
// the latest checkpoint, the group's maximum is worked out again from
// the new deployment's reports, and every record arrives exactly once.
func TestWatermarkAlignmentRestore(t *testing.T) {
	for _, pausable := range []bool{false, true} {
		t.Run(fmt.Sprintf("pausable=%v", pausable), func(t *testing.T) {
			src := &skewSource{steps: []int64{1, 20, 3, 7}, span: 60_000, batch: 10, pausable: pausable, mon: newSkewMonitor(4)}
			sink := streamtest.NewCollector[skewRec](true)
			faults := streamtest.NewFaults()
			var ev streamtest.Events
			boom := errors.New("injected source failure")
			read := faults.Add(stream.FaultBatch, streamtest.Fail(boom), streamtest.OnVertex("skew"), streamtest.OnSubtask(1),
				streamtest.AfterRecords(2000), streamtest.InAttempt(0), streamtest.CompletedSinceDeploy(&ev))
			// No split ends before a checkpoint of the deployment reading
			// it has completed, so that the first fault strikes however
			// fast the source runs.
			src.hold = func(ctx context.Context) error {
				return ev.WaitFor(ctx, streamtest.CheckpointSinceDeploy)
			}
			open := faults.Add(stream.FaultNewReader, streamtest.Fail(boom), streamtest.OnVertex("skew"), streamtest.OnSubtask(0),
				streamtest.AfterRestore(), streamtest.Times(1))
			res := streamtest.Run(t, func(env *stream.Environment) {
				wm := stream.BoundedOutOfOrderness[skewRec](100*time.Millisecond).
					WithTimestamps(func(r skewRec, _ int64) int64 { return r.TS }).
					WithWatermarkAlignment("skew", 300*time.Millisecond, 5*time.Millisecond)
				s := stream.FromSource(env, src, "skew", wm, stream.Uid("skew"))
				stream.SinkTo(stream.Rebalance(s, stream.Uid("rebalance")), sink, stream.Uid("sink"))
			}, streamtest.WithFaults(faults), streamtest.WithEvents(&ev), streamtest.Config("parallelism.default=2", "execution.checkpointing.interval=20 ms",
				"restart-strategy.type=fixed-delay", "restart-strategy.fixed-delay.attempts=5", "restart-strategy.fixed-delay.delay=0 ms"))
			if res.Err != nil {
				t.Fatalf("%v (faults: %v)", res.Err, faults)
			}
			if !read.Fired() || !open.Fired() {
				t.Fatalf("the faults did not all fire: %v", faults)
			}
			checkSkewOutput(t, src, sink.Results())
		})
	}
}

// TestWatermarkAlignmentRejected: a setting alignment cannot run with is
// an error of the job's, naming the source.
func TestWatermarkAlignmentRejected(t *testing.T) {
	for _, tc := range []struct {
		name string
		wm   stream.WatermarkStrategy[skewRec]
		want string
	}{
		{"no group", stream.BoundedOutOfOrderness[skewRec](0).WithWatermarkAlignment("", time.Second, 0), "the group is empty"},
		{"no drift", stream.BoundedOutOfOrderness[skewRec](0).WithWatermarkAlignment("g", 0, 0), "maximal drift 0s is not positive"},
		{"negative interval", stream.BoundedOutOfOrderness[skewRec](0).WithWatermarkAlignment("g", time.Second, -time.Second), "update interval -1s is not positive"},
		{"no watermarks", stream.NoWatermarks[skewRec]().WithWatermarkAlignment("g", time.Second, 0), "a source without watermarks"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, err := stream.NewEnvironment(stream.WithLogger(quiet))
			if err != nil {
				t.Fatal(err)
			}
			src := &skewSource{steps: []int64{1}, span: 10, batch: 10, mon: newSkewMonitor(1)}
			stream.SinkTo(stream.FromSource(env, src, "skew", tc.wm), streamtest.NewCollector[skewRec](false), stream.Uid("sink"))
			err = env.Execute(context.Background(), "rejected")
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "skew") {
				t.Fatalf("Execute: %v, want an error naming the source and saying %q", err, tc.want)
			}
		})
	}
}
