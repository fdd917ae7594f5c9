package diagnose

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/progress"
)

// A rank is named slow only when it was SlowFactor slower than the median
// rank in every report of the window, and the window is covered.
func TestFindSlowRank(t *testing.T) {
	at := func(ago time.Duration, s ...float64) StepReport { return StepReport{At: t0.Add(-ago), Seconds: s} }
	window := 3 * time.Minute
	cases := map[string]struct {
		reports []StepReport
		want    *SlowRank
	}{
		"rank 2 slow in every report": {
			reports: []StepReport{at(4*time.Minute, 0.2, 0.2, 0.2, 0.2), at(150*time.Second, 0.2, 0.21, 0.6, 0.2), at(90*time.Second, 0.2, 0.2, 0.62, 0.22), at(30*time.Second, 0.21, 0.2, 0.64, 0.2)},
			want:    &SlowRank{Rank: 2, Seconds: 0.62, Median: 0.2, Ratio: 3.1, Since: t0.Add(-150 * time.Second), Reports: 3},
		},
		"slow once only": {
			reports: []StepReport{at(150*time.Second, 0.2, 0.21, 0.6, 0.2), at(90*time.Second, 0.2, 0.2, 0.25, 0.22), at(30*time.Second, 0.21, 0.2, 0.64, 0.2)},
		},
		"not long enough yet": {
			reports: []StepReport{at(100*time.Second, 0.2, 0.21, 0.6, 0.2), at(60*time.Second, 0.2, 0.2, 0.62, 0.22), at(30*time.Second, 0.21, 0.2, 0.64, 0.2)},
		},
		"too few reports": {
			reports: []StepReport{at(170*time.Second, 0.2, 0.21, 0.6, 0.2), at(30*time.Second, 0.21, 0.2, 0.64, 0.2)},
		},
		"ranks that changed in number": {
			reports: []StepReport{at(150*time.Second, 0.2, 0.21, 0.6, 0.2), at(90*time.Second, 0.2, 0.62, 0.22), at(30*time.Second, 0.21, 0.2, 0.64, 0.2)},
		},
		"all equally slow": {
			reports: []StepReport{at(150*time.Second, 0.6, 0.6), at(90*time.Second, 0.6, 0.6), at(30*time.Second, 0.6, 0.6)},
		},
		"two ranks, one slow": {
			reports: []StepReport{at(150*time.Second, 0.2, 0.9), at(90*time.Second, 0.21, 0.95), at(30*time.Second, 0.2, 1)},
			want:    &SlowRank{Rank: 1, Seconds: 0.95, Median: 0.2, Ratio: 4.75, Since: t0.Add(-150 * time.Second), Reports: 3},
		},
		"two slow: the slower": {
			reports: []StepReport{at(150*time.Second, 0.2, 0.5, 0.8, 0.2, 0.2), at(90*time.Second, 0.2, 0.5, 0.8, 0.2, 0.2), at(30*time.Second, 0.2, 0.5, 0.8, 0.2, 0.2)},
			want:    &SlowRank{Rank: 2, Seconds: 0.8, Median: 0.2, Ratio: 4, Since: t0.Add(-150 * time.Second), Reports: 3},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := FindSlowRank(tc.reports, window, t0)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
				t.Errorf("FindSlowRank (-want +got):\n%s", diff)
			}
		})
	}
	if FindSlowRank(cases["rank 2 slow in every report"].reports, 0, t0) != nil {
		t.Error("a window of 0 (off) names a rank")
	}
}

// The finding names the rank, its Worker and node, and what differs
// there: a Worker resized to less CPU than the others.
func TestSlowRankSaysWhatDiffers(t *testing.T) {
	worker := func(i int, cpu, node string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "w" + cpu, Labels: map[string]string{completionIndexLabel: []string{"0", "1"}[i]}},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: api.NodeContainer,
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}}}
	}
	in := Input{TrainJob: job(2).Obj(), SlotsPerWorker: 2, Workers: []corev1.Pod{worker(0, "1", "n1"), worker(1, "250m", "n2")}, Now: t0,
		SlowRank: &SlowRank{Rank: 3, Seconds: 0.8, Median: 0.2, Ratio: 4, Since: t0.Add(-5 * time.Minute), Reports: 6},
		Nodes:    []NodeFree{{Name: "n2", Free: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}},
		AllNodes: []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n2"}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}}}}
	msg, next, who, ok := slowRank(in)
	if !ok || who == nil || who.Index != 1 {
		t.Fatalf("slowRank: ok %v, who %+v", ok, who)
	}
	for _, want := range []string{"Rank 3 (Worker 1 on node n2) takes 0.80 s per step, 4.0× the other ranks' median of 0.20 s, in each of the 6 progress reports checked since 03:55:00 UTC",
		"its Worker may use 250m CPU, the others 1", "node n2 has 5% of its CPU unrequested"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q: %s", want, msg)
		}
	}
	if len(next) < 3 || !strings.Contains(next[0].Text, "Give every Worker the same CPU") || !strings.Contains(next[1].Text, "busy node") {
		t.Errorf("next steps: %+v", next)
	}
	// Nothing differs: it says so.
	in.Workers, in.Nodes = []corev1.Pod{worker(0, "1", "n1"), worker(1, "1", "n2")}, nil
	if msg, _, _, _ := slowRank(in); !strings.Contains(msg, "asks for what the others ask for") {
		t.Errorf("with nothing different: %s", msg)
	}
}

