//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/diagnose"
	"github.com/mpijob/mpijob/test/framework"
)

// The MPI features mpi4py's own test suite found failing across pods
// (issue 45; docs/runtimes.md "One-sided MPI (RMA) and spawn across
// Workers"): each failure is diagnosed with its cause, and the fix its
// next step gives, run as a user pastes it, works.
const (
	// rmaProgram: every rank adds rank+1 into its slot of every rank's
	// window, then reads its neighbour's window: [1, 2] on 2 ranks.
	rmaProgram = `from mpi4py import MPI
import numpy as np
c = MPI.COMM_WORLD; r, n = c.Get_rank(), c.Get_size()
w = MPI.Win.Allocate(8 * n, 8, comm=c)
buf = np.frombuffer(w.tomemory(), dtype="i8"); buf[:] = 0
w.Fence()
for t in range(n):
    w.Accumulate([np.array([r + 1], dtype="i8"), MPI.INT64_T], t, target=[r, 1, MPI.INT64_T], op=MPI.SUM)
w.Fence()
got = np.empty(n, dtype="i8")
w.Get([got, MPI.INT64_T], (r + 1) % n)
w.Fence()
print(f"rank {r} window {buf.tolist()} from rank {(r + 1) % n}: {got.tolist()}", flush=True)
w.Free()
`
	// sharedProgram: a shared-memory window over COMM_WORLD, or with
	// "split" over the ranks of one Worker.
	sharedProgram = `import sys
from mpi4py import MPI
c = MPI.COMM_WORLD
comm = c.Split_type(MPI.COMM_TYPE_SHARED) if "split" in sys.argv else c
w = MPI.Win.Allocate_shared(8, 8, comm=comm)
print("rank", c.Get_rank(), "shared window over", comm.Get_size(), "ranks", flush=True)
w.Free()
`
	spawnProgram = `import sys
from mpi4py import MPI
if "child" in sys.argv:
    MPI.Comm.Get_parent().Disconnect(); sys.exit(0)
inter = MPI.COMM_WORLD.Spawn(sys.executable, [__file__, "child"], maxprocs=1)
inter.Disconnect(); print("rank", MPI.COMM_WORLD.Get_rank(), "spawned", flush=True)
`
)

