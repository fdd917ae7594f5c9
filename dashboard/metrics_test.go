package dashboard

import (
	"math"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/model"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mpijob/mpijob/pkg/api"
)

// The pod pattern matches the job's Launcher and Workers and no pod of a
// job whose name merely starts like it.
func TestPodSelector(t *testing.T) {
	sel := podSelector("team-a", "train.v1")
	m := regexp.MustCompile(`pod=~"(.*)"`).FindStringSubmatch(sel)
	if m == nil || !strings.HasPrefix(sel, `namespace="team-a",`) {
		t.Fatalf("selector %s has no namespace and pod matcher", sel)
	}
	re := regexp.MustCompile(strings.ReplaceAll(m[1], `\\`, `\`))
	cases := map[string]bool{
		"train.v1-launcher-0-0-abcde":          true,
		"train.v1-node-0-3-x7k2p":              true,
		"train.v1-node-0-12-x7k2p":             true,
		"trainxv1-node-0-0-abcde":              false, // the dot is literal
		"train.v1-node-0-0-node-0-0-abcde":     false, // a job named train.v1-node-0-0
		"train.v1-extra-launcher-0-0-abcde":    false,
		"other-train.v1-launcher-0-0-abcde":    false,
		"train.v1-launcher-0-0-abcde-x":        false,
		"train.v1-runtime-test-node-0-0-abcde": false,
	}
	for pod, want := range cases {
		if got := re.MatchString(pod); got != want {
			t.Errorf("pod %s: match %v, want %v", pod, got, want)
		}
	}
	if got := roleOfPod("train.v1", "train.v1-launcher-0-0-abcde"); got != api.RoleLauncher {
		t.Errorf("launcher pod role %s", got)
	}
	if got := roleOfPod("train.v1", "train.v1-node-0-1-abcde"); got != api.RoleWorker {
		t.Errorf("worker pod role %s", got)
	}
}

func TestMetricsRange(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { x := t0.Add(d); return &x }
	cases := map[string]struct {
		finished   *time.Time
		now        time.Time
		start, end time.Time
		step       time.Duration
	}{
		"a running job ends now; short jobs at the scrape interval": {nil, t0.Add(time.Minute), t0, t0.Add(time.Minute), 5 * time.Second},
		"a finished job ends three scrapes after it finished":       {at(time.Minute), t0.Add(time.Hour), t0, t0.Add(75 * time.Second), 5 * time.Second},
		"a job that just finished ends now":                         {at(time.Minute), t0.Add(62 * time.Second), t0, t0.Add(62 * time.Second), 5 * time.Second},
		"a long job has about 240 points":                           {at(4 * time.Hour), t0.Add(5 * time.Hour), t0, t0.Add(4*time.Hour + 15*time.Second), 61 * time.Second},
		"a job created this instant still has a range":              {nil, t0, t0, t0.Add(5 * time.Second), 5 * time.Second},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			start, end, step := metricsRange(t0, tc.finished, tc.now, 5*time.Second)
			if !start.Equal(tc.start) || !end.Equal(tc.end) || step != tc.step {
				t.Errorf("got %s..%s step %s, want %s..%s step %s", start, end, step, tc.start, tc.end, tc.step)
			}
		})
	}
	if got := rateWindow(5*time.Second, 5*time.Second); got != "20s" {
		t.Errorf("rate window of a short job %s, want 20s", got)
	}
	if got := rateWindow(61*time.Second, 5*time.Second); got != "61s" {
		t.Errorf("rate window of a long job %s, want 61s", got)
	}
}

func TestPhaseBands(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	series := func(phase string, from, to int) *model.SampleStream {
		s := &model.SampleStream{Metric: model.Metric{"phase": model.LabelValue(phase)}}
		for i := from; i <= to; i += 5 {
			s.Values = append(s.Values, model.SamplePair{Timestamp: model.TimeFromUnixNano(t0.Add(time.Duration(i) * time.Second).UnixNano()), Value: 1})
		}
		return s
	}
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	got := phaseBands(model.Matrix{series("Running", 10, 40), series("Pending", 0, 5), series("Succeeded", 45, 60)}, at(62))
	want := []PhaseBand{
		{Phase: api.PhasePending, Start: at(0), End: at(10)},
		{Phase: api.PhaseRunning, Start: at(10), End: at(45)},
		{Phase: api.PhaseSucceeded, Start: at(45), End: at(62)},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("bands (-want +got):\n%s", d)
	}
	if got := phaseBands(nil, at(1)); len(got) != 0 {
		t.Errorf("no samples gave bands %v", got)
	}
}

func TestStatusBands(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	mt := func(s int) *metav1.Time { x := metav1.NewTime(at(s)); return &x }
	cases := map[string]struct {
		st   api.Status
		want []PhaseBand
	}{
		"queued, never started": {api.Status{Phase: api.PhaseQueued}, []PhaseBand{{api.PhaseQueued, at(0), at(100)}}},
		"running":               {api.Status{Phase: api.PhaseRunning, StartTime: mt(10)}, []PhaseBand{{api.PhasePending, at(0), at(10)}, {api.PhaseRunning, at(10), at(100)}}},
		"failed after running": {api.Status{Phase: api.PhaseFailed, StartTime: mt(10), CompletionTime: mt(60)},
			[]PhaseBand{{api.PhasePending, at(0), at(10)}, {api.PhaseRunning, at(10), at(60)}, {api.PhaseFailed, at(60), at(100)}}},
		"failed before starting": {api.Status{Phase: api.PhaseFailed, CompletionTime: mt(30)},
			[]PhaseBand{{api.PhasePending, at(0), at(30)}, {api.PhaseFailed, at(30), at(100)}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, statusBands(t0, tc.st, at(100))); d != "" {
				t.Errorf("bands (-want +got):\n%s", d)
			}
		})
	}
}

func TestMatrixSeries(t *testing.T) {
	m := model.Matrix{
		{Metric: model.Metric{"pod": "j-node-0-1-bbbbb"}, Values: []model.SamplePair{{Timestamp: 2000, Value: 0.5}}},
		{Metric: model.Metric{"pod": "j-launcher-0-0-aaaaa"}, Values: []model.SamplePair{{Timestamp: 1000, Value: 0.1}, {Timestamp: 2000, Value: model.SampleValue(nan())}}},
		{Metric: model.Metric{"pod": "j-node-0-0-ccccc"}, Values: []model.SamplePair{{Timestamp: 3000, Value: 2}}},
	}
	want := []MetricSeries{
		{Metric: "cpu", Pod: "j-launcher-0-0-aaaaa", Role: api.RoleLauncher, Points: [][2]float64{{1, 0.1}}},
		{Metric: "cpu", Pod: "j-node-0-0-ccccc", Role: api.RoleWorker, Points: [][2]float64{{3, 2}}},
		{Metric: "cpu", Pod: "j-node-0-1-bbbbb", Role: api.RoleWorker, Points: [][2]float64{{2, 0.5}}},
	}
	if d := cmp.Diff(want, matrixSeries("cpu", "j", m)); d != "" {
		t.Errorf("series (-want +got):\n%s", d)
	}
}

func nan() float64 { return math.NaN() }

// A job that ended less than a scrape ago ends in its final phase, from
// the status's completion time; bands that already end so are kept.
func TestEndWith(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	done := metav1.NewTime(at(50))
	running := []PhaseBand{{api.PhasePending, at(0), at(10)}, {api.PhaseRunning, at(10), at(60)}}
	got := endWith(append([]PhaseBand(nil), running...), api.Status{Phase: api.PhaseSucceeded, CompletionTime: &done}, at(60))
	want := []PhaseBand{{api.PhasePending, at(0), at(10)}, {api.PhaseRunning, at(10), at(50)}, {api.PhaseSucceeded, at(50), at(60)}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("bands (-want +got):\n%s", d)
	}
	ended := []PhaseBand{{api.PhaseRunning, at(10), at(50)}, {api.PhaseSucceeded, at(50), at(60)}}
	if d := cmp.Diff(ended, endWith(append([]PhaseBand(nil), ended...), api.Status{Phase: api.PhaseSucceeded, CompletionTime: &done}, at(60))); d != "" {
		t.Errorf("bands already ending Succeeded changed (-want +got):\n%s", d)
	}
	if d := cmp.Diff(running, endWith(append([]PhaseBand(nil), running...), api.Status{Phase: api.PhaseRunning}, at(60))); d != "" {
		t.Errorf("a running job's bands changed (-want +got):\n%s", d)
	}
}
