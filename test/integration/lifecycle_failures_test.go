//go:build e2e

package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/diagnose"
	"github.com/mpijob/mpijob/pkg/jobspec"
	"github.com/mpijob/mpijob/pkg/runtimes"
	"github.com/mpijob/mpijob/test/framework"
)

// A job past its deadline, and a job whose Launcher is deleted while it
// runs, on the real nodes.
func TestDiagnosisOfLifecycleFailures(t *testing.T) {
	c := framework.Get(t)
	ctx := context.Background()

	t.Run("deadline exceeded", func(t *testing.T) {
		t.Parallel()
		ns := c.NewNamespace(t, "deadline")
		job := framework.MakeTrainJob("slow", ns, "mpi-openmpi").NumNodes(1).Command("sleep", "300").Obj()
		job.Spec.ActiveDeadlineSeconds = 8
		if err := c.Client.Create(ctx, job); err != nil {
			t.Fatal(err)
		}
		s := c.WaitForStatus(t, ns, "slow", 2*time.Minute, func(s api.Status) bool { return s.Phase == api.PhaseFailed })
		if s.Reason != diagnose.ReasonDeadlineExceeded || !strings.Contains(s.Message, "timeout of 8s") {
			t.Errorf("status %s %q, want %s naming the 8s timeout", s.Reason, s.Message, diagnose.ReasonDeadlineExceeded)
		}
	})

	t.Run("launcher deleted while Workers run", func(t *testing.T) {
		t.Parallel()
		ns := c.NewNamespace(t, "deleted")
		job := framework.MakeTrainJob("orphan", ns, "mpi-openmpi").NumNodes(1).Command("sleep", "300").Obj()
		if err := c.Client.Create(ctx, job); err != nil {
			t.Fatal(err)
		}
		c.WaitForStatus(t, ns, "orphan", 2*time.Minute, func(s api.Status) bool { return s.Phase == api.PhaseRunning })
		for _, p := range c.JobPods(t, ns, "orphan", "launcher") {
			if err := c.Client.Delete(ctx, &p); err != nil {
				t.Fatal(err)
			}
		}
		s := c.WaitForStatus(t, ns, "orphan", 2*time.Minute, func(s api.Status) bool { return s.Phase == api.PhaseFailed })
		if s.Reason != diagnose.ReasonLauncherDeleted {
			t.Errorf("status %s %q, want %s", s.Reason, s.Message, diagnose.ReasonLauncherDeleted)
		}
	})
}

// A Worker evicted through the API (as a node drain does) while the
// Launcher runs is named with its node at once, and stays the reason when
// mpirun then fails: sshd exits 0 on SIGTERM, so the Job never replaces it.
func TestWorkerEvictedThroughTheAPI(t *testing.T) {
	c := framework.Get(t)
	ctx := context.Background()
	ns := c.NewNamespace(t, "drain")
	job := framework.MakeTrainJob("drained", ns, "mpi-openmpi").NumNodes(2).
		Command("sh", "-c", "sleep 25; mpirun /usr/local/bin/mpi-hello").Obj()
	if err := c.Client.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	c.WaitForStatus(t, ns, "drained", 2*time.Minute, func(s api.Status) bool { return s.Phase == api.PhaseRunning })
	var node string
	for _, p := range c.JobPods(t, ns, "drained", "node") {
		if p.Labels["batch.kubernetes.io/job-completion-index"] != "1" {
			continue
		}
		node = p.Spec.NodeName
		if err := c.Clientset.CoreV1().Pods(ns).EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: ns}}); err != nil {
			t.Fatalf("evict %s: %v", p.Name, err)
		}
	}
	s := c.WaitForStatus(t, ns, "drained", time.Minute, func(s api.Status) bool { return s.Reason == diagnose.ReasonWorkerEvicted })
	if s.Phase != api.PhaseRunning || !strings.Contains(s.Message, "Worker 1 (pod drained-node-0-1-") || !strings.Contains(s.Message, "on node "+node) || len(s.NextSteps) != 2 {
		t.Errorf("while the Launcher runs: %s/%s %q %q, want Running naming Worker 1, node %s and 2 next steps", s.Phase, s.Reason, s.Message, s.NextSteps, node)
	}
	s = c.WaitForStatus(t, ns, "drained", 2*time.Minute, func(s api.Status) bool { return s.Phase == api.PhaseFailed })
	if s.Reason != diagnose.ReasonWorkerEvicted || !strings.Contains(s.Message, "Worker 1") {
		t.Errorf("after mpirun failed: %s %q, want %s naming Worker 1", s.Reason, s.Message, diagnose.ReasonWorkerEvicted)
	}
}

