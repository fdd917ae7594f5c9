//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/dashboard"
	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/usage"
	"github.com/mpijob/mpijob/test/framework"
)

// Usage per tenant, against a job's known run: a job of 2 Workers with 2
// GPUs each holds its kwok GPU nodes for about a minute in a namespace
// whose cost center is cc-e2e and whose ResourceQuota allows 4 GPUs. The
// quota alert fires while the job holds all 4 (100 % ≥ 90 %), and
// kubectl mpijob usage then says the GPU-hours the pods' own placement
// times give (4 GPUs × the seconds they were placed), with the cost center.
func TestUsageAgainstAKnownRunAndTheGPUQuotaAlert(t *testing.T) {
	t.Parallel()
	c := framework.Get(t)
	promURL := framework.PrometheusURL()
	if promURL == "" {
		t.Skip("no Prometheus: set MPIJOB_PROMETHEUS_URL")
	}
	ctx := context.Background()
	ns := c.NewNamespace(t, "usage")
	nsObj := &corev1.Namespace{}
	if err := c.Client.Get(ctx, client.ObjectKey{Name: ns}, nsObj); err != nil {
		t.Fatal(err)
	}
	nsObj.Labels[api.CostCenterLabel] = "cc-e2e"
	if err := c.Client.Update(ctx, nsObj); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "gpus", Namespace: ns},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"requests.nvidia.com/gpu": resource.MustParse("4")}}}); err != nil {
		t.Fatal(err)
	}
	job := framework.MakeTrainJob("held", ns, "mpi-openmpi-gpu").NumNodes(2).GPUsPerWorker(2).OnKwokNodes().HoldOnKwok()
	if err := framework.SubmitW(ctx, c.Client, job); err != nil {
		t.Fatal(err)
	}
	c.WaitForStatus(t, ns, "held", 3*time.Minute, func(s api.Status) bool { return s.Phase == api.PhaseRunning })
	framework.WaitForFiringAlert(t, "MPIJobNamespaceGPUQuotaHigh", map[string]string{"namespace": ns, "resource": "nvidia.com/gpu"}, 3*time.Minute)

	// Hold a while more, then end the job; the Workers' placement is
	// measured from the pods themselves: scheduled until deleted.
	time.Sleep(30 * time.Second)
	workers := c.JobPods(t, ns, "held", "node")
	if len(workers) != 2 {
		t.Fatalf("%d Worker pods, want 2", len(workers))
	}
	var placedSeconds float64
	ended := time.Now()
	if err := c.Client.Delete(ctx, job.Obj(), client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
		t.Fatal(err)
	}
	for _, p := range workers {
		placed := p.CreationTimestamp.Time
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionTrue {
				placed = cond.LastTransitionTime.Time
			}
		}
		placedSeconds += ended.Sub(placed).Seconds()
	}
	// 2 GPUs per Worker; the rules sample every 15 s and Prometheus scrapes
	// every 5 s, so each pod's start and end may each be off by one sample.
	want := 2 * placedSeconds / 3600
	slack := 2 * 2 * 2 * (usage.RuleInterval.Seconds() + 5) / 3600
	if err := wait.PollUntilContextTimeout(ctx, 5*time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		gone := &corev1.PodList{}
		if err := c.Client.List(ctx, gone, client.InNamespace(ns)); err != nil {
			return false, nil //nolint:nilerr // poll on
		}
		return len(gone.Items) == 0, nil
	}); err != nil {
		t.Fatalf("the job's pods are still there: %v", err)
	}
	time.Sleep(usage.RuleInterval + 10*time.Second) // the last samples recorded

	r := mpijob(t, "admin", ns, "usage", "--since", "1h", "--prometheus-url", promURL, "-o", "json")
	expect(t, r, 0)
	var rows []usage.Row
	if err := json.Unmarshal([]byte(r.out), &rows); err != nil {
		t.Fatalf("usage -o json: %v\n%s", err, r.out)
	}
	if len(rows) != 1 || rows[0].Namespace != ns || rows[0].CostCenter != "cc-e2e" {
		t.Fatalf("usage rows %+v, want one for %s with cost center cc-e2e", rows, ns)
	}
	got := rows[0].GPUHours
	t.Logf("GPU-hours: %.4f recorded, %.4f from the pods' placement (%.0f s of 2 GPUs), slack %.4f", got, want, placedSeconds, slack)
	if math.Abs(got-want) > slack {
		t.Errorf("usage says %.4f GPU-hours, the pods were placed for %.4f (± %.4f)", got, want, slack)
	}
	if rows[0].CPUHours <= 0 || rows[0].MemoryGiBHours <= 0 {
		t.Errorf("usage %+v: the pods' CPU and memory requests were not counted", rows[0])
	}
	// The table, and a tenant who cannot see the namespace gets none of it.
	expect(t, mpijob(t, "admin", ns, "usage", "--since", "1h", "--prometheus-url", promURL), 0, "NAMESPACE", "GPU-HOURS", ns, "cc-e2e")
	if r := runCLI(t, "dev-a", "team-a", "usage", "--since", "1h", "--prometheus-url", promURL); strings.Contains(r.out, ns) {
		t.Errorf("dev-a's usage of team-a shows %s:\n%s", ns, r.out)
	}
	expect(t, mpijob(t, "admin", ns, "usage", "--since", "1 hour", "--prometheus-url", promURL), 2, `--since "1 hour" is not a window`)

	// The dashboard's Cluster page: the same row for the administrator,
	// none of it for a tenant who may not see the namespace.
	ts, tokens := dashboardServer(t, dashboard.LoginUser{Name: "admin", Token: clusterAdminToken(t, c)})
	wantAPI(t, call(t, "GET", ts.URL+"/api/usage?since=1h", tokens["admin"]), 200, `"namespace":"`+ns+`"`, `"costCenter":"cc-e2e"`)
	if res := call(t, "GET", ts.URL+"/api/usage?since=1h", tokens["dev-a"]); res.code != 200 || strings.Contains(res.body, ns) {
		t.Errorf("dev-a's /api/usage: HTTP %d %s, want 200 without %s", res.code, res.body, ns)
	}
	wantAPI(t, call(t, "GET", ts.URL+"/api/usage?since=forever", tokens["dev-a"]), 400, "is not a window")
}
