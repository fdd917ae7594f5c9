//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/cli"
	"github.com/mpijob/mpijob/test/framework"
)

// kubectl mpijob doctor on the local cluster, as an administrator and as a
// tenant, then on a cluster with a runtime whose image no node holds.
func TestDoctor(t *testing.T) {
	t.Parallel()
	c := framework.Get(t)
	findings := func(r result) map[string][]cli.Finding {
		t.Helper()
		var fs []cli.Finding
		if err := json.Unmarshal([]byte(r.out), &fs); err != nil {
			t.Fatalf("doctor -o json: %v\n%s", err, r.out)
		}
		by := map[string][]cli.Finding{}
		for _, f := range fs {
			by[f.Check] = append(by[f.Check], f)
		}
		return by
	}
	// The administrator sees everything. The local cluster runs Trainer
	// v2.3.0 beside Kueue v0.19.2 (a pair doctor warns of) and never holds
	// the 20 GiB CUDA image on a node: those are its two warnings.
	r := mpijob(t, "admin", "team-a", "doctor", "-o", "json")
	by := findings(r)
	for _, check := range []string{"kubernetes", "trainer", "jobset", "kueue", "admission", "manager", "log store", "certificates"} {
		for _, f := range by[check] {
			if f.Severity != cli.SeverityOK {
				t.Errorf("admin: %s: %s: %s", check, f.Severity, f.Message)
			}
		}
		if len(by[check]) == 0 {
			t.Errorf("admin: no %s finding", check)
		}
	}
	if f := by["trainer+kueue"]; len(f) != 1 || f[0].Severity != cli.SeverityWarning || !strings.Contains(f[0].Message, "Kueue v0.19.2 is built against Trainer v2.2's API") {
		t.Errorf("admin: trainer+kueue: %+v", f)
	}
	for _, f := range by["images"] {
		if f.Severity != cli.SeverityOK && !strings.Contains(f.Message, "openmpi-cuda") {
			t.Errorf("admin: images: %s", f.Message)
		}
	}
	if r.code != 1 {
		t.Errorf("admin: exit %d, want 1 (warnings)", r.code)
	}
	expect(t, mpijob(t, "admin", "team-a", "doctor"), 1, "CHECK", "STATUS", "FINDING", "fix: ")

	// A tenant checks what a tenant may see; the rest is skipped, not failed.
	r = mpijob(t, "dev-a", "team-a", "doctor", "-o", "json")
	by = findings(r)
	if f := by["images"]; len(f) != 1 || f[0].Severity != cli.SeverityInfo || !strings.Contains(f[0].Message, "skipped: you may not read nodes") {
		t.Errorf("dev-a: images: %+v", f)
	}
	if f := by["admission"]; len(f) != 1 || f[0].Severity != cli.SeverityOK {
		t.Errorf("dev-a: admission: %+v", f)
	}
	if r.code != 0 {
		t.Errorf("dev-a: exit %d, want 0: %s", r.code, r.out)
	}
	expect(t, mpijob(t, "dev-a", "team-a", "doctor", "-o", "yaml"), 2, `--output "yaml": use json`)

	// Broken: a runtime whose image no node holds is named, with the fix.
	base := &trainer.ClusterTrainingRuntime{}
	if err := c.Client.Get(context.Background(), client.ObjectKey{Name: "mpi-openmpi"}, base); err != nil {
		t.Fatal(err)
	}
	// Not labelled as one of mpijob's runtimes: the lists and the runtime
	// tests that run beside this one do not see it; doctor checks every
	// runtime with an MPI policy.
	broken := &trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: framework.UniqueName("doctor-broken"),
		Labels: map[string]string{"trainer.kubeflow.org/framework": "mpi"}}, Spec: *base.Spec.DeepCopy()}
	for i := range broken.Spec.Template.Spec.ReplicatedJobs {
		pod := &broken.Spec.Template.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec
		for j := range pod.Containers {
			pod.Containers[j].Image = "registry.invalid/mpijob/gone:1"
		}
	}
	if err := c.Client.Create(context.Background(), broken); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Client.Delete(context.Background(), broken) })
	r = mpijob(t, "admin", "team-a", "doctor")
	expect(t, r, 1, "image registry.invalid/mpijob/gone:1 of runtime "+broken.Name+" is on no node", "fix: pre-pull it on the nodes")
}
