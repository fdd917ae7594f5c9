package dashboard

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mpijob/mpijob/pkg/api"
)

// The login page's flow: a session cookie stands for the token, whoami
// answers with it, logout ends it; an unknown user is told who there is.
func TestLoginFlow(t *testing.T) {
	f := newFakeAPI(t)
	got := f.do("", "POST", "/api/login", `{"user":"dev-x"}`)
	if got.code != 400 || !strings.Contains(got.body, `user \"dev-x\": no such user here; choose one of dev-a, viewer-a, or paste a token`) {
		t.Errorf("login as an unknown user: HTTP %d %s", got.code, got.body)
	}
	if got := f.do("", "POST", "/api/login", `{"token":"token-nobody"}`); got.code != 401 || !strings.Contains(got.body, "does not accept this token") {
		t.Errorf("login with a refused token: HTTP %d %s", got.code, got.body)
	}
	if got := f.do("", "POST", "/api/login", `not json`); got.code != 400 {
		t.Errorf("login with no JSON: HTTP %d %s", got.code, got.body)
	}
	req := httptest.NewRequest("POST", "http://localhost:9090/api/login", strings.NewReader(`{"user":"viewer-a"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", "http://localhost:9090")
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, req)
	if rec.Code != 200 {
		t.Fatalf("login: HTTP %d %s", rec.Code, rec.Body)
	}
	cookies := rec.Result().Cookies()
	if len(cookies) != 1 || cookies[0].Name != SessionCookie || !cookies[0].HttpOnly || strings.Contains(cookies[0].Value, "token-") {
		t.Fatalf("login cookies %+v: want one HttpOnly session cookie that is not the token", cookies)
	}
	withCookie := func(method, path string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, "http://localhost:9090"+path, nil)
		req.Header.Set("Origin", "http://localhost:9090")
		req.AddCookie(cookies[0])
		rec := httptest.NewRecorder()
		f.h.ServeHTTP(rec, req)
		return rec
	}
	if rec := withCookie("GET", "/api/whoami"); rec.Code != 200 || !strings.Contains(rec.Body.String(), `"user":"viewer-a"`) {
		t.Errorf("whoami with the session: HTTP %d %s", rec.Code, rec.Body)
	}
	if rec := withCookie("POST", "/api/logout"); rec.Code != 200 {
		t.Errorf("logout: HTTP %d %s", rec.Code, rec.Body)
	}
	if rec := withCookie("GET", "/api/whoami"); rec.Code != 401 || !strings.Contains(rec.Body.String(), "log in again") {
		t.Errorf("whoami after logout: HTTP %d %s", rec.Code, rec.Body)
	}
}

// The live stream sends the user's jobs at once and again when one
// changes; another tenant's job stream is refused as the API server
// refuses it.
func TestStream(t *testing.T) {
	for name, cached := range map[string]bool{"listed on each change": false, "through the users' watch caches": true} {
		t.Run(name, func(t *testing.T) { testStream(t, cached) })
	}
}

func testStream(t *testing.T, cached bool) {
	f := newFakeAPI(t, mpiJob("team-a", "pi", &api.Status{Phase: api.PhaseRunning})...)
	if cached {
		f.serveTrainJobs(t)
	}
	srv := httptest.NewServer(f.h)
	defer srv.Close()
	open := func(user, query string) (*bufio.Scanner, func()) {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/stream?"+query, nil)
		req.Header.Set("Authorization", "Bearer "+token(user))
		res, err := http.DefaultClient.Do(req) //nolint:bodyclose // the returned stop closes it
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != 200 {
			t.Fatalf("stream: HTTP %d", res.StatusCode)
		}
		return bufio.NewScanner(res.Body), func() { cancel(); _ = res.Body.Close() }
	}
	// next is the next event's name and data.
	next := func(sc *bufio.Scanner) (string, string) {
		var event string
		done := make(chan struct{})
		var data string
		go func() {
			defer close(done)
			for sc.Scan() {
				l := sc.Text()
				if e, ok := strings.CutPrefix(l, "event: "); ok {
					event = e
				}
				if d, ok := strings.CutPrefix(l, "data: "); ok {
					data = d
					return
				}
			}
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("no event within 10 s")
		}
		return event, data
	}
	sc, stop := open("dev-a", "namespace=team-a")
	defer stop()
	if ev, data := next(sc); ev != "jobs" || !strings.Contains(data, `"name":"pi"`) {
		t.Fatalf("first event %s %s, want the jobs with pi", ev, data)
	}
	if got := f.do("dev-a", "POST", "/api/jobs/team-a?dryRun=false", `{"name":"second","runtime":"mpi-openmpi","workers":2,"command":["mpirun","hostname"]}`); got.code != 201 {
		t.Fatalf("create: HTTP %d %s", got.code, got.body)
	}
	if ev, data := next(sc); ev != "jobs" || !strings.Contains(data, `"name":"second"`) {
		t.Errorf("after a create: %s %s, want the jobs with the new one", ev, data)
	}

	sc2, stop2 := open("dev-a", "namespace=team-a&job=pi")
	defer stop2()
	if ev, data := next(sc2); ev != "job" || !strings.Contains(data, `"phase":"Running"`) {
		t.Errorf("a job's stream: %s %s, want its page", ev, data)
	}
	sc3, stop3 := open("dev-b", "namespace=team-a&job=pi")
	defer stop3()
	if ev, data := next(sc3); ev != "denied" || !strings.Contains(data, "You (dev-b) may not see MPI job pi in namespace team-a") {
		t.Errorf("another tenant's job stream: %s %s, want denied", ev, data)
	}
	if got := f.do("dev-a", "GET", "/api/stream?job=pi", ""); got.code != 400 || !strings.Contains(got.body, "job needs namespace") {
		t.Errorf("a job stream without its namespace: HTTP %d %s", got.code, got.body)
	}
}

// The Metrics tab asks Prometheus for the job's pods only, after reading
// the job as the user; Prometheus's answer becomes series and phase bands.
func TestMetricsFromPrometheus(t *testing.T) {
	var queries []string
	prom := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		q := r.Form.Get("query")
		queries = append(queries, q)
		start, _ := time.Parse(time.RFC3339, "2026-11-22T12:00:00Z")
		var result string
		switch {
		case strings.HasPrefix(q, "mpijob_job_phase"):
			result = fmt.Sprintf(`[{"metric":{"phase":"Running"},"values":[[%d,"1"],[%d,"1"]]}]`, start.Unix(), start.Unix()+15)
		case strings.Contains(q, "container_cpu_usage_seconds_total"):
			result = fmt.Sprintf(`[{"metric":{"pod":"pi-launcher-0-0-abcde"},"values":[[%d,"0.5"],[%d,"0.75"]]}]`, start.Unix(), start.Unix()+15)
		default:
			result = `[]`
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"status":"success","data":{"resultType":"matrix","result":%s}}`, result)
	}))
	defer prom.Close()
	f := newFakeAPI(t, mpiJob("team-a", "pi", &api.Status{Phase: api.PhaseRunning})...)
	f.server.PrometheusURL, f.server.ScrapeInterval = prom.URL, 5*time.Second
	got := f.do("viewer-a", "GET", "/api/jobs/team-a/pi/metrics", "")
	if got.code != 200 {
		t.Fatalf("metrics: HTTP %d %s", got.code, got.body)
	}
	var m Metrics
	got.json(t, &m)
	if len(m.Series) != 1 || m.Series[0].Metric != "cpu" || len(m.Series[0].Points) != 2 || len(m.Phases) == 0 || m.Phases[0].Phase != api.PhaseRunning {
		t.Errorf("metrics = %+v, want one cpu series of 2 points and a Running band", m)
	}
	for _, q := range queries {
		if !strings.Contains(q, `namespace="team-a"`) {
			t.Errorf("a query for more than the job's namespace: %s", q)
		}
	}
	queries = nil
	if got := f.do("dev-b", "GET", "/api/jobs/team-a/pi/metrics", ""); got.code != 403 || len(queries) != 0 {
		t.Errorf("another tenant's metrics: HTTP %d, %d Prometheus queries; want 403 and none", got.code, len(queries))
	}
	if got := f.do("dev-a", "GET", "/api/jobs/team-a/nope/metrics", ""); got.code != 404 {
		t.Errorf("metrics of no job: HTTP %d", got.code)
	}
	prom.Close()
	if got := f.do("dev-a", "GET", "/api/jobs/team-a/pi/metrics", ""); got.code != 502 || !strings.Contains(got.body, "did not answer") {
		t.Errorf("metrics with Prometheus down: HTTP %d %s", got.code, got.body)
	}
}

