package web

import "testing"

// TestSkew: Flink's data skew of a few sets of values.
func TestSkew(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
	}{
		{[]float64{5, 5, 5}, 0},
		{[]float64{0, 0}, 0},
		{[]float64{0, 10}, 100},         // mean 5, deviation 5
		{[]float64{2, 4, 6}, 100.0 / 3}, // mean 4, deviation 4/3: 33.3%
		{[]float64{0, 0, 0, 100}, 100},  // mean 25, deviation 37.5: capped
	} {
		sum := 0.0
		for _, x := range c.xs {
			sum += x
		}
		if got := skew(c.xs, sum); got < c.want-1e-9 || got > c.want+1e-9 {
			t.Errorf("skew(%v) = %v, want %v", c.xs, got, c.want)
		}
	}
}
