package runtimes

import (
	"context"
	"sort"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// RuntimeLookup finds the runtime a TrainJob references.
type RuntimeLookup struct {
	Client client.Reader
	// Live, when set, is asked before "not found" is believed: Client is
	// a cache, and a runtime created a moment ago (a job created right
	// after its runtime) may not be in it yet.
	Live client.Reader
}

// Get returns the runtime's spec and annotations; found is false when it
// does not exist.
func (l RuntimeLookup) Get(ctx context.Context, tj *trainer.TrainJob) (spec *trainer.TrainingRuntimeSpec, annotations map[string]string, found bool, err error) {
	rt, err := l.Find(ctx, tj)
	if err != nil || rt == nil {
		return nil, nil, false, err
	}
	return rt.Spec, rt.Annotations, true, nil
}

// GetShared is Get for a reader that never changes what it is given (the
// controllers: IsMPI, ShapeOf, the policy annotations). Where Client is
// the manager's cache it hands out the cache's own runtime instead of a
// deep copy of it: a runtime's template is the largest object the manager
// read at each round of each job (7 % of the bytes the leader allocated
// at 200 jobs × 8, a heap profile over bench/scale), and the namespace's
// NetworkPolicy read the runtime of every job of the namespace at each
// round. Runtimes are few, so those of the kind are listed without copies
// and picked by name; one not listed (not in the cache yet, or a reader
// that lists nothing) is read as Get reads it.
func (l RuntimeLookup) GetShared(ctx context.Context, tj *trainer.TrainJob) (spec *trainer.TrainingRuntimeSpec, annotations map[string]string, found bool, err error) {
	name := tj.Spec.RuntimeRef.Name
	kind := trainer.ClusterTrainingRuntimeKind
	if tj.Spec.RuntimeRef.Kind != nil {
		kind = *tj.Spec.RuntimeRef.Kind
	}
	switch kind {
	case trainer.TrainingRuntimeKind:
		list := &trainer.TrainingRuntimeList{}
		if l.Client.List(ctx, list, client.InNamespace(tj.Namespace), client.UnsafeDisableDeepCopy) == nil {
			for i := range list.Items {
				if list.Items[i].Name == name {
					return &list.Items[i].Spec, list.Items[i].Annotations, true, nil
				}
			}
		}
	case trainer.ClusterTrainingRuntimeKind:
		list := &trainer.ClusterTrainingRuntimeList{}
		if l.Client.List(ctx, list, client.UnsafeDisableDeepCopy) == nil {
			for i := range list.Items {
				if list.Items[i].Name == name {
					return &list.Items[i].Spec, list.Items[i].Annotations, true, nil
				}
			}
		}
	}
	return l.Get(ctx, tj)
}

// Runtime is what is read of the runtime a TrainJob references.
type Runtime struct {
	Spec        *trainer.TrainingRuntimeSpec
	Labels      map[string]string
	Annotations map[string]string
}

// Find returns the runtime tj references, or nil when it does not exist.
func (l RuntimeLookup) Find(ctx context.Context, tj *trainer.TrainJob) (*Runtime, error) {
	rt, err := l.find(ctx, l.Client, tj)
	if err == nil && rt == nil && l.Live != nil {
		return l.find(ctx, l.Live, tj)
	}
	return rt, err
}

func (l RuntimeLookup) find(ctx context.Context, reader client.Reader, tj *trainer.TrainJob) (*Runtime, error) {
	kind := trainer.ClusterTrainingRuntimeKind
	if tj.Spec.RuntimeRef.Kind != nil {
		kind = *tj.Spec.RuntimeRef.Kind
	}
	var out Runtime
	var err error
	switch kind {
	case trainer.TrainingRuntimeKind:
		rt := &trainer.TrainingRuntime{}
		err = reader.Get(ctx, client.ObjectKey{Namespace: tj.Namespace, Name: tj.Spec.RuntimeRef.Name}, rt)
		out = Runtime{Spec: &rt.Spec, Labels: rt.Labels, Annotations: rt.Annotations}
	default:
		rt := &trainer.ClusterTrainingRuntime{}
		err = reader.Get(ctx, client.ObjectKey{Name: tj.Spec.RuntimeRef.Name}, rt)
		out = Runtime{Spec: &rt.Spec, Labels: rt.Labels, Annotations: rt.Annotations}
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// MPIRuntimeNames lists the ClusterTrainingRuntimes with an MPI policy
// (none when they cannot be read: for suggestions).
func (l RuntimeLookup) MPIRuntimeNames(ctx context.Context) []string {
	out, _ := ListMPIRuntimeNames(ctx, l.Client)
	return out
}

// ListMPIRuntimeNames lists the ClusterTrainingRuntimes with an MPI policy,
// sorted.
func ListMPIRuntimeNames(ctx context.Context, c client.Reader) ([]string, error) {
	list := &trainer.ClusterTrainingRuntimeList{}
	if err := c.List(ctx, list); err != nil {
		return nil, err
	}
	var out []string
	for i := range list.Items {
		if IsMPI(&list.Items[i].Spec) {
			out = append(out, list.Items[i].Name)
		}
	}
	sort.Strings(out)
	return out, nil
}
