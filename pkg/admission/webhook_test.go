package admission

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	admissionv1 "k8s.io/api/admission/v1"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	"github.com/mpijob/mpijob/config"
	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/runtimes"
)

func shipped(t *testing.T, name string) *trainer.ClusterTrainingRuntime {
	t.Helper()
	raw, err := config.Runtimes.ReadFile("runtimes/" + name + ".yaml")
	if err != nil {
		t.Fatal(err)
	}
	rt := &trainer.ClusterTrainingRuntime{}
	if err := yaml.UnmarshalStrict(raw, rt); err != nil {
		t.Fatal(err)
	}
	return rt
}

func reqCtx(t *testing.T, op admissionv1.Operation, user string, old *trainer.TrainJob) context.Context {
	t.Helper()
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: op, Namespace: "team-a", UserInfo: authnv1.UserInfo{Username: user}}}
	if old != nil {
		raw, err := json.Marshal(old)
		if err != nil {
			t.Fatal(err)
		}
		req.OldObject = runtime.RawExtension{Raw: raw}
	}
	return admission.NewContextWithRequest(context.Background(), req)
}

func tjOn(name, rt string, workers int32) *trainer.TrainJob {
	return &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a"},
		Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: rt}, Trainer: &trainer.Trainer{NumNodes: &workers}}}
}

// The creator is the requesting user on create, whatever the request says,
// and stays on update.
func TestDefaulterStampsTheCreator(t *testing.T) {
	d := &Defaulter{}
	forged := tjOn("a", "mpi-openmpi", 1)
	forged.Annotations = map[string]string{api.CreatorAnnotation: "someone-else"}
	if err := d.Default(reqCtx(t, admissionv1.Create, "dev-a", nil), forged); err != nil {
		t.Fatal(err)
	}
	if got := forged.Annotations[api.CreatorAnnotation]; got != "dev-a" {
		t.Errorf("creator on create %q, want the requesting user dev-a", got)
	}
	old := forged.DeepCopy()
	upd := forged.DeepCopy()
	upd.Annotations[api.CreatorAnnotation] = "dev-b"
	if err := d.Default(reqCtx(t, admissionv1.Update, "dev-b", old), upd); err != nil {
		t.Fatal(err)
	}
	if got := upd.Annotations[api.CreatorAnnotation]; got != "dev-a" {
		t.Errorf("creator after an update by dev-b %q, want dev-a kept", got)
	}
	bad := tjOn("b", "mpi-openmpi", 1)
	bad.Annotations = map[string]string{runtimes.ProgressTimeoutAnnotation: "soon"}
	var se *apierrors.StatusError
	if err := d.Default(reqCtx(t, admissionv1.Create, "dev-a", nil), bad); !errors.As(err, &se) || !apierrors.IsInvalid(err) {
		t.Errorf("a bad progress timeout: %v, want Invalid", err)
	}
}

func TestValidator(t *testing.T) {
	gpu := shipped(t, "mpi-openmpi-gpu")
	cpu := shipped(t, "mpi-openmpi")
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "gpus", Namespace: "team-a"},
		Spec:   corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"requests.nvidia.com/gpu": resource.MustParse("8")}},
		Status: corev1.ResourceQuotaStatus{Hard: corev1.ResourceList{"requests.nvidia.com/gpu": resource.MustParse("8")}, Used: corev1.ResourceList{}}}
	cl := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(gpu, cpu, quota).Build()
	v := &Validator{Runtimes: runtimes.RuntimeLookup{Client: cl}, Client: cl}
	other := tjOn("torch", "torch-distributed", 2)
	cases := map[string]struct {
		tj      *trainer.TrainJob
		reason  metav1.StatusReason
		msg     string
		causes  int
		allowed bool
	}{
		"fits":                            {tj: tjOn("hello", "mpi-openmpi", 2), allowed: true},
		"another framework's runtime":     {tj: other, allowed: true},
		"an MPI runtime name with a typo": {tj: tjOn("x", "mpi-opnempi", 2), reason: metav1.StatusReasonInvalid, msg: `did you mean "mpi-openmpi"`},
		"over the namespace's GPU quota":  {tj: tjOn("big", "mpi-openmpi-gpu", 9), reason: metav1.StatusReasonForbidden, msg: "does not fit the quota of namespace team-a", causes: 1},
		"zero Workers":                    {tj: tjOn("none", "mpi-openmpi", 0), reason: metav1.StatusReasonInvalid, msg: "spec.trainer.numNodes"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := v.ValidateCreate(reqCtx(t, admissionv1.Create, "dev-a", nil), tc.tj)
			if tc.allowed {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var se *apierrors.StatusError
			if !errors.As(err, &se) {
				t.Fatalf("error %v, want a Status", err)
			}
			st := se.Status()
			if st.Reason != tc.reason || !strings.Contains(st.Message, tc.msg) {
				t.Errorf("status %s %q, want %s with %q", st.Reason, st.Message, tc.reason, tc.msg)
			}
			if got := len(api.QuotaCauses(st)); got != tc.causes {
				t.Errorf("%d quota causes, want %d", got, tc.causes)
			}
		})
	}
	// The creator cannot change.
	old := tjOn("hello", "mpi-openmpi", 2)
	old.Annotations = map[string]string{api.CreatorAnnotation: "dev-a"}
	upd := old.DeepCopy()
	upd.Annotations[api.CreatorAnnotation] = "dev-b"
	_, err := v.ValidateUpdate(context.Background(), old, upd)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), `metadata.annotations[mpijob.dev/creator]`) {
		t.Errorf("a changed creator: %v, want Invalid naming the annotation", err)
	}
	if _, err := v.ValidateUpdate(context.Background(), old, old.DeepCopy()); err != nil {
		t.Errorf("an unchanged creator: %v", err)
	}
}
