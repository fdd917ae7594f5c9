//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"sigs.k8s.io/yaml"

	"github.com/mpijob/mpijob/dashboard"
	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/test/framework"
)

// busyRank keeps a rank half busy for about 45 s, so the job's pods have
// CPU to show.
const busyRank = `import time
end = time.time() + 45
while time.time() < end:
    t = time.time() + 0.05
    while time.time() < t:
        pass
    time.sleep(0.05)
print("done")`

// The metrics store of the local cluster, end to end: Prometheus scrapes
// every kubelet and mpijob-manager; the recording rules evaluate; a job
// that ran 45 s has CPU and memory series for its Launcher and each Worker
// and its phases as bands through the dashboard's API (as dev-a and
// viewer-a; never dev-b); every query of the Grafana dashboard and every
// recording rule has data; and the Metrics tab in Chromium draws them.
func TestMetricsOverTime(t *testing.T) {
	t.Parallel()
	framework.HeavyCPU(t)
	promURL := framework.PrometheusURL()
	if promURL == "" {
		t.Skip("MPIJOB_KUBECONFIG names another cluster: set MPIJOB_PROMETHEUS_URL to its Prometheus")
	}
	c := framework.Get(t)
	pc, err := promapi.NewClient(promapi.Config{Address: promURL})
	if err != nil {
		t.Fatal(err)
	}
	prom := promv1.NewAPI(pc)
	ctx := context.Background()

	// Every target answers: the kubelets of the real nodes and the manager.
	waitFor(t, time.Minute, "every Prometheus target up", func() (bool, string) {
		tr, err := prom.Targets(ctx)
		if err != nil {
			return false, err.Error()
		}
		jobs := map[string]bool{}
		for _, a := range tr.Active {
			if a.Health != promv1.HealthGood {
				return false, a.ScrapeURL + ": " + a.LastError
			}
			jobs[string(a.Labels["job"])] = true
		}
		return jobs["kubelet-resource"] && jobs["mpijob-manager"], "targets up: " + strings.Join(slices.Sorted(maps.Keys(jobs)), ", ")
	})

	job := framework.UniqueName("metrics")
	// A failure too, so the failure panels have something to show when
	// this test runs alone (kwok's OOM stage: no real node's time).
	failed := framework.UniqueName("metrics-oom")
	t.Cleanup(func() { mpijob(t, "dev-a", "team-a", "delete", job, failed, "--wait=false") })
	if err := c.As(t, "dev-a").Create(ctx, framework.MakeTrainJob(failed, "team-a", "mpi-openmpi").NumNodes(1).OnKwokNodes().FailWorkersOnKwok("OOMKilled").Obj()); err != nil {
		t.Fatal(err)
	}
	tj := framework.MakeTrainJob(job, "team-a", "mpi-openmpi").NumNodes(2).Command("mpirun", "python3", "-c", busyRank).Obj()
	if err := c.As(t, "dev-a").Create(ctx, tj); err != nil {
		t.Fatal(err)
	}
	c.WaitForStatus(t, "team-a", job, 4*time.Minute, func(s api.Status) bool { return s.Phase == api.PhaseSucceeded || s.Phase == api.PhaseFailed })
	st := c.WaitForStatus(t, "team-a", job, time.Second, func(api.Status) bool { return true })
	if st.Phase != api.PhaseSucceeded {
		t.Fatalf("job %s ended %s: %s", job, st.Phase, st.Message)
	}
	if ran := st.CompletionTime.Sub(st.StartTime.Time); ran < 30*time.Second {
		t.Fatalf("job ran %s, the test needs 30 s at least", ran)
	}

	ts, tokens := dashboardServer(t)
	var m dashboard.Metrics
	// The last samples and one evaluation of the rules come a few scrapes
	// after the job ends.
	waitFor(t, time.Minute, "CPU and memory series for the Launcher and both Workers", func() (bool, string) {
		r := call(t, http.MethodGet, ts.URL+"/api/jobs/team-a/"+job+"/metrics", tokens["dev-a"])
		if r.code != http.StatusOK {
			return false, r.body
		}
		m = dashboard.Metrics{}
		if err := json.Unmarshal([]byte(r.body), &m); err != nil {
			return false, err.Error()
		}
		return seriesPerRole(m, "cpu") == "Launcher:1 Worker:2" && seriesPerRole(m, "memory") == "Launcher:1 Worker:2",
			"cpu " + seriesPerRole(m, "cpu") + ", memory " + seriesPerRole(m, "memory")
	})
	for _, s := range m.Series {
		if s.Metric == "cpu" && s.Role == api.RoleWorker && maxValue(s.Points) < 0.1 {
			t.Errorf("Worker %s never used a tenth of a core (max %.3f): the busy ranks should show", s.Pod, maxValue(s.Points))
		}
	}
	var phases []string
	for _, b := range m.Phases {
		phases = append(phases, string(b.Phase))
	}
	if got := strings.Join(phases, ","); !strings.Contains(got, "Running") || !strings.HasSuffix(got, "Succeeded") {
		t.Errorf("phase bands %s, want Running and ending Succeeded", got)
	}
	// Who may read the job may read its metrics; another tenant may not.
	if r := call(t, http.MethodGet, ts.URL+"/api/jobs/team-a/"+job+"/metrics", tokens["viewer-a"]); r.code != http.StatusOK {
		t.Errorf("viewer-a reading team-a's metrics: %d %s", r.code, r.body)
	}
	if r := call(t, http.MethodGet, ts.URL+"/api/jobs/team-a/"+job+"/metrics", tokens["dev-b"]); r.code != http.StatusForbidden || strings.Contains(r.body, "series") {
		t.Errorf("dev-b reading team-a's metrics: %d %s, want 403 and no series", r.code, r.body)
	}

	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	rng := promv1.Range{Start: tj.CreationTimestamp.Add(-time.Minute), End: time.Now(), Step: 5 * time.Second}
	// The recording rules evaluate without error and each has data; the
	// alerts evaluate without error.
	waitFor(t, time.Minute, "every recording rule evaluated with data", func() (bool, string) {
		rules, err := prom.Rules(ctx)
		if err != nil {
			return false, err.Error()
		}
		recording := 0
		for _, g := range rules.Groups {
			counted := false
			for _, r := range g.Rules {
				if ar, ok := r.(promv1.AlertingRule); ok && ar.Health != promv1.RuleHealthGood {
					return false, ar.Name + ": " + string(ar.Health) + " " + ar.LastError
				}
				rr, ok := r.(promv1.RecordingRule)
				if !ok {
					continue
				}
				if !counted {
					recording, counted = recording+1, true
				}
				if rr.Health != promv1.RuleHealthGood {
					return false, rr.Name + ": " + string(rr.Health) + " " + rr.LastError
				}
				rng.End = time.Now()
				if n, err := samples(ctx, prom, rr.Name, rng); err != nil || n == 0 {
					return false, rr.Name + " has no data yet"
				}
			}
		}
		// The recording rules' three groups (jobs, resources, usage), and
		// the alerts' (alerts_test.go).
		return recording == 3 && len(rules.Groups) == 4, "rule groups loaded"
	})
	// Every query of the Grafana dashboard has data.
	b, err := os.ReadFile(filepath.Join(root, "config", "monitoring", "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var gd struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := yaml.Unmarshal(b, &gd); err != nil {
		t.Fatal(err)
	}
	if len(gd.Panels) < 8 {
		t.Fatalf("the Grafana dashboard has %d panels", len(gd.Panels))
	}
	for _, p := range gd.Panels {
		for _, q := range p.Targets {
			expr := strings.ReplaceAll(q.Expr, "$namespace", ".*")
			rng.End = time.Now()
			if n, err := samples(ctx, prom, expr, rng); err != nil || n == 0 {
				t.Errorf("Grafana panel %q: query %s returned no data (%v)", p.Title, expr, err)
			}
		}
	}

	browserCheck(t, "metrics.mjs", ts.URL, "Metrics tab checks", "JOB="+job)
}

// samples counts the samples a range query returns.
func samples(ctx context.Context, prom promv1.API, expr string, rng promv1.Range) (int, error) {
	res, _, err := prom.QueryRange(ctx, expr, rng)
	if err != nil {
		return 0, err
	}
	n := 0
	if m, ok := res.(model.Matrix); ok {
		for _, s := range m {
			n += len(s.Values)
		}
	}
	return n, nil
}

// seriesPerRole says how many series of metric each role has, e.g.
// "Launcher:1 Worker:2".
func seriesPerRole(m dashboard.Metrics, metric string) string {
	n := map[string]int{}
	for _, s := range m.Series {
		if s.Metric == metric && len(s.Points) > 0 {
			n[s.Role]++
		}
	}
	var out []string
	for _, r := range []string{api.RoleLauncher, api.RoleWorker} {
		if n[r] > 0 {
			out = append(out, r+":"+strconv.Itoa(n[r]))
		}
	}
	return strings.Join(out, " ")
}

func maxValue(points [][2]float64) float64 {
	m := 0.0
	for _, p := range points {
		m = max(m, p[1])
	}
	return m
}

// waitFor polls cond every 2 s until it holds, failing with its last word.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s (%s)", what, timeout, why)
		}
		time.Sleep(2 * time.Second)
	}
}
