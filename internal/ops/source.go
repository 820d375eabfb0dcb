package ops

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/internal/runtime"
)

// Watermarks says how a source assigns event time and generates
// watermarks: Flink's WatermarkStrategy with bounded out-of-orderness and
// idleness.
type Watermarks[T any] struct {
	// Timestamp returns a record's event time in Unix milliseconds, given
	// the source's own timestamp (NoTimestamp if it has none). Nil uses the
	// source's timestamp.
	Timestamp func(v T, sourceTs int64) int64
	// OutOfOrderness bounds how late a record may be relative to the
	// latest timestamp seen on its split: the watermark trails it by this.
	OutOfOrderness time.Duration
	// Idleness marks a split idle, excluded from the watermark, after this
	// long without records (0: never).
	Idleness time.Duration
	// Disabled turns watermark generation off (records keep timestamps).
	Disabled bool
	// Alignment, if set, keeps the source's splits within a drift of
	// event time of the other sources of its group (see
	// runtime.WatermarkAlignment).
	Alignment *runtime.WatermarkAlignment
}

// splitState is what a source checkpoints per split: its offset, the
// reader's opaque state for it (connector.SplitStateReader) and its
// watermark state.
type splitState struct {
	Offset int64
	Ended  bool
	State  []byte
	// MaxTs is the highest timestamp the split has emitted (nil before
	// any): its watermark state, so that a restored split's watermark goes
	// on from where it was instead of starting again from the minimum.
	MaxTs *int64
	// late: the source's first listing did not have the split (see
	// connector.SplitStart.Late). Not checkpointed: once a reader opened
	// the split, its state says where it started.
	late bool
}

// Source is the head of a source vertex: it reads its splits through a
// connector's reader on a fetcher goroutine, emits the records on the
// subtask's goroutine, tracks a watermark per split, and checkpoints each
// split's offset, and the reader's state for it, as operator state.
type Source[T any] struct {
	src  connector.Source[T]
	wm   Watermarks[T]
	out  runtime.Output[T]
	info connector.ReaderInfo

	ctx *runtime.OperatorContext
	// restored is every split's state in the restored checkpoint, for
	// the splits the subtask is assigned later.
	restored map[string]splitState
	splits   map[string]*splitState
	maxTs    map[string]int64
	lastAt   map[string]time.Time
	idle     map[string]bool
	emitted  int64 // current watermark
	// offsets of checkpoints not yet complete, for committing on complete
	pending map[int64]map[string]int64

	// current is a copy of every split's offset, replaced after each
	// fetch is emitted, for readers on other goroutines (the REST API).
	current atomic.Pointer[map[string]int64]

	reader  connector.Reader[T]
	fetched chan any
	cancel  context.CancelFunc
	done    chan struct{}

	// Watermark alignment (wm.Alignment). maxAllowed is the group's
	// maximal watermark the job master announced last (before any, the
	// drift past MinWatermark: a split reads until it has a watermark);
	// pauses is what the fetcher is to pause, which the subtask's
	// goroutine replaces and signals on wake; ended says the subtask
	// reported that none of its splits holds event time back.
	maxAllowed int64
	pauses     atomic.Pointer[pauseSet]
	wake       chan struct{}
	ended      bool
	scratch    []string
}

// pauseSet is what a source's fetcher pauses: the splits, sorted, of a
// reader that pauses single splits (connector.SplitPauser), or the whole
// reader (all).
type pauseSet struct {
	splits []string
	all    bool
	// every: nothing is left to read, every split not ended is paused
	// (or all is set).
	every bool
}

func (p *pauseSet) equal(q *pauseSet) bool {
	if p == nil || q == nil {
		return p == q
	}
	return p.all == q.all && p.every == q.every && slices.Equal(p.splits, q.splits)
}

// A source takes the splits the job master discovers while it runs.
var _ runtime.SplitReceiver = (*Source[struct{}])(nil)

// NewSource returns the source operator for src.
func NewSource[T any](src connector.Source[T], wm Watermarks[T], out runtime.Output[T]) *Source[T] {
	s := &Source[T]{src: src, wm: wm, out: out, emitted: runtime.MinWatermark, maxAllowed: runtime.MaxWatermark, wake: make(chan struct{}, 1)}
	if a := wm.Alignment; a != nil {
		s.maxAllowed = runtime.MinWatermark + a.MaxDrift.Milliseconds()
	}
	return s
}

