package admission

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/runtimes"
)

// FuzzWebhooks sends arbitrary AdmissionReview bodies, and arbitrary
// objects inside well-formed ones, to every webhook the manager serves.
// None may panic (a panic would take admission down for every tenant), and
// every answer is an AdmissionReview or an HTTP error. `go test` runs the
// seeds; `go test -fuzz FuzzWebhooks ./pkg/admission` explores.
func FuzzWebhooks(f *testing.F) {
	cpu := shipped(f, "mpi-openmpi")
	cl := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(cpu).Build()
	lookup := runtimes.RuntimeLookup{Client: cl}
	scheme := api.NewScheme()
	hooks := []http.Handler{
		admission.WithDefaulter(scheme, &Defaulter{Runtimes: lookup}),
		admission.WithValidator(scheme, &Validator{Runtimes: lookup, Client: cl, MaxWorkers: 256, Manager: "system:serviceaccount:mpijob-system:mpijob-manager"}),
		admission.WithValidator(scheme, ClusterRuntimeValidator{}),
		admission.WithValidator(scheme, RuntimeValidator{Client: cl}),
	}
	job := `{"apiVersion":"trainer.kubeflow.org/v1alpha1","kind":"TrainJob","metadata":{"name":"j","namespace":"team-a","annotations":{"mpijob.dev/creator":"dev-a"}},` +
		`"spec":{"runtimeRef":{"name":"mpi-openmpi"},"trainer":{"numNodes":2,"numProcPerNode":1},"suspend":true}}`
	for _, seed := range []struct{ op, object, old string }{
		{"CREATE", job, ""},
		{"UPDATE", job, job},
		{"UPDATE", `{"kind":"TrainJob","metadata":{"name":"j"},"spec":{"runtimeRef":{"name":"mpi-openmpi","kind":"TrainingRuntime"},"trainer":{"numNodes":-1}}}`, `{}`},
		{"CREATE", `{"kind":"ClusterTrainingRuntime","metadata":{"name":"r","annotations":{"policy.mpijob.dev/max-worker":"x"}},"spec":{}}`, ""},
		{"UPDATE", `{"kind":"TrainingRuntime","metadata":{"name":"r","labels":{"mpijob.dev/job":"j","mpijob.dev/base-runtime":"mpi-openmpi"}},"spec":{"mlPolicy":{}}}`, `{"kind":"TrainingRuntime"}`},
		{"CREATE", `null`, ""},
		{"DELETE", `{}`, `[]`},
	} {
		f.Add(seed.op, []byte(seed.object), []byte(seed.old), false)
	}
	f.Add("CREATE", []byte(`{"request":`), []byte(nil), true)
	f.Add("CREATE", []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"1","object":7}}`), []byte(nil), true)

	f.Fuzz(func(t *testing.T, op string, object, old []byte, rawBody bool) {
		body := object
		if !rawBody {
			review := admissionv1.AdmissionReview{Request: &admissionv1.AdmissionRequest{
				UID: "fuzz", Operation: admissionv1.Operation(op), Namespace: "team-a",
			}}
			review.APIVersion, review.Kind = "admission.k8s.io/v1", "AdmissionReview"
			review.Request.Object.Raw, review.Request.OldObject.Raw = object, old
			review.Request.UserInfo.Username = "dev-a"
			b, err := json.Marshal(review)
			if err != nil {
				return // not valid JSON inside the envelope: the API server never sends that
			}
			body = b
		}
		for _, h := range hooks {
			req := httptest.NewRequest(http.MethodPost, "/hook", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			start := time.Now()
			h.ServeHTTP(rec, req)
			if d := time.Since(start); d > time.Second {
				t.Fatalf("a webhook took %s on %q", d, body)
			}
			if rec.Code != http.StatusOK {
				continue
			}
			var got admissionv1.AdmissionReview
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || got.Response == nil {
				t.Fatalf("answer is not an AdmissionReview with a response: %v %q", err, rec.Body.String())
			}
		}
	})
}
