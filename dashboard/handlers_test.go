package dashboard

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/queue"
)

// Every route, as each kind of user: the answer's code and what it says.
// The access decisions are the API server's (the fake's RBAC), passed on.
func TestRoutes(t *testing.T) {
	running := &api.Status{Phase: api.PhaseRunning, Launcher: api.LauncherRunning, WorkersReady: 2, WorkersTotal: 2, SlotsPerWorker: 1}
	objs := append(mpiJob("team-a", "pi", running), mpiJob("team-b", "other", running)...)
	pi := objs[0].(*trainer.TrainJob)
	pi.Annotations[api.DescriptionAnnotation] = "digits on 2 Workers"
	pi.Spec.ActiveDeadlineSeconds = 600
	cases := map[string]struct {
		user, method, path, body string
		code                     int
		// has are texts the answer holds; hasNot it must not hold.
		has, hasNot []string
	}{
		"not logged in":               {method: "GET", path: "/api/jobs", code: 401, has: []string{"not logged in"}},
		"a token the cluster refuses": {user: "nobody", method: "GET", path: "/api/whoami", code: 401, has: []string{"log in again"}},
		"who am I":                    {user: "dev-a", method: "GET", path: "/api/whoami", code: 200, has: []string{`"user":"dev-a"`}},
		"login users":                 {method: "GET", path: "/api/login-users", code: 200, has: []string{`"name":"dev-a"`, `"proxy":false`}, hasNot: []string{"token-dev-a"}},
		"an unknown API":              {user: "dev-a", method: "GET", path: "/api/nothing", code: 404, has: []string{"no such API: GET /api/nothing"}},
		"health":                      {method: "GET", path: "/api/healthz", code: 200, has: []string{"ok"}},

		"a tenant's namespaces: their own, with what they may do": {user: "dev-a", method: "GET", path: "/api/namespaces", code: 200,
			has: []string{`{"name":"team-a","canDelete":true,"canPatch":true,"canCreate":true,"canLogs":true}`}, hasNot: []string{"team-b"}},
		"a viewer's namespaces: read only": {user: "viewer-a", method: "GET", path: "/api/namespaces", code: 200,
			has: []string{`{"name":"team-a","canDelete":false,"canPatch":false,"canCreate":false,"canLogs":true}`}},

		"a tenant's jobs":                 {user: "dev-a", method: "GET", path: "/api/jobs", code: 200, has: []string{`"name":"pi"`}, hasNot: []string{`"name":"other"`}},
		"an administrator sees every job": {user: "admin", method: "GET", path: "/api/jobs", code: 200, has: []string{`"name":"pi"`, `"name":"other"`}},
		"another tenant's job list":       {user: "dev-b", method: "GET", path: "/api/jobs?namespace=team-a", code: 403, has: []string{`dev-b`, `team-a`}},
		"a page of the jobs":              {user: "admin", method: "GET", path: "/api/jobs?perPage=1&sort=name", code: 200, has: []string{`"name":"other"`, `"total":2`, `"all":2`, `"page":1`, `"perPage":1`, `"runtimes":["mpi-openmpi"]`}, hasNot: []string{`"name":"pi"`}},
		"a filter on the jobs":            {user: "admin", method: "GET", path: "/api/jobs?name=p.&phase=Running", code: 200, has: []string{`"name":"pi"`, `"total":1`, `"all":2`}, hasNot: []string{`"name":"other"`}},
		"a bad list parameter":            {user: "dev-a", method: "GET", path: "/api/jobs?phase=Runnin", code: 400, has: []string{`phase \"Runnin\" is not a phase`}},
		"a bad stream parameter":          {user: "dev-a", method: "GET", path: "/api/stream?namespace=team-a&perPage=-1", code: 400, has: []string{`perPage \"-1\"`}},
		"a job's page": {user: "viewer-a", method: "GET", path: "/api/jobs/team-a/pi", code: 200, has: []string{`"phase":"Running"`, `"role":"launcher"`, `"summary":`, `"runtimeKind":"ClusterTrainingRuntime"`,
			`"settings":{"description":"digits on 2 Workers","timeout":"10m","timeoutSeconds":600,"gracePeriod":"1m"}`}},
		"another tenant's job page":        {user: "dev-b", method: "GET", path: "/api/jobs/team-a/pi", code: 403, has: []string{`User \"dev-b\" cannot get resource \"trainjobs\"`}},
		"a job that does not exist":        {user: "dev-a", method: "GET", path: "/api/jobs/team-a/nope", code: 404, has: []string{"MPI job nope does not exist in namespace team-a"}},
		"a job's events":                   {user: "viewer-a", method: "GET", path: "/api/jobs/team-a/pi/events", code: 200, has: []string{`"events":`}},
		"another tenant's events":          {user: "dev-b", method: "GET", path: "/api/jobs/team-a/pi/events", code: 403},
		"a viewer may not delete":          {user: "viewer-a", method: "DELETE", path: "/api/jobs/team-a/pi", code: 403, has: []string{`cannot delete resource \"trainjobs\"`}},
		"another tenant may not delete":    {user: "dev-b", method: "DELETE", path: "/api/jobs/team-a/pi", code: 403},
		"a viewer may not suspend":         {user: "viewer-a", method: "POST", path: "/api/jobs/team-a/pi/suspend", code: 403},
		"a Launcher's log":                 {user: "viewer-a", method: "GET", path: "/api/jobs/team-a/pi/logs?target=launcher", code: 200, has: []string{"fake logs"}},
		"another tenant's log":             {user: "dev-b", method: "GET", path: "/api/jobs/team-a/pi/logs?target=launcher", code: 403},
		"a log target that is no pod":      {user: "dev-a", method: "GET", path: "/api/jobs/team-a/pi/logs?target=worker-7", code: 404},
		"the manager runs":                 {user: "viewer-a", method: "GET", path: "/api/manager", code: 200, has: []string{`"running":true`}},
		"the runtimes":                     {user: "viewer-a", method: "GET", path: "/api/runtimes", code: 200, has: []string{`"name":"mpi-openmpi"`, `"mpi":"OpenMPI"`}},
		"a job's input for clone":          {user: "dev-a", method: "GET", path: "/api/jobs/team-a/pi/input", code: 200, has: []string{`"runtime":"mpi-openmpi"`}},
		"another tenant's input for clone": {user: "dev-b", method: "GET", path: "/api/jobs/team-a/pi/input", code: 403},
		"data connections":                 {user: "dev-a", method: "GET", path: "/api/namespaces/team-a/data-connections", code: 200, has: []string{`"connections":`}},
		"another tenant's data connections: none shown": {user: "dev-b", method: "GET", path: "/api/namespaces/team-a/data-connections", code: 200,
			has: []string{`"connections":[]`, "you may not list Secrets in this namespace"}},
		"a job's stacks, taken as the tenant": {user: "dev-a", method: "POST", path: "/api/jobs/team-a/pi/stacks", code: 200,
			has: []string{`"headline":"ranks 0-1 (2): comm.Allreduce ← train.py:120 step()"`, `"pods":"Workers 0-1"`}},
		"another tenant's stacks":      {user: "dev-b", method: "POST", path: "/api/jobs/team-a/pi/stacks", code: 403},
		"stacks of a job that is gone": {user: "dev-a", method: "POST", path: "/api/jobs/team-a/nope/stacks", code: 404, has: []string{"MPI job nope does not exist"}},
		"metrics without Prometheus":   {user: "dev-a", method: "GET", path: "/api/jobs/team-a/pi/metrics", code: 503, has: []string{"Prometheus"}},

		"create: a tenant in their namespace (dry run)": {user: "dev-a", method: "POST", path: "/api/jobs/team-a?dryRun=true",
			body: `{"name":"new","runtime":"mpi-openmpi","workers":2,"slots_per_worker":1,"command":["mpirun","hostname"]}`, code: 200,
			has: []string{`"name":"new"`, `"dryRun":true`, "kind: TrainJob"}},
		"create: in another tenant's namespace": {user: "dev-b", method: "POST", path: "/api/jobs/team-a",
			body: `{"name":"new","runtime":"mpi-openmpi","workers":2,"command":["mpirun","hostname"]}`, code: 403},
		"create: a viewer": {user: "viewer-a", method: "POST", path: "/api/jobs/team-a",
			body: `{"name":"new","runtime":"mpi-openmpi","workers":2,"command":["mpirun","hostname"]}`, code: 403},
		"create: a runtime with a typo": {user: "dev-a", method: "POST", path: "/api/jobs/team-a",
			body: `{"name":"new","runtime":"mpi-openmpl","workers":2,"command":["mpirun","hostname"]}`, code: 422,
			has: []string{`"field":"runtime"`, `did you mean \"mpi-openmpi\"?`}},
		"create: no Workers": {user: "dev-a", method: "POST", path: "/api/jobs/team-a",
			body: `{"name":"new","runtime":"mpi-openmpi","workers":0,"command":["mpirun","hostname"]}`, code: 422, has: []string{`"field":"workers"`}},
		"create: a field the wizard does not know": {user: "dev-a", method: "POST", path: "/api/jobs/team-a",
			body: `{"name":"new","wokers":2}`, code: 400, has: []string{"not valid JSON", "wokers"}},
		"create: a name already taken": {user: "dev-a", method: "POST", path: "/api/jobs/team-a",
			body: `{"name":"pi","runtime":"mpi-openmpi","workers":2,"command":["mpirun","hostname"]}`, code: 409, has: []string{`"field":"name"`, "MPI job pi already exists in namespace team-a: pick another name"}},
		"quota check without quotas": {user: "dev-a", method: "POST", path: "/api/jobs/team-a/quota-check",
			body: `{"name":"new","runtime":"mpi-openmpi","workers":2,"command":["mpirun","hostname"]}`, code: 200, has: []string{`"fits":true`}},

		"a runtime from a template, as a tenant": {user: "dev-a", method: "POST", path: "/api/runtimes",
			body: `{"from":"mpi-openmpi","name":"mine"}`, code: 403},
		"a runtime from a template, as an administrator (dry run)": {user: "admin", method: "POST", path: "/api/runtimes?dryRun=true",
			body: `{"from":"mpi-openmpi","name":"openmpi-small","policy":{"max-workers":"4"}}`, code: 200,
			has: []string{`"name":"openmpi-small"`, `policy.mpijob.dev/max-workers: \"4\"`}},
		"a runtime with a bad name": {user: "admin", method: "POST", path: "/api/runtimes",
			body: `{"from":"mpi-openmpi","name":"Mine"}`, code: 422, has: []string{`"field":"name"`}},
		"a runtime from no template": {user: "admin", method: "POST", path: "/api/runtimes",
			body: `{"from":"nope","name":"mine"}`, code: 422, has: []string{`"field":"from"`}},
		"test a runtime where one may not create jobs": {user: "viewer-a", method: "POST", path: "/api/runtimes/mpi-openmpi/test",
			body: `{"namespace":"team-a"}`, code: 403, has: []string{"you may not create TrainJobs in namespace team-a"}},
		"test a runtime without a namespace": {user: "dev-a", method: "POST", path: "/api/runtimes/mpi-openmpi/test",
			body: `{}`, code: 400, has: []string{"say where to run the test job"}},
		"a runtime test that does not exist": {user: "dev-a", method: "GET", path: "/api/runtime-tests/1-x", code: 404},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFakeAPI(t, objs...)
			got := f.do(tc.user, tc.method, tc.path, tc.body)
			if got.code != tc.code {
				t.Errorf("%s %s as %q: HTTP %d, want %d: %s", tc.method, tc.path, tc.user, got.code, tc.code, got.body)
			}
			for _, s := range tc.has {
				if !strings.Contains(got.body, s) {
					t.Errorf("the answer lacks %q: %s", s, got.body)
				}
			}
			for _, s := range tc.hasNot {
				if strings.Contains(got.body, s) {
					t.Errorf("the answer holds %q: %s", s, got.body)
				}
			}
		})
	}
}