// Positions returns each split's current offset (the offset of the next
// record to emit). It may be called from any goroutine.
func (s *Source[T]) Positions() map[string]int64 {
	if p := s.current.Load(); p != nil {
		return *p
	}
	return nil
}

// publish replaces the copy of the positions Positions returns.
func (s *Source[T]) publish() {
	m := make(map[string]int64, len(s.splits))
	for k, v := range s.splits {
		m[k] = v.Offset
	}
	s.current.Store(&m)
}

func (s *Source[T]) Open(ctx *runtime.OperatorContext) error {
	s.ctx = ctx
	ids, late, err := s.assigned(ctx)
	if err != nil {
		return err
	}
	if s.restored, err = s.restore(ctx); err != nil {
		return err
	}
	s.splits = make(map[string]*splitState)
	s.maxTs = make(map[string]int64)
	s.lastAt = make(map[string]time.Time)
	s.idle = make(map[string]bool)
	s.pending = make(map[int64]map[string]int64)
	var starts []connector.SplitStart
	for _, id := range ids {
		if st, ok := s.addSplit(id, slices.Contains(late, id)); ok {
			starts = append(starts, st)
		}
	}
	s.publish()
	if ctx.Restored != nil {
		ctx.Logger.Info("source restored", "checkpoint", ctx.Restored.CheckpointID, "positions", s.Positions())
	}
	s.info = connector.ReaderInfo{Subtask: ctx.Subtask, Parallelism: ctx.Parallelism, JobID: ctx.JobID}
	s.fetched = make(chan any, 2)
	if s.wm.Idleness > 0 {
		s.scheduleIdleCheck()
	}
	if s.wm.Alignment != nil {
		// At once, so that the group's maximum is known as soon as
		// every subtask has opened.
		s.reportWatermark()
		s.scheduleReport()
	}
	if len(starts) == 0 {
		if !s.src.Bounded() {
			// Nothing to read for now: do not hold back event time
			// downstream.
			if err := ctx.SetIdle(true); err != nil {
				return err
			}
		}
		s.startFetcher(func(fctx context.Context) {
			if s.src.Bounded() {
				s.send(fctx, connector.ErrEndOfInput)
			}
		})
		return nil
	}
	return s.openReader(starts)
}

// assigned returns the splits the subtask reads: those the job master
// assigned it, or, for a vertex whose splits the job master does not
// list, every Parallelism-th split of its own listing.
func (s *Source[T]) assigned(ctx *runtime.OperatorContext) (ids, late []string, err error) {
	if a := ctx.Splits; a != nil {
		if err := a.ListErr(); err != nil {
			return nil, nil, fmt.Errorf("listing splits: %w", err)
		}
		return a.Splits, a.Late, nil
	}
	all, err := s.src.Splits(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("listing splits: %w", err)
	}
	var mine []string
	for i, id := range all {
		if i%ctx.Parallelism == ctx.Subtask {
			mine = append(mine, id)
		}
	}
	return mine, nil, nil
}

// addSplit makes split id one of the subtask's, at its position in the
// restored checkpoint if it has one. It returns where the reader starts
// the split, and false if the split has ended or was the subtask's
// already.
func (s *Source[T]) addSplit(id string, late bool) (connector.SplitStart, bool) {
	if _, ok := s.splits[id]; ok {
		return connector.SplitStart{}, false
	}
	st := splitState{Offset: connector.StartDefault, late: late}
	if r, ok := s.restored[id]; ok {
		st = r
	}
	s.splits[id] = &st
	s.maxTs[id] = runtime.MinWatermark
	if st.MaxTs != nil {
		s.maxTs[id] = *st.MaxTs
	}
	s.lastAt[id] = s.ctx.Now()
	if st.Ended {
		return connector.SplitStart{}, false
	}
	return st.start(id), true
}

// start returns where a reader starts the split: at its offset with its
// state, as a late split if it has neither.
func (st *splitState) start(id string) connector.SplitStart {
	return connector.SplitStart{Split: id, Offset: st.Offset, State: st.State,
		Late: st.late && st.Offset == connector.StartDefault && st.State == nil}
}

// openReader opens a reader of starts and starts fetching.
func (s *Source[T]) openReader(starts []connector.SplitStart) error {
	if err := s.ctx.InjectFault(runtime.FaultSite{Point: runtime.FaultNewReader}); err != nil {
		return fmt.Errorf("opening reader: %w", err)
	}
	r, err := s.src.NewReader(s.ctx, s.info, starts)
	if err != nil {
		return fmt.Errorf("opening reader: %w", err)
	}
	s.reader = r
	if err := s.takeSplitStates(nil); err != nil {
		return err
	}
	s.startFetcher(s.fetch)
	return nil
}

