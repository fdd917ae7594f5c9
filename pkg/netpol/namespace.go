package netpol

import (
	"context"
	"fmt"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// NamespaceReconciler keeps the one NetworkPolicy of each namespace whose
// MPI jobs share one (api.NetworkPolicyScopeAnnotation "namespace"): it
// lists the namespace's MPI jobs that have not opted out, and goes when
// none is left or the namespace goes back to a policy per job.
type NamespaceReconciler struct {
	Client   client.Client
	Runtimes runtimes.RuntimeLookup
}

// SetupWithManager watches Namespaces whose scope changes, the creation
// and deletion of TrainJobs (and a changed opt-out): what changes the list
// of jobs, not their status writes; and the shared policies themselves, so
// an edit is put back.
func (r *NamespaceReconciler) SetupWithManager(mgr ctrl.Manager) error {
	toNamespace := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: o.GetNamespace()}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("networkpolicy-namespace").
		For(&corev1.Namespace{}, builder.WithPredicates(predicate.Funcs{
			CreateFunc: func(e event.CreateEvent) bool { return NamespaceScoped(e.Object.(*corev1.Namespace)) },
			UpdateFunc: scopeChanged.UpdateFunc,
			DeleteFunc: func(event.DeleteEvent) bool { return false },
		})).
		Watches(&trainer.TrainJob{}, toNamespace, builder.WithPredicates(predicate.Funcs{UpdateFunc: optOutChanged.UpdateFunc})).
		Watches(&networkingv1.NetworkPolicy{}, toNamespace, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetName() == api.NamespaceNetworkPolicy
		}))).
		Complete(r)
}

// Reconcile implements reconcile.Reconciler: gather (the namespace, its
// shared policy, its jobs), decide (the policy it should have), apply.
func (r *NamespaceReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ns := &corev1.Namespace{}
	if err := r.Client.Get(ctx, req.NamespacedName, ns); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if ns.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	have := &networkingv1.NetworkPolicy{}
	switch err := r.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: api.NamespaceNetworkPolicy}, have); {
	case apierrors.IsNotFound(err):
		have = nil
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("failed to read NetworkPolicy %s/%s: %w", ns.Name, api.NamespaceNetworkPolicy, err)
	}
	if have == nil && !NamespaceScoped(ns) {
		return ctrl.Result{}, nil // the common case: nothing shared, nothing to do
	}
	jobs, err := r.guarded(ctx, ns.Name)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !NamespaceScoped(ns) {
		return r.unshare(ctx, have, jobs)
	}
	want := BuildNamespace(ns.Name, jobs)
	if want == nil {
		return ctrl.Result{}, r.deleteShared(ctx, have)
	}
	if have != nil && Current(have, want) {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, apply(ctx, r.Client, want)
}

// guarded lists the names of the namespace's MPI jobs that have not opted
// out. A job being deleted stays: its pods may still run.
func (r *NamespaceReconciler) guarded(ctx context.Context, namespace string) ([]string, error) {
	list := &trainer.TrainJobList{}
	if err := r.Client.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("failed to list the TrainJobs of %s: %w", namespace, err)
	}
	var names []string
	for i := range list.Items {
		tj := &list.Items[i]
		if Disabled(tj) {
			continue
		}
		spec, _, found, err := r.Runtimes.GetShared(ctx, tj)
		if err != nil {
			return nil, err
		}
		if found && runtimes.IsMPI(spec) {
			names = append(names, tj.Name)
		}
	}
	return names, nil
}

// unshare removes the shared policy of a namespace gone back to a policy
// per job, once each job it guarded has its own (the Reconciler makes
// them): until then it keeps the jobs' pods closed.
func (r *NamespaceReconciler) unshare(ctx context.Context, have *networkingv1.NetworkPolicy, jobs []string) (ctrl.Result, error) {
	for _, job := range jobs {
		if !Guards(have, job) {
			continue
		}
		own := &networkingv1.NetworkPolicy{}
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: have.Namespace, Name: job + Suffix}, own); apierrors.IsNotFound(err) {
			return ctrl.Result{RequeueAfter: SharedWait}, nil
		} else if err != nil {
			return ctrl.Result{}, fmt.Errorf("failed to read NetworkPolicy %s: %w", job+Suffix, err)
		}
	}
	return ctrl.Result{}, r.deleteShared(ctx, have)
}

// deleteShared deletes the shared policy, if there is one that
// mpijob-manager made (a tenant's own policy of that name is theirs).
func (r *NamespaceReconciler) deleteShared(ctx context.Context, have *networkingv1.NetworkPolicy) error {
	if have == nil || have.Labels[ManagedByLabel] != api.FieldManager {
		return nil
	}
	if err := r.Client.Delete(ctx, have, client.Preconditions{UID: &have.UID}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to delete NetworkPolicy %s/%s: %w", have.Namespace, have.Name, err)
	}
	return nil
}
