//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/mpijob/mpijob/dashboard"
	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/test/framework"
)

// post sends body as JSON with the user's token.
func post(t *testing.T, url, token string, body any) apiResult {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	return do(t, http.MethodPost, url, token, bytes.NewReader(b))
}

// docs splits a YAML stream into its objects.
func docs(t *testing.T, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, d := range strings.Split("\n"+s, "\n---\n") {
		if strings.TrimSpace(d) == "" {
			continue
		}
		m := map[string]any{}
		if err := yaml.Unmarshal([]byte(d), &m); err != nil {
			t.Fatalf("bad YAML document: %v\n%s", err, d)
		}
		out = append(out, m)
	}
	return out
}

// The wizard and `kubectl mpijob create` build with the same builder: the
// same inputs give the same objects (a per-job runtime with the job's
// image and resources, and the TrainJob).
func TestDashboardBuildsWhatTheCLIBuilds(t *testing.T) {
	t.Parallel()
	ts, tokens := dashboardServer(t)
	cases := map[string]struct {
		input map[string]any
		flags []string
	}{
		"runtime as it is": {
			input: map[string]any{"name": "golden-plain", "runtime": "mpi-openmpi", "workers": 3, "slots_per_worker": 2},
			flags: []string{"create", "golden-plain", "--workers", "3", "--slots-per-worker", "2", "--dry-run=client", "-o", "yaml"},
		},
		"own resources, env, queue and command": {
			input: map[string]any{
				"name": "golden-sized", "runtime": "mpi-openmpi", "workers": 2,
				"resources_per_worker": map[string]string{"cpu": "500m", "memory": "300Mi"},
				"launcher_resources":   map[string]string{"cpu": "200m", "memory": "256Mi"},
				"env":                  []map[string]string{{"name": "NCCL_DEBUG", "value": "INFO"}},
				"queue":                "default",
				"command":              []string{"mpirun", "/usr/local/bin/mpi-hello"},
			},
			flags: []string{"create", "golden-sized", "--workers", "2", "--cpu", "500m", "--memory", "300Mi",
				"--launcher-cpu", "200m", "--launcher-memory", "256Mi", "--env", "NCCL_DEBUG=INFO", "--queue", "default",
				"--dry-run=client", "-o", "yaml", "--", "mpirun", "/usr/local/bin/mpi-hello"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := post(t, ts.URL+"/api/jobs/team-a?dryRun=true", tokens["dev-a"], tc.input)
			wantAPI(t, r, http.StatusOK)
			var ans struct{ YAML string }
			if err := json.Unmarshal([]byte(r.body), &ans); err != nil {
				t.Fatal(err)
			}
			cli := mpijob(t, "dev-a", "team-a", tc.flags...)
			expect(t, cli, 0)
			if diff := cmp.Diff(docs(t, cli.out), docs(t, ans.YAML)); diff != "" {
				t.Errorf("dashboard's job differs from the CLI's (-cli +dashboard):\n%s", diff)
			}
		})
	}
}

// Bad input is refused by the API with the field named, and nothing is
// created; the quota check gives the admission pre-flight's numbers.
func TestDashboardCreateAPIRefusesBadInput(t *testing.T) {
	t.Parallel()
	ts, tokens := dashboardServer(t)
	c := framework.Get(t)
	cases := map[string]struct {
		path  string
		input map[string]any
		code  int
		want  []string
	}{
		"bad name": {
			path: "/api/jobs/team-a", input: map[string]any{"name": "Bad_Name", "workers": 1},
			code: http.StatusUnprocessableEntity, want: []string{`"field":"name"`},
		},
		"0 Workers": {
			path: "/api/jobs/team-a", input: map[string]any{"name": "zero", "workers": 0},
			code: http.StatusUnprocessableEntity, want: []string{`"field":"workers"`, "at least 1 Worker"},
		},
		"a runtime typo": {
			path: "/api/jobs/team-a", input: map[string]any{"name": "typo", "runtime": "mpi-opnempi", "workers": 1},
			code: http.StatusUnprocessableEntity, want: []string{`"field":"runtime"`, `did you mean \"mpi-openmpi\"`},
		},
		"an unknown input": {
			path: "/api/jobs/team-a", input: map[string]any{"name": "x", "workers": 1, "wokers": 2},
			code: http.StatusBadRequest, want: []string{`unknown field \"wokers\"`},
		},
		"more GPUs than the quota, by admission": {
			path: "/api/jobs/team-a", input: map[string]any{"name": "greedy", "runtime": "mpi-openmpi-gpu", "workers": 3, "resources_per_worker": map[string]string{"nvidia.com/gpu": "4"}},
			code: http.StatusForbidden, want: []string{`"field":"resources_per_worker.nvidia.com/gpu"`, "requested 12 nvidia.com/gpu"},
		},
		"more GPUs than the quota, before submit": {
			path: "/api/jobs/team-a/quota-check", input: map[string]any{"name": "greedy", "runtime": "mpi-openmpi-gpu", "workers": 3, "resources_per_worker": map[string]string{"nvidia.com/gpu": "4"}},
			code: http.StatusOK, want: []string{`"fits":false`, `"field":"resources_per_worker.nvidia.com/gpu"`, "requested 12 nvidia.com/gpu (3 workers × 4), quota 8"},
		},
		"viewer-a may not create": {
			path: "/api/jobs/team-a", input: map[string]any{"name": "viewed", "workers": 1},
			code: http.StatusForbidden, want: []string{"forbidden"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			user := "dev-a"
			if strings.HasPrefix(name, "viewer-a") {
				user = "viewer-a"
			}
			wantAPI(t, post(t, ts.URL+tc.path, tokens[user], tc.input), tc.code, tc.want...)
			if n, _ := tc.input["name"].(string); n != "" {
				err := c.Client.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: n}, &trainer.TrainJob{})
				if err == nil {
					t.Errorf("job %s was created", n)
				}
			}
		})
	}
}