// takeSplitStates records the reader's split states (of the splits in
// only, if it is not nil).
func (s *Source[T]) takeSplitStates(only map[string]bool) error {
	sr, ok := s.reader.(connector.SplitStateReader)
	if !ok {
		return nil
	}
	for id, b := range sr.SplitStates() {
		if only != nil && !only[id] {
			continue
		}
		st, ok := s.splits[id]
		if !ok {
			return fmt.Errorf("source: reader reports state of split %q that this subtask does not own", id)
		}
		st.State = b
	}
	return nil
}

// AddSplits implements runtime.SplitReceiver: the job master assigned the
// subtask splits it discovered after the subtask opened. Each starts where
// the restored checkpoint has it, or at StartDefault (late if it is one of
// late). A reader that is a
// connector.SplitAdder takes them as it reads; any other is replaced by
// one that reads every split from its current offset.
func (s *Source[T]) AddSplits(ids, late []string) error {
	var starts []connector.SplitStart
	added := make(map[string]bool, len(ids))
	for _, id := range ids {
		if st, ok := s.addSplit(id, slices.Contains(late, id)); ok {
			starts = append(starts, st)
			added[id] = true
		}
	}
	s.publish()
	if len(starts) == 0 {
		return nil
	}
	s.ctx.Logger.Info("source splits added", "splits", ids)
	if a, ok := s.reader.(connector.SplitAdder); ok {
		if err := a.AddSplits(s.ctx, starts); err != nil {
			return fmt.Errorf("adding splits to the reader: %w", err)
		}
		if err := s.takeSplitStates(added); err != nil {
			return err
		}
	} else if err := s.reopen(); err != nil {
		return err
	}
	return s.ctx.SetIdle(false)
}

// reopen replaces the reader by one that reads every split that has not
// ended from its current offset. What the old one fetched and was not
// emitted yet is dropped: the new one reads it again.
func (s *Source[T]) reopen() error {
	s.stopFetcher()
	if r := s.reader; r != nil {
		s.reader = nil
		if err := r.Close(); err != nil {
			return fmt.Errorf("closing reader: %w", err)
		}
	}
	var starts []connector.SplitStart
	for _, id := range s.SplitIDs() {
		if st := s.splits[id]; !st.Ended {
			starts = append(starts, st.start(id))
		}
	}
	return s.openReader(starts)
}

// stopFetcher stops the fetcher goroutine and drops what it fetched.
func (s *Source[T]) stopFetcher() {
	if s.cancel == nil {
		return
	}
	s.cancel()
	<-s.done
	s.cancel, s.done = nil, nil
	for {
		select {
		case <-s.fetched:
		default:
			return
		}
	}
}

// startFetcher runs fetch on the fetcher goroutine, which Close cancels
// and waits for. It is the last step of a successful Open: an Open that
// fails leaves no goroutine behind and nothing for Close to wait on, so
// the subtask fails and the restart strategy takes over.
func (s *Source[T]) startFetcher(fetch func(ctx context.Context)) {
	fctx, cancel := context.WithCancel(s.ctx)
	done := make(chan struct{})
	s.cancel, s.done = cancel, done
	go func() {
		defer close(done)
		fetch(fctx)
	}()
}

// restore reads the split positions of every subtask of the restored
// run: any split may now belong to this subtask.
func (s *Source[T]) restore(ctx *runtime.OperatorContext) (map[string]splitState, error) {
	out := make(map[string]splitState)
	if ctx.Restored == nil || ctx.Restored.State == nil {
		return out, nil
	}
	var pieces [][]byte
	for _, st := range ctx.Restored.State.Subtasks {
		for _, h := range st.Operator {
			b, err := ctx.Restored.Store.ReadState(ctx, h)
			if err != nil {
				return nil, fmt.Errorf("reading source positions: %w", err)
			}
			pieces = append(pieces, b)
		}
	}
	ob, err := restoreOperatorState(ctx.Parallelism, ctx.Subtask, pieces)
	if err != nil {
		return nil, fmt.Errorf("restoring source positions: %w", err)
	}
	elems, ok, err := decodeSplits(ob)
	if err != nil {
		return nil, fmt.Errorf("restoring source positions: %w", err)
	}
	if !ok && len(pieces) > 0 {
		return nil, fmt.Errorf("restoring source positions: checkpoint %d holds operator state of %s that is not a source's", ctx.Restored.CheckpointID, ctx.UID)
	}
	for _, e := range elems {
		st := splitState{Offset: e.Offset, Ended: e.Ended, State: e.State}
		if e.HasMaxTs {
			st.MaxTs = &e.MaxTs
		}
		out[e.Split] = st
	}
	return out, nil
}

