package admission

import (
	"encoding/json"
	"flag"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mpijob/mpijob/pkg/api"
)

var updateDenial = flag.Bool("update-denial", false, "rewrite pkg/api/testdata/quota-denial.json")

// The quota denial carries each resource's numbers as structured causes.
// The Status, as the API server hands it to clients (its "admission
// webhook ... denied the request: " before the message), is the vector the
// CLI's and the SDK's tests read: pkg/api/testdata/quota-denial.json.
func TestQuotaDenialIsStructured(t *testing.T) {
	teamA := quota("team-quota", rl("requests.nvidia.com/gpu", "8", "requests.memory", "64Gi", "limits.memory", "64Gi"), rl())
	violations := CheckQuota(gpuJob(8, "3"), []corev1.ResourceQuota{teamA})
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: "team-a"}}
	st := quotaDenial(tj, violations).Status()
	// What k8s.io/apiserver's webhook errors.ToStatusErr makes of it.
	st.Message = `admission webhook "vtrainjob.mpijob.dev" denied the request: ` + st.Message
	got := api.QuotaCauses(st)
	want := []api.QuotaCause{
		{Resource: "memory (limits)", Requested: "66048Mi", Quota: "64Gi", InUse: "0", ResourceQuota: "team-quota", MaxWorkers: 7},
		{Resource: "memory", Requested: "65664Mi", Quota: "64Gi", InUse: "0", ResourceQuota: "team-quota", MaxWorkers: 7},
		{Resource: "nvidia.com/gpu", Requested: "24", Quota: "8", InUse: "0", ResourceQuota: "team-quota", MaxWorkers: 2},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("causes (-want,+got):\n%s", diff)
	}
	raw, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	raw = append(raw, '\n')
	const path = "../api/testdata/quota-denial.json"
	if *updateDenial {
		if err := os.WriteFile(path, raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	file, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(file), string(raw)); diff != "" {
		t.Errorf("%s is stale (go test ./pkg/admission -run QuotaDenial -update-denial) (-file,+now):\n%s", path, diff)
	}
}
