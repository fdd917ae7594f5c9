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
	spec, annotations, found, err = l.get(ctx, l.Client, tj)
	if err == nil && !found && l.Live != nil {
		return l.get(ctx, l.Live, tj)
	}
	return spec, annotations, found, err
}

func (l RuntimeLookup) get(ctx context.Context, reader client.Reader, tj *trainer.TrainJob) (spec *trainer.TrainingRuntimeSpec, annotations map[string]string, found bool, err error) {
	kind := trainer.ClusterTrainingRuntimeKind
	if tj.Spec.RuntimeRef.Kind != nil {
		kind = *tj.Spec.RuntimeRef.Kind
	}
	switch kind {
	case trainer.TrainingRuntimeKind:
		rt := &trainer.TrainingRuntime{}
		err = reader.Get(ctx, client.ObjectKey{Namespace: tj.Namespace, Name: tj.Spec.RuntimeRef.Name}, rt)
		spec, annotations = &rt.Spec, rt.Annotations
	default:
		rt := &trainer.ClusterTrainingRuntime{}
		err = reader.Get(ctx, client.ObjectKey{Name: tj.Spec.RuntimeRef.Name}, rt)
		spec, annotations = &rt.Spec, rt.Annotations
	}
	if apierrors.IsNotFound(err) {
		return nil, nil, false, nil
	}
	return spec, annotations, err == nil, err
}

// MPIRuntimeNames lists the ClusterTrainingRuntimes with an MPI policy.
func (l RuntimeLookup) MPIRuntimeNames(ctx context.Context) []string {
	list := &trainer.ClusterTrainingRuntimeList{}
	if err := l.Client.List(ctx, list); err != nil {
		return nil
	}
	var out []string
	for i := range list.Items {
		if IsMPI(&list.Items[i].Spec) {
			out = append(out, list.Items[i].Name)
		}
	}
	sort.Strings(out)
	return out
}
