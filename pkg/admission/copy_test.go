package admission

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	admissionv1 "k8s.io/api/admission/v1"
	authnv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/dataconn"
	"github.com/mpijob/mpijob/pkg/jobspec"
)

// A job with a per-job runtime (a data connection), exported and renamed,
// created with plain kubectl: the mutating webhook gives it a copy of the
// other job's runtime, named and labelled for it, with its own artifacts
// and checkpoint place, and points it there. Nothing is made on a dry run,
// for a user who may not create runtimes, or for a job on its own runtime.
func TestRuntimeCopier(t *testing.T) {
	base := shipped(t, "mpi-openmpi")
	orig, err := jobspec.Build(jobspec.Input{Name: "orig", Namespace: "team-a", Runtime: "mpi-openmpi", Workers: 2, DataConnections: []string{"local-s3"}}, base)
	if err != nil {
		t.Fatal(err)
	}
	envOf := func(rt *trainer.TrainingRuntime) map[string]string {
		out := map[string]string{}
		for _, c := range rt.Spec.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers {
			for _, e := range c.Env {
				if e.ValueFrom == nil {
					out[e.Name] = e.Value
				}
			}
		}
		return out
	}
	exported := func(name string) *trainer.TrainJob {
		tj := orig.TrainJob.DeepCopy()
		tj.Name = name
		return tj
	}
	foreign := &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "taken", Namespace: "team-a", Labels: map[string]string{"team": "x"}}}
	cases := map[string]struct {
		tj       *trainer.TrainJob
		dryRun   bool
		allowed  bool
		wantRef  string
		wantCopy bool
		wantErr  func(error) bool
	}{
		"renamed export":  {tj: exported("again"), allowed: true, wantRef: "again", wantCopy: true},
		"dry run":         {tj: exported("again"), allowed: true, dryRun: true, wantRef: "orig"},
		"may not create":  {tj: exported("again"), allowed: false, wantRef: "orig"},
		"its own runtime": {tj: orig.TrainJob.DeepCopy(), allowed: true, wantRef: "orig"},
		"the name is taken by a runtime of another kind": {tj: exported("taken"), allowed: true, wantRef: "taken", wantErr: apierrors.IsInvalid},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rt := orig.Runtime.DeepCopy()
			rt.OwnerReferences = []metav1.OwnerReference{{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind, Name: "orig", UID: "u1"}}
			cl := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(rt, foreign.DeepCopy()).Build()
			c := &RuntimeCopier{Client: cl, Live: cl, Cache: cl, MayCreate: func(_ context.Context, user authnv1.UserInfo, ns string) (bool, error) {
				if user.Username != "dev-a" || ns != "team-a" {
					t.Errorf("asked about %s in %s, want dev-a in team-a", user.Username, ns)
				}
				return tc.allowed, nil
			}}
			req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Create, Namespace: "team-a",
				UserInfo: authnv1.UserInfo{Username: "dev-a"}, DryRun: ptr.To(tc.dryRun)}}
			err := c.Copy(context.Background(), req, tc.tj)
			if tc.wantErr != nil {
				if !tc.wantErr(err) {
					t.Fatalf("got %v, want an Invalid error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.tj.Spec.RuntimeRef.Name != tc.wantRef {
				t.Errorf("runtimeRef %s, want %s", tc.tj.Spec.RuntimeRef.Name, tc.wantRef)
			}
			got := &trainer.TrainingRuntime{}
			err = cl.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: "again"}, got)
			if !tc.wantCopy {
				if !apierrors.IsNotFound(err) {
					t.Errorf("a runtime named again was made (%v)", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("no copy: %v", err)
			}
			if got.Labels[api.JobLabel] != "again" || got.Annotations[api.CopiedFromAnnotation] != "orig" || len(got.OwnerReferences) != 0 {
				t.Errorf("copy's labels %v, annotations %v, owners %v: want job again, copied from orig, no owner yet", got.Labels, got.Annotations, got.OwnerReferences)
			}
			for _, k := range []string{dataconn.OutputEnv, dataconn.CheckpointEnv} {
				if envOf(orig.Runtime)[k] == "" {
					t.Fatalf("the original runtime has no %s", k)
				}
			}
			if diff := cmp.Diff("again", envOf(got)[dataconn.JobNameEnv]); diff != "" {
				t.Errorf("job name in the copy (-want +got):\n%s", diff)
			}
			for _, k := range []string{dataconn.OutputEnv, dataconn.CheckpointEnv} {
				if g := envOf(got)[k]; g == envOf(orig.Runtime)[k] || g == "" {
					t.Errorf("%s of the copy is %q, the original's is %q: want the copy's own place", k, g, envOf(orig.Runtime)[k])
				}
			}
			if !jobspec.SameSpec(jobspec.Normalize(&got.Spec, &base.Spec), &base.Spec) {
				t.Error("the copy differs from its base in more than a per-job runtime may")
			}
		})
	}
}
