package runtime

import (
	"time"
)

// DebloatOptions configure buffer debloating (Flink's
// taskmanager.network.memory.buffer-debloat.*): a subtask with inputs
// limits the records in flight on each of its input channels to what it
// consumes within Target, so that under backpressure an aligned barrier
// waits behind about Target of work rather than behind full channels.
type DebloatOptions struct {
	Enabled bool
	// Target is the time the subtask should take to consume the records
	// in flight on all its input channels.
	Target time.Duration
	// Period is how often the subtask samples its consumption and
	// recomputes the limit.
	Period time.Duration
	// Samples is the number of periods the rate is averaged over.
	Samples int
	// Threshold is the smallest change of the limit, in percent of the
	// current one, that is applied.
	Threshold int
}

// DebloatFloor is the smallest in-flight limit of a channel, in records:
// below it the per-batch costs (a lock and a wake-up per hand-over) would
// dominate, and a subtask that consumes slowly would starve between two
// hand-overs. Never above the channel's static bound.
const DebloatFloor = 64

// Debloater computes the in-flight limit of a subtask's input channels
// from its consumption. It does no I/O and reads no clock: the subtask
// feeds it one sample per period (records consumed, time busy) and applies
// the limit it returns to its channels.
//
// The rate is the records consumed per second of busy time (the period
// less the time the subtask waited for input) over the last Samples
// periods: waiting for input is not counted, so a limit that starves the
// subtask does not lower the rate it measures and the limit cannot spiral
// down. Time blocked on a full output is counted: it slows the draining
// of the inputs as much as processing does. The limit of each channel is
// rate × Target divided among the channels (the barriers of an aligned
// checkpoint are behind the records of all of them), within
// [floor, ceiling]; a change smaller than Threshold percent of the current
// limit is not applied.
type Debloater struct {
	target         time.Duration
	threshold      int
	channels       int
	floor, ceiling int64

	// The last Samples periods' records and busy nanoseconds, as a ring,
	// and their sums.
	records, busy       []int64
	next                int
	sumRecords, sumBusy int64

	limit int64
}

// NewDebloater returns a Debloater for a subtask with the given number of
// input channels, each holding at most ceiling records without debloating.
// The limit starts at the floor: the first period measures the rate.
func NewDebloater(o DebloatOptions, channels int, ceiling int64) *Debloater {
	samples := max(o.Samples, 1)
	floor := debloatStart(ceiling)
	return &Debloater{target: o.Target, threshold: o.Threshold, channels: max(channels, 1), floor: floor, ceiling: ceiling,
		records: make([]int64, samples), busy: make([]int64, samples), limit: floor}
}

// debloatStart is the floor of a channel that holds at most ceiling
// records without debloating, and the limit it starts at. Both ends of a
// channel between processes start there, before the consumer announces
// any other.
func debloatStart(ceiling int64) int64 { return min(int64(DebloatFloor), ceiling) }

// Limit returns the current in-flight limit of each channel, in records.
func (d *Debloater) Limit() int64 { return d.limit }

// Observe takes one period's sample, records consumed and time busy, and
// returns the limit and whether it changed. A period without busy time
// (the subtask only waited) says nothing of the rate and is not counted.
func (d *Debloater) Observe(records int64, busy time.Duration) (int64, bool) {
	records, b := max(records, 0), int64(busy)
	if b <= 0 {
		return d.limit, false
	}
	d.sumRecords += records - d.records[d.next]
	d.sumBusy += b - d.busy[d.next]
	d.records[d.next], d.busy[d.next] = records, b
	d.next = (d.next + 1) % len(d.records)
	// rate × target / channels, in records: records × target / (busy ×
	// channels), in float64 so that large counts and targets cannot
	// overflow, and whole quotients come out exact.
	want := float64(d.sumRecords) * float64(d.target) / (float64(d.sumBusy) * float64(d.channels))
	n := d.ceiling
	if want < float64(d.ceiling) {
		n = max(int64(want), d.floor)
	}
	if n == d.limit {
		return d.limit, false
	}
	diff := n - d.limit
	if diff < 0 {
		diff = -diff
	}
	// Clamped to the floor or the ceiling it always applies: the bounds
	// are reached, not approached.
	if diff*100 < int64(d.threshold)*d.limit && n != d.floor && n != d.ceiling {
		return d.limit, false
	}
	d.limit = n
	return n, true
}

// initDebloat limits the subtask's input channels to the Debloater's
// starting limit, if debloating is on. It runs when the subtask is
// deployed, before its producers start.
func (t *Task) initDebloat() {
	o := t.opts.debloat
	if !o.Enabled || len(t.gate.chans) == 0 {
		return
	}
	t.debloater = NewDebloater(o, len(t.gate.chans), t.opts.ceiling)
	for _, c := range t.gate.chans {
		c.setLimit(t.debloater.Limit())
	}
}

// startDebloat starts sampling the subtask's consumption every period,
// if debloating is on.
func (t *Task) startDebloat() {
	if t.debloater == nil {
		return
	}
	t.debloatAt, t.debloatIdle, t.debloatIn = time.Now(), t.idleNanos(), t.recordsIn.Load()
	t.schedule(t.clock.Now().Add(t.opts.debloat.Period), t.sampleDebloat)
}

// sampleDebloat is a mail: it runs between units of work, so every batch
// counted since the last sample has been processed, within the busy time
// measured since.
func (t *Task) sampleDebloat() error {
	now, idle, in := time.Now(), t.idleNanos(), t.recordsIn.Load()
	busy := now.Sub(t.debloatAt) - time.Duration(idle-t.debloatIdle)
	records := in - t.debloatIn
	t.debloatAt, t.debloatIdle, t.debloatIn = now, idle, in
	if lim, changed := t.debloater.Observe(records, busy); changed {
		t.setInFlightLimit(lim)
	}
	t.schedule(t.clock.Now().Add(t.opts.debloat.Period), t.sampleDebloat)
	return nil
}

// setInFlightLimit limits each input channel to n records, and tells
// the producers in other processes.
func (t *Task) setInFlightLimit(n int64) {
	for _, c := range t.gate.chans {
		c.setLimit(n)
		c.announceLimit()
	}
}
