package admission

import (
	"context"
	"fmt"
	"sort"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/jobspec"
	"github.com/mpijob/mpijob/pkg/runtimes"
)

// Webhook paths of the runtime validators.
const (
	ValidateClusterRuntimePath = "/validate-trainer-kubeflow-org-v1alpha1-clustertrainingruntime"
	ValidateRuntimePath        = "/validate-trainer-kubeflow-org-v1alpha1-trainingruntime"
)

// ClusterRuntimeValidator refuses a ClusterTrainingRuntime whose policy
// annotations are wrong: a misspelled key would silently lift a limit.
type ClusterRuntimeValidator struct{}

var _ admission.Validator[*trainer.ClusterTrainingRuntime] = ClusterRuntimeValidator{}

// ValidateCreate implements admission.Validator.
func (ClusterRuntimeValidator) ValidateCreate(_ context.Context, rt *trainer.ClusterTrainingRuntime) (admission.Warnings, error) {
	return nil, policyErrors(trainer.ClusterTrainingRuntimeKind, rt.Name, rt.Annotations)
}

// ValidateUpdate implements admission.Validator.
func (ClusterRuntimeValidator) ValidateUpdate(_ context.Context, _, rt *trainer.ClusterTrainingRuntime) (admission.Warnings, error) {
	if rt.DeletionTimestamp != nil {
		return nil, nil
	}
	return nil, policyErrors(trainer.ClusterTrainingRuntimeKind, rt.Name, rt.Annotations)
}

// ValidateDelete implements admission.Validator.
func (ClusterRuntimeValidator) ValidateDelete(context.Context, *trainer.ClusterTrainingRuntime) (admission.Warnings, error) {
	return nil, nil
}

// RuntimeValidator guards namespaced TrainingRuntimes. Their policy
// annotations are checked as a cluster runtime's, and a namespace's own MPI
// runtime must keep the cluster's guards (NamespacedRuntimeErrors). A per-job runtime
// (pkg/jobspec) was admitted with its job, so it cannot change afterwards,
// and a new one cannot be slipped under a job that already exists: either
// would run pods that admission never saw.
type RuntimeValidator struct {
	// Client reads TrainJobs.
	Client client.Reader
}

var _ admission.Validator[*trainer.TrainingRuntime] = RuntimeValidator{}

// ValidateCreate implements admission.Validator.
func (v RuntimeValidator) ValidateCreate(ctx context.Context, rt *trainer.TrainingRuntime) (admission.Warnings, error) {
	if err := policyErrors(trainer.TrainingRuntimeKind, rt.Name, rt.Annotations); err != nil {
		return nil, err
	}
	if !jobspec.IsDerived(rt.Labels) {
		return nil, namespacedRuntimeInvalid(rt)
	}
	if errs := jobspec.JobEnvErrors(rt); len(errs) > 0 {
		return nil, runtimeInvalid(rt.Name, errs)
	}
	ns := namespaceOf(ctx, rt.Namespace)
	job := rt.Labels[api.JobLabel]
	tj := &trainer.TrainJob{}
	err := v.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: job}, tj)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, apierrors.NewInternalError(fmt.Errorf("failed to read TrainJob %s/%s: %w", ns, job, err))
	case tj.DeletionTimestamp != nil:
		return nil, nil
	}
	return nil, runtimeInvalid(rt.Name, field.ErrorList{field.Forbidden(field.NewPath("metadata", "labels").Key(api.JobLabel),
		fmt.Sprintf("job %s already exists in namespace %s: pick another name, or delete it first (a job's own runtime is made before the job and never replaced under it)", job, ns))})
}

