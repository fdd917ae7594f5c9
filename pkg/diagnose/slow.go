package diagnose

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/progress"
	"github.com/mpijob/mpijob/pkg/runtimes"
)

// ReasonSlowRank is a running job one of whose ranks computes its steps
// consistently slower than the others (the ranks' own step times, in the
// progress reports' rank_step_seconds): in synchronous training every rank
// waits for it at each step.
const ReasonSlowRank = "SlowRank"

// SlowFactor is how much slower than the other ranks' median a rank must
// be, in every report of the window, to be named.
const SlowFactor = 1.5

// slowMinReports is how many reports the window needs.
const slowMinReports = 3

// StepReport is one progress report's step times, with its time.
type StepReport struct {
	At      time.Time
	Seconds []float64
}

// SlowRank is a rank that stayed slower than the others.
type SlowRank struct {
	Rank int
	// Seconds is its median step time over the window; Median the other
	// ranks' median; Ratio the first over the second.
	Seconds, Median, Ratio float64
	// Since is the first report of the window, Reports how many it has.
	Since   time.Time
	Reports int
}

// stepReports are the reports of a Launcher's log lines that carry the
// ranks' step times, oldest first.
func stepReports(points []progress.Point) []StepReport {
	var out []StepReport
	for _, p := range points {
		if len(p.RankStepSeconds) > 1 && !p.Time.IsZero() {
			out = append(out, StepReport{At: p.Time, Seconds: p.RankStepSeconds})
		}
	}
	return out
}

// StepHistory is how far back the manager keeps a running Launcher's step
// reports across reads of its log (KeepStepReports): the longest
// slow-rank window (admission refuses a longer one).
const StepHistory = runtimes.MaxSlowRankAfter

// stepSpacing is, by a report's age, the least time kept between two step
// reports: dense for the last minutes, sparser further back.
var stepSpacing = []struct{ upTo, every time.Duration }{
	{2 * time.Minute, 2 * time.Second},
	{10 * time.Minute, 10 * time.Second},
	{StepHistory, time.Minute},
}

// KeepStepReports is what the manager keeps of a Launcher's step reports
// after a read of its log: the reports kept from earlier reads (oldest
// first) that came before the first of this read's (fresh), then fresh;
// none older than StepHistory; and, newest first, one report per 2 s of
// the last 2 minutes, per 10 s until 10 minutes, per minute beyond. One
// read holds only the log's last lines, which a job that reports many
// times a second fills in seconds: without the reports of earlier reads
// no window would be covered. The spacing bounds what a job that reports
// that often costs (about 220 reports at most).
func KeepStepReports(kept, fresh []StepReport, now time.Time) []StepReport {
	all := make([]StepReport, 0, len(kept)+len(fresh))
	for _, r := range kept {
		if len(fresh) == 0 || r.At.Before(fresh[0].At) {
			all = append(all, r)
		}
	}
	all = append(all, fresh...)
	type slot struct {
		every time.Duration
		at    time.Time
	}
	seen := map[slot]bool{}
	var out []StepReport
	for i := len(all) - 1; i >= 0; i-- {
		r := all[i]
		age := now.Sub(r.At)
		if age > StepHistory {
			break
		}
		tier := 0 // the last tier's upTo is StepHistory, which age is within
		for age > stepSpacing[tier].upTo {
			tier++
		}
		every := stepSpacing[tier].every
		k := slot{every, r.At.Truncate(every)}
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, r)
	}
	slices.Reverse(out)
	return out
}

// FindSlowRank names the rank that was at least SlowFactor slower than
// the median of the other ranks in every report of the last window (at least
// slowMinReports of them, the first at least two thirds of window old, all
// with the same ranks); the slowest such rank, nil when none or window is
// 0.
func FindSlowRank(reports []StepReport, window time.Duration, now time.Time) *SlowRank {
	if window <= 0 {
		return nil
	}
	var in []StepReport
	for _, r := range reports {
		if !r.At.Before(now.Add(-window)) && !r.At.After(now) {
			in = append(in, r)
		}
	}
	if len(in) < slowMinReports || now.Sub(in[0].At) < window*2/3 {
		return nil
	}
	n := len(in[0].Seconds)
	if n < 2 {
		return nil
	}
	for _, r := range in {
		if len(r.Seconds) != n {
			return nil
		}
	}
	var best *SlowRank
	for rank := 0; rank < n; rank++ {
		mine := make([]float64, len(in))
		others := make([]float64, len(in))
		slow := true
		for i, r := range in {
			rest := append(append([]float64(nil), r.Seconds[:rank]...), r.Seconds[rank+1:]...)
			mine[i], others[i] = r.Seconds[rank], progress.Median(rest)
			if others[i] <= 0 || mine[i] < SlowFactor*others[i] {
				slow = false
				break
			}
		}
		if !slow {
			continue
		}
		s := SlowRank{Rank: rank, Seconds: progress.Median(mine), Median: progress.Median(others), Since: in[0].At, Reports: len(in)}
		s.Ratio = s.Seconds / s.Median
		if best == nil || s.Ratio > best.Ratio {
			best = &s
		}
	}
	return best
}

