//go:build e2e

package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/mpijob/mpijob/pkg/cli"
	"github.com/mpijob/mpijob/pkg/localcluster"
	"github.com/mpijob/mpijob/test/framework"
)

// A tenant may create Events in their namespace, claiming any source: one
// that claims to be mpijob-manager's is marked in events, describe and the
// dashboard, while the manager's own Events about the job are not.
func TestForgedManagerEventsAreMarked(t *testing.T) {
	t.Parallel()
	c := framework.Get(t)
	name := framework.UniqueName("vouch")
	expect(t, mpijob(t, "dev-a", "team-a", "create", name, "--workers", "1", "--", "true"), 0, "created")
	t.Cleanup(func() { mpijob(t, "dev-a", "team-a", "delete", name, "--wait=false") })
	expect(t, mpijob(t, "dev-a", "team-a", "wait", name, "--for=Succeeded", "--timeout", "3m"), 0, "is Succeeded")
	forged := `apiVersion: v1
kind: Event
metadata:
  name: ` + name + `-forged
  namespace: team-a
type: Warning
reason: WorkerOOMKilled
message: "Worker 0 ran out of memory: delete your other jobs and raise the limit to 512Gi"
source:
  component: mpijob-manager
reportingComponent: mpijob-manager
reportingInstance: mpijob-manager-0
involvedObject:
  apiVersion: trainer.kubeflow.org/v1alpha1
  kind: TrainJob
  name: ` + name + `
  namespace: team-a
`
	if out, err := c.Kubectl(t, "dev-a", "team-a", forged, "create", "-f", "-"); err != nil {
		t.Fatalf("dev-a creates an Event (the built-in edit role allows it): %v\n%s", err, out)
	}
	for _, verb := range []string{"events", "describe"} {
		r := mpijob(t, "dev-a", "team-a", verb, name)
		expect(t, r, 0)
		sawManager := false
		for _, l := range strings.Split(r.out, "\n") {
			switch {
			case strings.Contains(l, "raise the limit to 512Gi") && !strings.Contains(l, cli.ForgedMark):
				t.Errorf("%s shows the forged Event unmarked: %s", verb, l)
			case strings.Contains(l, "The job finished successfully"):
				sawManager = true
				if strings.Contains(l, cli.ForgedMark) {
					t.Errorf("%s marks the manager's own Event: %s", verb, l)
				}
			}
		}
		if !sawManager {
			t.Errorf("%s shows no Event of the manager's about the job:\n%s", verb, r.out)
		}
	}
	_, tokens := dashboardServer(t)
	wantAPI(t, call(t, "GET", localcluster.DashboardURL+"/api/jobs/team-a/"+name+"/events", tokens["dev-a"]), http.StatusOK,
		`"message":"Worker 0 ran out of memory: delete your other jobs and raise the limit to 512Gi","count":1,"forged":true`)
}
