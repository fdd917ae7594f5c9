package progress

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// trainerVector is one case of testdata/trainer-status.json, which the
// SDK's tests read too.
type trainerVector struct {
	Name string                 `json:"name"`
	In   *trainer.TrainerStatus `json:"in"`
	Want *struct {
		Percent    *int32             `json:"percent"`
		ETASeconds *int32             `json:"eta_seconds"`
		ETA        string             `json:"eta"`
		Metrics    map[string]float64 `json:"metrics"`
		Updated    string             `json:"updated"`
	} `json:"want"`
}

func TestFromTrainerVectors(t *testing.T) {
	b, err := os.ReadFile("testdata/trainer-status.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Vectors []trainerVector `json:"vectors"`
	}
	if err := json.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Vectors) == 0 {
		t.Fatal("no vectors")
	}
	for _, v := range file.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			got, ok := FromTrainer(v.In)
			if v.Want == nil {
				if ok {
					t.Fatalf("FromTrainer = %+v, want no progress", got)
				}
				return
			}
			if !ok {
				t.Fatal("FromTrainer: no progress, want some")
			}
			want := TrainerStatus{ProgressPercentage: v.Want.Percent, EstimatedRemainingSeconds: v.Want.ETASeconds,
				EstimatedRemainingTimeSummary: v.Want.ETA, LastUpdatedTime: v.Want.Updated}
			if len(v.Want.Metrics) > 0 {
				want.TrainMetrics = v.Want.Metrics
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("FromTrainer (-want +got):\n%s", diff)
			}
		})
	}
}

func TestToTrainerReadsBack(t *testing.T) {
	now := time.Date(2026, 11, 26, 22, 0, 0, 0, time.UTC)
	s := Status(Point{Report: Report{Epoch: ptr.To(9.0), TotalEpochs: ptr.To(20.0), Loss: ptr.To(0.31), Accuracy: ptr.To(0.91),
		ETASeconds: ptr.To(120.0), Metrics: map[string]float64{"lr": 0.001}}}, now, false)
	got := s.ToTrainer(now)
	want := &trainer.TrainerStatus{ProgressPercentage: ptr.To[int32](45), EstimatedRemainingSeconds: ptr.To[int32](120),
		Metrics:         []trainer.Metric{{Name: "loss", Value: "0.31"}, {Name: "accuracy", Value: "0.91"}, {Name: "lr", Value: "0.001"}},
		LastUpdatedTime: metav1.NewTime(now)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("ToTrainer (-want +got):\n%s", diff)
	}
	// Trainer's field read back is the same progress, less what Trainer's
	// shape has no place for (epochs and steps).
	back, ok := FromTrainer(got)
	if !ok {
		t.Fatal("no progress read back")
	}
	s.CurrentEpoch, s.TotalEpochs = nil, nil
	if diff := cmp.Diff(s, back); diff != "" {
		t.Fatalf("read back (-want +got):\n%s", diff)
	}
}

func TestOfPrefersTheLaunchersReport(t *testing.T) {
	tj := &trainer.TrainJob{}
	if _, ok := Of(tj); ok {
		t.Fatal("a job that reported nothing has progress")
	}
	tj.Status.TrainerStatus = &trainer.TrainerStatus{ProgressPercentage: ptr.To[int32](42)}
	if got, _ := Of(tj); got.Short() != "42%" {
		t.Fatalf("from Trainer's status: %q, want 42%%", got.Short())
	}
	tj.Annotations = map[string]string{Annotation: `{"progressPercentage": 45, "currentEpoch": 9, "totalEpochs": 20}`}
	if got, _ := Of(tj); got.Short() != "45% epoch 9/20" {
		t.Fatalf("with mpijob's report too: %q, want mpijob's", got.Short())
	}
}

func TestSameForTrainer(t *testing.T) {
	ours := TrainerStatus{ProgressPercentage: ptr.To[int32](45), EstimatedRemainingSeconds: ptr.To[int32](120),
		EstimatedRemainingTimeSummary: "2 minutes", CurrentEpoch: ptr.To(9.0), TotalEpochs: ptr.To[int64](20),
		TrainMetrics: map[string]float64{"loss": 0.31}, LastUpdatedTime: "2026-11-26T22:00:00Z"}
	back, _ := FromTrainer(ours.ToTrainer(time.Now()))
	if !ours.SameForTrainer(back) {
		t.Fatalf("mpijob's report and Trainer's copy of it differ: %+v, %+v", ours, back)
	}
	other := back
	other.ProgressPercentage = ptr.To[int32](50)
	if ours.SameForTrainer(other) {
		t.Fatal("a new percentage reads as the same")
	}
	other = back
	other.TrainMetrics = map[string]float64{"loss": 0.2}
	if ours.SameForTrainer(other) {
		t.Fatal("a new metric value reads as the same")
	}
}
