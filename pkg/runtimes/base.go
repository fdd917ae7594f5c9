package runtimes

import (
	"context"
	"sort"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/api"
)

// A base runtime is one a user picks for a job: an MPI
// ClusterTrainingRuntime, or an MPI TrainingRuntime of the job's own
// namespace (not a per-job runtime mpijob made). Both are carried as a
// ClusterTrainingRuntime value; a namespace's has its Namespace set
// (IsNamespaced), so the job builder references it by the right kind.

// IsNamespaced reports whether base is a TrainingRuntime of a namespace.
func IsNamespaced(base *trainer.ClusterTrainingRuntime) bool {
	return base != nil && base.Namespace != ""
}

// KindOf is the runtimeRef kind that names base.
func KindOf(base *trainer.ClusterTrainingRuntime) string {
	if IsNamespaced(base) {
		return trainer.TrainingRuntimeKind
	}
	return trainer.ClusterTrainingRuntimeKind
}

// AsBase carries a namespace's TrainingRuntime as a base.
func AsBase(rt *trainer.TrainingRuntime) *trainer.ClusterTrainingRuntime {
	out := &trainer.ClusterTrainingRuntime{ObjectMeta: *rt.ObjectMeta.DeepCopy(), Spec: *rt.Spec.DeepCopy()}
	out.TypeMeta = rt.TypeMeta
	return out
}

// IsPerJob reports whether labels are those of a per-job runtime (made by
// mpijob for one job, never a base).
func IsPerJob(labels map[string]string) bool {
	return labels[api.JobLabel] != "" && labels[api.BaseRuntimeLabel] != ""
}

// FindBase returns the base runtime name for a job in namespace: the
// ClusterTrainingRuntime of that name, else the namespace's own
// TrainingRuntime of that name (an administrator's runtime wins over a
// tenant's of the same name). It returns a NotFound error for neither;
// the runtime may be of another framework (the caller checks IsMPI).
func FindBase(ctx context.Context, c client.Reader, namespace, name string) (*trainer.ClusterTrainingRuntime, error) {
	return FindBaseOfKind(ctx, c, namespace, name, "")
}

// FindBaseOfKind is FindBase limited to one kind: a TrainingRuntime of
// namespace for trainer.TrainingRuntimeKind (a job's recorded base, which
// a ClusterTrainingRuntime of the same name must not replace), either for
// "".
func FindBaseOfKind(ctx context.Context, c client.Reader, namespace, name, kind string) (*trainer.ClusterTrainingRuntime, error) {
	if kind == trainer.TrainingRuntimeKind {
		rt := &trainer.TrainingRuntime{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, rt); err != nil {
			return nil, err
		}
		if IsPerJob(rt.Labels) {
			return nil, apierrors.NewNotFound(trainer.GroupVersion.WithResource("trainingruntimes").GroupResource(), name)
		}
		return AsBase(rt), nil
	}
	crt := &trainer.ClusterTrainingRuntime{}
	err := c.Get(ctx, client.ObjectKey{Name: name}, crt)
	if err == nil || !apierrors.IsNotFound(err) || namespace == "" {
		if err != nil {
			return nil, err
		}
		return crt, nil
	}
	notFound := err
	rt := &trainer.TrainingRuntime{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, rt); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
			return nil, notFound
		}
		return nil, err
	}
	if IsPerJob(rt.Labels) {
		// Another job's own runtime: not one to pick.
		return nil, notFound
	}
	return AsBase(rt), nil
}

// ListBases lists the MPI base runtimes a job in namespace may pick: the
// MPI ClusterTrainingRuntimes, then the namespace's own MPI
// TrainingRuntimes (none when namespace is "" or they cannot be listed),
// each sorted by name.
func ListBases(ctx context.Context, c client.Reader, namespace string) ([]*trainer.ClusterTrainingRuntime, error) {
	l := &trainer.ClusterTrainingRuntimeList{}
	if err := c.List(ctx, l); err != nil {
		return nil, err
	}
	var out []*trainer.ClusterTrainingRuntime
	for i := range l.Items {
		if IsMPI(&l.Items[i].Spec) {
			out = append(out, &l.Items[i])
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	if namespace == "" {
		return out, nil
	}
	nl := &trainer.TrainingRuntimeList{}
	if err := c.List(ctx, nl, client.InNamespace(namespace)); err != nil {
		// A reader who may not list the namespace's runtimes sees the
		// cluster's.
		return out, nil //nolint:nilerr // the cluster's runtimes are still an answer
	}
	var own []*trainer.ClusterTrainingRuntime
	for i := range nl.Items {
		if IsMPI(&nl.Items[i].Spec) && !IsPerJob(nl.Items[i].Labels) {
			own = append(own, AsBase(&nl.Items[i]))
		}
	}
	sort.Slice(own, func(i, j int) bool { return own[i].Name < own[j].Name })
	return append(out, own...), nil
}
