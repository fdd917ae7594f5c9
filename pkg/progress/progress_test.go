package progress

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"
)

type vectors struct {
	Parse []struct {
		Name   string  `json:"name"`
		Line   string  `json:"line"`
		Report *Report `json:"report"`
	} `json:"parse"`
	Percent []struct {
		Report  Report `json:"report"`
		Percent *int32 `json:"percent"`
	} `json:"percent"`
}

func load(t *testing.T) vectors {
	t.Helper()
	b, err := os.ReadFile("testdata/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var v vectors
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestParseVectors(t *testing.T) {
	for _, tc := range load(t).Parse {
		t.Run(tc.Name, func(t *testing.T) {
			got, ok := Parse(tc.Line)
			if ok != (tc.Report != nil) {
				t.Fatalf("Parse(%q) ok = %v, want %v", tc.Line, ok, tc.Report != nil)
			}
			if tc.Report != nil {
				if diff := cmp.Diff(*tc.Report, got); diff != "" {
					t.Errorf("Parse(%q) (-want,+got):\n%s", tc.Line, diff)
				}
			}
		})
	}
}

func TestPercentVectors(t *testing.T) {
	for i, tc := range load(t).Percent {
		if diff := cmp.Diff(tc.Percent, tc.Report.Percent()); diff != "" {
			t.Errorf("case %d (-want,+got):\n%s", i, diff)
		}
	}
}

func TestAllReadsTimestampsAndSkipsOtherLines(t *testing.T) {
	log := "2026-11-23T18:00:00.5Z rank 0 of 4 on w0\n" +
		"2026-11-23T18:00:01Z MPIJOB_PROGRESS {\"epoch\": 1, \"total_epochs\": 2, \"loss\": 1.5}\n" +
		"garbage MPIJOB_PROGRESS {\n" +
		"MPIJOB_PROGRESS {\"epoch\": 2, \"total_epochs\": 2, \"loss\": 0.5}\n"
	got := All(log)
	want := []Point{
		{Time: time.Date(2026, 11, 23, 18, 0, 1, 0, time.UTC), Report: Report{Epoch: ptr.To(1.0), TotalEpochs: ptr.To(2.0), Loss: ptr.To(1.5)}},
		{Report: Report{Epoch: ptr.To(2.0), TotalEpochs: ptr.To(2.0), Loss: ptr.To(0.5)}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("All (-want,+got):\n%s", diff)
	}
}

func TestStatus(t *testing.T) {
	now := time.Date(2026, 11, 23, 18, 0, 0, 0, time.UTC)
	p := Point{Report: Report{Epoch: ptr.To(9.0), TotalEpochs: ptr.To(20.0), Loss: ptr.To(0.25), Accuracy: ptr.To(0.9), ETASeconds: ptr.To(3665.4),
		Metrics: map[string]float64{"lr": 0.1}}}
	cases := map[string]struct {
		finished bool
		want     TrainerStatus
		short    string
	}{
		"running": {want: TrainerStatus{
			ProgressPercentage: ptr.To[int32](45), EstimatedRemainingSeconds: ptr.To[int32](3665), EstimatedRemainingTimeSummary: "1 hour 1 minute",
			CurrentEpoch: ptr.To(9.0), TotalEpochs: ptr.To[int64](20), TrainMetrics: map[string]float64{"loss": 0.25, "accuracy": 0.9, "lr": 0.1},
			LastUpdatedTime: "2026-11-23T18:00:00Z",
		}, short: "45% epoch 9/20"},
		"finished": {finished: true, want: TrainerStatus{
			ProgressPercentage: ptr.To[int32](100), EstimatedRemainingSeconds: ptr.To[int32](0), EstimatedRemainingTimeSummary: "complete",
			CurrentEpoch: ptr.To(9.0), TotalEpochs: ptr.To[int64](20), TrainMetrics: map[string]float64{"loss": 0.25, "accuracy": 0.9, "lr": 0.1},
			LastUpdatedTime: "2026-11-23T18:00:00Z",
		}, short: "100% epoch 9/20"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Status(p, now, tc.finished)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Status (-want,+got):\n%s", diff)
			}
			if s := got.Short(); s != tc.short {
				t.Errorf("Short() = %q, want %q", s, tc.short)
			}
			if diff := cmp.Diff([]string{"loss", "accuracy", "lr"}, got.Metrics()); diff != "" {
				t.Errorf("Metrics() (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestSummary(t *testing.T) {
	cases := map[string]struct {
		d    time.Duration
		want string
	}{
		"zero":          {0, "complete"},
		"seconds":       {40 * time.Second, "40 seconds"},
		"one minute":    {61 * time.Second, "1 minute"},
		"hours only":    {2 * time.Hour, "2 hours"},
		"hour and mins": {time.Hour + 5*time.Minute, "1 hour 5 minutes"},
		"one second":    {time.Second, "1 second"},
	}
	for name, tc := range cases {
		if got := Summary(tc.d); got != tc.want {
			t.Errorf("%s: Summary(%v) = %q, want %q", name, tc.d, got, tc.want)
		}
	}
}

func TestReadRefusesGarbage(t *testing.T) {
	if _, ok := Read(map[string]string{Annotation: "{not json"}); ok {
		t.Error("Read accepted an annotation that is not JSON")
	}
	if _, ok := Read(nil); ok {
		t.Error("Read found a status without the annotation")
	}
	s, ok := Read(map[string]string{Annotation: `{"progressPercentage": 45, "currentEpoch": 9, "totalEpochs": 20}`})
	if !ok || s.Short() != "45% epoch 9/20" {
		t.Errorf("Read = %+v, %v", s, ok)
	}
}

func TestStepsOf(t *testing.T) {
	cases := map[string]struct {
		seconds []float64
		want    Steps
		ok      bool
	}{
		"none":       {},
		"odd ranks":  {seconds: []float64{0.2, 0.62, 0.3}, want: Steps{Ranks: 3, Median: 0.3, Slowest: 1, SlowestSeconds: 0.62, Others: 0.25}, ok: true},
		"even ranks": {seconds: []float64{0.2, 0.2, 0.3, 0.6}, want: Steps{Ranks: 4, Median: 0.25, Slowest: 3, SlowestSeconds: 0.6, Others: 0.2}, ok: true},
		"two ranks":  {seconds: []float64{0.125, 0.625}, want: Steps{Ranks: 2, Median: 0.375, Slowest: 1, SlowestSeconds: 0.625, Others: 0.125}, ok: true},
		"one rank":   {seconds: []float64{0.4}, want: Steps{Ranks: 1, Median: 0.4, Slowest: 0, SlowestSeconds: 0.4}, ok: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := StepsOf(Report{RankStepSeconds: tc.seconds})
			if ok != tc.ok || got != tc.want {
				t.Errorf("StepsOf = %+v %v, want %+v %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestStepSeconds(t *testing.T) {
	for s, want := range map[float64]string{0.00035: "0.35 ms", 0.012: "12 ms", 0.62: "0.62 s", 1.5: "1.50 s"} {
		if got := StepSeconds(s); got != want {
			t.Errorf("StepSeconds(%v) = %q, want %q", s, got, want)
		}
	}
}
