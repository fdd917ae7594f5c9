//go:build e2e

package integration

import (
	"context"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/localcluster"
	"github.com/mpijob/mpijob/test/framework"
)

// Leader failover: the leading mpijob-manager pod is deleted while jobs
// start and finish; the other replica of the Deployment takes over within
// the lease duration, no status is lost or goes backwards, and no
// transition's Event is written twice. The Deployment then brings back a
// second replica.
func TestManagerDownLeaderFailover(t *testing.T) {
	c := framework.Get(t)
	if os.Getenv("MPIJOB_KUBECONFIG") != "" {
		t.Skip("deletes the local cluster's mpijob-manager pods; MPIJOB_KUBECONFIG points elsewhere")
	}
	ctx := context.Background()
	leader, err := localcluster.ManagerLeader(ctx, c.Clientset)
	if err != nil || leader == "" {
		t.Fatalf("no mpijob-manager pod holds the Lease (%v)", err)
	}
	pods, err := localcluster.ManagerPods(ctx, c.Client)
	if err != nil || len(pods) != 2 {
		t.Fatalf("want 2 mpijob-manager pods, got %d (%v)", len(pods), err)
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
	if err := localcluster.DeleteManagerPod(ctx, c.Client, leader, nil); err != nil {
		t.Fatal(err)
	}
	var newLeader string
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		newLeader, _ = localcluster.ManagerLeader(ctx, c.Clientset)
		return newLeader != "" && newLeader != leader, nil
	}); err != nil {
		t.Fatalf("no manager took over within 30 s (Lease holder %q)", newLeader)
	}
	took := time.Since(stopped)
	// A pod deleted with its grace period hands the Lease over as it
	// stops (LeaderElectionReleaseOnCancel), so the other replica leads
	// well within the Lease's 60 s duration.
	t.Logf("failover: pod %s led %s after the leading pod %s was deleted", newLeader, took.Round(10*time.Millisecond), leader)
	if took > 15*time.Second {
		t.Errorf("failover took %s: the deleted leader did not hand its Lease over as it stopped", took)
	}
	// The Deployment brings a second replica back.
	waitManagerReady(t, c)

	for _, name := range jobs {
		s := c.WaitForStatus(t, ns, name, 2*time.Minute, func(s api.Status) bool { return s.Phase.Finished() })
		if s.Phase != api.PhaseSucceeded {
			t.Errorf("job %s ended %s (%s: %s), want Succeeded", name, s.Phase, s.Reason, s.Message)
		}
		if s.StartTime == nil || s.CompletionTime == nil || s.CompletionTime.Before(s.StartTime) {
			t.Errorf("job %s: start %v, completion %v", name, s.StartTime, s.CompletionTime)
		}
	}
	// Once each job's Succeeded Event is listed (the last one), count.
	var evs []corev1.Event
	for _, name := range jobs {
		evs = append(evs, c.WaitForManagerEvents(t, ns, name, []string{string(api.PhaseSucceeded)}, time.Minute)...)
	}
	seen := map[string]int32{}
	for _, e := range evs {
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
