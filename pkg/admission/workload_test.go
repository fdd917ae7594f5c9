package admission

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authnv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

func TestWorkloadActiveOnly(t *testing.T) {
	base := map[string]any{
		"active": true, "queueName": "default", "priority": float64(0),
		"podSets": []any{map[string]any{"name": "node", "count": float64(2)}},
	}
	with := func(k string, v any) map[string]any {
		m := map[string]any{}
		for kk, vv := range base {
			m[kk] = vv
		}
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	cases := map[string]struct {
		spec    map[string]any
		allowed bool
		says    string
	}{
		"suspend: active false":         {spec: with("active", false), allowed: true},
		"nothing in the spec changes":   {spec: base, allowed: true},
		"more pods than Kueue admitted": {spec: with("podSets", []any{map[string]any{"name": "node", "count": float64(2000)}}), says: "spec.podSets cannot be changed by dev-a"},
		"a higher priority":             {spec: with("priority", float64(1000000)), says: "spec.priority"},
		"another team's queue":          {spec: with("queueName", "team-b"), says: "spec.queueName"},
		"a longer run time":             {spec: with("maximumExecutionTimeSeconds", float64(1e9)), says: "spec.maximumExecutionTimeSeconds"},
		"a field removed":               {spec: with("priority", nil), says: "spec.priority"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			raw := func(spec map[string]any) runtime.RawExtension {
				b, err := json.Marshal(map[string]any{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "spec": spec})
				if err != nil {
					t.Fatal(err)
				}
				return runtime.RawExtension{Raw: b}
			}
			req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				Operation: admissionv1.Update, Namespace: "team-a", Name: "trainjob-x-1",
				UserInfo: authnv1.UserInfo{Username: "dev-a"}, Object: raw(tc.spec), OldObject: raw(base)}}
			got := WorkloadActiveOnly{}.Handle(context.Background(), req)
			if got.Allowed != tc.allowed {
				t.Fatalf("allowed = %v, want %v: %v", got.Allowed, tc.allowed, got.Result)
			}
			if !tc.allowed && !strings.Contains(got.Result.Message, tc.says) {
				t.Errorf("message %q lacks %q", got.Result.Message, tc.says)
			}
			if !tc.allowed && !strings.Contains(got.Result.Message, "only spec.active") {
				t.Errorf("message %q does not say what may change", got.Result.Message)
			}
		})
	}
}
