package stream_test

import (
	"strings"
	"testing"
)

// TestVerifySumsAtLeastOnce shows the at-least-once oracle of the keyed
// sum suite both ways: it accepts the outputs a job may legitimately
// write when a restore replays records its state already counts, and
// rejects those of a job that dropped a record, lost a record's
// contribution from its state, or wrote a sum that is no multiset of the
// key's records. An oracle that cannot fail proves nothing.
func TestVerifySumsAtLeastOnce(t *testing.T) {
	// Key a: 0/0..0/3 with values 1, 3, 5, 7 (sums 1, 4, 9, 16); key b:
	// 1/0 (value 2) and 0/4 (value 11).
	input := []rec{{"a", 1, 0, 0}, {"a", 3, 0, 1}, {"a", 5, 0, 2}, {"a", 7, 0, 3}, {"b", 11, 0, 4}, {"b", 2, 1, 0}}
	s := func(k string, sum int64, p int, seq int64) KeyedSum {
		return KeyedSum{Key: k, Sum: sum, P: p, Seq: seq}
	}
	a1, a4, a9, a16 := s("a", 1, 0, 0), s("a", 4, 0, 1), s("a", 9, 0, 2), s("a", 16, 0, 3)
	b2, b13 := s("b", 2, 1, 0), s("b", 13, 0, 4)
	exact := []KeyedSum{a1, a4, b2, a9, a16, b13}
	ordered := func(int) bool { return true }
	for _, tc := range []struct {
		name string
		out  []KeyedSum
		want string // "" accepted, else a part of the error
	}{
		{"exactly once", exact, ""},
		{"in another order", []KeyedSum{b13, a9, a1, a16, b2, a4}, ""},
		// The snapshot held 0/2 (state 9) but the source's position was
		// before it: the restore replays 0/2 onto 9, and then 0/3.
		{"a replay onto a state that counts it", []KeyedSum{a1, a4, b2, a9, s("a", 14, 0, 2), s("a", 21, 0, 3), b13}, ""},
		// The restore went back to state 4 and replays 0/2 and 0/3.
		{"a replay of committed sums", []KeyedSum{a1, a4, b2, a9, a16, b13, a9, a16}, ""},
		{"a record dropped", []KeyedSum{a1, a4, b2, s("a", 11, 0, 3), b13}, "have no sum (first [0/2]"},
		{"a sum missing", []KeyedSum{a1, a4, b2, a9, a16}, "have no sum (first [0/4]"},
		// 0/2 was summed and written, but its contribution lost: 0/3 is
		// added to 4, not 9.
		{"a contribution lost", []KeyedSum{a1, a4, b2, a9, s("a", 11, 0, 3), b13}, "less than"},
		// Across partitions the per-partition bound cannot tell: b's 0/4
		// follows an empty state, and no sum of b counts 1/0 with it.
		{"a contribution lost across partitions", []KeyedSum{a1, a4, b2, a9, a16, s("b", 11, 0, 4)}, "no sum counts every one"},
		{"a sum of no multiset", []KeyedSum{a1, a4, b2, s("a", 10, 0, 2), s("a", 17, 0, 3), b13}, "neither empty nor any sum"},
		{"a record of another key", []KeyedSum{a1, a4, b2, a9, a16, b13, s("b", 16, 0, 3)}, "not a record of the input of that key"},
		{"a record not in the input", []KeyedSum{a1, a4, b2, a9, a16, b13, s("a", 17, 0, 9)}, "not a record of the input"},
	} {
		err := verifySumsAtLeastOnce(tc.out, input, ordered)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: rejected: %v", tc.name, err)
		case tc.want != "" && err == nil:
			t.Errorf("%s: accepted, want an error with %q", tc.name, tc.want)
		case tc.want != "" && !strings.Contains(err.Error(), tc.want):
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
		// The exactly-once oracle rejects every duplicate the at-least-once
		// one accepts.
		if tc.want == "" && len(tc.out) != len(input) {
			if err := verifySums(tc.out, input, ordered); err == nil {
				t.Errorf("%s: the exactly-once oracle accepts it", tc.name)
			}
		}
	}
	if err := verifyPassThrough([]KeyedSum{s("a", 1, 0, 0), s("a", 1, 0, 0)}, input[:1], true); err != nil {
		t.Errorf("a pass-through duplicate under at-least-once: %v", err)
	}
	if err := verifyPassThrough([]KeyedSum{s("a", 1, 0, 0)}, input[:2], true); err == nil {
		t.Error("a pass-through record dropped under at-least-once: accepted")
	}
	if err := verifyPassThrough([]KeyedSum{s("a", 2, 0, 0)}, input[:1], true); err == nil {
		t.Error("a pass-through record with another value: accepted")
	}
}
