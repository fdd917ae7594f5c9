package netpol

import (
	"context"
	"fmt"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/runtimes"
)

// Reconciler keeps one NetworkPolicy per MPI TrainJob.
type Reconciler struct {
	Client   client.Client
	Runtimes runtimes.RuntimeLookup
}

// SetupWithManager watches TrainJobs and the policies they own.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("networkpolicy").
		For(&trainer.TrainJob{}).
		Owns(&networkingv1.NetworkPolicy{}).
		Complete(r)
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	tj := &trainer.TrainJob{}
	if err := r.Client.Get(ctx, req.NamespacedName, tj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("trainJob", klog.KObj(tj)))
	if tj.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	spec, _, found, err := r.Runtimes.Get(ctx, tj)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !found || !runtimes.IsMPI(spec) {
		return ctrl.Result{}, nil
	}
	if Disabled(tj) {
		np := &networkingv1.NetworkPolicy{}
		np.Namespace, np.Name = tj.Namespace, Name(tj)
		if err := r.Client.Delete(ctx, np); err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("failed to delete NetworkPolicy %s: %w", np.Name, err)
		}
		return ctrl.Result{}, nil
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(Build(tj))
	if err != nil {
		return ctrl.Result{}, err
	}
	delete(u, "status")
	obj := client.ApplyConfigurationFromUnstructured(&unstructured.Unstructured{Object: u})
	if err := r.Client.Apply(ctx, obj, client.FieldOwner(api.FieldManager), client.ForceOwnership); err != nil {
		if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			// The namespace and the job with it are going away: nothing
			// to protect, and retrying only fills the log.
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("failed to apply NetworkPolicy %s: %w", Name(tj), err)
	}
	return ctrl.Result{}, nil
}
