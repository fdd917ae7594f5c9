package netpol

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/mpijob/mpijob/config"
	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/runtimes"
)

// mpiRuntime is the runtime the project ships; torchRuntime is one with no
// MPI policy (a PyTorch runtime), whose jobs are not mpijob's to guard.
func mpiRuntime(t *testing.T) *trainer.ClusterTrainingRuntime {
	t.Helper()
	rt, err := config.Runtime("mpi-openmpi")
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

func torchRuntime(mpi *trainer.ClusterTrainingRuntime) *trainer.ClusterTrainingRuntime {
	rt := mpi.DeepCopy()
	rt.Name = "torch-distributed"
	rt.Spec.MLPolicy.MPI = nil
	rt.Spec.MLPolicy.Torch = &trainer.TorchMLPolicySource{}
	return rt
}

func trainJob(runtime string, annotations map[string]string) *trainer.TrainJob {
	return &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "team-a", UID: "uid-1", Annotations: annotations},
		Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: runtime}}}
}

// Reconcile keeps one NetworkPolicy for each MPI job that has not opted
// out, removes the one of a job that opts out, and leaves other jobs (and
// jobs being deleted or gone) alone.
func TestReconcile(t *testing.T) {
	mpi := mpiRuntime(t)
	existing := Build(trainJob(mpi.Name, nil))
	cases := map[string]struct {
		job      *trainer.TrainJob // nil: the job is gone
		existing bool              // the job's policy is there before
		want     bool              // the job's policy is there after
		applies  int               // server-side applies made
	}{
		"an MPI job gets its policy":                     {job: trainJob(mpi.Name, nil), want: true, applies: 1},
		"an MPI job keeps its policy, applying nothing":  {job: trainJob(mpi.Name, nil), existing: true, want: true},
		"a job created opted out gets none":              {job: trainJob(mpi.Name, map[string]string{api.NetworkPolicyAnnotation: "disabled"})},
		"a job that opts out loses its policy":           {job: trainJob(mpi.Name, map[string]string{api.NetworkPolicyAnnotation: "disabled"}), existing: true},
		"a PyTorch job is not mpijob's to guard":         {job: trainJob("torch-distributed", nil)},
		"a job on a runtime that does not exist: none":   {job: trainJob("no-such-runtime", nil)},
		"a job gone: nothing to do":                      {},
		"a job being deleted gets none (it is going)":    {job: deleting(trainJob(mpi.Name, nil))},
		"a job being deleted keeps what it has, for GC":  {job: deleting(trainJob(mpi.Name, nil)), existing: true, want: true},
		"another value of the annotation does not count": {job: trainJob(mpi.Name, map[string]string{api.NetworkPolicyAnnotation: "enabled"}), want: true, applies: 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs := []client.Object{mpi, torchRuntime(mpi)}
			if tc.job != nil {
				objs = append(objs, tc.job)
			}
			if tc.existing {
				objs = append(objs, existing.DeepCopy())
			}
			applies := 0
			c := countingApplies(objs, &applies)
			r := &Reconciler{Client: c, Runtimes: runtimes.RuntimeLookup{Client: c}}
			res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "team-a", Name: "hello"}})
			if err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			if applies != tc.applies {
				t.Errorf("%d applies, want %d (none when the policy is already what it should be)", applies, tc.applies)
			}
			if res.RequeueAfter != 0 {
				t.Errorf("requeued after %s, want no requeue (it acts on changes)", res.RequeueAfter)
			}
			got := &networkingv1.NetworkPolicy{}
			err = c.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: "hello-mpi"}, got)
			if apierrors.IsNotFound(err) == tc.want {
				t.Fatalf("policy there: %v (err %v), want %v", err == nil, err, tc.want)
			}
			if tc.want {
				if diff := cmp.Diff(existing.Spec, got.Spec); diff != "" {
					t.Errorf("policy spec (-want,+got):\n%s", diff)
				}
				if !metav1.IsControlledBy(got, &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{UID: "uid-1"}}) {
					t.Errorf("policy owners %+v, want the job as controller", got.OwnerReferences)
				}
			}
		})
	}
}

func deleting(tj *trainer.TrainJob) *trainer.TrainJob {
	tj.DeletionTimestamp = ptr.To(metav1.NewTime(time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)))
	tj.Finalizers = []string{"example.com/hold"} // the fake keeps an object being deleted only with one
	return tj
}

// countingApplies is a fake client holding objs that counts the
// server-side applies made through it (in applies).
func countingApplies(objs []client.Object, applies *int) client.WithWatch {
	return fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(objs...).
		WithInterceptorFuncs(interceptor.Funcs{Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			*applies++
			return applyCreates(ctx, c, obj, opts...)
		}}).Build()
}

// applyCreates makes a server-side apply of an object that is not there a
// create, as the API server does: the fake client's own apply cannot
// create a built-in kind from an unstructured apply configuration.
func applyCreates(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	raw, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	np := &networkingv1.NetworkPolicy{}
	if err := json.Unmarshal(raw, np); err != nil {
		return err
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(np), &networkingv1.NetworkPolicy{}); apierrors.IsNotFound(err) {
		return c.Create(ctx, np)
	}
	return c.Apply(ctx, obj, opts...)
}

// A policy is current when its spec, labels and controller are what Build
// says; anything else of it (a label someone added) does not matter.
func TestCurrent(t *testing.T) {
	want := Build(trainJob("mpi-openmpi", nil))
	cases := map[string]struct {
		edit func(*networkingv1.NetworkPolicy)
		want bool
	}{
		"as built":                 {edit: func(*networkingv1.NetworkPolicy) {}, want: true},
		"another label added":      {edit: func(p *networkingv1.NetworkPolicy) { p.Labels["team"] = "a" }, want: true},
		"a label of ours changed":  {edit: func(p *networkingv1.NetworkPolicy) { p.Labels["app.kubernetes.io/managed-by"] = "me" }},
		"ingress opened to all":    {edit: func(p *networkingv1.NetworkPolicy) { p.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{}} }},
		"owned by an older job":    {edit: func(p *networkingv1.NetworkPolicy) { p.OwnerReferences[0].UID = "uid-0" }},
		"no owner":                 {edit: func(p *networkingv1.NetworkPolicy) { p.OwnerReferences = nil }},
		"policy types left to API": {edit: func(p *networkingv1.NetworkPolicy) { p.Spec.PolicyTypes = nil }},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			have := want.DeepCopy()
			tc.edit(have)
			if got := Current(have, want); got != tc.want {
				t.Errorf("Current = %v, want %v", got, tc.want)
			}
		})
	}
}

// Of a TrainJob's updates, a status or progress write wakes nothing; a new
// spec or a changed opt-out does.
func TestOnlyChangesThatMatterWake(t *testing.T) {
	p := predicate.Or(predicate.GenerationChangedPredicate{}, optOutChanged)
	old := trainJob("mpi-openmpi", nil)
	old.Generation = 1
	status := old.DeepCopy()
	status.Annotations = map[string]string{api.StatusAnnotation: `{"phase":"Running"}`}
	spec := old.DeepCopy()
	spec.Generation = 2
	optOut := old.DeepCopy()
	optOut.Annotations = map[string]string{api.NetworkPolicyAnnotation: "disabled"}
	for name, tc := range map[string]struct {
		now  *trainer.TrainJob
		want bool
	}{"a status write": {status, false}, "a new spec": {spec, true}, "an opt-out": {optOut, true}} {
		if got := p.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: tc.now}); got != tc.want {
			t.Errorf("%s wakes the controller: %v, want %v", name, got, tc.want)
		}
	}
}
