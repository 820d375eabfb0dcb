package coordinator

import "testing"

// The expected values are those of Apache Commons Math's Percentile with
// its default estimation, which Flink's checkpoint statistics use.
func TestQuantile(t *testing.T) {
	oneToTen := []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, tc := range []struct {
		values []int64
		q      float64
		want   float64
	}{
		{nil, 0.5, 0},
		{[]int64{7}, 0.99, 7},
		{oneToTen, 0.5, 5.5},
		{oneToTen, 0.9, 9.9},
		{oneToTen, 0.95, 10},
		{oneToTen, 0.05, 1},
		{[]int64{10, 20, 30, 40}, 0.5, 25},
		{[]int64{10, 20, 30, 40}, 0.25, 12.5},
	} {
		if got := quantile(tc.values, tc.q); got != tc.want {
			t.Errorf("quantile(%v, %v) = %v, want %v", tc.values, tc.q, got, tc.want)
		}
	}
}

// Min, max and average cover every value; percentiles only the window.
func TestSummarizerWindow(t *testing.T) {
	s := newSummarizer(3)
	for _, v := range []int64{100, 1, 2, 3, -1} {
		s.add(v)
	}
	got := s.summary()
	if got.Min != 1 || got.Max != 100 || got.Avg != 26 {
		t.Errorf("min/max/avg = %d/%d/%d, want 1/100/26", got.Min, got.Max, got.Avg)
	}
	if got.P50 != 2 || got.P99 != 3 {
		t.Errorf("p50 = %v, p99 = %v over the window {1,2,3}, want 2 and 3", got.P50, got.P99)
	}
}
