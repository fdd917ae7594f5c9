// Package perjob keeps per-job runtimes (see pkg/jobspec) tied to their
// jobs. A client creates the runtime before the TrainJob and then makes the
// TrainJob its owner; when the client stops in between (or the objects
// were applied from a file, as convert prints them), the runtime has no
// owner. The reconciler adopts it for its TrainJob, or deletes it once it
// is clear that the TrainJob will not come.
package perjob

import (
	"context"
	"fmt"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/jobspec"
)

// Grace is how long an owner-less per-job runtime waits for its TrainJob
// before it is deleted: longer than any client takes between the two creates.
const Grace = 2 * time.Minute

// Decision is what to do with one per-job runtime.
type Decision int

// The decisions.
const (
	Keep Decision = iota
	Adopt
	Delete
	Wait
	// Release removes the finalizer of a deleted runtime whose job is gone.
	Release
)

// Decide is the pure rule: rt is a per-job runtime, tj its job (nil when
// there is none), now the time.
func Decide(rt *trainer.TrainingRuntime, tj *trainer.TrainJob, now time.Time) (Decision, time.Duration) {
	if rt.DeletionTimestamp != nil {
		if !controllerutil.ContainsFinalizer(rt, api.JobRuntimeFinalizer) {
			return Keep, 0
		}
		if tj != nil && tj.Spec.RuntimeRef.Name == rt.Name && ptr.Deref(tj.Spec.RuntimeRef.Kind, "") == trainer.TrainingRuntimeKind {
			// Its job still needs it (even while the job is being deleted:
			// the garbage collector's last update of the job is validated
			// against it).
			return Keep, 0
		}
		return Release, 0
	}
	for _, r := range rt.OwnerReferences {
		if r.Kind == trainer.TrainJobKind && (tj == nil || r.UID == tj.UID) {
			// Owned: the garbage collector removes it with its job.
			return Keep, 0
		}
	}
	if tj != nil && tj.DeletionTimestamp == nil && tj.Spec.RuntimeRef.Name == rt.Name &&
		ptr.Deref(tj.Spec.RuntimeRef.Kind, "") == trainer.TrainingRuntimeKind {
		return Adopt, 0
	}
	if age := now.Sub(rt.CreationTimestamp.Time); age < Grace {
		return Wait, Grace - age
	}
	return Delete, 0
}

// Reconciler adopts or deletes owner-less per-job runtimes.
type Reconciler struct {
	Client client.Client
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// SetupWithManager watches per-job runtimes and the TrainJobs that use them.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	perJob := predicate.NewPredicateFuncs(func(o client.Object) bool { return jobspec.IsDerived(o.GetLabels()) })
	return ctrl.NewControllerManagedBy(mgr).
		Named("perjob-runtime").
		For(&trainer.TrainingRuntime{}, builder.WithPredicates(perJob)).
		Watches(&trainer.TrainJob{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			tj := o.(*trainer.TrainJob)
			if ptr.Deref(tj.Spec.RuntimeRef.Kind, "") != trainer.TrainingRuntimeKind {
				return nil
			}
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: tj.Namespace, Name: tj.Spec.RuntimeRef.Name}}}
		})).
		Complete(r)
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	rt := &trainer.TrainingRuntime{}
	if err := r.Client.Get(ctx, req.NamespacedName, rt); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !jobspec.IsDerived(rt.Labels) {
		return reconcile.Result{}, nil
	}
	log := ctrl.LoggerFrom(ctx).WithValues("trainingRuntime", klog.KObj(rt))
	var tj *trainer.TrainJob
	got := &trainer.TrainJob{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: rt.Namespace, Name: rt.Labels[api.JobLabel]}, got)
	switch {
	case err == nil:
		tj = got
	case !apierrors.IsNotFound(err):
		return reconcile.Result{}, err
	}
	now := time.Now()
	if r.Now != nil {
		now = r.Now()
	}
	decision, after := Decide(rt, tj, now)
	switch decision {
	case Adopt:
		patch := client.MergeFrom(rt.DeepCopy())
		rt.OwnerReferences = jobspec.Owned(rt, tj)
		if err := r.Client.Patch(ctx, rt, patch); err != nil {
			return reconcile.Result{}, fmt.Errorf("failed to give runtime %s to its job: %w", rt.Name, err)
		}
		log.V(1).Info("adopted a per-job runtime for its TrainJob")
	case Delete:
		if err := r.Client.Delete(ctx, rt, client.Preconditions{UID: &rt.UID}); err != nil && !apierrors.IsNotFound(err) {
			return reconcile.Result{}, fmt.Errorf("failed to delete orphaned runtime %s: %w", rt.Name, err)
		}
		log.Info("deleted a per-job runtime whose TrainJob never came", "age", now.Sub(rt.CreationTimestamp.Time).Round(time.Second))
	case Wait:
		return reconcile.Result{RequeueAfter: after}, nil
	case Release:
		patch := client.MergeFrom(rt.DeepCopy())
		controllerutil.RemoveFinalizer(rt, api.JobRuntimeFinalizer)
		if err := r.Client.Patch(ctx, rt, patch); err != nil && !apierrors.IsNotFound(err) {
			return reconcile.Result{}, fmt.Errorf("failed to release runtime %s: %w", rt.Name, err)
		}
		log.V(1).Info("released a per-job runtime whose job is gone")
	}
	return reconcile.Result{}, nil
}