// A runtime's gang-scheduling timeout turns a job whose Workers cannot all
// be placed from waiting into stuck, with the timeout in the message and a
// Warning Event; a job outside Kueue is then suspended, so the Workers that
// were placed free their node.
func TestGangSchedulingTimeout(t *testing.T) {
	c := framework.Get(t)
	ctx := context.Background()
	rt := c.CopyRuntime(t, "mpi-openmpi-gpu", "mpi-test-gang", func(rt *trainer.ClusterTrainingRuntime) {
		rt.Annotations = map[string]string{runtimes.GangTimeoutAnnotation: "5s"}
		// Workers of 4 GPUs: two fit the one 8-GPU node the job may use,
		// the third waits for capacity (it would fit an empty node, so the
		// job is not CannotStart).
		for i := range rt.Spec.Template.Spec.ReplicatedJobs {
			if rj := &rt.Spec.Template.Spec.ReplicatedJobs[i]; rj.Name == api.WorkerJob {
				jobspec.SetResources(&rj.Template.Spec.Template.Spec.Containers[0].Resources, corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("4")})
			}
		}
	})

	ns := c.NewNamespace(t, "gang")
	// HoldOnKwok: the placed Workers keep running (kwok completes pods otherwise).
	job := framework.MakeTrainJob("stuck", ns, rt.Name).NumNodes(3).OnKwokNodes().HoldOnKwok().
		PatchWorkers(trainer.PodSpecPatch{NodeSelector: map[string]string{"kubernetes.io/hostname": "kwok-gpu-16"}}).Obj()
	if err := jobspec.CreateTrainJob(ctx, c.Client, job); err != nil {
		t.Fatal(err)
	}
	s := c.WaitForStatus(t, ns, "stuck", 2*time.Minute, func(s api.Status) bool { return s.Reason == diagnose.ReasonGangSchedulingTimeout })
	if !strings.Contains(s.Message, "gang-scheduling timeout") {
		t.Errorf("status %s %s %q, want it to name the timeout", s.Phase, s.Reason, s.Message)
	}
	// The timeout is a Warning Event too, within 10 seconds of the status.
	c.WaitForWarningEvent(t, ns, diagnose.ReasonGangSchedulingTimeout, 10*time.Second)
	// Suspended by the manager: the placed Workers are gone.
	s = c.WaitForStatus(t, ns, "stuck", time.Minute, func(s api.Status) bool { return s.Phase == api.PhaseSuspended })
	if s.Reason != diagnose.ReasonGangSchedulingTimeout || !strings.Contains(s.Message, "mpijob-manager suspended the job") || len(s.NextSteps) != 3 {
		t.Errorf("after the timeout: %s %q %q, want Suspended by the manager with 3 next steps", s.Reason, s.Message, s.NextSteps)
	}
	tj := &trainer.TrainJob{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "stuck"}, tj); err != nil {
		t.Fatal(err)
	}
	if tj.Spec.Suspend == nil || !*tj.Spec.Suspend || tj.Annotations[api.SuspendedByAnnotation] != api.SuspendedByGangTimeout {
		t.Errorf("spec.suspend %v, annotation %q: want true and %q", tj.Spec.Suspend, tj.Annotations[api.SuspendedByAnnotation], api.SuspendedByGangTimeout)
	}
	err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		return len(c.JobPods(t, ns, "stuck", api.WorkerJob)) == 0, nil
	})
	if err != nil {
		t.Errorf("the placed Workers still run after the suspension: %v", err)
	}
}

// A running job whose Launcher prints nothing for longer than its
// progress timeout (policy.mpijob.dev/progress-timeout on the job) gets a
// NoProgress Warning with its last line, and keeps running.
func TestNoProgressWarning(t *testing.T) {
	c := framework.Get(t)
	ctx := context.Background()
	ns := c.NewNamespace(t, "quiet")
	job := framework.MakeTrainJob("silent", ns, "mpi-openmpi").NumNodes(1).
		Command("sh", "-c", "echo step 1 done; sleep 300").Obj()
	job.Annotations = map[string]string{runtimes.ProgressTimeoutAnnotation: "5s"}
	if err := c.Client.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	s := c.WaitForStatus(t, ns, "silent", time.Minute, func(s api.Status) bool { return s.Reason == diagnose.ReasonNoProgress })
	if s.Phase != api.PhaseRunning || !strings.Contains(s.Message, `has printed nothing since `) || !strings.Contains(s.Message, `its last line: "step 1 done"`) || len(s.NextSteps) != 3 {
		t.Errorf("status %s/%s %q %q, want Running with the last line and 3 next steps", s.Phase, s.Reason, s.Message, s.NextSteps)
	}
	c.WaitForWarningEvent(t, ns, diagnose.ReasonNoProgress, 10*time.Second)
	// A bad value is refused with the annotation, the value and the form.
	bad := framework.MakeTrainJob("badtimeout", ns, "mpi-openmpi").NumNodes(1).Obj()
	bad.Annotations = map[string]string{runtimes.ProgressTimeoutAnnotation: "soon"}
	if err := c.Client.Create(ctx, bad); err == nil || !strings.Contains(err.Error(), `policy.mpijob.dev/progress-timeout]: Invalid value: "soon": must be a positive duration such as 30m`) {
		t.Errorf("a job with progress-timeout \"soon\" got %v, want a refusal naming the annotation and the form", err)
	}
}
