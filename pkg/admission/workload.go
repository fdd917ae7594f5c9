package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// ValidateWorkloadPath is where the manager judges people's changes to
// Kueue Workloads.
const ValidateWorkloadPath = "/validate-kueue-x-k8s-io-workload-active"

// WorkloadActiveOnly lets people who run jobs suspend and resume a job that
// Kueue manages the way Kueue honours, its Workload's spec.active (as
// OpenShift AI does), and nothing else: the rest of a Workload (its pod
// sets, queue, priority) is what Kueue admitted against the quota, which a
// tenant must not rewrite. mpijob-edit grants patch on Workloads for this
// one field; the webhook configuration sends only changes to the spec by
// people (not Kueue's or the engine's controllers) here.
type WorkloadActiveOnly struct{}

var _ admission.Handler = WorkloadActiveOnly{}

// Handle implements admission.Handler.
func (WorkloadActiveOnly) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.Operation != "UPDATE" {
		return admission.Allowed("")
	}
	var now, before struct {
		Spec map[string]any `json:"spec"`
	}
	if err := json.Unmarshal(req.Object.Raw, &now); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if err := json.Unmarshal(req.OldObject.Raw, &before); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	changed := changedSpecFields(before.Spec, now.Spec)
	delete(changed, "active")
	if len(changed) == 0 {
		return admission.Allowed("")
	}
	return admission.Denied(fmt.Sprintf("Workload %s/%s: spec.%s cannot be changed by %s; only spec.active may be (false suspends the job, true resumes it): "+
		"the rest of a Workload is what Kueue admitted against the quota. Change the TrainJob instead, or ask a cluster administrator",
		req.Namespace, req.Name, firstKey(changed), req.UserInfo.Username))
}

// changedSpecFields are the top-level spec fields that differ.
func changedSpecFields(a, b map[string]any) map[string]bool {
	out := map[string]bool{}
	for k, v := range a {
		if w, ok := b[k]; !ok || !reflect.DeepEqual(v, w) {
			out[k] = true
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out[k] = true
		}
	}
	return out
}

func firstKey(m map[string]bool) string {
	first := ""
	for k := range m {
		if first == "" || k < first {
			first = k
		}
	}
	return first
}
