//go:build e2e

package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/jobstatus"
	"github.com/mpijob/mpijob/pkg/localcluster"
	"github.com/mpijob/mpijob/test/framework"
)

// Suspend on a job Kueue manages goes through its Workload's spec.active,
// as the user: the job stays suspended (Kueue used to turn spec.suspend
// back within seconds and the program started over), says so in every
// interface, and resumes. People may change that one field of a Workload
// and nothing else; other tenants and viewers may not touch it.
func TestSuspendUnderKueueStays(t *testing.T) {
	t.Parallel()
	c := framework.Get(t)
	name := framework.UniqueName("pause")
	expect(t, mpijob(t, "dev-a", "team-a", "create", name, "--workers", "1", "--", "sleep", "600"), 0, "created")
	t.Cleanup(func() { mpijob(t, "dev-a", "team-a", "delete", name, "--wait=false") })
	expect(t, mpijob(t, "dev-a", "team-a", "wait", name, "--for=Running", "--timeout", "3m"), 0, "is Running")
	_, tokens := dashboardServer(t)
	base := localcluster.DashboardURL + "/api/jobs/team-a/" + name

	wantAPI(t, call(t, "POST", base+"/suspend", tokens["viewer-a"]), http.StatusForbidden, "viewer-a")
	wantAPI(t, call(t, "POST", base+"/suspend", tokens["dev-b"]), http.StatusForbidden, "dev-b")
	wantAPI(t, call(t, "POST", base+"/suspend", tokens["dev-a"]), http.StatusOK, `"suspended":true`)

	phase := func() (string, string) {
		tj := &trainer.TrainJob{}
		if err := c.Client.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: name}, tj); err != nil {
			return "", err.Error()
		}
		if err := jobstatus.Get(context.Background(), c.Client, tj); err != nil {
			return "", err.Error()
		}
		st, _ := api.StatusOf(tj)
		return string(st.Phase), st.Message
	}
	waitFor(t, 90*time.Second, name+" Suspended", func() (bool, string) {
		p, m := phase()
		return p == "Suspended", p + ": " + m
	})
	// running names a pod that runs and is not being stopped.
	running := func() string {
		pods := &corev1.PodList{}
		if err := c.Client.List(context.Background(), pods, client.InNamespace("team-a"), client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: name}); err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
				return p.Name
			}
		}
		return ""
	}
	// The engine stops the pods (Trainer suspends the JobSet, the Job
	// controller deletes them): a few seconds after spec.suspend under load.
	waitFor(t, 90*time.Second, name+"'s pods stopped", func() (bool, string) {
		p := running()
		return p == "", "pod " + p + " still runs"
	})
	// It stays suspended: no pod comes back, the phase holds.
	for range 10 {
		time.Sleep(2 * time.Second)
		if p, m := phase(); p != "Suspended" {
			t.Fatalf("the job left Suspended by itself: %s: %s", p, m)
		}
		if p := running(); p != "" {
			t.Fatalf("pod %s runs again while the job is suspended", p)
		}
	}
	expect(t, mpijob(t, "dev-a", "team-a", "get", name), 0, "Suspended")
	expect(t, mpijob(t, "dev-a", "team-a", "describe", name), 0, "Workload", "is inactive", `"active":true`)
	wantAPI(t, call(t, "GET", base, tokens["dev-a"]), http.StatusOK, `"suspended":true`, `"phase":"Suspended"`)

	// The Workload: dev-a may change spec.active only; dev-b not at all.
	wls := &unstructured.UnstructuredList{}
	wls.SetGroupVersionKind(schema.GroupVersionKind{Group: "kueue.x-k8s.io", Version: "v1beta2", Kind: "WorkloadList"})
	if err := c.Client.List(context.Background(), wls, client.InNamespace("team-a")); err != nil {
		t.Fatal(err)
	}
	wl := ""
	for _, w := range wls.Items {
		for _, o := range w.GetOwnerReferences() {
			if o.Name == name {
				wl = w.GetName()
			}
		}
	}
	if wl == "" {
		t.Fatalf("no Workload for %s", name)
	}
	for what, patch := range map[string]string{
		"spec.priority": `{"spec":{"priority":1000000}}`,
		"spec.podSets":  `[{"op":"replace","path":"/spec/podSets/0/count","value":1000}]`,
	} {
		typ := "merge"
		if strings.HasPrefix(patch, "[") {
			typ = "json"
		}
		out, err := c.Kubectl(t, "dev-a", "team-a", "", "patch", "workload", wl, "--type", typ, "-p", patch)
		ours := strings.Contains(out, what+" cannot be changed by dev-a") && strings.Contains(out, "only spec.active")
		// An admitted Workload's podSets are immutable to Kueue's own
		// webhook too. The API server calls validating webhooks side by
		// side and answers with the first refusal that comes back, so
		// either may be the one a user reads (mpijob's alone is checked in
		// pkg/admission's tests).
		kueues := what == "spec.podSets" && strings.Contains(out, `"vworkload.kb.io" denied the request`) && strings.Contains(out, "field is immutable")
		if err == nil || !ours && !kueues {
			t.Errorf("dev-a changed its Workload's %s (%v): %s", what, err, out)
		}
	}
	if out, err := c.Kubectl(t, "dev-b", "team-a", "", "patch", "workload", wl, "--type", "merge", "-p", `{"spec":{"active":true}}`); err == nil || !strings.Contains(out, "forbidden") {
		t.Errorf("dev-b resumed team-a's job (%v): %s", err, out)
	}

	wantAPI(t, call(t, "POST", base+"/resume", tokens["dev-a"]), http.StatusOK, `"suspended":false`)
	waitFor(t, 3*time.Minute, name+" Running again", func() (bool, string) {
		p, m := phase()
		return p == "Running", p + ": " + m
	})
}

// kubectl mpijob suspend and resume take the same way as the dashboard:
// a job Kueue manages is suspended through its Workload (it stays
// suspended, Kueue does not turn it back) and resumed to run again.
func TestCLISuspendAndResume(t *testing.T) {
	t.Parallel()
	c := framework.Get(t)
	name := framework.UniqueName("hold")
	expect(t, mpijob(t, "dev-a", "team-a", "create", name, "--workers", "1", "--", "sleep", "600"), 0, "created")
	t.Cleanup(func() { mpijob(t, "dev-a", "team-a", "delete", name, "--wait=false") })
	expect(t, mpijob(t, "dev-a", "team-a", "wait", name, "--for=Running", "--timeout", "3m"), 0, "is Running")
	expect(t, mpijob(t, "dev-a", "team-a", "suspend", name), 0, "mpijob "+name+" suspended through its Kueue Workload", "(spec.active false)")
	expect(t, mpijob(t, "viewer-a", "team-a", "suspend", name), 4)
	c.WaitForStatus(t, "team-a", name, 90*time.Second, func(s api.Status) bool { return s.Phase == api.PhaseSuspended })
	for range 5 {
		time.Sleep(2 * time.Second)
		if s := c.WaitForStatus(t, "team-a", name, time.Second, func(api.Status) bool { return true }); s.Phase != api.PhaseSuspended {
			t.Fatalf("the job left Suspended by itself: %s: %s", s.Phase, s.Message)
		}
	}
	expect(t, mpijob(t, "dev-a", "team-a", "resume", name), 0, "mpijob "+name+" resumed through its Kueue Workload")
	c.WaitForStatus(t, "team-a", name, 3*time.Minute, func(s api.Status) bool { return s.Phase == api.PhaseRunning })
	expect(t, mpijob(t, "dev-a", "team-a", "suspend", "no-such-job"), 3, "not found")
}