func (s *Source[T]) send(ctx context.Context, item any) bool {
	select {
	case s.fetched <- item:
		return true
	case <-ctx.Done():
		return false
	}
}

func (s *Source[T]) fetch(ctx context.Context) {
	var applied *pauseSet
	for {
		if s.wm.Alignment != nil {
			p := s.pauses.Load()
			if !p.equal(applied) {
				if err := s.applyPauses(applied, p); err != nil {
					s.send(ctx, err)
					return
				}
				applied = p
			}
			if p != nil && p.all {
				if !s.waitResume(ctx) {
					return
				}
				continue
			}
		}
		f, err := s.reader.Fetch(ctx)
		if errors.Is(err, connector.ErrSplitsPaused) && s.wm.Alignment != nil {
			// With every split paused, nothing is read until the pauses
			// change. Otherwise the reader was woken (FetchWaker), or
			// saw a split end before the subtask did: the pauses are
			// loaded again at once.
			if applied != nil && applied.every && !s.waitResume(ctx) {
				return
			}
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.send(ctx, err)
			return
		}
		if !s.send(ctx, f) {
			return
		}
	}
}

// applyPauses tells a reader that pauses single splits which to pause and
// which to resume, going from the pauses applied before to p.
func (s *Source[T]) applyPauses(applied, p *pauseSet) error {
	sp, ok := s.reader.(connector.SplitPauser)
	if !ok {
		return nil
	}
	var was, now []string
	if applied != nil {
		was = applied.splits
	}
	if p != nil {
		now = p.splits
	}
	var pause, resume []string
	for _, id := range now {
		if !slices.Contains(was, id) {
			pause = append(pause, id)
		}
	}
	for _, id := range was {
		if !slices.Contains(now, id) {
			resume = append(resume, id)
		}
	}
	if err := sp.PauseOrResumeSplits(pause, resume); err != nil {
		return fmt.Errorf("pausing splits %v and resuming %v for watermark alignment: %w", pause, resume, err)
	}
	return nil
}

// waitResume waits, on the fetcher's goroutine, until the pauses change;
// false if ctx ended.
func (s *Source[T]) waitResume(ctx context.Context) bool {
	select {
	case <-s.wake:
		return true
	case <-ctx.Done():
		return false
	}
}

// AlignWatermarks implements runtime.AlignedSource: the job master
// announced the maximal watermark of the source's alignment group.
func (s *Source[T]) AlignWatermarks(maxAllowed int64) error {
	if s.wm.Alignment == nil {
		return fmt.Errorf("source: watermark alignment announced to a source that does not align its watermarks")
	}
	s.maxAllowed = maxAllowed
	s.updatePauses()
	return nil
}

