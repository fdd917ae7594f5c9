package runtimes

import (
	"context"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
				t.Errorf("Get: found %v (err %v), want %v", found, err, tc.found)
			}
			spec, _, found, err = tc.lookup.GetShared(context.Background(), job(tc.ref))
			if err != nil || found != tc.found || (found && !IsMPI(spec)) {
				t.Errorf("GetShared: found %v (err %v), want %v", found, err, tc.found)
			}
		})
	}
}

// The controllers read a job's runtime at every round, and only read it:
// GetShared lists the runtimes of the job's kind without copies (from the
// manager's cache, the cache's own objects) and reads nothing else, where
// Get deep-copied the whole runtime each time. A cluster runtime and a
// namespace's runtime are found by name, and of the namespace's only the
// job's namespace is listed.
func TestGetSharedListsWithoutCopies(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := trainer.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cluster := loadRuntime(t, "mpi-openmpi")
	namespaced := &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "mine", Namespace: "team-a",
		Annotations: map[string]string{"test.mpijob.dev/which": "mine"}}, Spec: cluster.Spec}
	elsewhere := &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "mine", Namespace: "team-b"}}
	for name, tc := range map[string]struct {
		ref      trainer.RuntimeRef
		wantNote string
	}{
		"a cluster runtime":       {ref: trainer.RuntimeRef{Name: "mpi-openmpi"}},
		"a namespace's runtime":   {ref: trainer.RuntimeRef{Name: "mine", Kind: ptr.To(trainer.TrainingRuntimeKind)}, wantNote: "mine"},
		"a cluster kind, by name": {ref: trainer.RuntimeRef{Name: "mpi-openmpi", Kind: ptr.To(trainer.ClusterTrainingRuntimeKind)}},
	} {
		t.Run(name, func(t *testing.T) {
			r := &copyless{Reader: fake.NewClientBuilder().WithScheme(scheme).WithObjects(cluster, namespaced, elsewhere).Build()}
			tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "team-a"}, Spec: trainer.TrainJobSpec{RuntimeRef: tc.ref}}
			spec, annotations, found, err := RuntimeLookup{Client: r}.GetShared(context.Background(), tj)
			if err != nil || !found || !IsMPI(spec) {
				t.Fatalf("found %v, MPI %v (err %v), want an MPI runtime", found, IsMPI(spec), err)
			}
			if got := annotations["test.mpijob.dev/which"]; got != tc.wantNote {
				t.Errorf("annotation %q, want %q: another runtime's", got, tc.wantNote)
			}
			if r.gets != 0 || r.lists != 1 || r.copied != 0 || r.otherNamespace != 0 {
				t.Errorf("%d Gets, %d lists (%d with copies, %d of another namespace), want one list without copies", r.gets, r.lists, r.copied, r.otherNamespace)
			}
		})
	}
}

// copyless counts a reader's Gets and lists, and the lists that would copy.
type copyless struct {
	client.Reader
	gets, lists, copied, otherNamespace int
}

func (c *copyless) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.gets++
	return c.Reader.Get(ctx, key, obj, opts...)
}

func (c *copyless) List(ctx context.Context, l client.ObjectList, opts ...client.ListOption) error {
	c.lists++
	o := &client.ListOptions{}
	o.ApplyOptions(opts)
	if o.UnsafeDisableDeepCopy == nil || !*o.UnsafeDisableDeepCopy {
		c.copied++
	}
	if _, ok := l.(*trainer.TrainingRuntimeList); ok && o.Namespace != "team-a" {
		c.otherNamespace++
	}
	return c.Reader.List(ctx, l, opts...)
}
