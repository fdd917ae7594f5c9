package netpol

import (
	"context"
	"fmt"
	"slices"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/runtimes"
)

// Reconciler keeps one NetworkPolicy per MPI TrainJob.
type Reconciler struct {
	Client   client.Client
	Runtimes runtimes.RuntimeLookup
}

// SetupWithManager watches TrainJobs and the policies they own. A job's
// policy depends on its name, UID and opt-out annotation only: of a
// TrainJob's updates, only a new spec or a changed opt-out wake it; the
// status and progress writes that make most of a running job's updates do
// not (issue "At the control plane's pace").
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("networkpolicy").
		For(&trainer.TrainJob{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, optOutChanged))).
		Owns(&networkingv1.NetworkPolicy{}).
		Complete(r)
}

// optOutChanged passes a TrainJob update that changes the opt-out
// annotation (creates and deletes pass too).
var optOutChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	return e.ObjectOld.GetAnnotations()[api.NetworkPolicyAnnotation] != e.ObjectNew.GetAnnotations()[api.NetworkPolicyAnnotation]
}}

// Current reports whether have, the policy there now, is want as far as
// this controller owns it: the same spec, want's labels and want's
// controller. Then nothing is applied: an apply that changes nothing still
// costs the API server a write path and every watcher an event.
func Current(have, want *networkingv1.NetworkPolicy) bool {
	for k, v := range want.Labels {
		if have.Labels[k] != v {
			return false
		}
	}
	for _, ref := range want.OwnerReferences {
		if !slices.ContainsFunc(have.OwnerReferences, func(o metav1.OwnerReference) bool {
			return o.UID == ref.UID && o.Kind == ref.Kind && ptr.Deref(o.Controller, false) == ptr.Deref(ref.Controller, false)
		}) {
			return false
		}
	}
	return equality.Semantic.DeepEqual(have.Spec, want.Spec)
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
	want := Build(tj)
	have := &networkingv1.NetworkPolicy{}
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(want), have); err == nil && Current(have, want) {
		return ctrl.Result{}, nil
	} else if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("failed to read NetworkPolicy %s: %w", want.Name, err)
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(want)
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
