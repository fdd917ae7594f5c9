package netpol

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/runtimes"
)

func namespace(scope string) *corev1.Namespace {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}
	if scope != "" {
		ns.Annotations = map[string]string{api.NetworkPolicyScopeAnnotation: scope}
	}
	return ns
}

func job(name, runtime string, annotations map[string]string) *trainer.TrainJob {
	tj := trainJob(runtime, annotations)
	tj.Name, tj.UID = name, k8stypes.UID("uid-"+name)
	return tj
}

func ownPolicy(name string) *networkingv1.NetworkPolicy {
	return Build(job(name, "mpi-openmpi", nil))
}

// The one policy of a namespace that shares one lists its MPI jobs that
// have not opted out, is applied only when that list changes, and goes
// when no job is left or the namespace goes back to a policy per job:
// then only once every job it guarded has its own, and never a tenant's
// own policy of the same name.
func TestNamespaceReconcile(t *testing.T) {
	mpi := mpiRuntime(t)
	two := []client.Object{job("a", mpi.Name, nil), job("b", mpi.Name, nil)}
	mixed := append([]client.Object{job("torch", "torch-distributed", nil),
		job("out", mpi.Name, map[string]string{api.NetworkPolicyAnnotation: "disabled"})}, two...)
	shared := BuildNamespace("team-a", []string{"a", "b"})
	tenants := shared.DeepCopy()
	tenants.Labels = nil
	cases := map[string]struct {
		scope   string
		objs    []client.Object
		want    []string // the jobs the shared policy lists after; nil: no policy
		applies int
		requeue bool
	}{
		"the namespace's MPI jobs, not another framework's nor one opted out": {
			scope: ScopeNamespace, objs: mixed, want: []string{"a", "b"}, applies: 1},
		"already current: nothing applied": {
			scope: ScopeNamespace, objs: append(two, shared.DeepCopy()), want: []string{"a", "b"}},
		"a job more: applied again": {
			scope: ScopeNamespace, objs: append(append(two, job("c", mpi.Name, nil)), shared.DeepCopy()), want: []string{"a", "b", "c"}, applies: 1},
		"no job left: the policy goes": {
			scope: ScopeNamespace, objs: []client.Object{shared.DeepCopy()}},
		"no job, no policy: nothing": {scope: ScopeNamespace},
		"a policy per job, nothing shared: nothing": {
			objs: two},
		"back to a policy per job before the jobs have theirs: kept": {
			objs: append(two, shared.DeepCopy()), want: []string{"a", "b"}, requeue: true},
		"back to a policy per job once they have theirs: it goes": {
			scope: ScopeJob, objs: append(two, shared.DeepCopy(), ownPolicy("a"), ownPolicy("b"))},
		"a typo in the scope is a policy per job": {
			scope: "namespaces", objs: append(two, shared.DeepCopy(), ownPolicy("a"), ownPolicy("b"))},
		"a tenant's own policy of that name is theirs": {
			objs: append(two, tenants, ownPolicy("a"), ownPolicy("b")), want: []string{"a", "b"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs := append([]client.Object{mpi, torchRuntime(mpi), namespace(tc.scope)}, tc.objs...)
			applies := 0
			c := countingApplies(objs, &applies)
			r := &NamespaceReconciler{Client: c, Runtimes: runtimes.RuntimeLookup{Client: c}}
			res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Name: "team-a"}})
			if err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			if applies != tc.applies {
				t.Errorf("%d applies, want %d", applies, tc.applies)
			}
			if (res.RequeueAfter == SharedWait) != tc.requeue {
				t.Errorf("requeued after %s, want a requeue: %v", res.RequeueAfter, tc.requeue)
			}
			got := &networkingv1.NetworkPolicy{}
			err = c.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: api.NamespaceNetworkPolicy}, got)
			if apierrors.IsNotFound(err) != (tc.want == nil) {
				t.Fatalf("shared policy there: %v (err %v), want %v", err == nil, err, tc.want != nil)
			}
			if tc.want != nil {
				if diff := cmp.Diff(BuildNamespace("team-a", tc.want).Spec, got.Spec); diff != "" {
					t.Errorf("shared policy spec (-want,+got):\n%s", diff)
				}
			}
		})
	}
}

