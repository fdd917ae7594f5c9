//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/diagnose"
	"github.com/mpijob/mpijob/test/framework"
)

// A GPU job on the local cluster's simulated (kwok) GPU nodes: its Workers
// "run" where no container runs, so the Launcher's wait for their sshd
// gives up after 120 s. The failure names that, and the Worker, instead of
// "jobset failed ... first failed job: launcher"; logs shows the wait's
// output instead of "waiting to start: PodInitializing".
func TestGPUJobOnSimulatedNodesSaysWhy(t *testing.T) {
	t.Parallel()
	c := framework.Get(t)
	const ns, user = "team-a", "dev-a"
	name := framework.UniqueName("gpukwok")
	t.Cleanup(func() { mpijob(t, user, ns, "delete", name, "--wait=false") })
	expect(t, mpijob(t, user, ns, "create", name, "--runtime", "mpi-openmpi-gpu", "--workers", "2", "--gpus", "1"), 0)

	s := c.WaitForStatus(t, ns, name, 10*time.Minute, func(s api.Status) bool { return s.Phase.Finished() })
	t.Logf("%s %s: %s (next: %s)", s.Phase, s.Reason, s.Message, s.NextStep)
	if s.Phase != api.PhaseFailed || s.Reason != diagnose.ReasonHostUnreachable {
		t.Errorf("%s %s, want Failed %s", s.Phase, s.Reason, diagnose.ReasonHostUnreachable)
	}
	for _, want := range []string{"The Launcher gave up before mpirun started: Worker ", "did not answer on port 2222 within 120 s", "wait-for-workers"} {
		if !strings.Contains(s.Message, want) {
			t.Errorf("message lacks %q: %s", want, s.Message)
		}
	}
	if !strings.Contains(s.NextStep, "kwok") || !strings.Contains(s.NextStep, "kubectl mpijob describe "+name) {
		t.Errorf("next step %q, want the simulated nodes named and describe", s.NextStep)
	}
	r := mpijob(t, user, ns, "logs", name)
	expect(t, r, 0, "sshd on port 2222 did not answer the Launcher within 120 s")
	if !strings.Contains(r.errOut, "its program has not started (PodInitializing); the output of its init container wait-for-workers") {
		t.Errorf("logs does not say whose output it shows: %s", r.errOut)
	}
}