// The wizard in the browser: dev-a creates a job that Succeeds on the real
// nodes; a bad name, 0 Workers and more GPUs than the quota are shown next
// to their fields before submit, and nothing is created; viewer-a has no
// Create.
func TestDashboardCreateWizardInTheBrowser(t *testing.T) {
	t.Parallel()
	framework.HeavyCPU(t)
	ts, _ := dashboardServer(t)
	c := framework.Get(t)
	job := framework.UniqueName("wizard")
	// A job whose Worker the node killed for memory (kwok's OOM stage).
	oom := framework.UniqueName("oom")
	t.Cleanup(func() { mpijob(t, "dev-a", "team-a", "delete", job, job+"-2", oom, "--wait=false") })
	if err := c.As(t, "dev-a").Create(context.Background(), framework.MakeTrainJob(oom, "team-a", "mpi-openmpi").NumNodes(1).OnKwokNodes().FailWorkersOnKwok("OOMKilled").Obj()); err != nil {
		t.Fatal(err)
	}
	c.WaitForStatus(t, "team-a", oom, 2*time.Minute, func(s api.Status) bool { return s.Phase == api.PhaseFailed && s.Reason == "WorkerOOMKilled" })
	browserCheck(t, "create.mjs", ts.URL, "wizard checks", "JOB="+job,
		// mpi-openmpi's Workers have a 1Gi memory limit.
		"OOM_JOB="+oom, "OOM_MEMORY=2Gi")
	// What the Advanced section set reached the job.
	made := &trainer.TrainJob{}
	if err := c.Client.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: job}, made); err != nil {
		t.Fatal(err)
	}
	if made.Spec.ActiveDeadlineSeconds != 600 || made.Annotations[api.DescriptionAnnotation] != "made by the wizard test" {
		t.Errorf("the wizard's job: activeDeadlineSeconds %d, description %q; want 600 and the one typed", made.Spec.ActiveDeadlineSeconds, made.Annotations[api.DescriptionAnnotation])
	}
	b, err := json.Marshal(made.Spec.RuntimePatches)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"key":"mpijob.dev/wizard"`) {
		t.Errorf("the wizard's job has no toleration of mpijob.dev/wizard: %s", b)
	}
	// Only the job the wizard submitted exists.
	l := &trainer.TrainJobList{}
	if err := c.Client.List(context.Background(), l, client.InNamespace("team-a")); err != nil {
		t.Fatal(err)
	}
	for _, tj := range l.Items {
		if strings.HasPrefix(strings.ToLower(tj.Name), "bad") {
			t.Errorf("a job with a bad name got created: %s", tj.Name)
		}
	}
}

// The runtimes page: Test runtime (the checks of `kubectl mpijob runtimes
// test`, live) passes on a shipped runtime and fails the image pull check,
// naming the image, on a runtime whose image cannot be pulled.
func TestDashboardRuntimesTestInTheBrowser(t *testing.T) {
	t.Parallel()
	framework.HeavyCPU(t)
	c := framework.Get(t)
	ts, _ := dashboardServer(t, dashboard.LoginUser{Name: "admin", Token: clusterAdminToken(t, c)})
	const image = "registry.invalid/mpijob/broken:1"
	brokenRT := c.CopyRuntime(t, "mpi-openmpi", "broken", func(rt *trainer.ClusterTrainingRuntime) {
		for i := range rt.Spec.Template.Spec.ReplicatedJobs {
			pod := &rt.Spec.Template.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec
			for j := range pod.Containers {
				pod.Containers[j].Image = image
			}
		}
	})
	newRT := framework.UniqueName("small")
	t.Cleanup(func() {
		_ = c.Client.Delete(context.Background(), &trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: newRT}})
	})
	browserCheck(t, "runtimes.mjs", ts.URL, "runtime page checks", "BROKEN_RUNTIME="+brokenRT.Name, "BROKEN_IMAGE="+image, "NEW_RUNTIME="+newRT)
	// What admin made is a runtime like any other, with its policy.
	got := &trainer.ClusterTrainingRuntime{}
	if err := c.Client.Get(context.Background(), client.ObjectKey{Name: newRT}, got); err != nil {
		t.Fatalf("runtime %s made in the dashboard: %v", newRT, err)
	}
	if got.Annotations["policy.mpijob.dev/max-workers"] != "4" || got.Annotations["mpijob.dev/description"] != "OpenMPI for small jobs" {
		t.Errorf("runtime %s annotations %v, want max-workers 4 and its description", newRT, got.Annotations)
	}
}

