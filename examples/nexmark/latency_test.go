package nexmark

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/weirstream/weir/connector"
)

func TestLatencySpecDue(t *testing.T) {
	const base = 1_767_225_600_000 // a multiple of ten seconds
	for _, c := range []struct {
		q       string
		t, want int64
	}{
		{"q0", base + 1234, base + 1234},
		{"q5", base + 2000, base + 12000},   // a window's start: its end
		{"q7", base + 1, base + 10000},      // a bid in a window: the window's end
		{"q7", base + 10000, base + 10000},  // a bid on the end: its window's last
		{"q7", base - 9999, base},           // before the base too
		{"q11", base + 15000, base + 15000}, // a session's end
		{"q8", base + 20000, base + 30000},  // a window's start
		{"q14", base + 777, base + 777},     // a bid's time
		{"q1", -1, -1},                      // negative times as well
		{"q7", -10001, -10000},
	} {
		spec, err := LatencyOf(c.q)
		if err != nil {
			t.Fatal(err)
		}
		if got := spec.Due(c.t); got != c.want {
			t.Errorf("%s: Due(%d) = %d, want %d", c.q, c.t, got, c.want)
		}
	}
	if _, err := LatencyOf("q2"); err == nil {
		t.Error("q2's rows, which hold no time, have a due time")
	}
	if got := LatencyQueries(); !reflect.DeepEqual(got, []string{"q0", "q1", "q5", "q7", "q8", "q11", "q14"}) {
		t.Errorf("LatencyQueries() = %v", got)
	}
}

// TestPacedSource: a paced source reads the same events as the source,
// calls the shift once per reader, releases no event before its event
// time plus the shift on the wall clock, and stops waiting when its
// context ends.
func TestPacedSource(t *testing.T) {
	g := testGenerator(t, func(c *GenConfig) { c.Events, c.Rate = 400, 4000 }) // 200 ms of event time per split
	src, err := NewSource(g, 16)
	if err != nil {
		t.Fatal(err)
	}
	ids, _ := src.Splits(context.Background())
	var starts []connector.SplitStart
	for _, id := range ids {
		starts = append(starts, connector.SplitStart{Split: id, Offset: connector.StartDefault})
	}
	calls := 0
	shift := time.Now().Add(20*time.Millisecond).UnixMilli() - g.cfg.BaseTime
	paced := src.Paced(func() (int64, error) { calls++; return shift, nil })
	r, err := paced.NewReader(context.Background(), connector.ReaderInfo{}, starts)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]Event{}
	for {
		f, err := r.Fetch(context.Background())
		if errors.Is(err, connector.ErrEndOfInput) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now().UnixMilli()
		for i, ev := range f.Records {
			if f.Timestamps[i] != ev.Time() {
				t.Fatalf("timestamp %d of an event at %d", f.Timestamps[i], ev.Time())
			}
			if due := ev.Time() + shift; now < due {
				t.Fatalf("an event due at %d released at %d", due, now)
			}
		}
		got[f.Split] = append(got[f.Split], f.Records...)
	}
	if calls != 1 {
		t.Errorf("the shift was asked %d times, want once", calls)
	}
	for i, id := range ids {
		first, count := g.cfg.SplitRange(i)
		var want []Event
		for n := range count {
			want = append(want, g.event(first+n, n))
		}
		if !reflect.DeepEqual(got[id], want) {
			t.Fatalf("split %s: the paced source read %d other events", id, len(got[id]))
		}
	}

	// A shift an hour ahead: the reader waits until its context ends.
	late := src.Paced(func() (int64, error) { return time.Now().Add(time.Hour).UnixMilli() - g.cfg.BaseTime, nil })
	r, err = late.NewReader(context.Background(), connector.ReaderInfo{}, starts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go cancel()
	if _, err := r.Fetch(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("a fetch whose context ended: %v, want context.Canceled", err)
	}
	failing := src.Paced(func() (int64, error) { return 0, errors.New("no start") })
	r, err = failing.NewReader(context.Background(), connector.ReaderInfo{}, starts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Fetch(context.Background()); err == nil || err.Error() != "no start" {
		t.Fatalf("a fetch whose shift failed: %v", err)
	}
}