// ValidateUpdate implements admission.Validator.
func (v RuntimeValidator) ValidateUpdate(_ context.Context, old, rt *trainer.TrainingRuntime) (admission.Warnings, error) {
	if rt.DeletionTimestamp != nil {
		return nil, nil
	}
	if err := policyErrors(trainer.TrainingRuntimeKind, rt.Name, rt.Annotations); err != nil {
		return nil, err
	}
	if !jobspec.IsDerived(old.Labels) && !jobspec.IsDerived(rt.Labels) {
		return nil, namespacedRuntimeInvalid(rt)
	}
	var errs field.ErrorList
	labels := field.NewPath("metadata", "labels")
	for _, k := range []string{api.JobLabel, api.BaseRuntimeLabel} {
		if old.Labels[k] != rt.Labels[k] {
			errs = append(errs, field.Forbidden(labels.Key(k), fmt.Sprintf("a job's own runtime keeps the labels it was made with (%s=%q)", k, old.Labels[k])))
		}
	}
	if !equality.Semantic.DeepEqual(old.Spec, rt.Spec) {
		job := old.Labels[api.JobLabel]
		if job == "" {
			job = rt.Labels[api.JobLabel]
		}
		errs = append(errs, field.Forbidden(field.NewPath("spec"),
			fmt.Sprintf("this is job %s's own runtime, admitted with the job, so it cannot change: to run with other images or resources, create a new job (kubectl mpijob clone %s NEW-NAME --image ... --cpu ...)", job, job)))
	}
	if len(errs) > 0 {
		return nil, runtimeInvalid(rt.Name, errs)
	}
	return nil, nil
}

// ValidateDelete refuses to delete a namespace's own MPI runtime while a
// TrainJob references it: Trainer validates every update of a TrainJob
// against its runtime, the garbage collector's last one included, so a job
// whose runtime is gone can never finish being deleted. (mpijob's per-job
// runtimes hold a finalizer for this instead.)
func (v RuntimeValidator) ValidateDelete(ctx context.Context, rt *trainer.TrainingRuntime) (admission.Warnings, error) {
	if rt == nil || jobspec.IsDerived(rt.Labels) || !runtimes.IsMPI(&rt.Spec) || v.Client == nil {
		return nil, nil
	}
	ns := namespaceOf(ctx, rt.Namespace)
	jobs := &trainer.TrainJobList{}
	if err := v.Client.List(ctx, jobs, client.InNamespace(ns)); err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("failed to list the TrainJobs of %s: %w", ns, err))
	}
	var users []string
	for i := range jobs.Items {
		ref := jobs.Items[i].Spec.RuntimeRef
		if ptr.Deref(ref.Kind, "") == trainer.TrainingRuntimeKind && ref.Name == rt.Name {
			users = append(users, jobs.Items[i].Name)
		}
	}
	if len(users) == 0 {
		return nil, nil
	}
	sort.Strings(users)
	shown := users
	if len(shown) > 5 {
		shown = shown[:5]
	}
	return nil, apierrors.NewForbidden(trainer.GroupVersion.WithResource("trainingruntimes").GroupResource(), rt.Name, fmt.Errorf(
		"%s %s it (%s): delete them first (kubectl mpijob delete %s), then the runtime; a job whose runtime is gone can never finish being deleted",
		api.Count(len(users), "job", "jobs"), api.Agree(len(users), "uses", "use"), strings.Join(shown, ", "), strings.Join(shown, " ")))
}

// policyErrors refuses a runtime whose policy annotations are unknown or
// bad (nil when they are fine).
func policyErrors(kind, name string, annotations map[string]string) error {
	if _, errs := runtimes.ParsePolicy(annotations); len(errs) > 0 {
		return apierrors.NewInvalid(schema.GroupKind{Group: trainer.GroupVersion.Group, Kind: kind}, name, errs)
	}
	return nil
}

// namespacedRuntimeInvalid refuses a namespace's own MPI runtime that
// breaks a guard of the cluster's (NamespacedRuntimeErrors); its jobs are
// checked again when they are created.
func namespacedRuntimeInvalid(rt *trainer.TrainingRuntime) error {
	if !runtimes.IsMPI(&rt.Spec) {
		return nil
	}
	if errs := NamespacedRuntimeErrors(&rt.Spec); len(errs) > 0 {
		for _, e := range errs {
			e.Field = "spec"
		}
		return runtimeInvalid(rt.Name, errs)
	}
	return nil
}

func runtimeInvalid(name string, errs field.ErrorList) error {
	return apierrors.NewInvalid(schema.GroupKind{Group: trainer.GroupVersion.Group, Kind: trainer.TrainingRuntimeKind}, name, errs)
}
