package progress

import (
	"math"
	"strconv"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Trainer's own progress, status.trainerStatus (its TrainJobStatus
// feature): a training pod reports it to Trainer's runtime status server.
// mpijob and Trainer agree on a job's progress both ways:
//   - mpijob-manager writes the report it reads from the Launcher's log to
//     status.trainerStatus too (ToTrainer), so Trainer's API, kubectl get
//     trainjob -o yaml and Kubeflow's SDK show what mpijob's interfaces do;
//   - a job that reports only to Trainer's status server (no
//     MPIJOB_PROGRESS line) is shown by mpijob's interfaces from
//     status.trainerStatus (Of).

// ToTrainer is s in the shape of Trainer's status.trainerStatus: the
// percentage, the time left, and the metrics as names and values, loss
// and accuracy first.
func (s TrainerStatus) ToTrainer(now time.Time) *trainer.TrainerStatus {
	t := &trainer.TrainerStatus{
		ProgressPercentage:        s.ProgressPercentage,
		EstimatedRemainingSeconds: s.EstimatedRemainingSeconds,
		LastUpdatedTime:           metav1.NewTime(now.UTC().Truncate(time.Second)),
	}
	for _, name := range s.Metrics() {
		t.Metrics = append(t.Metrics, trainer.Metric{Name: name, Value: strconv.FormatFloat(s.TrainMetrics[name], 'g', -1, 64)})
	}
	return t
}

// FromTrainer reads Trainer's status.trainerStatus as mpijob's progress,
// within the bounds of a report from a log: a percentage of 0 to 100, a
// time left that an int32 holds, at most MaxMetrics metrics with names
// that MetricName allows and numeric values (others are left out, as a
// log's are). ok is false when nothing usable is left.
func FromTrainer(t *trainer.TrainerStatus) (TrainerStatus, bool) {
	if t == nil {
		return TrainerStatus{}, false
	}
	var s TrainerStatus
	if p := t.ProgressPercentage; p != nil && *p >= 0 && *p <= 100 {
		s.ProgressPercentage = p
	}
	if e := t.EstimatedRemainingSeconds; e != nil && *e >= 0 {
		s.EstimatedRemainingSeconds = e
		s.EstimatedRemainingTimeSummary = Summary(time.Duration(*e) * time.Second)
	}
	values := map[string]float64{}
	for _, m := range t.Metrics {
		// A value that is no finite number is left out, and an earlier
		// one of the name kept.
		if v, err := strconv.ParseFloat(m.Value, 64); err == nil && !math.IsNaN(v) && !math.IsInf(v, 0) {
			values[m.Name] = v
		}
	}
	s.TrainMetrics = keptMetrics(values)
	if s.ProgressPercentage == nil && s.EstimatedRemainingSeconds == nil && len(s.TrainMetrics) == 0 {
		// Nothing usable is left: no progress, as no report at all.
		return TrainerStatus{}, false
	}
	if !t.LastUpdatedTime.IsZero() {
		s.LastUpdatedTime = t.LastUpdatedTime.UTC().Format(time.RFC3339)
	}
	return s, true
}

// Of is a job's progress: the report mpijob-manager read from the
// Launcher's log (the annotation), else what the job reported to
// Trainer's runtime status server (status.trainerStatus). ok is false
// when the job reported neither.
func Of(tj *trainer.TrainJob) (TrainerStatus, bool) {
	if s, ok := Read(tj.Annotations); ok {
		return s, true
	}
	return FromTrainer(tj.Status.TrainerStatus)
}

// SameForTrainer says whether s and o agree on what Trainer's
// status.trainerStatus holds (the percentage, the time left and the
// metrics), whatever their epochs, steps and times.
func (s TrainerStatus) SameForTrainer(o TrainerStatus) bool {
	return TrainerSame(s.ToTrainer(time.Time{}), o.ToTrainer(time.Time{}))
}

// TrainerSame says whether two of Trainer's status.trainerStatus hold the
// same progress, whatever their times; a nil one holds none.
func TrainerSame(a, b *trainer.TrainerStatus) bool {
	if a == nil || b == nil {
		return a == b
	}
	x, y := *a, *b
	x.LastUpdatedTime, y.LastUpdatedTime = metav1.Time{}, metav1.Time{}
	return equality.Semantic.DeepEqual(x, y)
}
