package perjob

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mpijob/mpijob/pkg/api"
)

func TestDecide(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	runtime := func(age time.Duration, owner types.UID) *trainer.TrainingRuntime {
		rt := &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "hello", CreationTimestamp: metav1.NewTime(now.Add(-age))}}
		if owner != "" {
			rt.OwnerReferences = []metav1.OwnerReference{{Kind: trainer.TrainJobKind, Name: "hello", UID: owner}}
		}
		return rt
	}
	job := func(uid types.UID, kind, name string, deleting bool) *trainer.TrainJob {
		tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "hello", UID: uid}}
		tj.Spec.RuntimeRef = trainer.RuntimeRef{Name: name, Kind: ptr.To(kind)}
		if deleting {
			tj.DeletionTimestamp = ptr.To(metav1.NewTime(now))
		}
		return tj
	}
	deleting := func(rt *trainer.TrainingRuntime) *trainer.TrainingRuntime {
		rt.DeletionTimestamp = ptr.To(metav1.NewTime(now))
		rt.Finalizers = []string{api.JobRuntimeFinalizer}
		return rt
	}
	released := func(rt *trainer.TrainingRuntime) *trainer.TrainingRuntime {
		rt.Finalizers = nil
		return rt
	}
	cases := map[string]struct {
		rt        *trainer.TrainingRuntime
		tj        *trainer.TrainJob
		want      Decision
		wantAfter time.Duration
	}{
		"owned by its job":                        {rt: runtime(time.Hour, "u1"), tj: job("u1", trainer.TrainingRuntimeKind, "hello", false), want: Keep},
		"owned, job gone: GC's to delete":         {rt: runtime(time.Hour, "u1"), want: Keep},
		"owner-less, its job uses it":             {rt: runtime(time.Second, ""), tj: job("u2", trainer.TrainingRuntimeKind, "hello", false), want: Adopt},
		"owned by an old job of that name":        {rt: runtime(time.Hour, "old"), tj: job("new", trainer.TrainingRuntimeKind, "hello", false), want: Adopt},
		"owner-less, young, no job yet":           {rt: runtime(30*time.Second, ""), want: Wait, wantAfter: Grace - 30*time.Second},
		"owner-less, old, no job":                 {rt: runtime(Grace, ""), want: Delete},
		"a job of that name on a cluster runtime": {rt: runtime(time.Hour, ""), tj: job("u3", trainer.ClusterTrainingRuntimeKind, "mpi-openmpi", false), want: Delete},
		"its job is being deleted":                {rt: runtime(time.Hour, ""), tj: job("u4", trainer.TrainingRuntimeKind, "hello", true), want: Delete},
		"deleted, its job gone: release":          {rt: deleting(runtime(time.Hour, "u1")), want: Release},
		"deleted, its job still there: keep":      {rt: deleting(runtime(time.Hour, "u1")), tj: job("u1", trainer.TrainingRuntimeKind, "hello", true), want: Keep},
		"deleted, already released":               {rt: released(deleting(runtime(time.Hour, "u1"))), want: Keep},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, after := Decide(tc.rt, tc.tj, now)
			if got != tc.want || after != tc.wantAfter {
				t.Errorf("Decide = %v, %v; want %v, %v", got, after, tc.want, tc.wantAfter)
			}
		})
	}
}

// Reconcile carries out Decide's decision on the API server: it gives an
// owner-less per-job runtime to its TrainJob, deletes one whose job never
// came after the grace, requeues one still within it, releases a deleted
// one whose job is gone, and leaves runtimes that are not per-job alone.
func TestReconcile(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	perJob := func(age time.Duration) *trainer.TrainingRuntime {
		return &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "hello-rt", Namespace: "team-a", UID: "rt-uid",
			CreationTimestamp: metav1.NewTime(now.Add(-age)),
			Labels:            map[string]string{api.JobLabel: "hello", api.BaseRuntimeLabel: "mpi-openmpi"}}}
	}
	job := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "team-a", UID: "job-uid"},
		Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: "hello-rt", Kind: ptr.To(trainer.TrainingRuntimeKind)}}}
	type after struct {
		Exists     bool
		Owners     []types.UID
		Finalizers []string
	}
	cases := map[string]struct {
		rt      *trainer.TrainingRuntime
		job     *trainer.TrainJob
		want    after
		requeue time.Duration
	}{
		"an owner-less runtime is given to its job": {
			rt: perJob(time.Second), job: job,
			want: after{Exists: true, Owners: []types.UID{"job-uid"}},
		},
		"one whose job has not come yet waits out the grace": {
			rt: perJob(30 * time.Second), want: after{Exists: true}, requeue: Grace - 30*time.Second,
		},
		"one whose job never came is deleted": {
			rt: perJob(Grace + time.Second), want: after{},
		},
		"a deleted one whose job is gone is released": {
			rt: func() *trainer.TrainingRuntime {
				rt := perJob(time.Hour)
				rt.DeletionTimestamp = ptr.To(metav1.NewTime(now))
				rt.Finalizers = []string{api.JobRuntimeFinalizer, "example.com/other"}
				return rt
			}(),
			want: after{Exists: true, Finalizers: []string{"example.com/other"}},
		},
		"a runtime that is not a job's is left alone, however old": {
			rt: func() *trainer.TrainingRuntime {
				rt := perJob(time.Hour)
				rt.Labels = map[string]string{"team": "a"}
				return rt
			}(),
			want: after{Exists: true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs := []client.Object{tc.rt}
			if tc.job != nil {
				objs = append(objs, tc.job)
			}
			c := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(objs...).Build()
			r := &Reconciler{Client: c, Now: func() time.Time { return now }}
			res, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(tc.rt)})
			if err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			if res.RequeueAfter != tc.requeue {
				t.Errorf("requeue after %s, want %s", res.RequeueAfter, tc.requeue)
			}
			var got after
			cur := &trainer.TrainingRuntime{}
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(tc.rt), cur); err == nil {
				got.Exists, got.Finalizers = true, cur.Finalizers
				for _, o := range cur.OwnerReferences {
					got.Owners = append(got.Owners, o.UID)
				}
			} else if !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("the runtime after (-want,+got):\n%s", diff)
			}
		})
	}
	// A runtime that is gone: nothing to do, no error.
	c := fake.NewClientBuilder().WithScheme(api.NewScheme()).Build()
	if _, err := (&Reconciler{Client: c}).Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team-a", Name: "gone"}}); err != nil {
		t.Errorf("Reconcile of a gone runtime: %v", err)
	}
}