// slowRank explains a running job whose rank stays slower than the
// others: the rank, its Worker and node, by how much and for how long,
// and what differs where it runs (its Worker's CPU against the others',
// the node's other pods, how full the node is), with the next steps
// ranked by what was found.
func slowRank(in Input) (message string, next []api.Step, who *api.PodRef, ok bool) {
	sr := in.SlowRank
	if sr == nil {
		return "", nil, nil, false
	}
	r := strconv.Itoa(sr.Rank)
	ref := rankRef(in, r)
	var pod *corev1.Pod
	if ref != nil {
		pod = workerPod(in.Workers, int(ref.Index))
	}
	where := rankWorker(in, r)
	if pod != nil && pod.Spec.NodeName != "" {
		where += " on node " + pod.Spec.NodeName
	}
	msg := fmt.Sprintf("Rank %s (%s) takes %s per step, %.1f× the other ranks' median of %s, in each of the %d progress reports checked since %s: in synchronous training every rank waits for it at each step.",
		r, where, progress.StepSeconds(sr.Seconds), sr.Ratio, progress.StepSeconds(sr.Median), sr.Reports, sr.Since.UTC().Format("15:04:05 MST"))
	diffs, cpuLow, busy := differences(in, pod)
	if len(diffs) > 0 {
		msg += " What differs there: " + strings.Join(diffs, "; ") + "."
	} else {
		msg += " Its Worker asks for what the others ask for, on a node like theirs: look at what else runs there."
	}
	steps := []api.Step{}
	if cpuLow {
		steps = append(steps, stepf("Give every Worker the same CPU: run it again with one Worker size for all (`%s` with --cpu), and check that nothing resized its pod; `kubectl mpijob top` on the job shows it at its CPU limit.", cli("clone")))
	}
	if busy {
		steps = append(steps, step("Move it off the busy node: cordon the node (`kubectl cordon NODE`, an administrator) and run the job again from its last checkpoint; a job that saves checkpoints loses little."))
	}
	steps = append(steps,
		step("See what the slow rank does that the others do not: `kubectl mpijob top` on the job (CPU and memory of each Worker now) and `kubectl mpijob stacks` on the job (where each rank is)."),
		step("If the rank has more work than the others (an uneven split of the data), give each rank the same share."))
	return msg, ranked(steps...), ref, true
}

// workerPod is the job's Worker pod of index i.
func workerPod(workers []corev1.Pod, i int) *corev1.Pod {
	for k := range workers {
		if idx, ok := workers[k].Labels[completionIndexLabel]; ok && idx == strconv.Itoa(i) {
			return &workers[k]
		}
	}
	return nil
}

// differences says what differs for pod (the slow rank's Worker) from the
// job's other Workers: a lower CPU limit or request (cpuLow), and on its
// node, other jobs' pods or a node nearly full (busy).
func differences(in Input, pod *corev1.Pod) (diffs []string, cpuLow, busy bool) {
	if pod == nil {
		return nil, false, false
	}
	mine := nodeCPU(pod)
	var others []resource.Quantity
	for i := range in.Workers {
		w := &in.Workers[i]
		if w.Name == pod.Name {
			continue
		}
		others = append(others, nodeCPU(w))
	}
	if len(others) > 0 && !mine.IsZero() {
		lower := true
		for _, o := range others {
			if o.IsZero() || mine.Cmp(o) >= 0 {
				lower = false
			}
		}
		if lower {
			cpuLow = true
			diffs = append(diffs, fmt.Sprintf("its Worker may use %s CPU, the others %s", mine.String(), others[0].String()))
		}
	}
	for _, n := range in.Nodes {
		if n.Name != pod.Spec.NodeName {
			continue
		}
		free, alloc := n.Free[corev1.ResourceCPU], allocatableCPU(in.AllNodes, n.Name)
		if alloc.IsZero() {
			continue
		}
		if share := free.AsApproximateFloat64() / alloc.AsApproximateFloat64(); share < 0.1 {
			busy = true
			diffs = append(diffs, fmt.Sprintf("node %s has %.0f%% of its CPU unrequested", n.Name, math.Max(0, share*100)))
		}
	}
	return diffs, cpuLow, busy
}

// allocatableCPU is node name's allocatable CPU (zero when unknown).
func allocatableCPU(nodes []corev1.Node, name string) resource.Quantity {
	for i := range nodes {
		if nodes[i].Name == name {
			return nodes[i].Status.Allocatable[corev1.ResourceCPU]
		}
	}
	return resource.Quantity{}
}

// nodeCPU is the CPU the pod's node container may use: its limit, else
// its request (zero when neither is set).
func nodeCPU(p *corev1.Pod) resource.Quantity {
	for _, c := range p.Spec.Containers {
		if c.Name != api.NodeContainer {
			continue
		}
		if q, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
			return q
		}
		if q, ok := c.Resources.Requests[corev1.ResourceCPU]; ok {
			return q
		}
	}
	return resource.Quantity{}
}
