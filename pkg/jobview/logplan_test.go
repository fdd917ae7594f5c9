package jobview

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"k8s.io/utils/ptr"

	"github.com/mpijob/mpijob/pkg/api"
)

func TestPlanLogsVectors(t *testing.T) {
	type vectors struct {
		Vectors []struct {
			Name    string     `json:"name"`
			Request LogRequest `json:"request"`
			Job     LogJob     `json:"job"`
			Plan    LogPlan    `json:"plan"`
		} `json:"vectors"`
	}
	file := loadVectors[vectors](t, "testdata/log-plans.json", func(v vectors) int { return len(v.Vectors) }, 15)
	for _, v := range file.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			if diff := cmp.Diff(v.Plan, PlanLogs(v.Request, v.Job)); diff != "" {
				t.Errorf("PlanLogs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLogJobOf(t *testing.T) {
	spec := func(n int32) *trainer.TrainJob {
		return &trainer.TrainJob{Spec: trainer.TrainJobSpec{Trainer: &trainer.Trainer{NumNodes: ptr.To(n)}}}
	}
	cases := map[string]struct {
		tj   *trainer.TrainJob
		st   api.Status
		want LogJob
	}{
		"the spec says more":              {tj: spec(3), st: api.Status{WorkersTotal: 2}, want: LogJob{Workers: 3}},
		"the status says more":            {tj: spec(2), st: api.Status{WorkersTotal: 4, Phase: api.PhaseRunning}, want: LogJob{Workers: 4}},
		"no Workers in the spec":          {tj: &trainer.TrainJob{}, st: api.Status{WorkersTotal: 2}, want: LogJob{Workers: 2}},
		"a finished job":                  {tj: spec(1), st: api.Status{Phase: api.PhaseFailed}, want: LogJob{Workers: 1, Finished: true}},
		"a job the manager has not named": {tj: spec(2), want: LogJob{Workers: 2}},
		// Their pods are gone until they start again: the store has their lines.
		"a suspended job": {tj: spec(2), st: api.Status{Phase: api.PhaseSuspended}, want: LogJob{Workers: 2, Finished: true}},
		"a preempted job": {tj: spec(2), st: api.Status{Phase: api.PhaseQueued, Reason: "Preempted"}, want: LogJob{Workers: 2, Finished: true}},
		"a queued job":    {tj: spec(2), st: api.Status{Phase: api.PhaseQueued, Reason: "Queued"}, want: LogJob{Workers: 2}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, LogJobOf(tc.tj, tc.st)); diff != "" {
				t.Errorf("LogJobOf (-want +got):\n%s", diff)
			}
		})
	}
}
