package local

import (
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i+1) * time.Millisecond
	}
	cases := map[string]struct {
		sorted []time.Duration
		p      int
		want   time.Duration
	}{
		"none":                   {p: 50, want: 0},
		"one":                    {sorted: []time.Duration{7}, p: 99, want: 7},
		"p50 of 100 is the 50th": {sorted: hundred, p: 50, want: 50 * time.Millisecond},
		"p99 of 100 is the 99th": {sorted: hundred, p: 99, want: 99 * time.Millisecond},
		"p100 is the largest":    {sorted: hundred, p: 100, want: 100 * time.Millisecond},
		"p0 is the smallest":     {sorted: hundred, p: 0, want: time.Millisecond},
		"p50 of 3 is the middle": {sorted: []time.Duration{1, 2, 3}, p: 50, want: 2},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Percentile(tc.sorted, tc.p); got != tc.want {
				t.Errorf("Percentile(%d) = %v, want %v", tc.p, got, tc.want)
			}
		})
	}
}