// A finished job has no ranks to take stacks of: the answer says so.
func TestStacksOfAFinishedJob(t *testing.T) {
	f := newFakeAPI(t, mpiJob("team-a", "done", &api.Status{Phase: api.PhaseSucceeded})...)
	got := f.do("dev-a", "POST", "/api/jobs/team-a/done/stacks", "")
	if want := "job done is Succeeded: stacks show where a running job's ranks are"; got.code != 409 || !strings.Contains(got.body, want) {
		t.Errorf("HTTP %d %s, want 409 with %q", got.code, got.body, want)
	}
}

// What a tenant does to their own job happens; the job is as they left it.
func TestTenantActsOnTheirJob(t *testing.T) {
	f := newFakeAPI(t, mpiJob("team-a", "pi", &api.Status{Phase: api.PhaseRunning})...)
	ctx := context.Background()
	if got := f.do("dev-a", "POST", "/api/jobs/team-a/pi/suspend", ""); got.code != 200 {
		t.Fatalf("suspend: HTTP %d: %s", got.code, got.body)
	}
	tj := &trainer.TrainJob{}
	if err := f.store.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "pi"}, tj); err != nil {
		t.Fatal(err)
	}
	if tj.Spec.Suspend == nil || !*tj.Spec.Suspend {
		t.Errorf("after suspend the job's spec.suspend = %v", tj.Spec.Suspend)
	}
	if got := f.do("dev-a", "POST", "/api/jobs/team-a/pi/resume", ""); got.code != 200 {
		t.Fatalf("resume: HTTP %d: %s", got.code, got.body)
	}
	if err := f.store.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "pi"}, tj); err != nil {
		t.Fatal(err)
	}
	if tj.Spec.Suspend != nil && *tj.Spec.Suspend {
		t.Errorf("after resume the job is still suspended")
	}
	if got := f.do("dev-a", "POST", "/api/jobs/team-a?dryRun=false", `{"name":"new","runtime":"mpi-openmpi","workers":2,"command":["mpirun","hostname"]}`); got.code != 201 {
		t.Fatalf("create: HTTP %d: %s", got.code, got.body)
	}
	if err := f.store.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "new"}, &trainer.TrainJob{}); err != nil {
		t.Errorf("the created job is not there: %v", err)
	}
	if got := f.do("dev-a", "DELETE", "/api/jobs/team-a/pi", ""); got.code != 200 {
		t.Fatalf("delete: HTTP %d: %s", got.code, got.body)
	}
	if got := f.do("dev-a", "GET", "/api/jobs/team-a/pi", ""); got.code != 404 {
		t.Errorf("the deleted job's page: HTTP %d, want 404", got.code)
	}
}