// Progress and artifacts: read as the user; a job without storage says so.
func TestProgressAndArtifacts(t *testing.T) {
	f := newFakeAPI(t, mpiJob("team-a", "pi", &api.Status{Phase: api.PhaseRunning})...)
	if got := f.do("viewer-a", "GET", "/api/jobs/team-a/pi/progress", ""); got.code != 200 || !strings.Contains(got.body, `"points":[]`) {
		t.Errorf("progress of a job that reported none: HTTP %d %s", got.code, got.body)
	}
	if got := f.do("dev-b", "GET", "/api/jobs/team-a/pi/progress", ""); got.code != 403 {
		t.Errorf("another tenant's progress: HTTP %d %s", got.code, got.body)
	}
	got := f.do("dev-a", "GET", "/api/jobs/team-a/pi/artifacts", "")
	var a Artifacts
	got.json(t, &a)
	if got.code != 200 || len(a.Objects) != 0 || a.Message == "" {
		t.Errorf("artifacts of a job without storage: HTTP %d %s", got.code, got.body)
	}
	if got := f.do("dev-b", "GET", "/api/jobs/team-a/pi/artifacts", ""); got.code != 403 {
		t.Errorf("another tenant's artifacts: HTTP %d %s", got.code, got.body)
	}
	if got := f.do("dev-a", "GET", "/api/jobs/team-a/nope/artifacts/model.pt", ""); got.code != 404 {
		t.Errorf("an artifact of no job: HTTP %d %s", got.code, got.body)
	}
}