// clusterAdminToken is a token of a ServiceAccount bound to cluster-admin,
// for the dashboard's administrator pages (the local cluster's own admin
// user logs in with a client certificate, which a login page cannot take).
func clusterAdminToken(t *testing.T, c *framework.Cluster) string {
	t.Helper()
	ctx := context.Background()
	ns := c.NewNamespace(t, "platform-admin")
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "platform-admin", Namespace: ns}}
	if err := c.Client.Create(ctx, sa); err != nil {
		t.Fatal(err)
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "mpijob-test-" + ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa.Name, Namespace: ns}},
	}
	if err := c.Client.Create(ctx, crb); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Client.Delete(context.Background(), crb) })
	tr, err := c.Clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// A queued job's page gives an estimated start and says how it was
// worked out: its queue position times the median run of the namespace's
// finished jobs.
func TestDashboardEstimatesQueuedStart(t *testing.T) {
	t.Parallel()
	ts, tokens := dashboardServer(t)
	c := framework.Get(t)
	ctx := context.Background()
	ns := c.NewNamespace(t, "estimate")
	cq := framework.UniqueName("mpi-test-cq")
	// Room for one job at a time: a Launcher and a Worker of 100m each.
	for _, d := range []string{
		`{"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"ClusterQueue","metadata":{"name":"` + cq + `"},"spec":{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"` + ns + `"}},"resourceGroups":[{"coveredResources":["cpu","memory"],"flavors":[{"name":"default-flavor","resources":[{"name":"cpu","nominalQuota":"300m"},{"name":"memory","nominalQuota":"10Gi"}]}]}]}}`,
		`{"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"LocalQueue","metadata":{"name":"q","namespace":"` + ns + `"},"spec":{"clusterQueue":"` + cq + `"}}`,
		`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"dev-a-edit","namespace":"` + ns + `"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"edit"},"subjects":[{"apiGroup":"rbac.authorization.k8s.io","kind":"User","name":"dev-a"}]}`,
	} {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON([]byte(d)); err != nil {
			t.Fatal(err)
		}
		if err := c.Client.Create(ctx, u); err != nil {
			t.Fatalf("create %s: %v", u.GetKind(), err)
		}
		if u.GetKind() == "ClusterQueue" {
			t.Cleanup(func() { _ = c.Client.Delete(context.Background(), u) })
		}
	}
	// One job that ran (the basis), one that holds the queue, one waiting.
	done := framework.MakeTrainJob("done", ns, "mpi-openmpi").NumNodes(1).Queue("q").Obj()
	if err := c.Client.Create(ctx, done); err != nil {
		t.Fatal(err)
	}
	c.WaitForStatus(t, ns, "done", 3*time.Minute, func(s api.Status) bool { return s.Phase == api.PhaseSucceeded && s.StartTime != nil })
	for _, j := range []*trainer.TrainJob{
		framework.MakeTrainJob("holder", ns, "mpi-openmpi").NumNodes(1).Queue("q").Command("sleep", "300").Obj(),
		framework.MakeTrainJob("waiting", ns, "mpi-openmpi").NumNodes(1).Queue("q").Obj(),
	} {
		if err := c.Client.Create(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	c.WaitForStatus(t, ns, "waiting", 2*time.Minute, func(s api.Status) bool {
		return s.Phase == api.PhaseQueued && s.QueuePosition != nil
	})
	r := call(t, http.MethodGet, ts.URL+"/api/jobs/"+ns+"/waiting", tokens["dev-a"])
	wantAPI(t, r, http.StatusOK, `"estimate":{"start":`, "position 1 ×", "the median run of the last 1 finished job in "+ns)
}
