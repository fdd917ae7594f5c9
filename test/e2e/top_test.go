//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/mpijob/mpijob/pkg/cli"
	"github.com/mpijob/mpijob/test/framework"
)

// kubectl mpijob top shows each pod of a running job with its node and
// what it uses against its requests and limits, and names a Worker that
// runs at its CPU limit (a fifth of a core, both ranks spinning: reached even on a loaded machine, where half a core was not) as throttled.
// A typo gets "did you mean", a job of another tenant is not found.
func TestTopNamesAThrottledWorker(t *testing.T) {
	t.Parallel()
	framework.HeavyCPU(t)
	framework.Get(t)
	promURL := framework.PrometheusURL()
	if promURL == "" {
		t.Skip("no Prometheus: set MPIJOB_PROMETHEUS_URL")
	}
	name := framework.UniqueName("top")
	spin := `timeout 600 sh -c "while :; do :; done"` // longer than the test looks: deleted at its end
	expect(t, mpijob(t, "dev-a", "team-a", "create", name, "--workers", "2", "--cpu", "200m", "--", "mpirun", "sh", "-c", spin), 0, "created")
	t.Cleanup(func() { mpijob(t, "dev-a", "team-a", "delete", name, "--wait=false") })
	expect(t, mpijob(t, "dev-a", "team-a", "wait", name, "--for=Running", "--timeout", "3m"), 0)
	var last result
	waitFor(t, 3*time.Minute, "a Worker named at its CPU limit", func() (bool, string) {
		last = runCLI(t, "dev-a", "team-a", "top", name, "--prometheus-url", promURL)
		for _, l := range strings.Split(last.out, "\n") {
			if strings.Contains(l, "Worker") && strings.Contains(l, "/200m/200m") && strings.Contains(l, "at its CPU limit: throttled") {
				return true, ""
			}
		}
		return false, last.out + last.errOut
	})
	t.Logf("top:\n%s", last.out)
	if !strings.Contains(last.out, "Launcher") || strings.Count(last.out, "Worker") != 2 {
		t.Errorf("top shows the Launcher and 2 Workers:\n%s", last.out)
	}
	expect(t, mpijob(t, "dev-a", "team-a", "top", name+"x", "--prometheus-url", promURL), cli.ExitNotFound, `did you mean "`+name+`"`)
	expect(t, mpijob(t, "dev-b", "team-b", "top", name, "--prometheus-url", promURL), cli.ExitNotFound)
}
