//go:build e2e

package integration

import (
	"context"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/localcluster"
	"github.com/mpijob/mpijob/test/framework"
)

// Leader failover: a standby mpijob-manager (a second process with the
// same identity, other ports) takes over when the leader stops while jobs
// start and finish. The Lease changes hands at once (the leader hands it
// back), no status is lost or goes backwards, and no transition's Event is
// written twice. The local cluster runs the manager as host processes, so
// this is failover between processes, not pods.
func TestManagerDownLeaderFailover(t *testing.T) {
	c := framework.Get(t)
	if os.Getenv("MPIJOB_KUBECONFIG") != "" {
		t.Skip("starts and stops the local cluster's mpijob-manager; MPIJOB_KUBECONFIG points elsewhere")
	}
	ctx := context.Background()
	wd, _ := os.Getwd()
	opts, err := localcluster.DefaultOptions(wd)
	if err != nil {
		t.Fatal(err)
	}
	holder := func() string {
		l, err := c.Clientset.CoordinationV1().Leases(api.ManagerLeaseNamespace).Get(ctx, api.ManagerLeaseName, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	leader := holder()
	if leader == "" {
		t.Fatal("mpijob-manager holds no Lease")
	}
	health, err := localcluster.StartReplica(opts, "mpijob-manager", "mpijob-manager-standby", 100)
	if err != nil {
		t.Fatal(err)
	}
	// Stopping the standby last hands the Lease back to the cluster's own
	// manager (restarted below).
	t.Cleanup(func() { _ = localcluster.StopProcess(opts, "mpijob-manager-standby") })
	waitHealthy(t, "http://"+health+"/healthz", "the standby mpijob-manager")
	if h := holder(); h != leader {
		t.Fatalf("the standby took the Lease from a running leader (%s → %s)", leader, h)
	}

	ns := c.NewNamespace(t, "failover")
	jobs := []string{"quick", "steady"}
	for _, j := range []*framework.TrainJobWrapper{
		framework.MakeTrainJob("quick", ns, "mpi-openmpi").NumNodes(2).OnKwokNodes(),
		framework.MakeTrainJob("steady", ns, "mpi-openmpi").NumNodes(1).Command("sh", "-c", "sleep 10; mpirun /usr/local/bin/mpi-hello"),
	} {
		if err := c.Client.Create(ctx, j.Obj()); err != nil {
			t.Fatal(err)
		}
	}
	c.WaitForStatus(t, ns, "steady", 2*time.Minute, func(s api.Status) bool { return s.Phase == api.PhaseRunning })

	stopped := time.Now()
	if err := localcluster.StopProcess(opts, "mpijob-manager"); err != nil {
		t.Fatal(err)
	}
	var newLeader string
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		newLeader = holder()
		return newLeader != "" && newLeader != leader, nil
	}); err != nil {
		t.Fatalf("no manager took over within 30 s (Lease holder %q)", newLeader)
	}
	took := time.Since(stopped)
	t.Logf("failover: the standby led %s after the leader was stopped (lease duration 15 s)", took.Round(10*time.Millisecond))
	if took > 15*time.Second {
		t.Errorf("failover took %s, longer than the lease duration", took)
	}
	// The cluster's own manager comes back as the standby (its webhooks
	// serve again; the API server calls only its port).
	if err := localcluster.RestartProcess(opts, "mpijob-manager"); err != nil {
		t.Fatal(err)
	}
	waitManagerReady(t)

	for _, name := range jobs {
		s := c.WaitForStatus(t, ns, name, 2*time.Minute, func(s api.Status) bool { return s.Phase.Finished() })
		if s.Phase != api.PhaseSucceeded {
			t.Errorf("job %s ended %s (%s: %s), want Succeeded", name, s.Phase, s.Reason, s.Message)
		}
		if s.StartTime == nil || s.CompletionTime == nil || s.CompletionTime.Before(s.StartTime) {
			t.Errorf("job %s: start %v, completion %v", name, s.StartTime, s.CompletionTime)
		}
	}
	time.Sleep(3 * time.Second) // late Events
	evs := &corev1.EventList{}
	if err := c.Client.List(ctx, evs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int32{}
	for _, e := range evs.Items {
		if e.InvolvedObject.Kind != "TrainJob" {
			continue
		}
		n := e.Count
		if e.Series != nil {
			n = e.Series.Count
		}
		seen[e.InvolvedObject.Name+"/"+e.Reason] += max(n, 1)
	}
	// A job on kwok nodes may finish between two looks (no Running Event);
	// no transition is ever reported twice.
	for key, want := range map[string]int32{"steady/Running": 1, "steady/Succeeded": 1, "quick/Succeeded": 1} {
		if n := seen[key]; n != want {
			t.Errorf("Event %s written %d times, want %d (all: %v)", key, n, want, seen)
		}
	}
	for _, name := range jobs {
		for _, phase := range []api.Phase{api.PhaseRunning, api.PhaseSucceeded, api.PhaseFailed} {
			if n := seen[name+"/"+string(phase)]; n > 1 {
				t.Errorf("Event %s/%s written %d times (all: %v)", name, phase, n, seen)
			}
		}
	}
}
