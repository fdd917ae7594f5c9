//go:build e2e

package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// `kubectl mpijob create --dry-run=server` and the wizard's check say
// whether the cluster can place the job now, from the same admission
// answer: the fit in what the nodes have free, the free GPUs (for one who
// may list nodes only) and the job's Kueue queue (team-a's default
// LocalQueue, set by Kueue's defaulting). A Worker larger than any node it may use is never placed.
// The jobs that must fit go to the kwok nodes (16 × 32 CPUs), so tests
// running beside this one on the two real nodes do not change the answer.
func TestPlacementInTheCLIAndTheWizard(t *testing.T) {
	t.Parallel()
	const queue = "Kueue queue team-a/default (ClusterQueue team-a): "
	onKwok := []string{"--node-selector", "type=kwok", "--toleration", "nvidia.com/gpu:NoSchedule"}
	t.Run("the CLI", func(t *testing.T) {
		r := mpijob(t, "dev-a", "team-a", append([]string{"create", "placed", "--workers", "2", "--dry-run=server"}, onKwok...)...)
		expect(t, r, 0, "mpijob placed created in namespace team-a (server dry run: checked, not created)",
			"Can the cluster place it now?\n  fits now: the Launcher and 2 Workers (each ", "\n  "+queue)
		// A tenant, who may not list nodes, learns whether the job fits,
		// not what the cluster's nodes have free; an administrator does.
		if strings.Contains(r.out+r.errOut, "free GPUs now") {
			t.Errorf("dev-a, who may not list nodes, was told the cluster's free GPUs:\n%s", r.errOut)
		}
		admin := mpijob(t, "admin", "team-a", append([]string{"create", "placed", "--workers", "2", "--dry-run=server"}, onKwok...)...)
		expect(t, admin, 0, "fits now: the Launcher and 2 Workers (each ", "\n  free GPUs now: ")
		// A CPU Worker may use the two real nodes only (the GPU nodes'
		// taint keeps it off), which have 2 CPUs each.
		r = mpijob(t, "dev-a", "team-a", "create", "too-wide", "--workers", "1", "--cpu", "3", "--dry-run=server")
		expect(t, r, 0, "never fits as the cluster is now: a Worker asks for 3 cpu, and no node it may use has that much allocatable even with nothing else running: ask for less")
		admin = mpijob(t, "admin", "team-a", "create", "too-wide", "--workers", "1", "--cpu", "3", "--dry-run=server")
		expect(t, admin, 0, "even with nothing else running (the most one has: 2)")
		// One Worker per node: three CPU Workers can never be placed on the
		// two real nodes, however free (the diagnosis of the real job says
		// CannotStart "only 2 nodes can take one"; the dry run said "fits").
		r = mpijob(t, "dev-a", "team-a", "create", "three", "--workers", "3", "--dry-run=server")
		expect(t, r, 0, "never fits as the cluster is now: it asks for 3 Workers, but the runtime places one Worker per node and only 2 nodes can take one: use at most 2 Workers")
		// -o yaml stays YAML: placement goes to stderr.
		r = mpijob(t, "dev-a", "team-a", append([]string{"create", "placed", "--workers", "2", "--dry-run=server", "-o", "yaml"}, onKwok...)...)
		expect(t, r, 0)
		if strings.Contains(r.out, "Can the cluster place it now?") || !strings.Contains(r.errOut, "Can the cluster place it now?") {
			t.Errorf("with -o yaml, placement belongs on stderr only\nstdout: %s\nstderr: %s", r.out, r.errOut)
		}
	})
	t.Run("the wizard", func(t *testing.T) {
		ts, tokens := dashboardServer(t)
		r := post(t, ts.URL+"/api/jobs/team-a?dryRun=true", tokens["dev-a"], map[string]any{"name": "placed", "runtime": "mpi-openmpi", "workers": 2,
			"node_selector": map[string]string{"type": "kwok"}, "tolerations": []map[string]string{{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}}})
		wantAPI(t, r, http.StatusOK)
		var ans struct{ Placement []string }
		if err := json.Unmarshal([]byte(r.body), &ans); err != nil {
			t.Fatal(err)
		}
		t.Logf("placement: %q", ans.Placement)
		if len(ans.Placement) != 2 || !strings.HasPrefix(ans.Placement[0], "fits now: the Launcher and 2 Workers (each ") ||
			!strings.HasPrefix(ans.Placement[1], queue) {
			t.Errorf("placement %q, want the fit and the queue (dev-a may not list nodes: no free GPUs of the cluster)", ans.Placement)
		}
		// A real create answers without it.
		r = post(t, ts.URL+"/api/jobs/team-a", tokens["dev-a"], map[string]any{"name": "placed-real", "runtime": "mpi-openmpi", "workers": 1, "command": []string{"mpirun", "hostname"}})
		wantAPI(t, r, http.StatusCreated)
		if strings.Contains(r.body, `"placement"`) {
			t.Errorf("a real create said placement: %s", r.body)
		}
		mpijob(t, "dev-a", "team-a", "delete", "placed-real")
	})
}
