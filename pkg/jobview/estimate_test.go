package jobview

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	"github.com/mpijob/mpijob/pkg/api"
)

func TestEstimateStarts(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	finished := func(ns string, took time.Duration, ago time.Duration) Job {
		end := now.Add(-ago)
		start := end.Add(-took)
		return Job{Namespace: ns, Phase: api.PhaseSucceeded, Started: &start, Finished: &end}
	}
	queued := func(ns string, pos int32) Job {
		return Job{Name: "q", Namespace: ns, Phase: api.PhaseQueued, QueuePosition: ptr.To(pos)}
	}
	cases := map[string]struct {
		jobs []Job
		want *Estimate
	}{
		"median of the namespace's finished jobs times the position": {
			jobs: []Job{finished("a", 2*time.Minute, time.Hour), finished("a", 4*time.Minute, time.Hour), finished("a", 10*time.Minute, time.Hour), queued("a", 2)},
			want: &Estimate{Start: ptr.To(now.Add(8 * time.Minute)), Basis: "position 2 × 4m, the median run of the last 3 finished jobs in a (the jobs ahead taken to run one after another)"},
		},
		"other namespaces do not count": {
			jobs: []Job{finished("b", time.Minute, time.Hour), queued("a", 1)},
			want: &Estimate{Basis: "no finished job in a to estimate a start from"},
		},
		"only the latest 20 count": {
			jobs: append(func() []Job {
				var js []Job
				for i := 0; i < 20; i++ {
					js = append(js, finished("a", time.Minute, time.Duration(i+1)*time.Minute))
				}
				// Older and much longer: left out.
				for i := 0; i < 30; i++ {
					js = append(js, finished("a", time.Hour, 48*time.Hour))
				}
				return js
			}(), queued("a", 1)),
			want: &Estimate{Start: ptr.To(now.Add(time.Minute)), Basis: "position 1 × 60s, the median run of the last 20 finished jobs in a (the jobs ahead taken to run one after another)"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			EstimateStarts(tc.jobs, now)
			got := tc.jobs[len(tc.jobs)-1].Estimate
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("estimate (-want,+got):\n%s", diff)
			}
		})
	}
	// Jobs that are not queued get none.
	jobs := []Job{{Phase: api.PhaseRunning}, {Phase: api.PhaseQueued}}
	EstimateStarts(jobs, now)
	if jobs[0].Estimate != nil || jobs[1].Estimate != nil {
		t.Errorf("estimates for jobs not queued or without a position: %+v", jobs)
	}
}
