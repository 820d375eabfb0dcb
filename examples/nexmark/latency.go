package nexmark

import (
	"fmt"

	"github.com/weirstream/weir/stream"
)

// End-to-end latency: when a query's row is due. A row is due at an event
// time derived from one of its sink table's columns: the bid's time for a
// row of a stateless query, the end of its window for a window's row (a
// window's result cannot be known before event time reaches its end).
// With the source paced to release each event at its event time (Source's
// Paced), a row's latency is the wall-clock time it reaches the sink less
// its due time on the same clock. Another system computes the same from
// the same column of its rows (LatencySpec says which and how).

// LatencySpec says how a query's row is due: at its Column's time rounded
// up to a multiple of RoundMs, plus OffsetMs.
type LatencySpec struct {
	// Column is the sink table's column holding the time (q5's is
	// starttime, which the reference's SELECT drops: its rows are written
	// with it for a latency run).
	Column   string
	RoundMs  int64 // 1: as is
	OffsetMs int64
}

// Due returns the due time of a row whose Column holds t.
func (s LatencySpec) Due(t int64) int64 {
	r := max(s.RoundMs, 1)
	return t + mod(-t, r) + s.OffsetMs
}

// latencyOf are the queries whose rows have a due time: the spec, and the
// time of the spec's column in weir's row.
var latencyOf = map[string]struct {
	spec  LatencySpec
	times func(stream.Stream[Event]) stream.Stream[int64]
}{
	"q0": {LatencySpec{"dateTime", 1, 0}, func(e stream.Stream[Event]) stream.Stream[int64] {
		return rowTimes(Q0(e), func(r BidRow) int64 { return r.DateTime })
	}},
	"q1": {LatencySpec{"dateTime", 1, 0}, func(e stream.Stream[Event]) stream.Stream[int64] {
		return rowTimes(Q1(e), func(r Q1Row) int64 { return r.DateTime })
	}},
	// A hopping window's row: its start plus the window's size.
	"q5": {LatencySpec{"starttime", 1, windowMs}, func(e stream.Stream[Event]) stream.Stream[int64] {
		return rowTimes(Q5(e), func(r Q5Row) int64 { return r.Start })
	}},
	// The bid at a tumbling window's highest price: the window's end is
	// the bid's time rounded up to the window's size (a bid on the end is
	// its window's last).
	"q7": {LatencySpec{"dateTime", windowMs, 0}, func(e stream.Stream[Event]) stream.Stream[int64] {
		return rowTimes(Q7(e), func(r BidRow) int64 { return r.DateTime })
	}},
	"q8": {LatencySpec{"stime", 1, windowMs}, func(e stream.Stream[Event]) stream.Stream[int64] {
		return rowTimes(Q8(e), func(r Q8Row) int64 { return r.Start })
	}},
	"q11": {LatencySpec{"endtime", 1, 0}, func(e stream.Stream[Event]) stream.Stream[int64] {
		return rowTimes(Q11(e), func(r Q11Row) int64 { return r.End })
	}},
	"q14": {LatencySpec{"dateTime", 1, 0}, func(e stream.Stream[Event]) stream.Stream[int64] {
		return rowTimes(Q14(e), func(r Q14Row) int64 { return r.DateTime })
	}},
}

func rowTimes[T any](s stream.Stream[T], f func(T) int64) stream.Stream[int64] {
	return stream.Map(s, f, stream.Uid("row-time"))
}

// LatencyQueries are the queries whose rows have a due time, in order.
func LatencyQueries() []string {
	var names []string
	for _, q := range Queries() {
		if _, ok := latencyOf[q.Name]; ok {
			names = append(names, q.Name)
		}
	}
	return names
}

// LatencyOf returns how query name's rows are due.
func LatencyOf(name string) (LatencySpec, error) {
	l, ok := latencyOf[name]
	if !ok {
		return LatencySpec{}, fmt.Errorf("nexmark: %s's rows have no due time (latency is measured on %v)", name, LatencyQueries())
	}
	return l.spec, nil
}

// DueTimes adds query name to a job reading events and returns the due
// time of each of its rows (LatencySpec.Due of the spec's column).
func DueTimes(name string, events stream.Stream[Event]) (stream.Stream[int64], error) {
	l, ok := latencyOf[name]
	if !ok {
		var none stream.Stream[int64]
		return none, fmt.Errorf("nexmark: %s's rows have no due time (latency is measured on %v)", name, LatencyQueries())
	}
	return stream.Map(l.times(events), l.spec.Due, stream.Uid("due")), nil
}
