//go:build e2e

package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/api"
	clicmd "github.com/mpijob/mpijob/pkg/cli"
	"github.com/mpijob/mpijob/pkg/jobspec"
	"github.com/mpijob/mpijob/pkg/localcluster"
	"github.com/mpijob/mpijob/test/framework"
)

// mpijob-manager restarted while a job runs picks the job up where it was:
// the job still ends Succeeded, and no transition is reported twice.
func TestManagerDownRestartMidJob(t *testing.T) {
	c := framework.Get(t)
	if os.Getenv("MPIJOB_KUBECONFIG") != "" {
		t.Skip("restarts the local cluster's mpijob-manager; MPIJOB_KUBECONFIG points elsewhere")
	}
	ctx := context.Background()
	ns := c.NewNamespace(t, "restart")
	job := framework.MakeTrainJob("steady", ns, "mpi-openmpi").NumNodes(2).
		Command("sh", "-c", "sleep 12; mpirun /usr/local/bin/mpi-hello").Obj()
	// As the CLI creates (a replica that restarts under load is tried past).
	if err := jobspec.CreateTrainJob(ctx, c.Client, job); err != nil {
		t.Fatal(err)
	}
	c.WaitForStatus(t, ns, "steady", 2*time.Minute, func(s api.Status) bool { return s.Phase == api.PhaseRunning })

	// Both replicas go and come back (a restart of the whole Deployment).
	scaleManager(t, c, 0)
	scaleManager(t, c, 2)
	waitManagerReady(t, c)

	s := c.WaitForStatus(t, ns, "steady", 2*time.Minute, func(s api.Status) bool { return s.Phase.Finished() })
	if s.Phase != api.PhaseSucceeded {
		t.Fatalf("job ended %s (%s: %s), want Succeeded", s.Phase, s.Reason, s.Message)
	}

	// Once the Running and Succeeded Events are listed, count them per
	// reason.
	seen := map[string]int32{}
	for _, e := range c.WaitForManagerEvents(t, ns, "steady", []string{string(api.PhaseRunning), string(api.PhaseSucceeded)}, time.Minute) {
		n := e.Count
		if e.Series != nil {
			n = e.Series.Count
		}
		seen[e.Reason] += max(n, 1)
	}
	for _, reason := range []string{string(api.PhaseRunning), string(api.PhaseSucceeded)} {
		if seen[reason] != 1 {
			t.Errorf("Event %s reported %d times, want once (all: %v)", reason, seen[reason], seen)
		}
	}
}

