package scopecontroller

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mpijob/mpijob/pkg/admission"
	"github.com/mpijob/mpijob/pkg/api"
)

// The list in the three objects follows the MPI ClusterTrainingRuntimes:
// a torch runtime is left out, conditions of other names are kept, and a
// reconcile with nothing new writes nothing.
func TestReconcileWritesTheMPIRuntimes(t *testing.T) {
	cond := func(expr string) []admissionregistrationv1.MatchCondition {
		return []admissionregistrationv1.MatchCondition{{Name: "keep", Expression: "true"}, {Name: admission.ScopeCondition, Expression: expr}}
	}
	mut := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "m"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "creator.trainjob.mpijob.dev", MatchConditions: cond("old")}}}
	val := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "v"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "validate.trainjob.mpijob.dev", MatchConditions: cond("old")}, {Name: "validate.workload.mpijob.dev"}}}
	vap := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: admission.ManagerRunningPolicy},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{MatchConditions: cond("old")}}
	mpi := &trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "my-mpi"},
		Spec: trainer.TrainingRuntimeSpec{MLPolicy: &trainer.MLPolicy{MLPolicySource: trainer.MLPolicySource{MPI: &trainer.MPIMLPolicySource{}}}}}
	torch := &trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "torch-distributed"},
		Spec: trainer.TrainingRuntimeSpec{MLPolicy: &trainer.MLPolicy{MLPolicySource: trainer.MLPolicySource{Torch: &trainer.TorchMLPolicySource{}}}}}
	cl := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(mut, val, vap, mpi, torch).Build()
	r := &Reconciler{Client: cl, Mutating: "m", Validating: "v"}
	if _, err := r.Reconcile(context.Background(), reconcile.Request{}); err != nil {
		t.Fatal(err)
	}
	want := cond(admission.ScopeExpression([]string{"my-mpi"}))
	gotM := &admissionregistrationv1.MutatingWebhookConfiguration{}
	gotV := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	gotP := &admissionregistrationv1.ValidatingAdmissionPolicy{}
	for _, o := range []struct {
		key client.ObjectKey
		obj client.Object
	}{{client.ObjectKey{Name: "m"}, gotM}, {client.ObjectKey{Name: "v"}, gotV}, {client.ObjectKey{Name: admission.ManagerRunningPolicy}, gotP}} {
		if err := cl.Get(context.Background(), o.key, o.obj); err != nil {
			t.Fatal(err)
		}
	}
	for name, got := range map[string][]admissionregistrationv1.MatchCondition{
		"mutating": gotM.Webhooks[0].MatchConditions, "validating": gotV.Webhooks[0].MatchConditions, "policy": gotP.Spec.MatchConditions,
	} {
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
	if gotV.Webhooks[1].MatchConditions != nil {
		t.Errorf("a webhook without the condition got one: %v", gotV.Webhooks[1].MatchConditions)
	}
	rv := gotV.ResourceVersion
	if _, err := r.Reconcile(context.Background(), reconcile.Request{}); err != nil {
		t.Fatal(err)
	}
	if err := cl.Get(context.Background(), client.ObjectKey{Name: "v"}, gotV); err != nil || gotV.ResourceVersion != rv {
		t.Errorf("a reconcile with nothing new wrote the configuration again (resourceVersion %s → %s, %v)", rv, gotV.ResourceVersion, err)
	}
	// Without the objects (not installed yet), nothing fails.
	empty := &Reconciler{Client: fake.NewClientBuilder().WithScheme(api.NewScheme()).Build(), Mutating: "m", Validating: "v"}
	if _, err := empty.Reconcile(context.Background(), reconcile.Request{}); err != nil {
		t.Errorf("with no configuration installed: %v", err)
	}
}

// SetupWithManager registers the controller with its watches on a manager
// (not started: nothing is read).
func TestSetupWithManager(t *testing.T) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, trainer.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	mgr, err := ctrl.NewManager(&rest.Config{Host: "https://127.0.0.1:1"}, ctrl.Options{Scheme: s, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{Client: mgr.GetClient(), Mutating: "m", Validating: "v"}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatalf("SetupWithManager: %v", err)
	}
	// A second controller of the same name is refused: the first one was
	// registered.
	if err := (&Reconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err == nil {
		t.Error("a second webhook-scope controller was registered: the first one was not")
	}
}
