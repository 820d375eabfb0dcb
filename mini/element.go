package mini

import (
	"fmt"
	"math"
)

// Element is one item of a stream: a data [Event], a [Watermark], a checkpoint
// [Barrier], or a [KeyedSum] emitted by [StatefulSumOperator]. The set is
// sealed: only the types of this package implement it, so a type switch over
// them is exhaustive.
type Element interface {
	element()
	String() string
}

// Event is a data record. Only events advance a source's position; markers
// (watermarks, barriers) do not.
type Event struct {
	Key       string
	Value     int64
	Timestamp int64
}

// Watermark asserts that no event with a timestamp at or below Timestamp
// follows on the same stream.
type Watermark struct {
	Timestamp int64
}

// Barrier separates the records that belong to checkpoint ID (before it) from
// those that belong to later checkpoints (after it). Barriers never overtake
// records on a channel.
type Barrier struct {
	ID int64
}

// KeyedSum is what StatefulSumOperator emits for each event: the running sum
// of the event's key after the event was applied.
type KeyedSum struct {
	Key string
	Sum int64
}

// EndOfInput marks that a channel delivers nothing more. It is used by the
// multi-input [Task]; single-input functions never see it.
type EndOfInput struct{}

func (Event) element()      {}
func (Watermark) element()  {}
func (Barrier) element()    {}
func (KeyedSum) element()   {}
func (EndOfInput) element() {}

func (e Event) String() string {
	if e.Timestamp == 0 {
		return fmt.Sprintf("k=%s v=%d", e.Key, e.Value)
	}
	return fmt.Sprintf("k=%s v=%d ts=%d", e.Key, e.Value, e.Timestamp)
}

func (w Watermark) String() string { return "watermark=" + formatTime(w.Timestamp) }
func (b Barrier) String() string   { return fmt.Sprintf("barrier=%d", b.ID) }
func (s KeyedSum) String() string  { return fmt.Sprintf("%s=%d", s.Key, s.Sum) }
func (EndOfInput) String() string  { return "end" }

func formatTime(ts int64) string {
	switch ts {
	case math.MinInt64:
		return "min"
	case math.MaxInt64:
		return "max"
	}
	return fmt.Sprint(ts)
}

// KeyFunc selects the key an event is summed under.
type KeyFunc func(Event) string

// ByKey is the KeyFunc that returns Event.Key.
func ByKey(e Event) string { return e.Key }
