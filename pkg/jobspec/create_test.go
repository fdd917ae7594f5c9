package jobspec

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/mpijob/mpijob/pkg/api"
)

// The vectors the Python SDK tests too.
func TestRuntimeNotSeenVectors(t *testing.T) {
	raw, err := os.ReadFile("testdata/runtime-not-seen.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Vectors []struct {
			Error     string `json:"error"`
			Retry     bool   `json:"retry"`
			AnyCreate bool   `json:"anyCreate"`
		} `json:"vectors"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Vectors) == 0 {
		t.Fatal("no vectors")
	}
	for _, v := range f.Vectors {
		if got := TryAgain(errors.New(v.Error), true); got != v.Retry {
			t.Errorf("TryAgain(%q, right after the runtime) = %v, want %v", v.Error, got, v.Retry)
		}
		if got := TryAgain(errors.New(v.Error), false); got != v.AnyCreate {
			t.Errorf("TryAgain(%q, any create) = %v, want %v", v.Error, got, v.AnyCreate)
		}
	}
}

// A create that Trainer refuses because its cache has not seen the new
// runtime is tried again; any other refusal is returned at once.
func TestCreateTrainJobWaitsForTrainerToSeeTheRuntime(t *testing.T) {
	notSeen := errors.New(`admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request: TrainingRuntime.trainer.kubeflow.org "x" not found: specified trainingRuntime must be created before the TrainJob is created`)
	cases := map[string]struct {
		failures int
		other    error
		want     error
		calls    int
	}{
		"seen at once":          {calls: 1},
		"seen at the third try": {failures: 2, calls: 3},
		"another refusal":       {other: errors.New("denied: spec.trainer.numNodes: must be at least 1"), want: errors.New("denied: spec.trainer.numNodes: must be at least 1"), calls: 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			calls := 0
			c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithInterceptorFuncs(interceptor.Funcs{
				Create: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
					calls++
					if tc.other != nil {
						return tc.other
					}
					if calls <= tc.failures {
						return notSeen
					}
					return cl.Create(ctx, obj, opts...)
				}}).Build()
			tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "team-a"}}
			err := CreateTrainJob(context.Background(), c, tj)
			if (err == nil) != (tc.want == nil) || (err != nil && err.Error() != tc.want.Error()) {
				t.Errorf("error %v, want %v", err, tc.want)
			}
			if calls != tc.calls {
				t.Errorf("%d create calls, want %d", calls, tc.calls)
			}
		})
	}
}

func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := trainer.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// An earlier dry run's runtime of the same name that goes between the
// refused create and the read of it is no error: the name is free, and
// the runtime is created (the quickstart's two dry runs of "big" in a row
// failed with `trainingruntimes "big" not found`).
func TestCreateRuntimeWhileTheOldOneGoes(t *testing.T) {
	creates := 0
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			creates++
			if creates == 1 {
				return apierrors.NewAlreadyExists(schema.GroupResource{Group: "trainer.kubeflow.org", Resource: "trainingruntimes"}, obj.GetName())
			}
			return cl.Create(ctx, obj, opts...)
		}}).Build()
	rt := &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: "team-a", Labels: map[string]string{api.JobLabel: "big"}}}
	if err := createRuntime(context.Background(), c, rt); err != nil {
		t.Fatalf("createRuntime: %v", err)
	}
	if creates != 2 {
		t.Errorf("%d creates, want 2 (refused, then made)", creates)
	}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(rt), &trainer.TrainingRuntime{}); err != nil {
		t.Errorf("the runtime is not there: %v", err)
	}
}
