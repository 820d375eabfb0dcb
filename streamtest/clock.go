package streamtest

import (
	"time"

	"github.com/weirstream/weir/internal/manualclock"
)

// ManualClock is a processing-time clock that moves only when told to:
// timers registered with AfterFunc run when Advance passes their time. It
// implements stream.Clock.
type ManualClock struct{ c *manualclock.Clock }

// NewManualClock returns a clock at start.
func NewManualClock(start time.Time) *ManualClock { return &ManualClock{manualclock.New(start)} }

// Now returns the clock's time.
func (c *ManualClock) Now() time.Time { return c.c.Now() }

// AfterFunc runs f once the clock has advanced by d; with d <= 0 it runs f
// at once, on its own goroutine, as time.AfterFunc does.
func (c *ManualClock) AfterFunc(d time.Duration, f func()) (stop func() bool) {
	return c.c.AfterFunc(d, f)
}

// Pending returns how many timers wait to fire.
func (c *ManualClock) Pending() int { return c.c.Pending() }

// Advance moves the clock forward by d and runs, in time order, the timers
// that became due.
func (c *ManualClock) Advance(d time.Duration) { c.c.Advance(d) }
