package admission

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/config"
	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/manifests"
)

// evalScope evaluates ScopeExpression the way the API server does a match
// condition: with the object as JSON data.
func evalScope(t *testing.T, expr string, object any) (bool, error) {
	t.Helper()
	return evalCEL(t, expr, map[string]any{"object": object})
}

// evalCEL evaluates a match condition's expression with vars (object,
// oldObject, request: JSON data) as the API server does; a result that is
// not true is false.
func evalCEL(t *testing.T, expr string, vars map[string]any) (bool, error) {
	t.Helper()
	env, err := cel.NewEnv(cel.Variable("object", cel.DynType), cel.Variable("oldObject", cel.DynType), cel.Variable("request", cel.DynType))
	if err != nil {
		t.Fatal(err)
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		t.Fatalf("the expression does not compile: %v\n%s", iss.Err(), expr)
	}
	prg, err := env.Program(ast)
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := prg.Eval(vars)
	if err != nil {
		return false, err
	}
	b, ok := out.Value().(bool)
	return ok && b, nil
}

// The API server's match condition and the webhooks' own check agree on
// which TrainJobs are MPI jobs, and neither errs on a TrainJob the schema
// has not checked yet (mutating webhooks see it first).
func TestScopeExpression(t *testing.T) {
	mpi := []string{"mpi-openmpi", "deepspeed-distributed", "mlx-distributed"}
	job := func(name, ref string, kind string, labels map[string]string) *trainer.TrainJob {
		tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: ref}}}
		if kind != "" {
			tj.Spec.RuntimeRef.Kind = ptr.To(kind)
		}
		return tj
	}
	cases := map[string]struct {
		tj   *trainer.TrainJob
		want bool
	}{
		"torch on upstream's runtime":   {tj: job("t", "torch-distributed", trainer.ClusterTrainingRuntimeKind, nil), want: false},
		"jax, kind left to the default": {tj: job("j", "jax-distributed", "", nil), want: false},
		// A match condition cannot read the runtime: every job on a
		// namespaced runtime reaches the webhooks, which let another
		// framework's through unchanged (TestNamespacedRuntimes).
		"xgboost on a tenant's own runtime":         {tj: job("x", "my-xgboost", trainer.TrainingRuntimeKind, nil), want: true},
		"a tenant's own MPI runtime":                {tj: job("x", "team-mpi", trainer.TrainingRuntimeKind, nil), want: true},
		"an MPI job on mpijob's runtime":            {tj: job("m", "mpi-openmpi", trainer.ClusterTrainingRuntimeKind, nil), want: true},
		"upstream's deepspeed-distributed":          {tj: job("d", "deepspeed-distributed", "", nil), want: true},
		"a typo of an MPI runtime":                  {tj: job("m", "mpi-opnempi", "", nil), want: true},
		"a per-job runtime (named after its job)":   {tj: job("m", "m", trainer.TrainingRuntimeKind, nil), want: true},
		"a job mpijob's builder made":               {tj: job("m", "other", trainer.TrainingRuntimeKind, map[string]string{api.BaseRuntimeLabel: "mpi-openmpi"}), want: true},
		"a tenant runtime under another job's name": {tj: job("m", "n", trainer.TrainingRuntimeKind, map[string]string{"team": "a"}), want: true},
		"a name only generateName will give":        {tj: job("", "m", trainer.TrainingRuntimeKind, nil), want: true},
	}
	expr := ScopeExpression(mpi)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			raw, err := json.Marshal(tc.tj)
			if err != nil {
				t.Fatal(err)
			}
			var object map[string]any
			if err := json.Unmarshal(raw, &object); err != nil {
				t.Fatal(err)
			}
			got, err := evalScope(t, expr, object)
			if err != nil {
				t.Fatalf("CEL: %v", err)
			}
			if got != tc.want {
				t.Errorf("match condition: %v, want %v", got, tc.want)
			}
		})
	}
	for name, object := range map[string]any{
		"no spec":       map[string]any{"metadata": map[string]any{"name": "x"}},
		"no runtimeRef": map[string]any{"metadata": map[string]any{"name": "x"}, "spec": map[string]any{}},
		"no metadata":   map[string]any{"spec": map[string]any{"runtimeRef": map[string]any{"name": "x", "kind": "TrainingRuntime"}}},
	} {
		if got, err := evalScope(t, expr, object); err != nil || got {
			t.Errorf("%s: %v, %v; want false without an error (the schema refuses it)", name, got, err)
		}
	}
}

