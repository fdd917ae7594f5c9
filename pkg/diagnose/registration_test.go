package diagnose

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mpijob/mpijob/pkg/api"
)

func TestRegistrationInStatus(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	next := metav1.NewTime(t0.Add(time.Minute))
	rec := func(r api.Registration) string {
		raw, err := r.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	type view struct {
		Phase   api.Phase
		Reason  string
		Message string
		Steps   []string
		Warning bool
	}
	done := "The job finished successfully on 2 Workers."
	cases := map[string]struct {
		annotations map[string]string
		want        view
	}{
		"no registration asked": {want: view{Phase: api.PhaseSucceeded, Message: done}},
		"under way": {annotations: map[string]string{api.RegisterModelAnnotation: "digits:v1"},
			want: view{Phase: api.PhaseSucceeded, Message: done + " mpijob-manager is registering its model (digits:v1) in the model registry."}},
		"registered": {annotations: map[string]string{api.RegisterModelAnnotation: "digits:v1",
			api.ModelRegistrationAnnotation: rec(api.Registration{Model: "digits", Version: "v1", State: api.RegistrationDone, URI: "s3://b/train/model.npz"})},
			want: view{Phase: api.PhaseSucceeded, Message: done + " Model digits version v1 is registered in the model registry (s3://b/train/model.npz)."}},
		"registry down: still Succeeded, with the warning and the command": {annotations: map[string]string{api.RegisterModelAnnotation: "digits:v1", api.RegisterArtifactAnnotation: "model.npz",
			api.ModelRegistrationAnnotation: rec(api.Registration{Model: "digits", Version: "v1", State: api.RegistrationRetrying, Attempts: 1, NextTry: &next,
				Error: "the model registry (http://r) could not be reached: connection refused.", Command: "kubectl mpijob register hello digits:v1 --artifact model.npz"})},
			want: view{Phase: api.PhaseSucceeded, Reason: ReasonModelRegistrationFailed, Warning: true,
				Message: "Training completed, but model upload failed. Manual upload required. The model registry (http://r) could not be reached: connection refused. mpijob-manager tries again at 2026-11-29T12:01:00Z (attempt 2 of 8). Register it yourself: kubectl mpijob register hello digits:v1 --artifact model.npz",
				Steps:   []string{"Register the model yourself once the registry answers: kubectl mpijob register hello digits:v1 --artifact model.npz."}}},
		"taken": {annotations: map[string]string{api.RegisterModelAnnotation: "digits:v1",
			api.ModelRegistrationAnnotation: rec(api.Registration{Model: "digits", Version: "v1", State: api.RegistrationFailed, Attempts: 1,
				Error: "version v1 of model digits exists already (registered from job team-a/old): give another version, NAME:VERSION.", Command: "kubectl mpijob register hello digits:v1"})},
			want: view{Phase: api.PhaseSucceeded, Reason: ReasonModelRegistrationFailed, Warning: true,
				Message: "Training completed, but model upload failed. Manual upload required. Version v1 of model digits exists already (registered from job team-a/old): give another version, NAME:VERSION. Register it yourself: kubectl mpijob register hello digits:v1",
				Steps:   []string{"Register the model yourself, with what the message says changed (another version, or access to the registry): kubectl mpijob register hello digits:v1."}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tj := job(2).Obj()
			tj.Annotations = tc.annotations
			tj.Status.Conditions = []metav1.Condition{{Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)}}
			s := Diagnose(Input{TrainJob: tj, Now: t0})
			got := view{Phase: s.Phase, Reason: s.Reason, Message: s.Message, Warning: Warning(s)}
			for _, st := range s.Steps {
				got.Steps = append(got.Steps, st.Text)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("status (-want,+got):\n%s", diff)
			}
		})
	}
}

// A finished job is diagnosed again when its registration record changes,
// and only then (Settled).
func TestRegistrationShown(t *testing.T) {
	done, _ := api.Registration{Model: "digits", Version: "v1", State: api.RegistrationDone, URI: "s3://b/k"}.Encode()
	failed, _ := api.Registration{Model: "digits", Version: "v1", State: api.RegistrationFailed, Error: "no."}.Encode()
	base := "The job finished successfully on 2 Workers."
	under := base + " mpijob-manager is registering its model (digits:v1) in the model registry."
	registered := base + " Model digits version v1 is registered in the model registry (s3://b/k)."
	cases := map[string]struct {
		annotations map[string]string
		status      api.Status
		want        bool
	}{
		"no registration":         {status: api.Status{Phase: api.PhaseSucceeded, Message: base}, want: true},
		"a failed job":            {annotations: map[string]string{api.RegisterModelAnnotation: "digits:v1"}, status: api.Status{Phase: api.PhaseFailed}, want: true},
		"under way, shown":        {annotations: map[string]string{api.RegisterModelAnnotation: "digits:v1"}, status: api.Status{Phase: api.PhaseSucceeded, Message: under}, want: true},
		"registered since":        {annotations: map[string]string{api.RegisterModelAnnotation: "digits:v1", api.ModelRegistrationAnnotation: done}, status: api.Status{Phase: api.PhaseSucceeded, Message: under}, want: false},
		"registered, shown":       {annotations: map[string]string{api.RegisterModelAnnotation: "digits:v1", api.ModelRegistrationAnnotation: done}, status: api.Status{Phase: api.PhaseSucceeded, Message: registered}, want: true},
		"failed since":            {annotations: map[string]string{api.RegisterModelAnnotation: "digits:v1", api.ModelRegistrationAnnotation: failed}, status: api.Status{Phase: api.PhaseSucceeded, Message: under}, want: false},
		"failed, then registered": {annotations: map[string]string{api.RegisterModelAnnotation: "digits:v1", api.ModelRegistrationAnnotation: done}, status: api.Status{Phase: api.PhaseSucceeded, Reason: ReasonModelRegistrationFailed, Message: "x"}, want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tj := job(2).Obj()
			tj.Annotations = tc.annotations
			if got := registrationShown(tj, tc.status); got != tc.want {
				t.Errorf("registrationShown = %v, want %v", got, tc.want)
			}
		})
	}
}
