package jobview

import (
	"encoding/json"
	"os"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mpijob/mpijob/pkg/api"
)

// The vectors the SDK's get_logs is tested with too.
func TestLogFromVectors(t *testing.T) {
	raw, err := os.ReadFile("testdata/log-sources.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Vectors []struct {
			Name  string
			Where LogWhere
			From  LogSource
		}
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Vectors) < 8 {
		t.Fatalf("%d vectors", len(f.Vectors))
	}
	for _, tc := range f.Vectors {
		t.Run(tc.Name, func(t *testing.T) {
			if got := LogFrom(tc.Where); got != tc.From {
				t.Errorf("LogFrom(%+v) = %s, want %s", tc.Where, got, tc.From)
			}
		})
	}
}

// A job Trainer has marked Failed or Complete is finished for the log plan
// even while the manager's status still says Running: JobSet removes a
// failed job's pods at once, and the Launcher's lines are then the store's.
func TestLogJobOfTakesTrainersCondition(t *testing.T) {
	running := api.Status{Phase: api.PhaseRunning, WorkersTotal: 2}
	for name, tc := range map[string]struct {
		conds []metav1.Condition
		want  bool
	}{
		"running":                   {want: false},
		"Trainer says Failed first": {conds: []metav1.Condition{{Type: trainer.TrainJobFailed, Status: metav1.ConditionTrue}}, want: true},
		"Trainer says Complete":     {conds: []metav1.Condition{{Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue}}, want: true},
		"a condition not true":      {conds: []metav1.Condition{{Type: trainer.TrainJobFailed, Status: metav1.ConditionFalse}}, want: false},
	} {
		t.Run(name, func(t *testing.T) {
			tj := &trainer.TrainJob{Status: trainer.TrainJobStatus{Conditions: tc.conds}}
			job := LogJobOf(tj, running)
			if job.Finished != tc.want {
				t.Errorf("Finished = %v, want %v", job.Finished, tc.want)
			}
			job.Store = true
			plan := PlanLogs(LogRequest{Target: "launcher"}, job)
			if tc.want && (plan.Missing != "" || len(plan.Reads) != 1 || plan.Reads[0].From != LogStore) {
				t.Errorf("a finished job whose Launcher is gone: plan %+v, want the Launcher from the store", plan)
			}
		})
	}
}