// A quota the job would exceed: the wizard's check names the field to
// change and every line of the quota.
func TestQuotaCheckNamesTheField(t *testing.T) {
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "compute"},
		Spec:   corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceLimitsMemory: resource.MustParse("2Gi")}},
		Status: corev1.ResourceQuotaStatus{Hard: corev1.ResourceList{corev1.ResourceLimitsMemory: resource.MustParse("2Gi")}, Used: corev1.ResourceList{corev1.ResourceLimitsMemory: resource.MustParse("0")}}}
	f := newFakeAPI(t, quota)
	got := f.do("dev-a", "POST", "/api/jobs/team-a/quota-check", `{"name":"big","runtime":"mpi-openmpi","workers":4,"command":["mpirun","hostname"]}`)
	var q QuotaCheck
	got.json(t, &q)
	if got.code != 200 || q.Fits || len(q.Fields) == 0 || len(q.Lines) == 0 {
		t.Fatalf("quota check of 4 Workers of 1Gi under 2Gi: HTTP %d %s", got.code, got.body)
	}
	if q.Fields[0].Field != "resources_per_worker.memory" || !strings.Contains(q.Fields[0].Message, "quota 2Gi") {
		t.Errorf("the violation %+v does not name the Workers' memory and the quota", q.Fields[0])
	}
	if want := (QuotaLine{Quota: "compute", Resource: "limits.memory", Requested: "4608Mi", Hard: "2Gi", Used: "0"}); len(q.Lines) != 1 || q.Lines[0] != want {
		t.Errorf("quota lines %+v, want %+v", q.Lines, want)
	}
	// A viewer may not read quotas: the check says admission makes it.
	if got := f.do("viewer-a", "POST", "/api/jobs/team-a/quota-check", `{"name":"big","runtime":"mpi-openmpi","workers":4,"command":["mpirun","hostname"]}`); got.code != 200 || !strings.Contains(got.body, "admission checks them") {
		t.Errorf("quota check as a viewer: HTTP %d %s", got.code, got.body)
	}
}

// The Test runtime button: the run belongs to whoever started it.
func TestRuntimeTestRuns(t *testing.T) {
	f := newFakeAPI(t)
	got := f.do("dev-a", "POST", "/api/runtimes/mpi-openmpi/test", `{"namespace":"team-a"}`)
	if got.code != 202 {
		t.Fatalf("start a test: HTTP %d %s", got.code, got.body)
	}
	var started struct{ ID string }
	got.json(t, &started)
	path := "/api/runtime-tests/" + url.PathEscape(started.ID)
	if got := f.do("dev-a", "GET", path, ""); got.code != 200 || !strings.Contains(got.body, `"progress":`) {
		t.Errorf("follow the test: HTTP %d %s", got.code, got.body)
	}
	if got := f.do("dev-b", "GET", path, ""); got.code != 404 {
		t.Errorf("another user follows the test: HTTP %d %s", got.code, got.body)
	}
	if got := f.do("dev-a", "POST", "/api/runtimes/nope/test", `{"namespace":"team-a"}`); got.code != 404 {
		t.Errorf("test no runtime: HTTP %d %s", got.code, got.body)
	}
}

// Suspending a job someone deleted meanwhile says so.
func TestSuspendAJobThatIsGone(t *testing.T) {
	f := newFakeAPI(t)
	got := f.do("dev-a", "POST", "/api/jobs/team-a/gone/suspend", "")
	if got.code != 404 {
		t.Errorf("suspend no job: HTTP %d %s", got.code, got.body)
	}
	var e struct{ Error string }
	_ = json.Unmarshal([]byte(got.body), &e)
	if !strings.Contains(e.Error, "gone") {
		t.Errorf("the error %q does not name the job", e.Error)
	}
}
