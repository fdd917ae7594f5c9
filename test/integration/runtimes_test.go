//go:build e2e

package integration

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mpijob/mpijob/test/framework"
)

// The Intel MPI runtime's init step turns Trainer's OpenMPI hostfile into
// Hydra's "host:N" form before the Launcher starts, for programs that call
// mpiexec.hydra themselves. A real job on the real nodes with mpijob's Intel
// MPI image prints the derived hostfile and where I_MPI_HYDRA_HOST_FILE
// points.
func TestIntelRuntimeDerivesHydraHostfile(t *testing.T) {
	c := framework.Get(t)
	ctx := context.Background()
	c.EnsureImages(t, "intel")

	ns := c.NewNamespace(t, "intel")
	job := framework.MakeTrainJob("hydra", ns, "mpi-intel").NumNodes(2).SlotsPerWorker(2).
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
