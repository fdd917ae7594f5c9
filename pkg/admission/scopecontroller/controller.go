// Package scopecontroller keeps the list of MPI ClusterTrainingRuntimes in
// mpijob's webhook configurations and manager-down policy current (the
// match condition admission.ScopeCondition). It is a package of its own
// so that what imports pkg/admission (the dashboard) does not bring in
// controller-runtime's manager and its command-line flags.
package scopecontroller

import (
	"context"
	"fmt"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mpijob/mpijob/pkg/admission"
	"github.com/mpijob/mpijob/pkg/runtimes"
)

// Reconciler keeps admission.ScopeCondition's list of MPI ClusterTrainingRuntimes
// current in mpijob's webhook configurations and in admission.ManagerRunningPolicy:
// gather (the runtimes, the three objects) → decide (admission.SetScope, pure) →
// apply (an update of each object that changed). It runs on the leader.
//
// A new MPI runtime is matched a moment after it is created; the
// ClusterTrainingRuntime webhook (failurePolicy Fail) refuses new MPI
// runtimes while the manager is down, so the list cannot fall behind then.
type Reconciler struct {
	Client client.Client
	// Mutating and Validating name mpijob's webhook configurations.
	Mutating, Validating string
}

// scopeKey is the one key the reconciler works on: everything it writes
// depends on the whole set of runtimes.
var scopeKey = reconcile.Request{}

// SetupWithManager registers the reconciler: any change of a
// ClusterTrainingRuntime or of the objects it writes (a reinstall puts the
// release's list back) reconciles the one key; the informers' first list
// reconciles it at start.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	one := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{scopeKey}
	})
	named := func(names ...string) builder.Predicates {
		return builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			for _, n := range names {
				if o.GetName() == n {
					return true
				}
			}
			return false
		}))
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("webhook-scope").
		Watches(&trainer.ClusterTrainingRuntime{}, one).
		Watches(&admissionregistrationv1.MutatingWebhookConfiguration{}, one, named(r.Mutating)).
		Watches(&admissionregistrationv1.ValidatingWebhookConfiguration{}, one, named(r.Validating)).
		Watches(&admissionregistrationv1.ValidatingAdmissionPolicy{}, one, named(admission.ManagerRunningPolicy)).
		Complete(r)
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	names, err := runtimes.ListMPIRuntimeNames(ctx, r.Client)
	if err != nil {
		return reconcile.Result{}, err
	}
	expr := admission.ScopeExpression(names)
	log := ctrl.LoggerFrom(ctx)
	for _, o := range []struct {
		name string
		obj  client.Object
	}{
		{r.Mutating, &admissionregistrationv1.MutatingWebhookConfiguration{}},
		{r.Validating, &admissionregistrationv1.ValidatingWebhookConfiguration{}},
		{admission.ManagerRunningPolicy, &admissionregistrationv1.ValidatingAdmissionPolicy{}},
	} {
		key, obj := client.ObjectKey{Name: o.name}, o.obj
		changed := false
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := r.Client.Get(ctx, key, obj); err != nil {
				return err
			}
			if changed = admission.SetScope(obj, expr); !changed {
				return nil
			}
			return r.Client.Update(ctx, obj)
		})
		if client.IgnoreNotFound(err) != nil {
			return reconcile.Result{}, fmt.Errorf("failed to write the MPI runtimes into %s: %w", key.Name, err)
		}
		if err == nil && changed {
			log.Info("MPI jobs' match condition updated", "object", key.Name, "mpiRuntimes", names)
		}
	}
	return reconcile.Result{}, nil
}