// While mpijob-manager is down, the CLI says that a status may be stale
// and how old it is, and creates are refused with "mpijob admission is
// unavailable" (never admitted unchecked); once it is back, the status
// continues where it was: lastTransitionTime is kept.
func TestManagerDownStaleStatusAndNoAdmission(t *testing.T) {
	c := framework.Get(t)
	if os.Getenv("MPIJOB_KUBECONFIG") != "" {
		t.Skip("stops the local cluster's mpijob-manager; MPIJOB_KUBECONFIG points elsewhere")
	}
	ctx := context.Background()
	ns := c.NewNamespace(t, "down")
	job := framework.MakeTrainJob("held", ns, "mpi-openmpi").NumNodes(1).OnKwokNodes().HoldOnKwok().Obj()
	if err := c.Client.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	before := c.WaitForStatus(t, ns, "held", 2*time.Minute, func(s api.Status) bool { return s.Phase == api.PhaseRunning })
	// dev-a looks at the job in the dashboard too.
	if err := c.Client.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "dev-a-view", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "dev-a"}},
	}); err != nil {
		t.Fatal(err)
	}
	restarted := false
	restart := func() {
		if restarted {
			return
		}
		restarted = true
		scaleManager(t, c, 2)
		waitManagerReady(t, c)
	}
	// Both replicas gone: no webhook answers, no controller runs.
	scaleManager(t, c, 0)
	t.Cleanup(restart)

	cli := func(args ...string) (int, string) {
		var out bytes.Buffer
		code := clicmd.Main(append([]string{"--kubeconfig", c.Kubeconfig, "--context", "admin", "-n", ns}, args...),
			genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &out})
		return code, out.String()
	}
	// A manager that stops hands its Lease back at once; one killed would
	// count as gone once the Lease is two lease durations old (30 s).
	var code int
	var out string
	for deadline := time.Now().Add(35 * time.Second); ; time.Sleep(time.Second) {
		code, out = cli("describe", "held")
		if strings.Contains(out, "mpijob-manager is not running") || time.Now().After(deadline) {
			break
		}
	}
	if code != 0 || !strings.Contains(out, "mpijob-manager is not running (its Lease was last renewed") || !strings.Contains(out, "this status is as it saw the job") {
		t.Errorf("describe while the manager is down (exit %d):\n%s\nwant the status called stale with its age", code, out)
	}
	// The dashboard says so too: a banner on every page, the note on the job.
	if body := dashboardGet(t, c, "dev-a", "/api/manager"); !strings.Contains(body, `"running":false`) || !strings.Contains(body, "mpijob-manager is not running (its Lease was last renewed") {
		t.Errorf("dashboard /api/manager while the manager is down: %s", body)
	}
	if body := dashboardGet(t, c, "dev-a", "/api/jobs/"+ns+"/held"); !strings.Contains(body, "this status is as it saw the job") {
		t.Errorf("dashboard job detail while the manager is down has no stale note: %.300s", body)
	}
	// doctor names the stopped manager, as an error (exit 2), with the fix.
	code, out = cli("doctor", "-o", "json")
	var findings []clicmd.Finding
	// The JSON list first; then doctor's one line on stderr (cli writes both to out).
	if err := json.NewDecoder(strings.NewReader(out)).Decode(&findings); err != nil {
		t.Fatalf("doctor -o json while the manager is down (exit %d): %v\n%s", code, err, out)
	}
	admissionDown := false
	for _, f := range findings {
		if f.Check == "admission" && f.Severity == clicmd.SeverityError && strings.Contains(f.Message, "no mpijob-manager replica is ready") &&
			strings.Contains(f.Fix, "kubectl -n mpijob-system get deployment/mpijob-manager") {
			admissionDown = true
		}
	}
	if code != 2 || !admissionDown {
		t.Errorf("doctor while the manager is down: exit %d, want 2 with an admission error naming the manager and the fix:\n%s", code, out)
	}
	code, out = cli("create", "refused", "--workers", "1")
	if code == 0 || !strings.Contains(out, "mpijob admission is unavailable") {
		t.Errorf("create while the manager is down: exit %d\n%s\nwant refused with \"mpijob admission is unavailable\"", code, out)
	}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "refused"}, &trainer.TrainJob{}); !apierrors.IsNotFound(err) {
		t.Errorf("a job was admitted while mpijob's webhooks were down: %v", err)
	}
	// The refusal is the API server's own policy, and names the manager.
	err := c.Client.Create(ctx, framework.MakeTrainJob("refused-too", ns, "mpi-openmpi").NumNodes(1).Obj())
	if err == nil || !strings.Contains(err.Error(), "mpijob-manager is not running") || !strings.Contains(err.Error(), "kubectl -n mpijob-system get deployment/mpijob-manager") {
		t.Errorf("an MPI job created while the manager is down: %v, want refused with a sentence naming mpijob-manager and what to do", err)
	}
	// Other frameworks' TrainJobs do not depend on mpijob-manager: a
	// PyTorch job is created and changed as upstream allows.
	rt := upstreamRuntime(t, "torch")
	ensureClusterRuntime(t, c, rt)
	torch := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "torch-while-down", Namespace: ns},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{Name: rt.Name, APIGroup: ptr.To(trainer.GroupVersion.Group), Kind: ptr.To(trainer.ClusterTrainingRuntimeKind)},
			Trainer:    &trainer.Trainer{NumNodes: ptr.To[int32](2)},
			Suspend:    ptr.To(true),
		}}
	if err := jobspec.CreateTrainJob(ctx, c.Client, torch); err != nil {
		t.Errorf("a PyTorch job created while mpijob-manager is down: %v, want admitted", err)
	} else if err := c.Client.Patch(ctx, torch.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"a"}},"spec":{"suspend":true}}`))); err != nil {
		t.Errorf("a PyTorch job changed while mpijob-manager is down: %v, want admitted", err)
	}
	// Prometheus alerts (config/monitoring/alerts.yaml): no replica
	// answers its scrape (after a minute), and the API server could not
	// call mpijob's creator webhook for the MPI jobs created above.
	framework.WaitForFiringAlert(t, "MPIJobManagerDown", nil, 3*time.Minute)
	framework.WaitForFiringAlert(t, "MPIJobAdmissionWebhookErrors", map[string]string{"name": "creator.trainjob.mpijob.dev"}, time.Minute)
	restart()
	time.Sleep(5 * time.Second) // the manager looks at every job again
	after := c.WaitForStatus(t, ns, "held", time.Minute, func(s api.Status) bool { return s.Phase == api.PhaseRunning })
	if before.LastTransitionTime == nil || after.LastTransitionTime == nil || !after.LastTransitionTime.Equal(before.LastTransitionTime) {
		t.Errorf("lastTransitionTime %v before the manager stopped, %v after it came back: want it kept", before.LastTransitionTime, after.LastTransitionTime)
	}
	if code, out := cli("describe", "held"); strings.Contains(out, "not running") {
		t.Errorf("describe after the manager came back (exit %d) still says it is not running:\n%s", code, out)
	}
	if body := dashboardGet(t, c, "dev-a", "/api/manager"); !strings.Contains(body, `"running":true`) {
		t.Errorf("dashboard /api/manager after the manager came back: %s", body)
	}
}

// dashboardGet calls the local cluster's dashboard API as user (with the
// user's token from the kubeconfig) and returns the body.
func dashboardGet(t *testing.T, c *framework.Cluster, user, path string) string {
	t.Helper()
	raw, err := clientcmd.LoadFromFile(c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	a, ok := raw.AuthInfos[user]
	if !ok || a.Token == "" {
		t.Skipf("kubeconfig has no token user %s", user)
	}
	req, err := http.NewRequest(http.MethodGet, localcluster.DashboardURL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+a.Token)
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("dashboard %s: %v", path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// scaleManager scales the mpijob-manager Deployment and waits for it.
func scaleManager(t *testing.T, c *framework.Cluster, replicas int32) {
	t.Helper()
	if err := localcluster.ScaleManager(context.Background(), c.Client, replicas, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
}

// waitManagerReady waits until the Deployment runs both replicas, Ready
// (their webhooks answer), and one of them leads. A pod killed without a
// grace period cannot hand its Lease over: the other replica takes it only
// once it expires, the Lease's own duration after its last renewal (60 s
// for mpijob-manager), so the wait allows that duration and a minute more.
func waitManagerReady(t *testing.T, c *framework.Cluster) {
	t.Helper()
	ctx := context.Background()
	if err := localcluster.WaitRollout(ctx, c.Client, localcluster.ManagerNamespace, localcluster.ManagerDeployment, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	within := time.Minute
	if l, err := c.Clientset.CoordinationV1().Leases(api.ManagerLeaseNamespace).Get(ctx, api.ManagerLeaseName, metav1.GetOptions{}); err == nil && l.Spec.LeaseDurationSeconds != nil {
		within += time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, within, true, func(ctx context.Context) (bool, error) {
		leader, _ := localcluster.ManagerLeader(ctx, c.Clientset)
		if leader == "" {
			return false, nil
		}
		pods, err := localcluster.ManagerPods(ctx, c.Client)
		if err != nil {
			return false, nil //nolint:nilerr // keep polling
		}
		for _, p := range pods {
			if p.Name == leader {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		holder, _ := localcluster.ManagerLeader(ctx, c.Clientset)
		t.Fatalf("no running mpijob-manager pod leads %s after the rollout (the Lease's holder: %q)", within, holder)
	}
}