// updatePauses works out what the fetcher pauses: the splits whose
// watermark is past the group's maximum if the reader pauses single
// splits, or else the whole reader while the source's watermark is.
func (s *Source[T]) updatePauses() {
	if s.wm.Alignment == nil || s.reader == nil {
		return
	}
	// Worked out in scratch, so that a batch that changes nothing (most
	// of them) allocates nothing.
	splits, all := s.scratch[:0], false
	if _, ok := s.reader.(connector.SplitPauser); ok {
		for id, st := range s.splits {
			if !st.Ended && s.splitWatermark(id) > s.maxAllowed {
				splits = append(splits, id)
			}
		}
		slices.Sort(splits)
	} else {
		all = s.currentWatermark() > s.maxAllowed
	}
	s.scratch = splits
	next := pauseSet{splits: splits, all: all, every: all || len(splits) == s.unended()}
	if next.equal(s.pauses.Load()) {
		return
	}
	next.splits = slices.Clone(splits)
	s.pauses.Store(&pauseSet{splits: next.splits, all: next.all, every: next.every})
	if next.every {
		// Nothing left to read until the maximum rises: the job master
		// may be holding it down with an older report of this subtask's.
		s.reportWatermark()
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
	if w, ok := s.reader.(connector.FetchWaker); ok {
		w.WakeUp()
	}
}

// splitWatermark returns split id's watermark: its highest timestamp less
// the out-of-orderness bound and 1 ms (MinWatermark before any).
func (s *Source[T]) splitWatermark(id string) int64 {
	ts := s.maxTs[id]
	if ts == runtime.MinWatermark {
		return runtime.MinWatermark
	}
	return ts - s.wm.OutOfOrderness.Milliseconds() - 1
}

// scheduleReport reports the subtask's watermark to the job master every
// update interval of its alignment: its current watermark, or
// MaxWatermark when none of its splits holds event time back (they have
// all ended or are idle, or it has none).
func (s *Source[T]) scheduleReport() {
	s.ctx.AtProcessingTime(s.ctx.Now().Add(s.wm.Alignment.UpdateInterval), func() error {
		if s.ctx.Err() != nil || s.ended {
			return nil
		}
		s.reportWatermark()
		s.scheduleReport()
		return nil
	})
}

func (s *Source[T]) reportWatermark() {
	s.ctx.ReportWatermark(s.currentWatermark())
}

// currentWatermark returns the subtask's watermark as its splits have it:
// the lowest watermark of those neither ended nor idle (MaxWatermark if
// none is), and never less than the watermark it emitted. It is worked out
// from the splits, not taken from what was emitted, since a subtask
// restored from a checkpoint has its splits' highest timestamps back but
// emits no watermark until it reads: were it to report the lowest
// possible watermark, the group's maximum would hold its splits paused
// and it would never read.
func (s *Source[T]) currentWatermark() int64 {
	lowest := runtime.MaxWatermark
	for id, st := range s.splits {
		if !st.Ended && !s.idle[id] {
			lowest = min(lowest, s.splitWatermark(id))
		}
	}
	return max(lowest, s.emitted)
}

// paused reports whether the fetcher is to pause split id.
func (s *Source[T]) paused(id string) bool {
	p := s.pauses.Load()
	return p != nil && (p.all || slices.Contains(p.splits, id))
}

// Fetched implements runtime.SourceDriver.
func (s *Source[T]) Fetched() <-chan any { return s.fetched }

// Emit implements runtime.SourceDriver.
func (s *Source[T]) Emit(item any) (int, bool, error) {
	switch it := item.(type) {
	case error:
		if errors.Is(it, connector.ErrEndOfInput) {
			if s.wm.Alignment != nil && !s.ended {
				// No split holds the group back any more.
				s.ended = true
				s.ctx.ReportWatermark(runtime.MaxWatermark)
			}
			return 0, true, nil
		}
		return 0, false, fmt.Errorf("reading source: %w", it)
	case connector.Fetch[T]:
		return s.emit(it)
	}
	return 0, false, fmt.Errorf("source: unexpected fetch %T", item)
}

func (s *Source[T]) emit(f connector.Fetch[T]) (int, bool, error) {
	st, ok := s.splits[f.Split]
	if !ok {
		return 0, false, fmt.Errorf("source: fetch from split %q that this subtask does not own", f.Split)
	}
	maxTs := s.maxTs[f.Split]
	for i, v := range f.Records {
		ts := runtime.NoTimestamp
		if f.Timestamps != nil {
			ts = f.Timestamps[i]
		}
		if s.wm.Timestamp != nil {
			ts = s.wm.Timestamp(v, ts)
		}
		maxTs = max(maxTs, ts)
		if err := s.out.Collect(v, ts); err != nil {
			return i, false, err
		}
	}
	s.maxTs[f.Split] = maxTs
	if f.Recycle != nil {
		f.Recycle()
	}
	st.Offset = f.Next
	if f.State != nil {
		st.State = f.State
	}
	if f.EndOfSplit {
		st.Ended = true
	}
	s.publish()
	if len(f.Records) > 0 {
		s.lastAt[f.Split] = s.ctx.Now()
		if s.idle[f.Split] {
			s.idle[f.Split] = false
			if err := s.ctx.SetIdle(false); err != nil {
				return len(f.Records), false, err
			}
		}
	}
	if err := s.advanceWatermark(); err != nil {
		return len(f.Records), false, err
	}
	s.updatePauses()
	return len(f.Records), false, nil
}

// scheduleIdleCheck marks splits idle that have had no records for the
// idleness timeout, checking a few times per timeout; when every split is
// idle the subtask tells downstream it is idle.
func (s *Source[T]) scheduleIdleCheck() {
	every := max(s.wm.Idleness/4, time.Millisecond)
	s.ctx.AtProcessingTime(s.ctx.Now().Add(every), func() error {
		now := s.ctx.Now()
		changed := false
		for id, st := range s.splits {
			if s.wm.Alignment != nil && s.paused(id) {
				// Watermark alignment holds it back: it is not idle, and
				// has all of Idleness to read once it is resumed.
				s.lastAt[id] = now
				continue
			}
			if !st.Ended && !s.idle[id] && now.Sub(s.lastAt[id]) >= s.wm.Idleness {
				s.idle[id] = true
				changed = true
			}
		}
		if changed {
			if err := s.advanceWatermark(); err != nil {
				return err
			}
			if s.allIdle() {
				if err := s.ctx.SetIdle(true); err != nil {
					return err
				}
			}
		}
		if s.ctx.Err() == nil {
			s.scheduleIdleCheck()
		}
		return nil
	})
}

// unended returns how many of the subtask's splits have not ended.
func (s *Source[T]) unended() int {
	n := 0
	for _, st := range s.splits {
		if !st.Ended {
			n++
		}
	}
	return n
}

func (s *Source[T]) allIdle() bool {
	for id, st := range s.splits {
		if !st.Ended && !s.idle[id] {
			return false
		}
	}
	return true
}

// advanceWatermark emits the minimum over the active splits of each
// split's max timestamp minus the out-of-orderness bound (minus 1 ms, as
// Flink: a record exactly at the bound is not late).
func (s *Source[T]) advanceWatermark() error {
	if s.wm.Disabled {
		return nil
	}
	lowest, any := runtime.MaxWatermark, false
	for id, st := range s.splits {
		if st.Ended || s.idle[id] {
			continue
		}
		any = true
		ts := s.maxTs[id]
		w := runtime.MinWatermark
		if ts != runtime.MinWatermark {
			w = ts - s.wm.OutOfOrderness.Milliseconds() - 1
		}
		lowest = min(lowest, w)
	}
	if !any || lowest <= s.emitted || lowest == runtime.MaxWatermark {
		return nil
	}
	s.emitted = lowest
	return s.out.EmitWatermark(lowest)
}

// ProcessWatermark forwards the end-of-input watermark the task sends.
func (s *Source[T]) ProcessWatermark(wm int64) error {
	if wm <= s.emitted {
		return nil
	}
	s.emitted = wm
	return s.out.EmitWatermark(wm)
}

// Snapshot records every split's offset, reader state and highest
// timestamp, in split order.
func (s *Source[T]) Snapshot(id int64) (runtime.Snapshot, error) {
	elems := make([]splitElem, 0, len(s.splits))
	offsets := make(map[string]int64, len(s.splits))
	for _, k := range slices.Sorted(maps.Keys(s.splits)) {
		v := s.splits[k]
		e := splitElem{Split: k, Offset: v.Offset, Ended: v.Ended, State: v.State}
		if ts := s.maxTs[k]; ts != runtime.MinWatermark {
			e.HasMaxTs, e.MaxTs = true, ts
		}
		elems = append(elems, e)
		offsets[k] = v.Offset
	}
	s.pending[id] = offsets
	b, err := encodeSplits(id, elems)
	if err != nil {
		return runtime.Snapshot{}, err
	}
	return runtime.Snapshot{Operator: b}, nil
}

// NotifyCheckpointComplete lets a reader publish the completed offsets
// (Kafka commits them to the broker for monitoring).
func (s *Source[T]) NotifyCheckpointComplete(id int64) error {
	offsets, ok := s.pending[id]
	for k := range s.pending {
		if k <= id {
			delete(s.pending, k)
		}
	}
	if !ok {
		return nil
	}
	if c, ok := s.reader.(connector.OffsetCommitter); ok {
		if err := c.CommitOffsets(s.ctx, id, offsets); err != nil {
			s.ctx.Logger.Warn("committing source offsets", "checkpoint", id, "err", err)
		}
	}
	if l, ok := s.reader.(connector.CheckpointListener); ok {
		return l.NotifyCheckpointComplete(s.ctx, id)
	}
	return nil
}

func (s *Source[T]) Finish() error { return nil }

func (s *Source[T]) Close() error {
	if s.cancel != nil {
		s.cancel()
		<-s.done
	}
	if s.reader != nil {
		return s.reader.Close()
	}
	return nil
}

// SplitIDs returns the splits this subtask reads, sorted.
func (s *Source[T]) SplitIDs() []string { return slices.Sorted(maps.Keys(s.splits)) }

// SplitPosition is a split's position in a source subtask's checkpointed
// state.
type SplitPosition struct {
	// Offset is where a restore resumes (connector.StartDefault: where
	// the source's configuration says).
	Offset int64
	// Ended reports that the split had no more records.
	Ended bool
}
