//go:build e2e

package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/diagnose"
	"github.com/mpijob/mpijob/test/framework"
)

// team-a enforces Pod Security "restricted" (a privileged pod is refused
// there), and a real MPI job of dev-a still runs to completion in it: the
// runtime's Launcher and Worker pods are restricted-compliant. (MPICH
// passes too, but its image can hang in MPI_Finalize: see mpi-mpich.yaml.)
func TestRuntimesPassPodSecurityRestricted(t *testing.T) {
	c := framework.Get(t)
	devA := c.As(t, "dev-a")
	ctx := context.Background()

	privileged := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pss-probe", Namespace: "team-a"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "ghcr.io/mpijob/openmpi:4.1",
			SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}}},
	}
	err := devA.Create(ctx, privileged, client.DryRunAll)
	if err == nil || !strings.Contains(err.Error(), `violates PodSecurity "restricted`) {
		t.Fatalf("a privileged pod in team-a got %v, want a PodSecurity restricted violation", err)
	}

	names := map[string]string{}
	for _, runtime := range []string{"mpi-openmpi"} {
		names[runtime] = framework.UniqueName("pss-" + strings.TrimPrefix(runtime, "mpi-"))
		job := framework.MakeTrainJob(names[runtime], "team-a", runtime).NumNodes(2).Obj()
		if err := devA.Create(ctx, job); err != nil {
			t.Fatalf("dev-a could not create a %s job in team-a: %v", runtime, err)
		}
		t.Cleanup(func() { _ = c.Client.Delete(context.Background(), job) })
	}
	for runtime, name := range names {
		if got := c.WaitForTrainJob(t, "team-a", name, 3*time.Minute, trainer.TrainJobComplete, trainer.TrainJobFailed); got != trainer.TrainJobComplete {
			t.Errorf("%s job in team-a ended %s", runtime, got)
		}
	}
}

// Worker pods that Pod Security refuses (a hostPath volume in the job's
// runtimePatches, team-a enforcing restricted) are said to never start,
// with the policy's own words, not "waiting to be scheduled".
func TestPodSecurityRefusalIsDiagnosed(t *testing.T) {
	c := framework.Get(t)
	devA := c.As(t, "dev-a")
	name := framework.UniqueName("psa")
	job := framework.MakeTrainJob(name, "team-a", "mpi-openmpi").NumNodes(2).PatchWorkers(trainer.PodSpecPatch{
		Volumes:    []corev1.Volume{{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp"}}}},
		Containers: []trainer.ContainerPatch{{Name: "node", VolumeMounts: []corev1.VolumeMount{{Name: "host", MountPath: "/host"}}}},
	}).Obj()
	if err := devA.Create(context.Background(), job); err != nil {
		t.Fatalf("dev-a could not create the job: %v", err)
	}
	t.Cleanup(func() { _ = c.Client.Delete(context.Background(), job) })
	s := c.WaitForStatus(t, "team-a", name, time.Minute, func(s api.Status) bool { return s.Reason == diagnose.ReasonPodsRefused })
	for _, want := range []string{`Pod Security level "restricted"`, "the Workers' pods", `volume "host" uses restricted volume type "hostPath"`} {
		if !strings.Contains(s.Message, want) {
			t.Errorf("message %q lacks %q", s.Message, want)
		}
	}
	if s.Phase != api.PhasePending || len(s.NextSteps) < 2 || !strings.Contains(s.NextStep, "runtimePatches") {
		t.Errorf("phase %s, next steps %q: want Pending with ranked steps naming runtimePatches", s.Phase, s.NextSteps)
	}
}
