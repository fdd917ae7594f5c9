//go:build e2e

package e2e

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/diagnose"
	"github.com/mpijob/mpijob/pkg/runtimes"
	"github.com/mpijob/mpijob/test/framework"
)

// stepsProgram: each rank does the same work per step (matrix products,
// one thread), then an Allreduce; after each epoch of 5 steps every rank's
// step time goes to rank 0 (the images' mpijob_io.StepTimes), which
// reports them (rank_step_seconds).
const stepsProgram = `import sys
import numpy as np
from mpi4py import MPI
sys.path.insert(0, "/opt/mpijob/examples")
import mpijob_io

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
a = np.random.default_rng(rank).random((160, 160))
times = mpijob_io.StepTimes()
for epoch in range(1, 100000):
    for step in range(5):
        with times:
            for _ in range(12):
                a = np.tanh(a @ a.T / 160)
        comm.Allreduce(np.ones(1), np.empty(1), op=MPI.SUM)
    every = times.gather(comm)
    if rank == 0:
        mpijob_io.progress(epoch=epoch, rank_step_seconds=every)
`

// A Worker resized to a fifteenth of the other's CPU (in place, as an
// administrator or a vertical autoscaler would; the runtime places one
// Worker per node, so two here) makes its rank the slow one: top shows the ranks' step times with it as the slowest, and the
// status warns SlowRank, naming the rank, its Worker and node, and the
// lower CPU limit there. Why a fifteenth: a rank's step time counts only
// its own work, and a Worker that waits in the Allreduce for the others
// gets its CPU quota back meanwhile. On a loaded CI machine rank 0 itself
// was slowed up to 20 times (60 ms a step against 3 ms); at a fifth of the
// CPU (60m), rank 1 was then no slower than rank 0 in about a third of the
// reports, and never named. At 20m its steps take at least two quota
// periods (about 100 ms), slower than rank 0's worst.
func TestSlowRankIsNamed(t *testing.T) {
	t.Parallel()
	framework.HeavyCPU(t)
	c := framework.Get(t)
	const ns = "team-a"
	name := framework.UniqueName("slow")
	b64 := base64.StdEncoding.EncodeToString([]byte(stepsProgram))
	rankCmd := fmt.Sprintf(`echo %s | base64 -d > /tmp/steps.py && exec python3 /tmp/steps.py`, b64)
	expect(t, mpijob(t, "dev-a", ns, "create", name, "--workers", "2", "--slots-per-worker", "1", "--cpu", "300m",
		"--env", "OPENBLAS_NUM_THREADS=1", "--env", "OMP_NUM_THREADS=1", "--", "mpirun", "sh", "-c", rankCmd), 0, "created")
	t.Cleanup(func() { mpijob(t, "dev-a", ns, "delete", name, "--wait=false") })
	if out, err := c.Kubectl(t, "dev-a", ns, "", "annotate", "trainjob", name, runtimes.SlowRankAfterAnnotation+"=40s"); err != nil {
		t.Fatalf("annotate: %v: %s", err, out)
	}
	expect(t, mpijob(t, "dev-a", ns, "wait", name, "--for=Running", "--timeout", "3m"), 0)
	pod, err := c.Kubectl(t, "admin", ns, "", "get", "pods", "-l", "jobset.sigs.k8s.io/jobset-name="+name+",batch.kubernetes.io/job-completion-index=1,jobset.sigs.k8s.io/replicatedjob-name=node", "-o", "jsonpath={.items[0].metadata.name}")
	if err != nil || pod == "" {
		t.Fatalf("Worker 1's pod: %v %q", err, pod)
	}
	// A failure shows what the diagnosis judged: the Launcher's last
	// progress reports (the ranks' step times) and Worker 1's CPU as the
	// kubelet applied it.
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		launcher, _ := c.Kubectl(t, "admin", ns, "", "get", "pods", "-l", "jobset.sigs.k8s.io/jobset-name="+name+",jobset.sigs.k8s.io/replicatedjob-name=launcher", "-o", "jsonpath={.items[0].metadata.name}")
		logs, _ := c.Kubectl(t, "admin", ns, "", "logs", strings.TrimSpace(launcher), "-c", "node", "--tail", "30", "--timestamps")
		t.Logf("the Launcher's last lines:\n%s", logs)
		res, _ := c.Kubectl(t, "admin", ns, "", "get", "pod", pod, "-o", "jsonpath={.status.containerStatuses[0].resources} {.status.conditions}")
		t.Logf("Worker 1's applied resources and conditions: %s", res)
	})
	out, err := c.Kubectl(t, "admin", ns, "", "patch", "pod", pod, "--subresource", "resize", "-p",
		`{"spec":{"containers":[{"name":"node","resources":{"requests":{"cpu":"20m"},"limits":{"cpu":"20m"}}}]}}`)
	if err != nil {
		t.Fatalf("resize Worker 1 to 20m: %v: %s", err, out)
	}
	s := c.WaitForStatus(t, ns, name, 4*time.Minute, func(s api.Status) bool {
		if s.Phase.Finished() {
			t.Fatalf("the job ended: %s %s: %s", s.Phase, s.Reason, s.Message)
		}
		return s.Reason == diagnose.ReasonSlowRank
	})
	t.Logf("SlowRank: %s", s.Message)
	for _, want := range []string{"Rank 1 (Worker 1 on node ", "per step", "× the other ranks' median of", "its Worker may use 20m CPU, the others 300m"} {
		if !strings.Contains(s.Message, want) {
			t.Errorf("message lacks %q: %s", want, s.Message)
		}
	}
	if len(s.NextSteps) < 2 || !strings.Contains(s.NextSteps[0], "Give every Worker the same CPU") {
		t.Errorf("next steps: %q", s.NextSteps)
	}
	if s.Subject == nil || s.Subject.Index != 1 {
		t.Errorf("the finding is about %+v, want Worker 1", s.Subject)
	}
	if promURL := framework.PrometheusURL(); promURL != "" {
		r := runCLI(t, "dev-a", ns, "top", name, "--prometheus-url", promURL)
		t.Logf("top:\n%s", r.out)
		if !strings.Contains(r.out, "slowest rank 1 (Worker 1)") {
			t.Errorf("top names rank 1 the slowest:\n%s", r.out)
		}
	}
	expect(t, mpijob(t, "dev-a", ns, "describe", name), 0, "SlowRank", "Rank 1 (Worker 1")
}
