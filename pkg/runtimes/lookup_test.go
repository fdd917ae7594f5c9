package runtimes

import (
	"context"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// A runtime the cache has not seen yet (created a moment before its job)
// is found through the live reader; one that exists nowhere is not found.
func TestLookupAsksTheAPIBeforeNotFound(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := trainer.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	rt := loadRuntime(t, "mpi-openmpi")
	rt.Name = "just-made"
	stale := fake.NewClientBuilder().WithScheme(scheme).Build()
	live := fake.NewClientBuilder().WithScheme(scheme).WithObjects(rt).Build()
	job := func(name string) *trainer.TrainJob {
		return &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "team-a"}, Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: name}}}
	}
	for name, tc := range map[string]struct {
		lookup RuntimeLookup
		ref    string
		found  bool
	}{
		"in the cache":                      {lookup: RuntimeLookup{Client: live}, ref: "just-made", found: true},
		"not yet in the cache, live reader": {lookup: RuntimeLookup{Client: stale, Live: live}, ref: "just-made", found: true},
		"not yet in the cache, no reader":   {lookup: RuntimeLookup{Client: stale}, ref: "just-made", found: false},
		"nowhere":                           {lookup: RuntimeLookup{Client: stale, Live: live}, ref: "mpi-opnempi", found: false},
	} {
		t.Run(name, func(t *testing.T) {
			spec, _, found, err := tc.lookup.Get(context.Background(), job(tc.ref))
			if err != nil || found != tc.found || (found && !IsMPI(spec)) {
				t.Errorf("found %v (err %v), want %v", found, err, tc.found)
			}
		})
	}
}
