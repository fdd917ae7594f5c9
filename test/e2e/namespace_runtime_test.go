//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/cli"
	"github.com/mpijob/mpijob/pkg/jobspec"
	"github.com/mpijob/mpijob/pkg/netpol"
	"github.com/mpijob/mpijob/pkg/runtimes"
	"github.com/mpijob/mpijob/test/framework"
)

// A tenant's own MPI TrainingRuntime is first-class and governed: dev-a
// makes a copy of mpi-openmpi in team-a, whose policy tries to lift the
// cluster's Worker cap. Its jobs pass mpijob's admission (the red team's
// jobs on such a runtime skipped it: a forged creator and rank failure
// were kept, and 2147483647 Workers passed a dry run); a runtime of a
// tenant's that mounts a claim over /usr/bin is refused; the runtime is
// listed, marked as the namespace's, and a job created on it with
// kubectl mpijob create runs, with its NetworkPolicy and status.
func TestTenantMPIRuntimeIsGoverned(t *testing.T) {
	t.Parallel()
	c := framework.Get(t)
	ctx := context.Background()
	devA := c.As(t, "dev-a")
	name := framework.UniqueName("team-mpi")
	rt := &trainer.TrainingRuntime{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a", Annotations: map[string]string{
			runtimes.MaxWorkersAnnotation: "2147483647", api.DescriptionAnnotation: "team A's Open MPI"}},
		Spec: *framework.ShippedRuntime("mpi-openmpi").Spec.DeepCopy(),
	}
	if err := devA.Create(ctx, rt); err != nil {
		t.Fatalf("dev-a cannot make an MPI TrainingRuntime in team-a: %v", err)
	}
	// Runs last: the jobs on it go first (Trainer could never finish
	// deleting a job whose runtime is gone, and admission refuses to
	// delete a runtime a job uses).
	t.Cleanup(func() {
		ctx := context.Background()
		_ = wait.PollUntilContextTimeout(ctx, 2*time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			jobs := &trainer.TrainJobList{}
			if err := c.Client.List(ctx, jobs, client.InNamespace("team-a")); err != nil {
				return false, nil //nolint:nilerr // poll on
			}
			left := 0
			for i := range jobs.Items {
				if jobs.Items[i].Spec.RuntimeRef.Name == name {
					left++
					_ = c.Client.Delete(ctx, &jobs.Items[i], client.PropagationPolicy(metav1.DeletePropagationBackground))
				}
			}
			return left == 0, nil
		})
		_ = c.Client.Delete(ctx, rt)
	})

	// A runtime of the tenant's that mounts a claim over /usr/bin.
	usr := rt.DeepCopy()
	usr.Name, usr.Annotations = name+"-usr", nil
	for i := range usr.Spec.Template.Spec.ReplicatedJobs {
		pod := &usr.Spec.Template.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec
		pod.Volumes = append(pod.Volumes, corev1.Volume{Name: "tools", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "shared-data"}}})
		pod.Containers[0].VolumeMounts = append(pod.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "tools", MountPath: "/usr/bin"})
	}
	if err := devA.Create(ctx, usr); err == nil || !strings.Contains(err.Error(), "/usr/bin") {
		_ = c.Client.Delete(ctx, usr)
		t.Errorf("a tenant's MPI runtime mounting a claim over /usr/bin: %v, want refused naming /usr/bin", err)
	}

	onIt := func(job string, workers int32) *trainer.TrainJob {
		return &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: job, Namespace: "team-a"},
			Spec: trainer.TrainJobSpec{
				RuntimeRef: trainer.RuntimeRef{Name: name, APIGroup: ptr.To(trainer.GroupVersion.Group), Kind: ptr.To(trainer.TrainingRuntimeKind)},
				Trainer:    &trainer.Trainer{NumNodes: ptr.To(workers), Command: []string{"mpirun", "hostname"}},
			}}
	}
	// The cluster's Worker cap holds, whatever the tenant's policy says.
	err := jobspec.CreateTrainJob(ctx, devA, onIt(framework.UniqueName("huge"), 2147483647), client.DryRunAll)
	if err == nil || !strings.Contains(err.Error(), "is namespace team-a's own, whose policy.mpijob.dev/max-workers cannot raise that") {
		t.Errorf("2147483647 Workers on dev-a's MPI runtime (server dry run): %v, want refused by the cluster's Worker cap", err)
	}
	// What only mpijob-manager writes cannot come from the tenant: the
	// creator is stamped and the forged rank failure dropped.
	forged := onIt(framework.UniqueName("forged"), 1)
	forged.Annotations = map[string]string{api.CreatorAnnotation: "admin", api.RankFailureAnnotation: `{"rank":3,"exitCode":9}`}
	forged.Spec.Suspend = ptr.To(true)
	if err := jobspec.CreateTrainJob(ctx, devA, forged); err != nil {
		t.Fatalf("a job on dev-a's MPI runtime: %v", err)
	}
	t.Cleanup(func() { _ = c.Client.Delete(context.Background(), forged) })
	got := &trainer.TrainJob{}
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(forged), got); err != nil {
		t.Fatal(err)
	}
	if got.Annotations[api.CreatorAnnotation] != "dev-a" || got.Annotations[api.RankFailureAnnotation] != "" {
		t.Errorf("creator %q and rank failure %q kept from the request, want dev-a and none", got.Annotations[api.CreatorAnnotation], got.Annotations[api.RankFailureAnnotation])
	}

	// Listed, marked as the namespace's; picked by name; run.
	expect(t, mpijob(t, "dev-a", "team-a", "runtimes", "list"), 0, name, "namespace team-a", "team A's Open MPI")
	expect(t, mpijob(t, "dev-a", "team-b", "runtimes", "list"), 0, "mpi-openmpi")
	if r := runCLI(t, "dev-a", "team-b", "runtimes", "list"); strings.Contains(r.out, name) {
		t.Errorf("team-b's list shows team-a's runtime %s:\n%s", name, r.out)
	}
	job := framework.UniqueName("own")
	expect(t, mpijob(t, "dev-a", "team-a", "create", job, "--runtime", name, "--workers", "2"), 0, "created in namespace team-a")
	t.Cleanup(func() { mpijob(t, "dev-a", "team-a", "delete", job, "--wait=false") })
	expect(t, mpijob(t, "dev-a", "team-a", "create", job+"-x", "--runtime", name[:len(name)-1], "--workers", "2", "--dry-run=server"), cli.ExitNotFound, `did you mean "`+name+`"`)
	tj := &trainer.TrainJob{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: job}, tj); err != nil {
		t.Fatal(err)
	}
	if k := ptr.Deref(tj.Spec.RuntimeRef.Kind, ""); k != trainer.TrainingRuntimeKind || tj.Spec.RuntimeRef.Name != name {
		t.Errorf("the job references %s %s, want TrainingRuntime %s", k, tj.Spec.RuntimeRef.Name, name)
	}
	if err := wait.PollUntilContextTimeout(ctx, 2*time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		return c.Client.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: netpol.Name(tj)}, &networkingv1.NetworkPolicy{}) == nil, nil
	}); err != nil {
		t.Errorf("no NetworkPolicy %s for a job on the namespace's own runtime: %v", netpol.Name(tj), err)
	}
	expect(t, mpijob(t, "dev-a", "team-a", "wait", job, "--for=Succeeded", "--timeout", "4m"), 0, "is Succeeded")
	expect(t, mpijob(t, "dev-a", "team-a", "describe", job), 0, "Creator:", "dev-a", name)
	// The runtime is not deleted under its jobs.
	if err := devA.Delete(ctx, rt); err == nil || !strings.Contains(err.Error(), "delete them first") {
		t.Errorf("deleting the runtime while jobs use it: %v, want refused naming them", err)
	}
}
