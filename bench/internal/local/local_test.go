package local

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
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

// TestWatchesOf: the events and bytes the API server's watches sent, by
// resource and group, summed over versions.
func TestWatchesOf(t *testing.T) {
	text := `# TYPE apiserver_watch_events_total counter
apiserver_watch_events_total{group="",resource="pods",version="v1"} 1000
apiserver_watch_events_total{group="jobset.x-k8s.io",resource="jobsets",version="v1alpha2"} 40
apiserver_watch_events_total{group="jobset.x-k8s.io",resource="jobsets",version="v1alpha1"} 2
# TYPE apiserver_watch_events_sizes histogram
apiserver_watch_events_sizes_bucket{group="",resource="pods",version="v1",le="+Inf"} 1000
apiserver_watch_events_sizes_sum{group="",resource="pods",version="v1"} 8e+06
apiserver_watch_events_sizes_count{group="",resource="pods",version="v1"} 1000
`
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Watched{"pods": {Events: 1000, Bytes: 8e6}, "jobsets.jobset.x-k8s.io": {Events: 42}}
	if d := cmp.Diff(want, WatchesOf(fams)); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}
