//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/test/framework"
)

// A tenant's pods get an ephemeral-storage limit by default (the
// namespace's LimitRange), which Kueue leaves to the kubelet: a job that
// writes more than it to its own file system is admitted, runs, and is
// evicted before it fills the node's disk, and the diagnosis says why and
// what to do.
func TestEphemeralStorageLimitStopsAFillingPod(t *testing.T) {
	t.Parallel()
	c := framework.Get(t)
	const ns, user = "team-a", "dev-a"
	name := framework.UniqueName("fill")
	t.Cleanup(func() { mpijob(t, user, ns, "delete", name, "--wait=false") })
	// 1.2 GiB, past the namespace's default limit of 1 GiB.
	expect(t, mpijob(t, user, ns, "create", name, "--workers", "1", "--",
		"sh", "-c", "head -c 1200M /dev/zero > /tmp/fill; sleep 300"), 0)
	s := c.WaitForStatus(t, ns, name, 5*time.Minute, func(s api.Status) bool { return s.Phase.Finished() })
	if s.Phase != api.PhaseFailed || !strings.Contains(s.Message, "ephemeral-storage limit") {
		t.Fatalf("job %s: %s %s: %s; want Failed, naming the ephemeral-storage limit", name, s.Phase, s.Reason, s.Message)
	}
	r := mpijob(t, user, ns, "describe", name)
	expect(t, r, 0, "ephemeral-storage limit", "Write large files to a PVC")
}
