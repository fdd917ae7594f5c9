package jobview

import (
	"fmt"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/mpijob/mpijob/pkg/api"
)

// Estimate is when a queued job may start, and how that was worked out.
type Estimate struct {
	// Start is nil when there is nothing to estimate from.
	Start *time.Time `json:"start,omitempty"`
	// Basis says how it is estimated, in words.
	Basis string `json:"basis"`
}

// recentFinished is how many of a namespace's latest finished jobs the
// typical run time is taken from.
const recentFinished = 20

// EstimateStarts gives every Queued job with a queue position an estimated
// start: its position times the median run time (start to finish) of the
// latest finished jobs of its namespace. It is rough on purpose: it takes
// the jobs ahead to run one after another and knows nothing of their sizes;
// the basis says so.
func EstimateStarts(jobs []Job, now time.Time) {
	type run struct {
		took     time.Duration
		finished time.Time
	}
	runs := map[string][]run{}
	for _, j := range jobs {
		if j.Started != nil && j.Finished != nil && (j.Phase == api.PhaseSucceeded || j.Phase == api.PhaseFailed) && j.Finished.After(*j.Started) {
			runs[j.Namespace] = append(runs[j.Namespace], run{j.Finished.Sub(*j.Started), *j.Finished})
		}
	}
	typical := map[string]time.Duration{}
	counted := map[string]int{}
	for ns, rs := range runs {
		sort.Slice(rs, func(a, b int) bool { return rs[a].finished.After(rs[b].finished) })
		if len(rs) > recentFinished {
			rs = rs[:recentFinished]
		}
		took := make([]time.Duration, len(rs))
		for i, r := range rs {
			took[i] = r.took
		}
		sort.Slice(took, func(a, b int) bool { return took[a] < took[b] })
		typical[ns], counted[ns] = median(took), len(took)
	}
	for i := range jobs {
		j := &jobs[i]
		if j.Phase != api.PhaseQueued || j.QueuePosition == nil || *j.QueuePosition < 1 {
			continue
		}
		pos := *j.QueuePosition
		n := counted[j.Namespace]
		if n == 0 {
			j.Estimate = &Estimate{Basis: fmt.Sprintf("no finished job in %s to estimate a start from", j.Namespace)}
			continue
		}
		start := now.Add(typical[j.Namespace] * time.Duration(pos))
		j.Estimate = &Estimate{
			Start: &start,
			Basis: fmt.Sprintf("position %d × %s, the median run of the last %d finished %s in %s (the jobs ahead taken to run one after another)",
				pos, duration.HumanDuration(typical[j.Namespace]), n, api.Agree(n, "job", "jobs"), j.Namespace),
		}
	}
}

func median(sorted []time.Duration) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}
