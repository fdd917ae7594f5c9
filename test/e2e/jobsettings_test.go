//go:build e2e

package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/test/framework"
)

// priorityClass creates a Kueue WorkloadPriorityClass of the test's own
// (cluster-scoped, so its name is unique) and removes it afterwards.
func priorityClass(t *testing.T, c *framework.Cluster, value int64) string {
	t.Helper()
	pc := &unstructured.Unstructured{}
	pc.SetGroupVersionKind(schema.GroupVersionKind{Group: "kueue.x-k8s.io", Version: "v1beta2", Kind: "WorkloadPriorityClass"})
	pc.SetName(framework.UniqueName("e2e-high"))
	pc.Object["value"] = value
	pc.Object["description"] = "mpijob e2e"
	if err := c.Client.Create(context.Background(), pc); err != nil {
		t.Fatalf("creating a WorkloadPriorityClass: %v", err)
	}
	t.Cleanup(func() { _ = c.Client.Delete(context.Background(), pc) })
	return pc.GetName()
}

// A job described fully at create time: a timeout, a priority, a
// toleration, an image pull Secret, a description and mpirun's flags, from
// the CLI's flags to the pods, the Kueue Workload and describe; the
// timeout then stops it as DeadlineExceeded. A misspelled priority is
// refused naming the classes there are.
func TestTheWholeJobAtCreateTime(t *testing.T) {
	t.Parallel()
	c := framework.Get(t)
	ctx := context.Background()
	const ns, user = "team-a", "dev-a"
	pc := priorityClass(t, c, 1000)
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: framework.UniqueName("regcred"), Namespace: ns},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"registry.example.com":{"auth":"dTpw"}}}`)},
	}
	if err := c.As(t, user).Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Client.Delete(context.Background(), secret) })

	// The local cluster's own classes (config/dev/queues.yaml): a typo
	// gets the closest, and a tenant can list them as the help says.
	expect(t, mpijob(t, user, ns, "create", framework.UniqueName("typo"), "--workers", "1", "--queue", "default", "--priority", "hgh"), 5,
		`is no WorkloadPriorityClass of this cluster; did you mean "high"? The classes are`, "high (1000)", "low (-100)", pc+" (1000)")
	if out, err := c.Kubectl(t, user, "", "", "get", "workloadpriorityclasses"); err != nil || !strings.Contains(out, "high") || !strings.Contains(out, "low") {
		t.Errorf("dev-a lists the priority classes (%v): %s", err, out)
	}

	name := framework.UniqueName("whole")
	t.Cleanup(func() { mpijob(t, user, ns, "delete", name, "--wait=false") })
	expect(t, mpijob(t, user, ns, "create", name, "--workers", "1", "--queue", "default", "--priority", pc,
		"--timeout", "40s", "--description", "nightly digits, e2e", "--toleration", "mpijob.dev/e2e=yes:NoSchedule",
		"--image-pull-secret", secret.Name, "--launcher-flags", "--bind-to none",
		"--", "mpirun", "sh", "-c", "echo started; sleep 600"), 0)

	launcher := c.WaitForPods(t, ns, name, api.LauncherJob, 1, 3*time.Minute)[0]
	workers := c.WaitForPods(t, ns, name, api.WorkerJob, 1, time.Minute)
	for _, p := range append(workers, launcher) {
		tolerated := slices.ContainsFunc(p.Spec.Tolerations, func(tl corev1.Toleration) bool {
			return tl.Key == "mpijob.dev/e2e" && tl.Value == "yes" && tl.Effect == corev1.TaintEffectNoSchedule
		})
		if !tolerated {
			t.Errorf("pod %s tolerations %+v, want mpijob.dev/e2e=yes:NoSchedule", p.Name, p.Spec.Tolerations)
		}
		if !slices.Contains(p.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: secret.Name}) {
			t.Errorf("pod %s image pull Secrets %+v, want %s", p.Name, p.Spec.ImagePullSecrets, secret.Name)
		}
	}
	var cmd []string
	for _, ct := range launcher.Spec.Containers {
		if ct.Name == api.NodeContainer {
			cmd = ct.Command
		}
	}
	if len(cmd) < 3 || cmd[0] != "mpirun" || cmd[1] != "--bind-to" || cmd[2] != "none" {
		t.Errorf("the Launcher runs %q, want mpirun --bind-to none first", cmd)
	}

	// Kueue took the priority: the job's Workload has the class and its value.
	wls := &unstructured.UnstructuredList{}
	wls.SetGroupVersionKind(schema.GroupVersionKind{Group: "kueue.x-k8s.io", Version: "v1beta2", Kind: "WorkloadList"})
	if err := c.Client.List(ctx, wls, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, wl := range wls.Items {
		for _, o := range wl.GetOwnerReferences() {
			if o.Name != name {
				continue
			}
			found = true
			got, _, _ := unstructured.NestedString(wl.Object, "spec", "priorityClassRef", "name")
			if got == "" {
				got, _, _ = unstructured.NestedString(wl.Object, "spec", "priorityClassName")
			}
			value, _, _ := unstructured.NestedInt64(wl.Object, "spec", "priority")
			if got != pc || value != 1000 {
				t.Errorf("Workload %s: priority class %q value %d, want %s 1000", wl.GetName(), got, value, pc)
			}
		}
	}
	if !found {
		t.Errorf("no Kueue Workload of %s in %s", name, ns)
	}

	expect(t, mpijob(t, user, ns, "describe", name), 0, "Description:       nightly digits, e2e", "Priority:          "+pc, "Timeout:           40s",
		"Tolerations:       mpijob.dev/e2e=yes:NoSchedule", "Pull Secrets:      "+secret.Name)

	// 40 s after it started, Trainer stops it and the diagnosis names the timeout.
	st := c.WaitForStatus(t, ns, name, 3*time.Minute, func(s api.Status) bool { return s.Phase == api.PhaseFailed })
	if st.Reason != "DeadlineExceeded" || !strings.Contains(st.Message, "timeout of 40s") || !strings.Contains(st.NextStep, "--timeout") {
		t.Errorf("status %+v, want DeadlineExceeded naming the timeout of 40s and --timeout", st)
	}
}

// --retries starts the whole job again after a failure: JobSet restarts it
// once, then the job fails for good with the program's own reason.
func TestRetriesStartTheJobAgain(t *testing.T) {
	t.Parallel()
	c := framework.Get(t)
	const ns, user = "team-a", "dev-a"
	name := framework.UniqueName("retry")
	t.Cleanup(func() { mpijob(t, user, ns, "delete", name, "--wait=false") })
	expect(t, mpijob(t, user, ns, "create", name, "--workers", "1", "--retries", "1",
		"--", "mpirun", "sh", "-c", "echo attempt; exit 3"), 0)
	st := c.WaitForStatus(t, ns, name, 4*time.Minute, func(s api.Status) bool { return s.Phase == api.PhaseFailed })
	js := &jobsetv1alpha2.JobSet{}
	if err := c.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, js); err != nil {
		t.Fatal(err)
	}
	if js.Status.Restarts != 1 {
		t.Errorf("JobSet %s restarted %d times, want 1 (--retries 1)", name, js.Status.Restarts)
	}
	if st.Reason != "RankFailed" {
		t.Errorf("status %+v, want RankFailed (the program's exit 3) after the last try", st)
	}
	expect(t, mpijob(t, user, ns, "describe", name), 0, "Retries:           up to 1")
	// A retry count out of range is refused before anything is made.
	expect(t, mpijob(t, user, ns, "create", framework.UniqueName("retry"), "--workers", "1", "--retries", "11"), 2,
		`--retries "11": use 0 to 10`)
}