// The release's webhook configurations and policy ship the expression for
// the runtimes in config/runtimes and upstream's MPI runtimes (what the
// manager writes once it runs), under the condition name the manager
// looks for.
func TestReleaseShipsTheScope(t *testing.T) {
	want := ScopeExpression(append(config.RuntimeNames(), "deepspeed-distributed", "mlx-distributed"))
	found := map[string]int{}
	for _, obj := range releaseAdmission(t) {
		kind := reflect.TypeOf(obj).Elem().Name()
		for _, c := range MatchConditions(obj) {
			if c.Name == ScopeCondition {
				found[kind]++
				if diff := cmp.Diff(want, c.Expression); diff != "" {
					t.Errorf("%s: %s's expression is not the one the manager writes (-want +got):\n%s", kind, ScopeCondition, diff)
				}
			}
		}
	}
	if diff := cmp.Diff(map[string]int{"MutatingWebhookConfiguration": 1, "ValidatingWebhookConfiguration": 1, "ValidatingAdmissionPolicy": 1}, found); diff != "" {
		t.Errorf("where %s stands (-want +got):\n%s", ScopeCondition, diff)
	}
}

// releaseAdmission is the release's webhook configurations and admission
// policies, read strictly: a misspelled field of the manifest fails here.
func releaseAdmission(t *testing.T) []client.Object {
	t.Helper()
	objs, err := manifests.Parse(bytes.NewReader(config.WebhookManifest), "config/webhook/manifests.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var out []client.Object
	for _, u := range objs {
		var obj client.Object
		switch u.GetKind() {
		case "MutatingWebhookConfiguration":
			obj = &admissionregistrationv1.MutatingWebhookConfiguration{}
		case "ValidatingWebhookConfiguration":
			obj = &admissionregistrationv1.ValidatingWebhookConfiguration{}
		case "ValidatingAdmissionPolicy":
			obj = &admissionregistrationv1.ValidatingAdmissionPolicy{}
		default:
			continue
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, obj, true); err != nil {
			t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
		}
		out = append(out, obj)
	}
	return out
}

// The creator webhook is called once per create: reinvoked after
// Trainer's defaulter stamps the runtime patches' times (IfNeeded), it was
// one admission call in three of an MPI create, and DedupeKueuePatch needs
// no second call in any order of the webhooks
// (TestDedupeKueuePatchInAnyOrder).
func TestCreatorIsCalledOnce(t *testing.T) {
	got := map[string]admissionregistrationv1.ReinvocationPolicyType{}
	for _, obj := range releaseAdmission(t) {
		if cfg, ok := obj.(*admissionregistrationv1.MutatingWebhookConfiguration); ok {
			for _, w := range cfg.Webhooks {
				got[w.Name] = ptr.Deref(w.ReinvocationPolicy, admissionregistrationv1.NeverReinvocationPolicy)
			}
		}
	}
	if diff := cmp.Diff(map[string]admissionregistrationv1.ReinvocationPolicyType{"creator.trainjob.mpijob.dev": admissionregistrationv1.NeverReinvocationPolicy}, got); diff != "" {
		t.Errorf("the mutating webhooks' reinvocation (-want +got):\n%s", diff)
	}
}

func TestSetScope(t *testing.T) {
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{Webhooks: []admissionregistrationv1.ValidatingWebhook{
		{Name: "a", MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "other", Expression: "true"}, {Name: ScopeCondition, Expression: "old"}}},
		{Name: "b"},
	}}
	if !SetScope(cfg, "new") {
		t.Error("SetScope reported no change")
	}
	want := []admissionregistrationv1.MatchCondition{{Name: "other", Expression: "true"}, {Name: ScopeCondition, Expression: "new"}}
	if diff := cmp.Diff(want, cfg.Webhooks[0].MatchConditions); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}
	if SetScope(cfg, "new") {
		t.Error("SetScope reported a change when the expression was already set")
	}
	vap := &admissionregistrationv1.ValidatingAdmissionPolicy{Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
		MatchConditions: []admissionregistrationv1.MatchCondition{{Name: ScopeCondition, Expression: "old"}}}}
	if !SetScope(vap, "new") || vap.Spec.MatchConditions[0].Expression != "new" {
		t.Errorf("policy: %+v", vap.Spec.MatchConditions)
	}
}