// In a namespace that shares one policy, a job's own policy goes, but only
// once the shared one guards the job: its pods are never left open.
func TestOwnPolicyGivesWayToTheShared(t *testing.T) {
	mpi := mpiRuntime(t)
	cases := map[string]struct {
		objs    []client.Object
		wantOwn bool
		requeue bool
	}{
		"the shared policy guards the job: its own goes": {
			objs: []client.Object{ownPolicy("hello"), BuildNamespace("team-a", []string{"hello"})}},
		"no shared policy yet: its own stays": {
			objs: []client.Object{ownPolicy("hello")}, wantOwn: true, requeue: true},
		"the shared policy does not list it yet: its own stays": {
			objs: []client.Object{ownPolicy("hello"), BuildNamespace("team-a", []string{"other"})}, wantOwn: true, requeue: true},
		"no policy of its own: nothing to do": {},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs := append([]client.Object{mpi, namespace(ScopeNamespace), job("hello", mpi.Name, nil)}, tc.objs...)
			c := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(objs...).
				WithInterceptorFuncs(interceptor.Funcs{Apply: func(context.Context, client.WithWatch, runtime.ApplyConfiguration, ...client.ApplyOption) error {
					t.Error("applied a policy of its own in a namespace that shares one")
					return nil
				}}).Build()
			r := &Reconciler{Client: c, Runtimes: runtimes.RuntimeLookup{Client: c}}
			res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "team-a", Name: "hello"}})
			if err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			if (res.RequeueAfter == SharedWait) != tc.requeue {
				t.Errorf("requeued after %s, want a requeue: %v", res.RequeueAfter, tc.requeue)
			}
			err = c.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: "hello-mpi"}, &networkingv1.NetworkPolicy{})
			if apierrors.IsNotFound(err) == tc.wantOwn {
				t.Errorf("its own policy there: %v (err %v), want %v", err == nil, err, tc.wantOwn)
			}
		})
	}
}

// Guards tells which jobs a policy selects, per job or shared; the shared
// one's list is sorted and without repeats, so an unchanged set of jobs is
// an unchanged policy.
func TestGuardsAndBuildNamespace(t *testing.T) {
	if BuildNamespace("team-a", nil) != nil {
		t.Error("a shared policy for no job: want none (a selector needs a value)")
	}
	np := BuildNamespace("team-a", []string{"b", "a", "b"})
	if diff := cmp.Diff([]metav1.LabelSelectorRequirement{{Key: jobsetv1alpha2.JobSetNameKey, Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}}}, np.Spec.PodSelector.MatchExpressions); diff != "" {
		t.Errorf("shared selector (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(np.Spec.PodSelector, *np.Spec.Ingress[0].From[0].PodSelector); diff != "" {
		t.Errorf("ingress from other pods than the guarded ones (-selected,+admitted):\n%s", diff)
	}
	for _, tc := range []struct {
		np   *networkingv1.NetworkPolicy
		job  string
		want bool
	}{
		{np, "a", true}, {np, "c", false}, {np, "", false},
		{ownPolicy("a"), "a", true}, {ownPolicy("a"), "ab", false},
	} {
		if got := Guards(tc.np, tc.job); got != tc.want {
			t.Errorf("Guards(%s, %q) = %v, want %v", tc.np.Name, tc.job, got, tc.want)
		}
	}
	for scope, want := range map[string]bool{"": false, ScopeJob: false, ScopeNamespace: true, "Namespace": false} {
		if got := NamespaceScoped(namespace(scope)); got != want {
			t.Errorf("scope %q shared: %v, want %v", scope, got, want)
		}
	}
}
