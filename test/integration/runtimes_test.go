//go:build e2e

package integration

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"

	"github.com/mpijob/mpijob/test/framework"
)

// The Intel MPI runtime's init step turns Trainer's OpenMPI hostfile into
// Hydra's "host:N" form before the Launcher starts. A real job on the real
// nodes (with mpijob's MPICH image standing in for an Intel MPI image)
// prints the derived hostfile and where I_MPI_HYDRA_HOST_FILE points.
func TestIntelRuntimeDerivesHydraHostfile(t *testing.T) {
	c := framework.Get(t)
	ctx := context.Background()
	// As an administrator would: a copy of mpi-intel with a real image for
	// the Launcher and the Workers (Trainer applies spec.trainer.image to
	// the Launcher only).
	rt := c.CopyRuntime(t, "mpi-intel", "mpi-test-intel", func(rt *trainer.ClusterTrainingRuntime) {
		for i := range rt.Spec.Template.Spec.ReplicatedJobs {
			spec := &rt.Spec.Template.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec
			for j := range spec.Containers {
				spec.Containers[j].Image = "ghcr.io/mpijob/mpich:4.0"
			}
		}
	})

	ns := c.NewNamespace(t, "intel")
	job := framework.MakeTrainJob("hydra", ns, rt.Name).NumNodes(2).SlotsPerWorker(2).
		Command("sh", "-c", `cat "$I_MPI_HYDRA_HOST_FILE"`).Obj()
	if err := c.Client.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	c.WaitForTrainJob(t, ns, "hydra", 2*time.Minute, "Complete")
	launcher := c.JobPods(t, ns, "hydra", "launcher")
	if len(launcher) != 1 {
		t.Fatalf("want 1 Launcher pod, got %d", len(launcher))
	}
	out := strings.TrimSpace(c.PodLog(t, ns, launcher[0].Name))
	lines := strings.Split(out, "\n")
	re := regexp.MustCompile(`^hydra-node-0-[01]\.hydra(\.` + regexp.QuoteMeta(ns) + `\.svc)?:2$`)
	if len(lines) != 2 {
		t.Fatalf("Hydra hostfile has %d lines, want 2 (one per Worker):\n%s", len(lines), out)
	}
	for _, l := range lines {
		if !re.MatchString(l) {
			t.Errorf("Hydra hostfile line %q, want host:2 for a Worker", l)
		}
	}
}
