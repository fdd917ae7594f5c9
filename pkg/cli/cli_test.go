package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/utils/ptr"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/jobspec"
	"github.com/mpijob/mpijob/pkg/logs"
)

var update = flag.Bool("update", false, "rewrite golden files")

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := "testdata/" + name + ".golden"
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./pkg/cli -update)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s (-want,+got):\n%s", path, diff)
	}
}

var now = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func testJob(ns, name, rt string, workers int32, s *api.Status, age time.Duration) trainer.TrainJob {
	tj := trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(now.Add(-age)),
			Annotations: map[string]string{api.CreatorAnnotation: "dev-a"}},
		Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: rt}, Trainer: &trainer.Trainer{NumNodes: ptr.To(workers), NumProcPerNode: ptr.To[int32](2)}},
	}
	if s != nil {
		raw, _ := s.Encode()
		tj.Annotations[api.StatusAnnotation] = raw
	}
	return tj
}

func tableJobs() []trainer.TrainJob {
	start := metav1.NewTime(now.Add(-90 * time.Second))
	end := metav1.NewTime(now.Add(-30 * time.Second))
	gpu := testJob("team-b", "train", "mpi-openmpi-gpu", 5, &api.Status{Phase: api.PhaseQueued, Reason: "Queued", WorkersTotal: 4, QueuePosition: ptr.To[int32](2)}, 3*time.Minute)
	q := resource.MustParse("8")
	gpu.Spec.Trainer.ResourcesPerNode = &corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": q}}
	return []trainer.TrainJob{
		testJob("team-a", "hello", "mpi-openmpi", 2, &api.Status{Phase: api.PhaseSucceeded, WorkersReady: 2, WorkersTotal: 2, SlotsPerWorker: 2, StartTime: &start, CompletionTime: &end}, 2*time.Minute),
		testJob("team-a", "oom", "mpi-openmpi", 4, &api.Status{Phase: api.PhaseFailed, Reason: "WorkerOOMKilled", WorkersReady: 3, WorkersTotal: 4, StartTime: &start, CompletionTime: &end}, time.Hour),
		gpu,
		// Its own runtime gives the Workers 4 slots and an AMD GPU: the
		// manager's status says so.
		testJob("team-b", "amd", "amd", 2, &api.Status{Phase: api.PhaseRunning, WorkersReady: 2, WorkersTotal: 2, SlotsPerWorker: 4, GPUsPerWorker: "1 amd.com/gpu", StartTime: &start}, 5*time.Minute),
		testJob("team-a", "no-manager", "mpi-mpich", 3, nil, 26*time.Hour),
	}
}

func TestJobTableGolden(t *testing.T) {
	for name, opts := range map[string]printers.PrintOptions{
		"table":         {},
		"table-wide":    {Wide: true},
		"table-all-ns":  {WithNamespace: true},
		"table-wide-ns": {Wide: true, WithNamespace: true},
	} {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			if err := printers.NewTablePrinter(opts).PrintObj(JobTable(tableJobs(), now), &b); err != nil {
				t.Fatal(err)
			}
			golden(t, name, b.String())
		})
	}
}

func TestLineFilter(t *testing.T) {
	f := &lineFilter{prefix: true}
	var b bytes.Buffer
	f.print(&b, logs.NewLine("worker-1", "2026-11-22T10:00:00Z export HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz0123456789"))
	f.print(&b, logs.NewLine("launcher", "2026-11-22T10:00:01Z plain"))
	want := "[worker-1] export HF_TOKEN=[REDACTED]\n[launcher] plain\n"
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("(-want,+got):\n%s", diff)
	}
	var ts bytes.Buffer
	(&lineFilter{timestamps: true}).print(&ts, logs.NewLine("launcher", "2026-11-22T10:00:01.5Z kept"))
	(&lineFilter{timestamps: true}).print(&ts, logs.NewLine("launcher", "no time here"))
	if diff := cmp.Diff("2026-11-22T10:00:01.5Z kept\nno time here\n", ts.String()); diff != "" {
		t.Errorf("--timestamps (-want,+got):\n%s", diff)
	}
	if f.redacted() != 1 {
		t.Errorf("redacted = %d, want 1", f.redacted())
	}
}

