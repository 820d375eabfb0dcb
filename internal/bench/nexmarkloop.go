package bench

import (
	"fmt"
	"math"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/weirstream/weir/examples/nexmark"
)

// The limit next to the engine: q0, q1, q5 and q7 as hand-written loops
// on one goroutine, over the same events generated the same way (the
// generator's Event, split after split in batches, as the engine's source
// reads them), with the reference's four-second watermark closing q5's
// and q7's windows. What they compute is what the queries compute; their
// rows are counted, not written.

// LoopQueries are the queries that have a hand-written loop.
func LoopQueries() []string { return []string{"q0", "q1", "q5", "q7"} }

// LoopResult is one run of a loop.
type LoopResult struct {
	Query  string
	Events int64
	Rows   int64 // the rows the query emitted
	// Checksum folds the rows' fields, so that the loop's work is used.
	Checksum int64
	// CPU is the time the loop's thread spent (CLOCK_THREAD_CPUTIME_ID).
	CPU     time.Duration
	Elapsed time.Duration
}

// PerCPUSecond is events per CPU-second of the loop's thread; NaN if the
// loop was too short for its thread to be charged any CPU time.
func (r LoopResult) PerCPUSecond() float64 {
	if r.CPU <= 0 {
		return math.NaN()
	}
	return float64(r.Events) / r.CPU.Seconds()
}

// loopBatch is how many events of a split the loop takes in turn.
const loopBatch = 1024

// outOfOrderness is the reference DDL's watermark delay.
const outOfOrderness = 4000

// RunLoopQuery runs query q's hand-written loop over the events of g.
func RunLoopQuery(q string, g nexmark.GenConfig) (LoopResult, error) {
	gen, err := nexmark.NewGenerator(g)
	if err != nil {
		return LoopResult{}, err
	}
	var step func(e *nexmark.Event)
	var fire func(watermark int64)
	var rows int64
	var sink int64 // what the rows hold, so that nothing is optimised away
	switch q {
	case "q0":
		step = func(e *nexmark.Event) {
			if e.Type == nexmark.BidEvent {
				b := &e.Bid
				r := nexmark.BidRow{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, DateTime: b.DateTime, Extra: b.Extra}
				rows++
				sink += r.Auction ^ r.Price + int64(len(r.Extra))
			}
		}
	case "q1":
		step = func(e *nexmark.Event) {
			if e.Type == nexmark.BidEvent {
				b := &e.Bid
				r := nexmark.Q1Row{Auction: b.Auction, Bidder: b.Bidder, PriceMilli: b.Price * 908, DateTime: b.DateTime, Extra: b.Extra}
				rows++
				sink += r.Auction ^ r.PriceMilli + int64(len(r.Extra))
			}
		}
	case "q5":
		// Counts per window start and auction; a window fires once the
		// watermark passes its end: the auctions at its highest count.
		counts := map[int64]map[int64]int64{}
		step = func(e *nexmark.Event) {
			if e.Type != nexmark.BidEvent {
				return
			}
			t := e.Bid.DateTime
			for s := t - floorMod(t, 2000); s > t-10_000; s -= 2000 {
				w := counts[s]
				if w == nil {
					w = map[int64]int64{}
					counts[s] = w
				}
				w[e.Bid.Auction]++
			}
		}
		fire = func(wm int64) {
			for s, w := range counts {
				if s+10_000-1 > wm {
					continue
				}
				var top int64
				for _, n := range w {
					top = max(top, n)
				}
				for a, n := range w {
					if n == top {
						rows++
						sink += a
					}
				}
				delete(counts, s)
			}
		}
	case "q7":
		// Per tumbling window: the highest price, the bids at it, and the
		// bids on the window's end (BETWEEN includes it), which match but
		// belong to the next window.
		type window struct {
			max            int64
			tops, boundary []nexmark.Bid
		}
		windows := map[int64]*window{}
		get := func(s int64) *window {
			w := windows[s]
			if w == nil {
				w = &window{max: -1}
				windows[s] = w
			}
			return w
		}
		step = func(e *nexmark.Event) {
			if e.Type != nexmark.BidEvent {
				return
			}
			b := e.Bid
			s := b.DateTime - floorMod(b.DateTime, 10_000)
			w := get(s)
			switch {
			case b.Price > w.max:
				w.max, w.tops = b.Price, append(w.tops[:0], b)
			case b.Price == w.max:
				w.tops = append(w.tops, b)
			}
			if s == b.DateTime {
				p := get(s - 10_000)
				p.boundary = append(p.boundary, b)
			}
		}
		fire = func(wm int64) {
			for s, w := range windows {
				if s+10_000 > wm {
					continue
				}
				if w.max >= 0 {
					for _, list := range [2][]nexmark.Bid{w.tops, w.boundary} {
						for _, b := range list {
							if b.Price == w.max {
								rows++
								sink += b.Bidder
							}
						}
					}
				}
				delete(windows, s)
			}
		}
	default:
		return LoopResult{}, fmt.Errorf("bench: no hand-written loop for %s (have %v)", q, LoopQueries())
	}

	runtime.GC()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpu0 := threadCPU()
	start := time.Now()
	next := make([]int64, g.Splits) // each split's next position
	last := make([]int64, g.Splits) // each split's latest event time
	for i := range last {
		last[i] = g.BaseTime
	}
	var e nexmark.Event
	for done := false; !done; {
		done = true
		for s := range g.Splits {
			_, count := g.SplitRange(s)
			end := min(next[s]+loopBatch, count)
			for n := next[s]; n < end; n++ {
				e = gen.Event(s, n)
				step(&e)
				last[s] = e.Time()
			}
			next[s] = end
			if end < count {
				done = false
			}
		}
		if fire != nil {
			// The watermark: the least latest time of the splits still
			// reading, less the delay; at the end of the input, every
			// window fires.
			wm := int64(1<<63 - 1)
			for s := range g.Splits {
				if _, count := g.SplitRange(s); next[s] < count {
					wm = min(wm, last[s]-outOfOrderness)
				}
			}
			fire(wm)
		}
	}
	return LoopResult{Query: q, Events: g.Events, Rows: rows, Checksum: sink, CPU: threadCPU() - cpu0, Elapsed: time.Since(start)}, nil
}

func floorMod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}

// threadCPU is the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID,
// to the nanosecond: RUSAGE_THREAD counts in scheduler ticks, and a
// short loop could read as no time at all).
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}
