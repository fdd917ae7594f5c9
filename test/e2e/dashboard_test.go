//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/mpijob/mpijob/dashboard"
	"github.com/mpijob/mpijob/pkg/localcluster"
	"github.com/mpijob/mpijob/test/framework"
)

// dashboardServer runs the dashboard in-process against the test cluster,
// offering the kubeconfig's token users, and returns it with their tokens.
func dashboardServer(t *testing.T, extra ...dashboard.LoginUser) (*httptest.Server, map[string]string) {
	t.Helper()
	c := framework.Get(t)
	raw, err := clientcmd.LoadFromFile(c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	tokens := map[string]string{}
	srv := &dashboard.Server{Base: c.Config, PrometheusURL: framework.PrometheusURL(), ScrapeInterval: localcluster.ScrapeInterval}
	for _, u := range []string{"dev-a", "dev-b", "viewer-a"} {
		a, ok := raw.AuthInfos[u]
		if !ok || a.Token == "" {
			t.Skipf("kubeconfig %s has no token user %s: the dashboard tests need the local cluster's users", c.Kubeconfig, u)
		}
		tokens[u] = a.Token
		srv.Users = append(srv.Users, dashboard.LoginUser{Name: u, Token: a.Token})
	}
	for _, u := range extra {
		tokens[u.Name] = u.Token
		srv.Users = append(srv.Users, u)
	}
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	srv.Namespaces = func(ctx context.Context) ([]corev1.Namespace, error) {
		list, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		return list.Items, nil
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts, tokens
}

type apiResult struct {
	code int
	body string
}

func call(t *testing.T, method, url, token string) apiResult {
	t.Helper()
	return do(t, method, url, token, nil)
}

// do sends a request with the user's token (none when empty) and a JSON
// body when body is not nil.
func do(t *testing.T, method, url, token string, body io.Reader) apiResult {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return apiResult{code: resp.StatusCode, body: string(b)}
}

func wantAPI(t *testing.T, r apiResult, code int, contains ...string) {
	t.Helper()
	if r.code != code {
		t.Errorf("HTTP %d, want %d: %s", r.code, code, r.body)
		return
	}
	// Errors are JSON: compare with the message as users read it.
	text := r.body
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal([]byte(r.body), &e) == nil && e.Error != "" {
		text = e.Error
	}
	for _, s := range contains {
		if !strings.Contains(r.body, s) && !strings.Contains(text, s) {
			t.Errorf("answer lacks %q: %s", s, r.body)
		}
	}
}

// The dashboard's API acts as each user: dev-a sees and reads team-a's
// job (list, detail, logs, live stream), dev-b is refused with the API
// server's words, viewer-a may look but not delete, and bad tokens go
// back to the login.
func TestDashboardAPIActsAsTheUser(t *testing.T) {
	t.Parallel()
	ts, tokens := dashboardServer(t)
	name := framework.UniqueName("dash")
	expect(t, mpijob(t, "dev-a", "team-a", "create", name, "--workers", "2"), 0, "created in namespace team-a")
	t.Cleanup(func() { mpijob(t, "dev-a", "team-a", "delete", name, "--wait=false") })

	wantAPI(t, call(t, "GET", ts.URL+"/api/jobs", ""), http.StatusUnauthorized, "not logged in")
	wantAPI(t, call(t, "GET", ts.URL+"/api/jobs", "not-a-token"), http.StatusUnauthorized, "log in again")
	wantAPI(t, call(t, "GET", ts.URL+"/api/whoami", tokens["dev-a"]), http.StatusOK, `"user":"dev-a"`)
	wantAPI(t, call(t, "GET", ts.URL+"/api/jobs?namespace=team-a", tokens["dev-a"]), http.StatusOK, `"name":"`+name+`"`, `"runtime":"mpi-openmpi"`, `"mpi":true`)
	wantAPI(t, call(t, "GET", ts.URL+"/api/jobs/team-a/"+name, tokens["dev-a"]), http.StatusOK, "kind: TrainJob", `"summary":"2 Workers × 1 slot`)
	// The list filters and pages on the server: the job by its name, one
	// row a page; a page past the last is the last; a bad phase is named.
	byName := ts.URL + "/api/jobs?namespace=team-a&perPage=1&name=" + url.QueryEscape("^"+name+"$")
	wantAPI(t, call(t, "GET", byName, tokens["dev-a"]), http.StatusOK, `"name":"`+name+`"`, `"total":1,`, `"page":1,`, `"perPage":1`)
	wantAPI(t, call(t, "GET", byName+"&page=5", tokens["dev-a"]), http.StatusOK, `"name":"`+name+`"`, `"page":1,`)
	wantAPI(t, call(t, "GET", ts.URL+"/api/jobs?namespace=team-a&phase=Finished", tokens["dev-a"]), http.StatusBadRequest, `phase "Finished" is not a phase; use one of Pending`)
	wantAPI(t, call(t, "GET", ts.URL+"/api/jobs/team-a/nope-"+name, tokens["dev-a"]), http.StatusNotFound, "does not exist in namespace team-a")

	// dev-b: refused in team-a, and team-a is not among its namespaces.
	wantAPI(t, call(t, "GET", ts.URL+"/api/jobs?namespace=team-a", tokens["dev-b"]), http.StatusForbidden, `"dev-b" cannot list`)
	wantAPI(t, call(t, "GET", ts.URL+"/api/jobs/team-a/"+name, tokens["dev-b"]), http.StatusForbidden, `"dev-b" cannot get`)
	nsB := call(t, "GET", ts.URL+"/api/namespaces", tokens["dev-b"])
	wantAPI(t, nsB, http.StatusOK, `"name":"team-b"`)
	if strings.Contains(nsB.body, `"team-a"`) {
		t.Errorf("dev-b's namespaces include team-a: %s", nsB.body)
	}
	if all := call(t, "GET", ts.URL+"/api/jobs", tokens["dev-b"]); strings.Contains(all.body, name) {
		t.Errorf("dev-b's job list shows team-a's %s: %s", name, all.body)
	}

	// viewer-a: may look, may not delete.
	wantAPI(t, call(t, "GET", ts.URL+"/api/namespaces", tokens["viewer-a"]), http.StatusOK, `{"name":"team-a","canDelete":false,"canPatch":false`)
	wantAPI(t, call(t, "DELETE", ts.URL+"/api/jobs/team-a/"+name, tokens["viewer-a"]), http.StatusForbidden, `"viewer-a" cannot delete`)

	// Live: the stream pushes the job list again when the job changes.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL+"/api/stream?namespace=team-a&job="+name, nil)
	req.Header.Set("Authorization", "Bearer "+tokens["dev-a"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	phases := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 8<<20)
	event := ""
	for sc.Scan() && !phases["Succeeded"] {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "event: "); ok {
			event = v
		}
		if v, ok := strings.CutPrefix(line, "data: "); ok && event == "job" {
			var d dashboard.Detail
			if err := json.Unmarshal([]byte(v), &d); err != nil {
				t.Fatalf("stream data: %v", err)
			}
			phases[string(d.Job.Phase)] = true
		}
	}
	if !phases["Succeeded"] || len(phases) < 2 {
		t.Errorf("the stream showed phases %v, want the job's progress up to Succeeded", phases)
	}

	// Logs: the Launcher's, one Worker's, all merged with prefixes.
	wantAPI(t, call(t, "GET", ts.URL+"/api/jobs/team-a/"+name+"/logs", tokens["dev-a"]), http.StatusOK, "allreduce over 2 ranks ok")
	wantAPI(t, call(t, "GET", ts.URL+"/api/jobs/team-a/"+name+"/logs?target=all", tokens["dev-a"]), http.StatusOK, "[launcher] ")
	wantAPI(t, call(t, "GET", ts.URL+"/api/jobs/team-a/"+name+"/logs?target=worker-7", tokens["dev-a"]), http.StatusNotFound, "has no worker-7: it has 2 Workers (worker-0 to worker-1)")
	wantAPI(t, call(t, "GET", ts.URL+"/api/jobs/team-a/"+name+"/logs?tail=-3", tokens["dev-a"]), http.StatusBadRequest, `tail "-3"`)
	wantAPI(t, call(t, "GET", ts.URL+"/api/jobs/team-a/"+name+"/events", tokens["dev-a"]), http.StatusOK, `"events":[`)
	wantAPI(t, call(t, "DELETE", ts.URL+"/api/jobs/team-a/"+name, tokens["dev-a"]), http.StatusOK)
}

// An API server that cannot be reached gives a clear 502, never a blank
// answer; the page shows it in a banner and retries.
func TestDashboardAPIServerUnreachable(t *testing.T) {
	t.Parallel()
	c := framework.Get(t)
	down := rest.CopyConfig(c.Config)
	down.Host = "https://127.0.0.1:1"
	ts := httptest.NewServer((&dashboard.Server{Base: down}).Handler())
	t.Cleanup(ts.Close)
	wantAPI(t, call(t, "GET", ts.URL+"/api/jobs", "any-token"), http.StatusBadGateway, "the Kubernetes API server cannot be reached")
}

// The dashboard in a real browser (Debian's chromium through
// playwright-core) as dev-a, dev-b and viewer-a: dashboard/web/e2e/browser.mjs.
// Screenshots go to .cache/dashboard-screenshots.
func TestDashboardInTheBrowser(t *testing.T) {
	t.Parallel()
	framework.HeavyCPU(t)
	ts, _ := dashboardServer(t)
	chromium := os.Getenv("CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	if _, err := os.Stat(chromium); err != nil {
		t.Fatalf("no browser at %s: `make browser` installs Debian's chromium", chromium)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	web := filepath.Join(root, "dashboard", "web")
	if _, err := os.Stat(filepath.Join(web, "node_modules", "playwright-core")); err != nil {
		t.Fatalf("playwright-core is not installed: run `make dashboard` (npm ci in dashboard/web)")
	}
	running, failed, big := framework.UniqueName("dash-run"), framework.UniqueName("dash-fail"), framework.UniqueName("dash-big")
	expect(t, mpijob(t, "dev-a", "team-a", "create", failed, "--workers", "1", "--worker-image", localcluster.PauseImage), 0, "created")
	// A job that prints 100 MB (1 MB a second) while the browser follows
	// its log.
	expect(t, mpijob(t, "dev-a", "team-a", "create", big, "--workers", "1", "--",
		"sh", "-c", `sleep 10; for i in $(seq 100); do yes "rank 0 filler line of a very chatty training program, step 0123456789" | head -c 1048576; sleep 1; done; sleep 30`), 0, "created")
	t.Cleanup(func() { mpijob(t, "dev-a", "team-a", "delete", running, failed, big, "--wait=false") })
	// The browser reads the failed job's diagnosis: on a cluster busy with
	// the other tests' jobs its Worker may wait for a node a while first.
	expect(t, mpijob(t, "dev-a", "team-a", "wait", failed, "--for=Failed", "--timeout", "5m"), 0)
	// The job the list follows to Succeeded is created last, after that
	// wait: created first, it once finished before the browser opened the
	// list on a busy cluster.
	expect(t, mpijob(t, "dev-a", "team-a", "create", running, "--workers", "2", "--slots-per-worker", "2",
		"--", "sh", "-c", "sleep 120 && mpirun /usr/local/bin/mpi-hello"), 0, "created")

	shots := browserCheck(t, "browser.mjs", ts.URL, "browser checks", "RUNNING_JOB="+running, "FAILED_JOB="+failed, "BIG_JOB="+big, "CHROMIUM="+chromium)
	fmt.Fprintf(os.Stderr, "dashboard screenshots: %s\n", shots)
}

// browserCheck runs the Playwright script dashboard/web/e2e/SCRIPT against
// the dashboard at url with env, logs its report and fails the test (what
// names the checks) when one of them failed. Screenshots go to
// .cache/dashboard-screenshots, whose path it returns.
// failedChecks is the browser test's FAIL lines, each with what its page
// showed (the harness's indented lines after it), so the failure's own
// line says which check failed even where only the end of the output is
// kept.
func failedChecks(out string) string {
	var b strings.Builder
	in := false
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(l, "FAIL "):
			in = true
		case in && strings.HasPrefix(l, "     "):
		default:
			in = false
		}
		if in {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

func browserCheck(t *testing.T, script, url, what string, env ...string) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	shots := filepath.Join(root, ".cache", "dashboard-screenshots")
	cmd := exec.Command("node", filepath.Join("e2e", script))
	cmd.Dir = filepath.Join(root, "dashboard", "web")
	cmd.Env = append(append(os.Environ(), "DASHBOARD_URL="+url, "SHOTS="+shots), env...)
	out, err := cmd.CombinedOutput()
	t.Logf("browser test:\n%s", out)
	if err != nil {
		t.Fatalf("%s failed (%v); screenshots in %s; what failed:\n%s", what, err, shots, failedChecks(string(out)))
	}
	return shots
}