func TestJobFlagsInput(t *testing.T) {
	cases := map[string]struct {
		f       jobFlags
		set     []string
		start   jobspec.Input
		want    jobspec.Input
		wantErr string
	}{
		"workers, slots, images": {
			f:    jobFlags{workers: 3, slots: 2, image: "a:1", workerImage: "b:1"},
			set:  []string{"workers", "slots-per-worker", "image", "worker-image"},
			want: jobspec.Input{Workers: 3, SlotsPerWorker: 2, Image: "a:1", WorkerImage: "b:1"},
		},
		"a new --image replaces both sides of the source": {
			f:     jobFlags{image: "c:1"},
			set:   []string{"image"},
			start: jobspec.Input{LauncherImage: "a:1", WorkerImage: "b:1"},
			want:  jobspec.Input{Image: "c:1"},
		},
		"resources per Worker and of the Launcher": {
			f:   jobFlags{gpus: 2, cpu: "300m", memory: "300Mi", resources: []string{"amd.com/gpu=1"}, launcherCPU: "200m", launcher: "1Gi"},
			set: []string{"gpus", "cpu", "memory", "resource", "launcher-cpu", "launcher-memory"},
			want: jobspec.Input{
				ResourcesPerWorker: map[string]string{"nvidia.com/gpu": "2", "cpu": "300m", "memory": "300Mi", "amd.com/gpu": "1"},
				LauncherResources:  map[string]string{"cpu": "200m", "memory": "1Gi"},
			},
		},
		"--gpus 0 removes the runtime's GPUs": {f: jobFlags{gpus: 0}, set: []string{"gpus"}, want: jobspec.Input{ResourcesPerWorker: map[string]string{"nvidia.com/gpu": "0"}}},
		"env replaces by name, selector and queue": {
			f:     jobFlags{env: []string{"A=2", "B=1"}, nodeSelector: []string{"zone=a"}, queue: "default"},
			set:   []string{"env", "node-selector", "queue"},
			start: jobspec.Input{Env: []corev1.EnvVar{{Name: "A", Value: "1"}}},
			want:  jobspec.Input{Env: []corev1.EnvVar{{Name: "A", Value: "2"}, {Name: "B", Value: "1"}}, NodeSelector: map[string]string{"zone": "a"}, Queue: "default"},
		},
		"env from a Secret's key, or the key of the same name; it replaces a plain value": {
			f:     jobFlags{envFromSecret: []string{"AWS_SECRET_ACCESS_KEY=s3-creds:secret-key", "TOKEN=api"}},
			set:   []string{"env-from-secret"},
			start: jobspec.Input{Env: []corev1.EnvVar{{Name: "TOKEN", Value: "plain"}}},
			want: jobspec.Input{Env: []corev1.EnvVar{
				{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "api"}, Key: "TOKEN"}}},
				{Name: "AWS_SECRET_ACCESS_KEY", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s3-creds"}, Key: "secret-key"}}},
			}},
		},
		"env from a Secret without one":  {f: jobFlags{envFromSecret: []string{"TOKEN="}}, set: []string{"env-from-secret"}, wantErr: `--env-from-secret "TOKEN=": use KEY=SECRET or KEY=SECRET:SECRETKEY`},
		"env from a Secret without KEY=": {f: jobFlags{envFromSecret: []string{"s3-creds"}}, set: []string{"env-from-secret"}, wantErr: `--env-from-secret "s3-creds": use KEY=SECRET`},
		"zero slots":                     {f: jobFlags{slots: 0}, set: []string{"slots-per-worker"}, wantErr: "--slots-per-worker 0"},
		"negative gpus":                  {f: jobFlags{gpus: -1}, set: []string{"gpus"}, wantErr: "--gpus -1: use 0 or more"},
		"empty image":                    {f: jobFlags{workerImage: " "}, set: []string{"worker-image"}, wantErr: "--worker-image is empty"},
		"empty runtime":                  {f: jobFlags{runtime: ""}, set: []string{"runtime"}, wantErr: "--runtime is empty"},
		"env without =":                  {f: jobFlags{env: []string{"NOPE"}}, set: []string{"env"}, wantErr: `--env "NOPE": use KEY=VALUE`},
		"bad selector":                   {f: jobFlags{nodeSelector: []string{"gpu"}}, set: []string{"node-selector"}, wantErr: `--node-selector "gpu"`},
		"bad resource":                   {f: jobFlags{resources: []string{"amd.com/gpu"}}, set: []string{"resource"}, wantErr: `--resource "amd.com/gpu": use NAME=COUNT`},
		"timeout, retries, priority, tolerations, pull Secrets, description, launcher flags": {
			f: jobFlags{timeout: " 2h ", retries: 2, priority: "high", tolerations: []string{"dedicated=mpi:NoSchedule", "spot"},
				pullSecrets: []string{"regcred"}, description: "nightly digits", launcherFlags: " --bind-to  none "},
			set: []string{"timeout", "retries", "priority", "toleration", "image-pull-secret", "description", "launcher-flags"},
			want: jobspec.Input{Timeout: "2h", Retries: 2, Priority: "high",
				Tolerations: []corev1.Toleration{
					{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "mpi", Effect: corev1.TaintEffectNoSchedule},
					{Key: "spot", Operator: corev1.TolerationOpExists},
				},
				ImagePullSecrets: []string{"regcred"}, Description: "nightly digits", LauncherFlags: []string{"--bind-to", "none"}},
		},
		"a clone's flags replace the source's tolerations and clear its timeout": {
			f:     jobFlags{tolerations: []string{"gpu:NoExecute"}, timeout: ""},
			set:   []string{"toleration", "timeout"},
			start: jobspec.Input{Timeout: "1h", Tolerations: []corev1.Toleration{{Key: "old", Operator: corev1.TolerationOpExists}}},
			want:  jobspec.Input{Tolerations: []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}}},
		},
		"empty toleration":          {f: jobFlags{tolerations: []string{" "}}, set: []string{"toleration"}, wantErr: "--toleration is empty"},
		"two tolerations in one":    {f: jobFlags{tolerations: []string{"a,b"}}, set: []string{"toleration"}, wantErr: `--toleration "a,b" names 2 tolerations`},
		"a toleration's bad effect": {f: jobFlags{tolerations: []string{"a=b:Never"}}, set: []string{"toleration"}, wantErr: "the effect must be NoSchedule, PreferNoSchedule or NoExecute"},
		"empty pull Secret":         {f: jobFlags{pullSecrets: []string{""}}, set: []string{"image-pull-secret"}, wantErr: "--image-pull-secret is empty"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := tc.start
			err := tc.f.input(&got, func(n string) bool { return contains(tc.set, n) })
			if len(tc.f.warnings) > 0 {
				t.Errorf("warnings %q, want none", tc.f.warnings)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("input (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestBuildErrNamesTheFlag: a builder error names the flag the user typed.
func TestBuildErrNamesTheFlag(t *testing.T) {
	cases := map[string]struct {
		err  *jobspec.Error
		want string
	}{
		"cpu":             {&jobspec.Error{Field: "resources_per_worker.cpu", Value: "lots", Problem: "p"}, `--cpu "lots": p`},
		"gpus":            {&jobspec.Error{Field: "resources_per_worker.nvidia.com/gpu", Value: "1.5", Problem: "p"}, `--gpus "1.5": p`},
		"other resource":  {&jobspec.Error{Field: "resources_per_worker.gpu", Value: "1", Problem: "p"}, `--resource gpu "1": p`},
		"launcher memory": {&jobspec.Error{Field: "launcher_resources.memory", Value: "x", Problem: "p"}, `--launcher-memory "x": p`},
		"worker image":    {&jobspec.Error{Field: "worker_image", Value: "A", Problem: "p"}, `--worker-image "A": p`},
		"name":            {&jobspec.Error{Field: "name", Value: "Hello", Problem: "p"}, `NAME "Hello": p`},
		"no value":        {&jobspec.Error{Field: "launcher_resources", Problem: "p"}, `--launcher-cpu/--launcher-memory: p`},
		"toleration":      {&jobspec.Error{Field: "tolerations", Value: "a", Problem: "p"}, `--toleration "a": p`},
		"pull Secret":     {&jobspec.Error{Field: "image_pull_secrets", Value: "A", Problem: "p"}, `--image-pull-secret "A": p`},
		"launcher flags":  {&jobspec.Error{Field: "launcher_flags", Value: "x", Problem: "p"}, `--launcher-flags "x": p`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := buildErr(tc.err)
			var ee *exitError
			if !errors.As(err, &ee) || ee.code != ExitUsage {
				t.Fatalf("err = %#v, want a usage error", err)
			}
			if diff := cmp.Diff(tc.want, ee.msg); diff != "" {
				t.Errorf("message (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestExitCodes(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: dev, context: {cluster: c, user: u}}]
current-context: dev
`), 0o600); err != nil {
		t.Fatal(err)
	}
	root := NewRootCommand(genericTestStreams())
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"wait"}, ExitUsage, "wait takes one job NAME"},
		{[]string{"convert"}, ExitUsage, "-f is required"},
		{[]string{"convert", "-f", "../legacy/testdata/malformed-v1.yaml"}, ExitUsage, `apiVersion: is "kubeflow.org/v1"`},
		{[]string{"nosuchverb"}, ExitUsage, "unknown command"},
		{[]string{"create", "x", "--workers", "two"}, ExitUsage, `invalid argument "two" for "--workers" flag`},
		{[]string{"logs", "x", "--since", "5"}, ExitUsage, `invalid argument "5" for "--since" flag`},
		{[]string{"get", "-o", "wid"}, ExitUsage, "-o wid: not an output format; use wide or one of json, yaml"},
		{[]string{"runtimes", "list", "-o", "yaml"}, ExitUsage, "unknown shorthand flag: 'o'"},
		{[]string{"--kubeconfig", kubeconfig, "--context", "nosuch", "get"}, ExitUsage, "--context nosuch: no such context in the kubeconfig"},
		{[]string{"delete", "x", "--grace-period", "-2"}, ExitUsage, "--grace-period -2: use seconds, 0 or more"},
		{[]string{"create", "x", "--workers", "1", "--env-from-secret", "TOKEN"}, ExitUsage, `--env-from-secret "TOKEN": use KEY=SECRET`},
		{[]string{"version"}, ExitOK, ""},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			root = NewRootCommand(genericTestStreams())
			root.SetArgs(tc.args)
			err := root.Execute()
			if err == nil {
				if tc.code != ExitOK {
					t.Fatalf("no error, want exit %d", tc.code)
				}
				return
			}
			code, msg := explain(err, root)
			if code != tc.code || !strings.Contains(msg, tc.msg) {
				t.Errorf("exit %d %q, want %d containing %q", code, msg, tc.code, tc.msg)
			}
		})
	}
}

// docs/cli.md is generated from the commands: it must match them.
func TestReferenceIsCurrent(t *testing.T) {
	got, err := Reference(NewRootCommand(genericTestStreams()))
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("docs/cli.md is stale: run `make docs` (-file,+commands):\n%s", diff)
	}
}

func genericTestStreams() genericiooptions.IOStreams {
	return genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}}
}

// get -w rows line up under the table and come once per visible change.
func TestWatchRows(t *testing.T) {
	jobs := tableJobs()
	table := JobTable(jobs, now)
	var head bytes.Buffer
	if err := printers.NewTablePrinter(printers.PrintOptions{}).PrintObj(table, &head); err != nil {
		t.Fatal(err)
	}
	header := strings.SplitN(head.String(), "\n", 2)[0]
	rows := newRowPrinter(table, false, false, true)
	var out bytes.Buffer
	// An update that changes nothing visible but the age: no row (the
	// table shows that state already).
	later := JobTable(jobs[:1], now.Add(time.Minute)).Rows[0]
	rows.print(&out, &jobs[0], later)
	rows.print(&out, &jobs[0], later)
	if out.Len() != 0 {
		t.Errorf("printed rows for a state the table shows:\n%s", out.String())
	}
	// A new phase is a row, aligned with the header.
	running := jobs[0].DeepCopy()
	raw, _ := (&api.Status{Phase: api.PhaseRunning, WorkersReady: 2, WorkersTotal: 2}).Encode()
	running.Annotations[api.StatusAnnotation] = raw
	out.Reset()
	rows.print(&out, running, JobTable([]trainer.TrainJob{*running}, now).Rows[0])
	line := strings.TrimSuffix(out.String(), "\n")
	for _, col := range []struct{ header, cell string }{{"RUNTIME", "mpi-openmpi"}, {"PHASE", "Running"}, {"WORKERS", "2/2"}} {
		if strings.Index(line, col.cell) != strings.Index(header, col.header) {
			t.Errorf("%s at %d, its header at %d:\n%s\n%s", col.cell, strings.Index(line, col.cell), strings.Index(header, col.header), header, line)
		}
	}
	// Without a table above (no jobs yet), the first row brings the header.
	out.Reset()
	fresh := newRowPrinter(JobTable(nil, now), false, false, false)
	fresh.print(&out, running, JobTable([]trainer.TrainJob{*running}, now).Rows[0])
	if !strings.HasPrefix(out.String(), "NAME") || strings.Count(out.String(), "\n") != 2 {
		t.Errorf("first watch row without a table: %q, want the header then the row", out.String())
	}
}

// An --env value that looks like a secret is taken, with a warning that
// names --env-from-secret; a plain value is not warned about.
func TestEnvThatLooksLikeASecretIsWarnedAbout(t *testing.T) {
	cases := map[string]struct {
		env  string
		warn bool
	}{
		"AWS secret key": {"AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", true},
		"password":       {"DB_PASSWORD=hunter2hunter2", true},
		"GitHub token":   {"GH=ghp_abcdefghijklmnopqrstuvwxyz0123456789", true},
		"learning rate":  {"LR=0.1", false},
		"a path":         {"DATA=/mnt/data/imagenet", false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := jobFlags{env: []string{tc.env}}
			var in jobspec.Input
			if err := f.input(&in, func(n string) bool { return n == "env" }); err != nil {
				t.Fatal(err)
			}
			if len(in.Env) != 1 {
				t.Fatalf("env %v, want the variable kept", in.Env)
			}
			if got := len(f.warnings) > 0; got != tc.warn {
				t.Fatalf("warned %v (%q), want %v", got, f.warnings, tc.warn)
			}
			if tc.warn && !strings.Contains(f.warnings[0], "--env-from-secret "+strings.SplitN(tc.env, "=", 2)[0]+"=SECRET:KEY") {
				t.Errorf("warning %q does not name --env-from-secret", f.warnings[0])
			}
		})
	}
}

// Errors are classified from the API's structured Status: mpijob's quota
// denial (the vector the SDK reads too), a validation error, RBAC.
func TestExplainReadsTheStructuredStatus(t *testing.T) {
	raw, err := os.ReadFile("../api/testdata/quota-denial.json")
	if err != nil {
		t.Fatal(err)
	}
	var quota metav1.Status
	if err := json.Unmarshal(raw, &quota); err != nil {
		t.Fatal(err)
	}
	gk := schema.GroupKind{Group: "trainer.kubeflow.org", Kind: "TrainJob"}
	cases := map[string]struct {
		err  error
		code int
		msg  string
	}{
		"quota denial":   {&apierrors.StatusError{ErrStatus: quota}, ExitDenied, "the cluster refused the job: admission webhook"},
		"invalid":        {apierrors.NewInvalid(gk, "x", field.ErrorList{field.Invalid(field.NewPath("spec", "trainer", "numNodes"), 0, "must be at least 1")}), ExitDenied, "spec.trainer.numNodes"},
		"RBAC forbidden": {apierrors.NewForbidden(schema.GroupResource{Group: "trainer.kubeflow.org", Resource: "trainjobs"}, "x", errors.New(`User "dev-b" cannot create resource "trainjobs"`)), ExitForbidden, "permission denied"},
		"other webhook":  {&apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 403, Reason: metav1.StatusReasonForbidden, Message: `admission webhook "vtrainjob.kb.io" denied the request: x`}}, ExitDenied, "vtrainjob.kb.io"},
		"not found":      {apierrors.NewNotFound(schema.GroupResource{Resource: "trainjobs"}, "x"), ExitNotFound, "not found"},
		"already exists": {apierrors.NewAlreadyExists(schema.GroupResource{Resource: "trainjobs"}, "x"), ExitUsage, "pick another name"},
		"mpijob's webhook down": {apierrors.NewInternalError(errors.New(`Internal error occurred: failed calling webhook "validate.trainjob.mpijob.dev": failed to call webhook: Post "https://127.0.0.1:9445/validate": connect: connection refused`)),
			ExitError, "mpijob admission is unavailable, so no MPI job can be created or changed now (jobs already running are not affected)"},
		"mpijob-manager not running (the API server's policy)": {&apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 403, Reason: metav1.StatusReasonForbidden,
			Message: `trainjobs.trainer.kubeflow.org "x" is forbidden: ValidatingAdmissionPolicy 'mpijob-manager-running.mpijob.dev' with binding 'mpijob-manager-running.mpijob.dev' denied request: mpijob-manager is not running (no ready replica)`}},
			ExitError, "mpijob admission is unavailable: mpijob-manager is not running (no ready replica)"},
		"mpijob's webhook Service has no pod": {apierrors.NewInternalError(errors.New(`Internal error occurred: failed calling webhook "creator.trainjob.mpijob.dev": failed to call webhook: Post "https://mpijob-webhook-service.mpijob-system.svc:443/mutate-trainer-kubeflow-org-v1alpha1-trainjob?timeout=10s": no endpoints available for service "mpijob-webhook-service"`)),
			ExitError, "mpijob admission is unavailable"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			code, msg := explain(tc.err, NewRootCommand(genericTestStreams()))
			if code != tc.code || !strings.Contains(msg, tc.msg) {
				t.Errorf("explain: %d %q, want %d containing %q", code, msg, tc.code, tc.msg)
			}
		})
	}
}

// --rank keeps what the selected ranks printed, exactly, and says why
// nothing matched.
func TestRankFilter(t *testing.T) {
	sel, err := logs.ParseSelection("1-2")
	if err != nil {
		t.Fatal(err)
	}
	f := &lineFilter{ranks: sel}
	var out bytes.Buffer
	for _, raw := range []string{
		"2026-11-22T10:00:01Z [1,0]<stdout>:step 1 rank 0",
		"2026-11-22T10:00:02Z [1,1]<stdout>:step 1 [rank 1]",
		"2026-11-22T10:00:03Z mpirun noticed that process rank 2 exited",
		"2026-11-22T10:00:04Z [1,2]<stderr>:RuntimeError: boom",
		"2026-11-22T10:00:05Z [1,3]<stdout>:step 2 rank 3",
	} {
		f.print(&out, logs.NewLine("launcher", raw))
	}
	want := "[1,1]<stdout>:step 1 [rank 1]\n[1,2]<stderr>:RuntimeError: boom\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	none, _ := logs.ParseSelection("7")
	g := &lineFilter{ranks: none}
	g.print(&out, logs.NewLine("launcher", "2026-11-22T10:00:01Z [1,0]<stdout>:a"))
	g.print(&out, logs.NewLine("launcher", "2026-11-22T10:00:01Z [1,1]<stdout>:b"))
	g.print(&out, logs.NewLine("launcher", "2026-11-22T10:00:01Z [1,3]<stdout>:c"))
	if got := g.noRankLines("hello", "7"); got != "No line from rank 7 in job hello's log; ranks that printed: 0-1,3." {
		t.Errorf("noRankLines = %q", got)
	}
	if got := (&lineFilter{ranks: none}).noRankLines("hello", "7"); !strings.Contains(got, "its runtime does not tag the ranks' output") {
		t.Errorf("noRankLines without tags = %q", got)
	}
}
