package cli

import (
	"context"
	"strings"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/queue"
)

var workloadGVK = schema.GroupVersionKind{Group: "kueue.x-k8s.io", Version: "v1beta2", Kind: "Workload"}

// suspend and resume: a job outside Kueue through spec.suspend, a job
// Kueue manages through its Workload's spec.active (its spec.suspend left
// alone); an unknown name changes nothing.
func TestSuspendAndResumeVerbs(t *testing.T) {
	s := api.NewScheme()
	s.AddKnownTypeWithName(workloadGVK, &unstructured.Unstructured{})
	s.AddKnownTypeWithName(workloadGVK.GroupVersion().WithKind("WorkloadList"), &unstructured.UnstructuredList{})
	plain := fakeJob("plain")
	queued := fakeJob("queued")
	queued.UID, queued.Labels = "uid-q", map[string]string{queue.NameLabel: "default"}
	early := fakeJob("early")
	early.UID, early.Labels = "uid-e", map[string]string{queue.NameLabel: "default"}
	wl := &unstructured.Unstructured{}
	wl.SetGroupVersionKind(workloadGVK)
	wl.SetNamespace("team-a")
	wl.SetName("trainjob-queued-1a2b3")
	wl.SetLabels(map[string]string{"kueue.x-k8s.io/job-uid": "uid-q"})
	wl.Object["spec"] = map[string]any{"active": true, "queueName": "default"}
	cl := fake.NewClientBuilder().WithScheme(s).WithObjects(plain, queued, early, wl).Build()
	run := func(args ...string) (int, string) {
		o, out, errOut := optionsOn(cl)
		root := newRoot(o)
		root.SetArgs(args)
		root.SetOut(out)
		root.SetErr(errOut)
		code, msg := 0, ""
		if err := root.ExecuteContext(context.Background()); err != nil {
			code, msg = explain(err, root)
		}
		return code, out.String() + errOut.String() + msg
	}
	get := func(name string) *trainer.TrainJob {
		tj := &trainer.TrainJob{}
		if err := cl.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: name}, tj); err != nil {
			t.Fatal(err)
		}
		return tj
	}
	active := func() bool {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(workloadGVK)
		if err := cl.Get(context.Background(), client.ObjectKeyFromObject(wl), u); err != nil {
			t.Fatal(err)
		}
		a, _ := u.Object["spec"].(map[string]any)["active"].(bool)
		return a
	}

	if code, out := run("suspend", "plain", "nosuch"); code != ExitNotFound || ptr.Deref(get("plain").Spec.Suspend, false) {
		t.Errorf("suspend with an unknown name: exit %d, plain suspended %v: %s", code, ptr.Deref(get("plain").Spec.Suspend, false), out)
	}
	if code, out := run("suspend", "plain"); code != 0 || !ptr.Deref(get("plain").Spec.Suspend, false) || !strings.Contains(out, "mpijob plain suspended (spec.suspend true)") {
		t.Errorf("suspend plain: exit %d: %s", code, out)
	}
	if code, out := run("resume", "plain"); code != 0 || ptr.Deref(get("plain").Spec.Suspend, true) || !strings.Contains(out, "mpijob plain resumed") {
		t.Errorf("resume plain: exit %d: %s", code, out)
	}
	code, out := run("suspend", "queued")
	if code != 0 || active() || get("queued").Spec.Suspend != nil || !strings.Contains(out, "suspended through its Kueue Workload trainjob-queued-1a2b3 (spec.active false)") {
		t.Errorf("suspend queued: exit %d, active %v, spec.suspend %v: %s", code, active(), get("queued").Spec.Suspend, out)
	}
	if code, out := run("resume", "queued"); code != 0 || !active() {
		t.Errorf("resume queued: exit %d, active %v: %s", code, active(), out)
	}
	if code, out := run("suspend", "early"); code != ExitError || !strings.Contains(out, "Workload does not exist yet") {
		t.Errorf("suspend a queued job before Kueue made its Workload: exit %d: %s", code, out)
	}
	if code, out := run("suspend"); code != ExitUsage || !strings.Contains(out, "suspend takes one or more job NAMEs") {
		t.Errorf("suspend with no name: exit %d: %s", code, out)
	}
}
