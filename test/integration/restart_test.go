//go:build e2e

package integration

import (
	"context"
	"crypto/tls"
	"net/http"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/localcluster"
	"github.com/mpijob/mpijob/test/framework"
)

// mpijob-manager restarted while a job runs picks the job up where it was:
// the job still ends Succeeded, and no transition is reported twice.
func TestManagerRestartMidJob(t *testing.T) {
	c := framework.Get(t)
	if os.Getenv("MPIJOB_KUBECONFIG") != "" {
		t.Skip("restarts the local cluster's mpijob-manager; MPIJOB_KUBECONFIG points elsewhere")
	}
	ctx := context.Background()
	ns := c.NewNamespace(t, "restart")
	job := framework.MakeTrainJob("steady", ns, "mpi-openmpi").NumNodes(2).
		Command("sh", "-c", "sleep 12; mpirun /usr/local/bin/mpi-hello").Obj()
	if err := c.Client.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	c.WaitForStatus(t, ns, "steady", 2*time.Minute, func(s api.Status) bool { return s.Phase == api.PhaseRunning })

	wd, _ := os.Getwd()
	opts, err := localcluster.DefaultOptions(wd)
	if err != nil {
		t.Fatal(err)
	}
	if err := localcluster.RestartProcess(opts, "mpijob-manager"); err != nil {
		t.Fatalf("restart: %v", err)
	}
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12}}}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		resp, err := hc.Get(framework.ManagerHealthURL)
		if err != nil {
			return false, nil //nolint:nilerr // not up yet
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	}); err != nil {
		t.Fatalf("mpijob-manager not ready after restart: %v", err)
	}

	s := c.WaitForStatus(t, ns, "steady", 2*time.Minute, func(s api.Status) bool { return s.Phase.Finished() })
	if s.Phase != api.PhaseSucceeded {
		t.Fatalf("job ended %s (%s: %s), want Succeeded", s.Phase, s.Reason, s.Message)
	}

	// Let late Events land, then count them per reason.
	time.Sleep(3 * time.Second)
	evs := &corev1.EventList{}
	if err := c.Client.List(ctx, evs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int32{}
	for _, e := range evs.Items {
		if e.InvolvedObject.Kind != "TrainJob" || e.InvolvedObject.Name != "steady" {
			continue
		}
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