// The Launcher's log's reports with step times reach the finding.
func TestObserveReadsStepTimes(t *testing.T) {
	log := "2026-11-22T03:57:00Z [1,0]<stdout>:" + progress.Prefix + `{"epoch": 1, "rank_step_seconds": [0.2, 0.6]}` + "\n" +
		"2026-11-22T03:58:00Z [1,0]<stdout>:" + progress.Prefix + `{"epoch": 2}` + "\n" +
		"2026-11-22T03:59:00Z [1,0]<stdout>:" + progress.Prefix + `{"epoch": 3, "rank_step_seconds": [0.21, 0.62]}` + "\n"
	o := Observe(log, t0, 0)
	want := []StepReport{{At: t0.Add(-3 * time.Minute), Seconds: []float64{0.2, 0.6}}, {At: t0.Add(-time.Minute), Seconds: []float64{0.21, 0.62}}}
	if diff := cmp.Diff(want, o.Steps); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
}

// The reports of earlier reads are kept before this read's, thinned by
// age and dropped past StepHistory.
func TestKeepStepReports(t *testing.T) {
	at := func(ago time.Duration) StepReport {
		return StepReport{At: t0.Add(-ago), Seconds: []float64{0.1, float64(ago) / float64(time.Second)}}
	}
	ages := func(rs []StepReport) []time.Duration {
		var out []time.Duration
		for _, r := range rs {
			out = append(out, t0.Sub(r.At))
		}
		return out
	}
	// Every 200 ms over the last 20 s: what one read of 200 lines holds
	// from a job that reports 5 times a second (t0 is on a whole minute).
	var fast []StepReport
	for ago := 20 * time.Second; ago >= 0; ago -= 200 * time.Millisecond {
		fast = append(fast, at(ago))
	}
	cases := map[string]struct {
		kept, fresh []StepReport
		want        []time.Duration
	}{
		"the first read: the newest of each 2 s": {
			fresh: fast,
			want: []time.Duration{18200 * time.Millisecond, 16200 * time.Millisecond, 14200 * time.Millisecond, 12200 * time.Millisecond, 10200 * time.Millisecond,
				8200 * time.Millisecond, 6200 * time.Millisecond, 4200 * time.Millisecond, 2200 * time.Millisecond, 200 * time.Millisecond, 0},
		},
		"earlier reads' reports come first; the overlap is this read's": {
			kept:  []StepReport{at(50 * time.Second), at(30 * time.Second), at(10 * time.Second)},
			fresh: []StepReport{at(20 * time.Second), at(5 * time.Second)},
			want:  []time.Duration{50 * time.Second, 30 * time.Second, 20 * time.Second, 5 * time.Second},
		},
		"older reports sparser: the newest of each 10 s, then of each minute": {
			kept:  []StepReport{at(11*time.Minute + 30*time.Second), at(11*time.Minute + 10*time.Second), at(5*time.Minute + 5*time.Second), at(5*time.Minute + 2*time.Second), at(3 * time.Minute)},
			fresh: []StepReport{at(time.Second)},
			want:  []time.Duration{11*time.Minute + 10*time.Second, 5*time.Minute + 2*time.Second, 3 * time.Minute, time.Second},
		},
		"none older than StepHistory": {
			kept:  []StepReport{at(StepHistory + time.Minute), at(StepHistory - time.Minute)},
			fresh: []StepReport{at(0)},
			want:  []time.Duration{StepHistory - time.Minute, 0},
		},
		"no new reports: the kept ones": {
			kept: []StepReport{at(30 * time.Second), at(10 * time.Second)},
			want: []time.Duration{30 * time.Second, 10 * time.Second},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ages(KeepStepReports(tc.kept, tc.fresh, t0))); diff != "" {
				t.Errorf("kept reports' ages (-want +got):\n%s", diff)
			}
		})
	}
	// A job that reported 5 times a second for the 2 hours kept: bounded.
	var all []StepReport
	for ago := StepHistory; ago >= 0; ago -= 200 * time.Millisecond {
		all = append(all, at(ago))
	}
	if n := len(KeepStepReports(nil, all, t0)); n > 230 {
		t.Errorf("kept %d reports of a job that reports 5 times a second, want at most about 220", n)
	}
}
