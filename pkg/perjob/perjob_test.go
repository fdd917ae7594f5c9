package perjob

import (
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

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