// The API server's field paths and quota lines land on the wizard's fields.
func TestCauseFields(t *testing.T) {
	quota := `{"resource":"nvidia.com/gpu","requested":"12","quota":"8","inUse":"0","resourceQuota":"gpus"}`
	got := causeFields(&metav1.StatusDetails{Causes: []metav1.StatusCause{
		{Field: "metadata.name", Message: "name too long"},
		{Field: "spec.trainer.numNodes", Message: "at most 16"},
		{Field: "spec.trainer.numProcPerNode", Message: "at most 8"},
		{Field: "spec.trainer.command", Message: "empty"},
		{Field: "spec.trainer.image", Message: "bad image"},
		{Field: "spec.runtimeRef.name", Message: "no runtime"},
		{Field: "metadata.labels[" + queue.NameLabel + "]", Message: "no queue"},
		{Field: "requests.nvidia.com/gpu", Type: api.QuotaCauseType, Message: quota},
		{Field: "limits.memory", Type: api.QuotaCauseType, Message: "not JSON"},
		{Field: "count/pods", Message: "too many pods"},
	}})
	want := []FieldError{
		{Field: "name", Message: "name too long"},
		{Field: "workers", Message: "at most 16"},
		{Field: "slots_per_worker", Message: "at most 8"},
		{Field: "command", Message: "empty"},
		{Field: "image", Message: "bad image"},
		{Field: "runtime", Message: "no runtime"},
		{Field: "queue", Message: "no queue"},
		{Field: "resources_per_worker.nvidia.com/gpu", Message: "requested 12 nvidia.com/gpu, quota 8, in use 0 (ResourceQuota gpus)"},
		{Field: "resources_per_worker.memory", Message: "over the namespace's quota"},
		{Field: "workers", Message: "too many pods"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("causeFields (-want,+got):\n%s", diff)
	}
	if causeFields(nil) != nil {
		t.Errorf("no details give fields")
	}
}

// Logs: every pod merged and labelled, one Worker, and bad options named.
func TestLogTargets(t *testing.T) {
	f := newFakeAPI(t, mpiJob("team-a", "pi", &api.Status{Phase: api.PhaseRunning})...)
	cases := map[string]struct {
		query string
		code  int
		has   []string
	}{
		"every pod, labelled":    {query: "target=all", code: 200, has: []string{"[launcher] fake logs", "[worker-0] fake logs", "[worker-1] fake logs"}},
		"one Worker":             {query: "target=worker-1&timestamps=1", code: 200, has: []string{"fake logs"}},
		"the last lines":         {query: "tail=10", code: 200, has: []string{"fake logs"}},
		"a negative tail":        {query: "tail=-1", code: 400, has: []string{`tail \"-1\": use a number of lines, 0 or more`}},
		"since no time":          {query: "sinceSeconds=0", code: 400, has: []string{`sinceSeconds \"0\": use a number of seconds, 1 or more`}},
		"a target that is none":  {query: "target=nodes", code: 400, has: []string{`target \"nodes\": use launcher, worker-N or all`}},
		"a Worker the job lacks": {query: "target=worker-2", code: 404, has: []string{"job pi has no worker-2: it has 2 Workers (worker-0 to worker-1)"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := f.do("viewer-a", "GET", "/api/jobs/team-a/pi/logs?"+tc.query, "")
			if got.code != tc.code {
				t.Errorf("HTTP %d, want %d: %s", got.code, tc.code, got.body)
			}
			for _, s := range tc.has {
				if !strings.Contains(got.body, s) {
					t.Errorf("the answer lacks %q: %s", s, got.body)
				}
			}
		})
	}
}

// The front end: files as they are, any other path the app's index.html
// (or, in a binary built without it, how to build it).
func TestStaticFrontEnd(t *testing.T) {
	f := newFakeAPI(t)
	got := f.do("", "GET", "/jobs/team-a/pi", "")
	switch got.code {
	case 200:
		if !strings.Contains(got.header.Get("Content-Type"), "text/html") || !strings.Contains(got.body, "<div id=\"root\"") {
			t.Errorf("a front-end route: %s %s", got.header.Get("Content-Type"), got.body)
		}
	case 503:
		if !strings.Contains(got.body, "run `make dashboard`") {
			t.Errorf("without the front end: %s", got.body)
		}
	default:
		t.Errorf("a front-end route: HTTP %d %s", got.code, got.body)
	}
}

// A namespace being deleted takes no new job: it is listed (its jobs are
// going) but not offered for a create, which the API server would refuse.
func TestTerminatingNamespaceTakesNoNewJob(t *testing.T) {
	f := newFakeAPI(t)
	f.terminating = map[string]bool{"team-a": true}
	a := f.do("dev-a", "GET", "/api/namespaces", "")
	if a.code != 200 || !strings.Contains(a.body, `{"name":"team-a","canDelete":true,"canPatch":true,"canCreate":false,"canLogs":true,"terminating":true}`) {
		t.Errorf("GET /api/namespaces for dev-a while team-a is deleted: %d %s", a.code, a.body)
	}
}
