//go:build e2e

package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/jobspec"
	"github.com/mpijob/mpijob/pkg/runtimes"
	"github.com/mpijob/mpijob/test/framework"
)

// Admission holds after creation (the red team's path around it): a job
// created within its runtime's policy but suspended, by hand or by a queue
// that does not exist, then edited to leave the policy, cannot run. The
// edit is refused, and so is resuming a job that no longer complies;
// resuming a compliant one is not.
func TestAdmissionHoldsAfterCreation(t *testing.T) {
	c := framework.Get(t)
	ctx := context.Background()
	ns := c.NewNamespace(t, "holds")
	rt := c.CopyRuntime(t, "mpi-openmpi", "mpi-test-pinned", func(rt *trainer.ClusterTrainingRuntime) {
		rt.Annotations = map[string]string{
			runtimes.RequiredNodeSelectorAnnotation: "type=kwok",
			runtimes.RequiredTolerationsAnnotation:  "nvidia.com/gpu:NoSchedule",
		}
	})
	// JSON patches of the job's first runtime patch (OnKwokNodes: the
	// Launcher's, then the Workers' pod spec).
	const workers = "/spec/runtimePatches/0/trainingRuntimeSpec/template/spec/replicatedJobs/1/template/spec/template/spec"
	leave := []byte(`[{"op":"replace","path":"` + workers + `/nodeSelector/type","value":"real"},{"op":"remove","path":"` + workers + `/tolerations"}]`)
	resume := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"suspend":false}}`))

	for name, w := range map[string]*framework.TrainJobWrapper{
		"suspended by its creator":            framework.MakeTrainJob("by-hand", ns, rt.Name).NumNodes(1).OnKwokNodes().HoldOnKwok().Suspend(),
		"held by a queue that does not exist": framework.MakeTrainJob("no-queue", ns, rt.Name).NumNodes(1).OnKwokNodes().HoldOnKwok().Queue("nope"),
	} {
		t.Run(name, func(t *testing.T) {
			job := w.Obj()
			if err := jobspec.CreateTrainJob(ctx, c.Client, job); err != nil {
				t.Fatalf("a compliant job was refused: %v", err)
			}
			c.WaitForStatus(t, ns, job.Name, time.Minute, func(s api.Status) bool {
				return s.Phase == api.PhaseSuspended || s.Phase == api.PhaseQueued
			})
			err := c.Client.Patch(ctx, job.DeepCopy(), client.RawPatch(types.JSONPatchType, leave))
			for _, want := range []string{
				`spec.runtimePatches[node].nodeSelector[type]: Invalid value: "real": runtime ` + rt.Name + ` requires nodeSelector type=kwok on every pod`,
				`spec.runtimePatches[node].tolerations: Required value: runtime ` + rt.Name + ` requires every pod to tolerate nvidia.com/gpu:NoSchedule`,
			} {
				if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
					t.Errorf("editing the suspended job out of its policy: %v, want %q", err, want)
				}
			}
			if name == "suspended by its creator" {
				// Resuming the job as it was admitted runs it.
				if err := c.Client.Patch(ctx, job.DeepCopy(), resume); err != nil {
					t.Fatalf("resuming a compliant job: %v", err)
				}
				c.WaitForStatus(t, ns, job.Name, 2*time.Minute, func(s api.Status) bool { return s.Phase == api.PhaseRunning })
				// A running job cannot be edited out of its policy either.
				// Trainer's own webhook refuses runtimePatches edits of a
				// running job too; both answer at once, either may be seen.
				if err := c.Client.Patch(ctx, job.DeepCopy(), client.RawPatch(types.JSONPatchType, leave)); !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) {
					t.Errorf("editing the running job out of its policy: %v, want refused (Invalid from mpijob, or Forbidden from Trainer)", err)
				}
			}
			for _, p := range c.JobPods(t, ns, job.Name, "node") {
				if p.Spec.NodeSelector["type"] != "kwok" {
					t.Errorf("Worker %s runs with nodeSelector %v, outside the policy", p.Name, p.Spec.NodeSelector)
				}
			}
		})
	}
}

// One tenant cannot take the engine down: a TrainJob asking for 2^31-1
// Workers (which grew Trainer's controller to 22.7 GB until it was
// OOM-killed, refusing every tenant's jobs for minutes) is refused with the
// numbers, and Trainer goes on running jobs.
func TestWorkerCapKeepsTrainerUp(t *testing.T) {
	c := framework.Get(t)
	ctx := context.Background()
	devA := c.As(t, "dev-a")
	huge := framework.MakeTrainJob(framework.UniqueName("huge"), "team-a", "mpi-openmpi").NumNodes(2147483647).Obj()
	err := devA.Create(ctx, huge)
	want := "spec.trainer.numNodes: Invalid value: 2147483647: this cluster allows at most 256 Workers per job (mpijob-manager --max-workers), and runtime mpi-openmpi sets no policy.mpijob.dev/max-workers of its own: use at most 256 Workers"
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
		t.Fatalf("2147483647 Workers: %v, want %q", err, want)
	}
	if err == nil {
		_ = c.Client.Delete(ctx, huge)
	}
	ns := c.NewNamespace(t, "after-huge")
	job := framework.MakeTrainJob("small", ns, "mpi-openmpi").NumNodes(1).OnKwokNodes().Obj()
	if err := c.Client.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	s := c.WaitForStatus(t, ns, "small", 2*time.Minute, func(s api.Status) bool { return s.Phase.Finished() })
	if s.Phase != api.PhaseSucceeded {
		t.Errorf("a job after the refused one ended %s (%s: %s), want Succeeded", s.Phase, s.Reason, s.Message)
	}
}

// A job's own runtime (kubectl mpijob create --image/--cpu) was admitted
// with the job: a namespace editor cannot change it afterwards, relabel it
// or slip a new one under a job that exists.
func TestPerJobRuntimeCannotChange(t *testing.T) {
	c := framework.Get(t)
	ctx := context.Background()
	devA := c.As(t, "dev-a")
	w := framework.MakeTrainJob(framework.UniqueName("own"), "team-a", "mpi-openmpi").NumNodes(1).WorkerImage("ghcr.io/mpijob/openmpi:4.1").Suspend()
	if err := framework.SubmitW(ctx, devA, w); err != nil {
		t.Fatal(err)
	}
	job := w.Obj()
	t.Cleanup(func() { _ = c.Client.Delete(context.Background(), job) })
	rt := &trainer.TrainingRuntime{}
	if err := devA.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: job.Spec.RuntimeRef.Name}, rt); err != nil {
		t.Fatal(err)
	}
	image := client.RawPatch(types.JSONPatchType, []byte(`[{"op":"replace","path":"/spec/template/spec/replicatedJobs/1/template/spec/template/spec/containers/0/image","value":"registry.example.com/other:1"}]`))
	if err := devA.Patch(ctx, rt.DeepCopy(), image); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec: Forbidden: this is job "+job.Name+"'s own runtime, admitted with the job, so it cannot change") {
		t.Errorf("editing the job's runtime: %v, want Forbidden", err)
	}
	relabel := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"`+api.JobLabel+`":"other"}}}`))
	if err := devA.Patch(ctx, rt.DeepCopy(), relabel); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "metadata.labels[mpijob.dev/job]: Forbidden") {
		t.Errorf("relabelling the job's runtime: %v, want Forbidden", err)
	}
	second := rt.DeepCopy()
	second.ObjectMeta = *rt.ObjectMeta.DeepCopy()
	second.Name, second.ResourceVersion, second.UID, second.OwnerReferences, second.Finalizers, second.ManagedFields = rt.Name+"-2", "", "", nil, nil, nil
	if err := devA.Create(ctx, second); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "job "+job.Name+" already exists in namespace team-a: pick another name") {
		_ = c.Client.Delete(ctx, second)
		t.Errorf("a second runtime for the existing job: %v, want Forbidden", err)
	}
	// Metadata the manager or the user may change still can.
	if err := devA.Patch(ctx, rt.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"team.example.com/note":"x"}}}`))); err != nil {
		t.Errorf("annotating the job's runtime: %v", err)
	}
}

// A job's name is not reused while the pods of an earlier job of that name
// still terminate: the new Launcher would reach the old Workers by their
// DNS names. The create is refused with what to do, and works once they
// are gone.
func TestNameReuseWaitsForTheOldPods(t *testing.T) {
	c := framework.Get(t)
	ctx := context.Background()
	ns := c.NewNamespace(t, "reuse")
	// A Launcher that ignores SIGTERM keeps its pod Terminating for the
	// grace period (30 s).
	old := framework.MakeTrainJob("again", ns, "mpi-openmpi").NumNodes(1).Command("sh", "-c", "trap '' TERM; sleep 600").Obj()
	if err := c.Client.Create(ctx, old); err != nil {
		t.Fatal(err)
	}
	c.WaitForPods(t, ns, "again", "launcher", 1, 2*time.Minute)
	c.WaitForStatus(t, ns, "again", 2*time.Minute, func(s api.Status) bool { return s.Launcher == api.LauncherRunning })
	if err := c.Client.Delete(ctx, old, client.PropagationPolicy("Background")); err != nil {
		t.Fatal(err)
	}
	again := framework.MakeTrainJob("again", ns, "mpi-openmpi").NumNodes(1).Obj()
	var err error
	deadline := time.Now().Add(20 * time.Second)
	for {
		err = c.Client.Create(ctx, again.DeepCopy(), client.DryRunAll)
		if !apierrors.IsAlreadyExists(err) || time.Now().After(deadline) {
			break // the old TrainJob is gone
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "an earlier job named again still has") || !strings.Contains(err.Error(), "wait until they are gone") {
		t.Fatalf("creating a job while the earlier one's pods terminate: %v, want Conflict saying to wait", err)
	}
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		return c.Client.Create(ctx, again.DeepCopy(), client.DryRunAll) == nil, nil
	}); err != nil {
		t.Errorf("the name stays refused after the earlier pods were given 90 s to go")
	}
}
