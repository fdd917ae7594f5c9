//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/test/framework"
)

// Three jobs of a namespace killed for memory within minutes fire
// MPIJobFailureBurst for that namespace and reason, evaluated by the local
// Prometheus from config/monitoring/alerts.yaml. (MPIJobStuck fires in
// TestSilentRankIsNamed; MPIJobManagerDown and MPIJobAdmissionWebhookErrors
// in TestManagerDownStaleStatusAndNoAdmission.)
func TestFailureBurstAlerts(t *testing.T) {
	t.Parallel()
	c := framework.Get(t)
	ns := c.NewNamespace(t, "burst")
	for i := range 3 {
		name := framework.UniqueName("oom")
		job := framework.MakeTrainJob(name, ns, "mpi-openmpi").NumNodes(1).OnKwokNodes().FailWorkersOnKwok("OOMKilled").Obj()
		if err := c.Client.Create(context.Background(), job); err != nil {
			t.Fatalf("job %d: %v", i, err)
		}
		c.WaitForStatus(t, ns, name, 2*time.Minute, func(s api.Status) bool { return s.Phase == api.PhaseFailed && s.Reason == "WorkerOOMKilled" })
	}
	a := framework.WaitForFiringAlert(t, "MPIJobFailureBurst", map[string]string{"namespace": ns, "reason": "WorkerOOMKilled"}, 2*time.Minute)
	if !strings.Contains(a.Annotations["description"], "3 MPI jobs in namespace "+ns+" failed with reason WorkerOOMKilled") {
		t.Errorf("the alert's description: %q", a.Annotations["description"])
	}
	// Another namespace's one failure fires nothing for it.
	other := c.NewNamespace(t, "calm")
	name := framework.UniqueName("oom")
	if err := c.Client.Create(context.Background(), framework.MakeTrainJob(name, other, "mpi-openmpi").NumNodes(1).OnKwokNodes().FailWorkersOnKwok("OOMKilled").Obj()); err != nil {
		t.Fatal(err)
	}
	c.WaitForStatus(t, other, name, 2*time.Minute, func(s api.Status) bool { return s.Phase == api.PhaseFailed })
	// Once Prometheus has scraped that failure and evaluated the alert
	// after it, the alert would be there if it fired.
	framework.WaitForAlertEvaluatedOn(t, "MPIJobFailureBurst", `mpijob_jobs_failed_total{namespace="`+other+`"}`, 2*time.Minute)
	alerts, err := framework.Alerts(context.Background(), framework.PrometheusURL())
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range alerts {
		if a.Labels["alertname"] == "MPIJobFailureBurst" && a.Labels["namespace"] == other {
			t.Errorf("one failure in %s fired %v", other, a.Labels)
		}
	}
}