func TestOneSidedAndSpawnAcrossWorkers(t *testing.T) {
	framework.HeavyCPU(t)
	c := framework.Get(t)
	c.EnsureImages(t, "openmpi5")
	const ns, user = "team-a", "dev-a"
	cm := framework.UniqueName("mpi-features")
	if out, err := c.Kubectl(t, user, ns, "", "create", "configmap", cm, "--from-literal=rma.py="+rmaProgram,
		"--from-literal=shared.py="+sharedProgram, "--from-literal=spawn.py="+spawnProgram); err != nil {
		t.Fatalf("kubectl create configmap: %v\n%s", err, out)
	}
	t.Cleanup(func() { _, _ = c.Kubectl(t, user, ns, "", "delete", "configmap", cm, "--wait=false") })
	dir := "/config/" + cm + "/"

	// fails runs a job that must fail with reason; it returns the status.
	fails := func(t *testing.T, name, runtime, reason string, command ...string) api.Status {
		t.Helper()
		t.Cleanup(func() { mpijob(t, user, ns, "delete", name, "--wait=false") })
		args := append([]string{"create", name, "--runtime", runtime, "--workers", "2", "--config-map", cm, "--"}, command...)
		expect(t, mpijob(t, user, ns, args...), 0)
		s := c.WaitForStatus(t, ns, name, 5*time.Minute, func(s api.Status) bool { return s.Phase.Finished() })
		if s.Phase != api.PhaseFailed || s.Reason != reason {
			t.Fatalf("%s/%s: %s; want Failed/%s", s.Phase, s.Reason, s.Message, reason)
		}
		if strings.Contains(s.Message, "Launcher's own command") {
			t.Errorf("a rank's error blamed on the Launcher: %s", s.Message)
		}
		return s
	}
	// succeeds waits for a job to complete and returns its log.
	succeeds := func(t *testing.T, name string) string {
		t.Helper()
		t.Cleanup(func() { mpijob(t, user, ns, "delete", name, "--wait=false") })
		if got := c.WaitForTrainJob(t, ns, name, 5*time.Minute, trainer.TrainJobComplete, trainer.TrainJobFailed); got != trainer.TrainJobComplete {
			t.Fatalf("the job with the fix: %s\n%s", got, mpijob(t, user, ns, "describe", name).out)
		}
		return mpijob(t, user, ns, "logs", name).out
	}

	t.Run("Win.Allocate on Open MPI 4", func(t *testing.T) {
		t.Parallel()
		name := framework.UniqueName("rma")
		s := fails(t, name, "mpi-openmpi", diagnose.ReasonRMAWindowRefused, "mpirun", "python3", dir+"rma.py")
		if !strings.Contains(s.Message, "MPI_ERR_WIN") || !strings.HasPrefix(s.Message, "Rank ") {
			t.Errorf("message: %s", s.Message)
		}
		// The first step, pasted with the program for <command>.
		expect(t, mpijob(t, user, ns, pastedStep(t, s.NextSteps[0], "python3", dir+"rma.py")...), 0)
		logs := succeeds(t, name+"-2")
		for _, want := range []string{"rank 0 window [1, 2] from rank 1: [1, 2]", "rank 1 window [1, 2] from rank 0: [1, 2]"} {
			if !strings.Contains(logs, want) {
				t.Errorf("the one-sided sums are wrong: no %q in\n%s", want, logs)
			}
		}
	})
	t.Run("Win.Allocate_shared over COMM_WORLD on Open MPI 5", func(t *testing.T) {
		t.Parallel()
		name := framework.UniqueName("shm")
		s := fails(t, name, "mpi-openmpi5", diagnose.ReasonSharedWindowAcrossWorkers, "mpirun", "python3", dir+"shared.py")
		// Open MPI 5 does not tag lines with ranks: its own account of
		// the failed process names the rank.
		if !strings.Contains(s.Message, "(Worker ") || !strings.Contains(s.Message, "MPI_ERR_RMA_SHARED") {
			t.Errorf("message: %s", s.Message)
		}
		if !strings.Contains(s.NextStep, "Split_type(MPI.COMM_TYPE_SHARED)") {
			t.Fatalf("first step: %s", s.NextStep)
		}
		expect(t, mpijob(t, user, ns, "clone", name, name+"-2", "--", "mpirun", "python3", dir+"shared.py", "split"), 0)
		logs := succeeds(t, name+"-2")
		if n := strings.Count(logs, "shared window over 1 ranks"); n != 2 {
			t.Errorf("%d ranks made a window over their Worker, want 2:\n%s", n, logs)
		}
	})
	t.Run("spawn with every slot taken on Open MPI 4", func(t *testing.T) {
		t.Parallel()
		name := framework.UniqueName("spawn")
		s := fails(t, name, "mpi-openmpi", diagnose.ReasonNoSlotsToSpawn, "mpirun", "python3", "-m", "mpi4py", dir+"spawn.py")
		if !strings.Contains(s.Message, "MPI_Comm_spawn could not start the new ranks") {
			t.Errorf("message: %s", s.Message)
		}
		expect(t, mpijob(t, user, ns, pastedStep(t, s.NextSteps[0], "python3", "-m", "mpi4py", dir+"spawn.py")...), 0)
		logs := succeeds(t, name+"-2")
		for _, want := range []string{"rank 0 spawned", "rank 1 spawned"} {
			if !strings.Contains(logs, want) {
				t.Errorf("no %q in\n%s", want, logs)
			}
		}
	})
}

// pastedStep is the `kubectl mpijob ...` command of a next step as a user
// pastes it, with command for its <command>.
func pastedStep(t *testing.T, step string, command ...string) []string {
	t.Helper()
	_, rest, ok := strings.Cut(step, "`kubectl mpijob ")
	if !ok {
		t.Fatalf("no kubectl mpijob command in the step %q", step)
	}
	line, _, _ := strings.Cut(rest, "`")
	var args []string
	for _, a := range strings.Fields(line) {
		if a == "<command>" {
			args = append(args, command...)
			continue
		}
		args = append(args, a)
	}
	return args
}
