package netpol

import (
	"context"
	"fmt"
	"slices"
	"time"

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
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/runtimes"
)

// Reconciler keeps one NetworkPolicy per MPI TrainJob, or none where the
// job's namespace shares one (NamespaceReconciler keeps that one).
type Reconciler struct {
	Client   client.Client
	Runtimes runtimes.RuntimeLookup
}

// SetupWithManager watches TrainJobs and the policies they own. A job's
// policy depends on its name, UID and opt-out annotation only: of a
// TrainJob's updates, only a new spec or a changed opt-out wake it; the
// status and progress writes that make most of a running job's updates do
// not (issue "At the control plane's pace"). A namespace whose scope
// changes wakes each of its jobs.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("networkpolicy").
		For(&trainer.TrainJob{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, optOutChanged))).
		Owns(&networkingv1.NetworkPolicy{}).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.jobsOf), builder.WithPredicates(scopeChanged)).
		Complete(r)
}

// jobsOf maps a Namespace to its TrainJobs.
func (r *Reconciler) jobsOf(ctx context.Context, o client.Object) []reconcile.Request {
	jobs := &trainer.TrainJobList{}
	if err := r.Client.List(ctx, jobs, client.InNamespace(o.GetName())); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "failed to list the TrainJobs of a namespace whose NetworkPolicy scope changed", "namespace", o.GetName())
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(jobs.Items))
	for i := range jobs.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&jobs.Items[i])})
	}
	return reqs
}

// scopeChanged passes a Namespace update that changes its NetworkPolicy
// scope (and nothing else: a namespace's creation has no jobs yet, and its
// deletion takes the jobs with it).
var scopeChanged = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetAnnotations()[api.NetworkPolicyScopeAnnotation] != e.ObjectNew.GetAnnotations()[api.NetworkPolicyScopeAnnotation]
	},
}

// SharedWait is how soon a job's own policy is looked at again while its
// namespace's shared policy does not guard it yet (or, going back, while
// it has no policy of its own yet): the one goes only once the other is
// there, so the job's pods are never left open.
const SharedWait = 2 * time.Second

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
	spec, _, found, err := r.Runtimes.GetShared(ctx, tj)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !found || !runtimes.IsMPI(spec) {
		return ctrl.Result{}, nil
	}
	ns := &corev1.Namespace{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: tj.Namespace}, ns); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("failed to read namespace %s for its NetworkPolicy scope: %w", tj.Namespace, err)
	}
	if Disabled(tj) || NamespaceScoped(ns) {
		return r.removeOwn(ctx, tj, !Disabled(tj))
	}
	want := Build(tj)
	have := &networkingv1.NetworkPolicy{}
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(want), have); err == nil && Current(have, want) {
		return ctrl.Result{}, nil
	} else if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("failed to read NetworkPolicy %s: %w", want.Name, err)
	}
	return ctrl.Result{}, apply(ctx, r.Client, want)
}

// apply server-side-applies policy np as mpijob-manager. In a namespace
// being deleted it does nothing: the namespace and its jobs are going
// away, nothing is left to protect, and retrying only fills the log.
func apply(ctx context.Context, c client.Client, np *networkingv1.NetworkPolicy) error {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(np)
	if err != nil {
		return err
	}
	delete(u, "status")
	obj := client.ApplyConfigurationFromUnstructured(&unstructured.Unstructured{Object: u})
	if err := c.Apply(ctx, obj, client.FieldOwner(api.FieldManager), client.ForceOwnership); err != nil {
		if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			return nil
		}
		return fmt.Errorf("failed to apply NetworkPolicy %s/%s: %w", np.Namespace, np.Name, err)
	}
	return nil
}

// removeOwn deletes tj's own policy, if it has one. When shared, the
// namespace's policy takes over, so the job's goes only once that one
// guards the job.
func (r *Reconciler) removeOwn(ctx context.Context, tj *trainer.TrainJob, shared bool) (ctrl.Result, error) {
	own := &networkingv1.NetworkPolicy{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: tj.Namespace, Name: Name(tj)}, own); apierrors.IsNotFound(err) {
		return ctrl.Result{}, nil
	} else if err != nil {
		return ctrl.Result{}, fmt.Errorf("failed to read NetworkPolicy %s: %w", Name(tj), err)
	}
	if shared {
		np := &networkingv1.NetworkPolicy{}
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: tj.Namespace, Name: api.NamespaceNetworkPolicy}, np); err != nil || !Guards(np, tj.Name) {
			if err != nil && !apierrors.IsNotFound(err) {
				return ctrl.Result{}, fmt.Errorf("failed to read NetworkPolicy %s: %w", api.NamespaceNetworkPolicy, err)
			}
			return ctrl.Result{RequeueAfter: SharedWait}, nil
		}
	}
	if err := r.Client.Delete(ctx, own, client.Preconditions{UID: &own.UID}); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("failed to delete NetworkPolicy %s: %w", own.Name, err)
	}
	return ctrl.Result{}, nil
}
