package controller

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/registry"
)

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) *metav1.Time {
	t := metav1.NewTime(now.Add(d))
	return &t
}

func TestNext(t *testing.T) {
	ref := registry.Ref{Name: "digits", Version: "v1"}
	down := &registry.UnreachableError{Where: "http://r", Err: errors.New("connection refused")}
	cases := map[string]struct {
		prev *api.Registration
		a    Attempt
		want api.Registration
	}{
		"registered at once": {
			a: Attempt{Job: "train", Ref: ref, Registry: "model-registry/model-registry", URI: "s3://b/train/model.npz", Result: registry.Result{ModelID: "1", VersionID: "2"}},
			want: api.Registration{Model: "digits", Version: "v1", State: api.RegistrationDone, Registry: "model-registry/model-registry",
				URI: "s3://b/train/model.npz", ModelID: "1", VersionID: "2", Attempts: 1, At: metav1.NewTime(now)},
		},
		"registry down: tried again in 30s, with the command": {
			a: Attempt{Job: "train", Ref: ref, Err: down},
			want: api.Registration{Model: "digits", Version: "v1", State: api.RegistrationRetrying, Attempts: 1, At: metav1.NewTime(now),
				Error: "the model registry (http://r) could not be reached: connection refused.", Command: "kubectl mpijob register train digits:v1", NextTry: at(30 * time.Second)},
		},
		"down again: the wait doubles": {
			prev: &api.Registration{Model: "digits", Version: "v1", State: api.RegistrationRetrying, Attempts: 3},
			a:    Attempt{Job: "train", Ref: ref, Artifact: "model.onnx", Err: down},
			want: api.Registration{Model: "digits", Version: "v1", State: api.RegistrationRetrying, Attempts: 4, At: metav1.NewTime(now),
				Error: "the model registry (http://r) could not be reached: connection refused.", Command: "kubectl mpijob register train digits:v1 --artifact model.onnx", NextTry: at(4 * time.Minute)},
		},
		"down at the last attempt: failed, gave up": {
			prev: &api.Registration{Model: "digits", Version: "v1", State: api.RegistrationRetrying, Attempts: MaxAttempts - 1},
			a:    Attempt{Job: "train", Ref: ref, Err: down},
			want: api.Registration{Model: "digits", Version: "v1", State: api.RegistrationFailed, Attempts: MaxAttempts, At: metav1.NewTime(now),
				Error: fmt.Sprintf("the model registry (http://r) could not be reached: connection refused. mpijob-manager gave up after %d attempts.", MaxAttempts), Command: "kubectl mpijob register train digits:v1"},
		},
		"version another job holds: failed at once": {
			a: Attempt{Job: "train", Ref: ref, Err: &registry.TakenError{Ref: ref, From: "team-b/other"}},
			want: api.Registration{Model: "digits", Version: "v1", State: api.RegistrationFailed, Attempts: 1, At: metav1.NewTime(now),
				Error: "version v1 of model digits exists already (registered from job team-b/other): give another version, NAME:VERSION.", Command: "kubectl mpijob register train digits:v1"},
		},
		"no access: failed at once": {
			a: Attempt{Job: "train", Ref: ref, Err: &registry.AccessError{Where: "http://r", Err: errors.New("403 Forbidden")}},
			want: api.Registration{Model: "digits", Version: "v1", State: api.RegistrationFailed, Attempts: 1, At: metav1.NewTime(now),
				Error: "you may not use the model registry (http://r): 403 Forbidden.", Command: "kubectl mpijob register train digits:v1"},
		},
		"another version asked: attempts start again": {
			prev: &api.Registration{Model: "digits", Version: "v0", State: api.RegistrationFailed, Attempts: 5},
			a:    Attempt{Job: "train", Ref: ref, Err: down},
			want: api.Registration{Model: "digits", Version: "v1", State: api.RegistrationRetrying, Attempts: 1, At: metav1.NewTime(now),
				Error: "the model registry (http://r) could not be reached: connection refused.", Command: "kubectl mpijob register train digits:v1", NextTry: at(30 * time.Second)},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Next(tc.prev, tc.a, now)); diff != "" {
				t.Errorf("Next (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestPending(t *testing.T) {
	rec := func(state, version string) string {
		raw, _ := api.Registration{Model: "digits", Version: version, State: state}.Encode()
		return raw
	}
	complete := []metav1.Condition{{Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue}}
	succeeded, err := json.Marshal(api.Status{Phase: api.PhaseSucceeded})
	if err != nil {
		t.Fatal(err)
	}
	with := func(m map[string]string) map[string]string {
		out := map[string]string{api.StatusAnnotation: string(succeeded)}
		for k, v := range m {
			out[k] = v
		}
		return out
	}
	cases := map[string]struct {
		annotations map[string]string
		conditions  []metav1.Condition
		want        bool
	}{
		"no request":                   {annotations: nil, conditions: complete, want: false},
		"running":                      {annotations: map[string]string{api.RegisterModelAnnotation: "digits:v1"}, want: false},
		"succeeded, nothing yet":       {annotations: map[string]string{api.RegisterModelAnnotation: "digits:v1"}, conditions: complete, want: true},
		"succeeded, registered":        {annotations: map[string]string{api.RegisterModelAnnotation: "digits:v1", api.ModelRegistrationAnnotation: rec(api.RegistrationDone, "v1")}, conditions: complete, want: false},
		"succeeded, retrying":          {annotations: map[string]string{api.RegisterModelAnnotation: "digits:v1", api.ModelRegistrationAnnotation: rec(api.RegistrationRetrying, "v1")}, conditions: complete, want: true},
		"succeeded, failed":            {annotations: map[string]string{api.RegisterModelAnnotation: "digits:v1", api.ModelRegistrationAnnotation: rec(api.RegistrationFailed, "v1")}, conditions: complete, want: false},
		"failed, then another version": {annotations: map[string]string{api.RegisterModelAnnotation: "digits:v2", api.ModelRegistrationAnnotation: rec(api.RegistrationFailed, "v1")}, conditions: complete, want: true},
		"version from the job's name":  {annotations: map[string]string{api.RegisterModelAnnotation: "digits", api.ModelRegistrationAnnotation: rec(api.RegistrationDone, "train")}, conditions: complete, want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ann := tc.annotations
			if tc.conditions != nil && name != "complete, before mpijob says Succeeded" {
				ann = with(ann)
			}
			tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "train", Annotations: ann}, Status: trainer.TrainJobStatus{Conditions: tc.conditions}}
			if got := Pending(tj); got != tc.want {
				t.Errorf("Pending = %v, want %v", got, tc.want)
			}
		})
	}
}
