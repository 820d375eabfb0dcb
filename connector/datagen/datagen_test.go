package datagen

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/weirstream/weir/connector"
)

type rec struct {
	P   int
	Seq int64
}

func readAll(t *testing.T, s *Source[rec], starts []connector.SplitStart) map[string][]rec {
	t.Helper()
	r, err := s.NewReader(context.Background(), connector.ReaderInfo{}, starts)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	out := map[string][]rec{}
	next := map[string]int64{}
	for {
		f, err := r.Fetch(context.Background())
		if errors.Is(err, connector.ErrEndOfInput) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out[f.Split] = append(out[f.Split], f.Records...)
		if f.Next <= next[f.Split] {
			t.Fatalf("split %s: offset went from %d to %d", f.Split, next[f.Split], f.Next)
		}
		next[f.Split] = f.Next
	}
}

func TestBoundedDeterministicReplayable(t *testing.T) {
	s, err := New(func(p int, seq int64) rec { return rec{p, seq} }, Partitions(3), Count(1000), BatchSize(64))
	if err != nil {
		t.Fatal(err)
	}
	ids, _ := s.Splits(context.Background())
	if !slices.Equal(ids, []string{"datagen-0", "datagen-1", "datagen-2"}) || !s.Bounded() {
		t.Fatalf("splits %v bounded %v", ids, s.Bounded())
	}
	var starts []connector.SplitStart
	for _, id := range ids {
		starts = append(starts, connector.SplitStart{Split: id, Offset: connector.StartDefault})
	}
	all := readAll(t, s, starts)
	for p, id := range ids {
		if len(all[id]) != 1000 {
			t.Fatalf("split %s: %d records", id, len(all[id]))
		}
		for i, r := range all[id] {
			if r != (rec{p, int64(i)}) {
				t.Fatalf("split %s record %d is %v", id, i, r)
			}
		}
	}
	// Seeking to an offset replays exactly the rest.
	rest := readAll(t, s, []connector.SplitStart{{Split: "datagen-1", Offset: 777}})
	if !slices.Equal(rest["datagen-1"], all["datagen-1"][777:]) {
		t.Fatalf("replay from 777 gave %d records", len(rest["datagen-1"]))
	}
}

func TestValidation(t *testing.T) {
	gen := func(int, int64) rec { return rec{} }
	for _, opts := range [][]Option{{Partitions(0)}, {Count(-1)}, {RatePerSecond(-1)}, {BatchSize(0)}} {
		if _, err := New(gen, opts...); err == nil {
			t.Errorf("options %v accepted", opts)
		}
	}
	if _, err := New[rec](nil); err == nil {
		t.Error("nil generator accepted")
	}
}

func TestMixIsDeterministicAndSpreads(t *testing.T) {
	a, b := Mix(1, 2, 3), Mix(1, 2, 3)
	if a != b || a == Mix(1, 2, 4) || a == Mix(2, 2, 3) {
		t.Fatal("Mix is not a deterministic function of its arguments")
	}
	buckets := make([]int, 16)
	for seq := range int64(16000) {
		buckets[Mix(7, 0, seq)%16]++
	}
	for i, n := range buckets {
		if n < 800 || n > 1200 {
			t.Fatalf("bucket %d has %d of 16000", i, n)
		}
	}
}
