package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	kfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/mpijob/mpijob/config"
	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/jobspec"
	"github.com/mpijob/mpijob/pkg/logstore"
)

// fakeOptions are Options whose API clients are fakes holding objs, in
// namespace team-a (the client-getter seam, as kueuectl's
// app/testing/fake.go); funcs intercept calls. It returns the streams'
// buffers too.
func fakeOptions(t *testing.T, funcs interceptor.Funcs, objs ...client.Object) (*Options, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	return optionsOn(fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithInterceptorFuncs(funcs).Build())
}

// optionsOn are Options whose API client is cl (a fake built with a
// scheme of the test's own), in namespace team-a.
func optionsOn(cl client.WithWatch) (*Options, *bytes.Buffer, *bytes.Buffer) {
	out, errOut := &bytes.Buffer{}, &bytes.Buffer{}
	o := &Options{
		IOStreams: genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: out, ErrOut: errOut},
		Config:    genericclioptions.NewConfigFlags(false),
		ClientsFunc: func() (*clients, error) {
			return &clients{WithWatch: cl, cs: kfake.NewClientset(), namespace: "team-a"}, nil
		},
	}
	return o, out, errOut
}

func fakeJob(name string) *trainer.TrainJob {
	return &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a"},
		Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: "mpi-openmpi"}}}
}

func fakePod(job, role string, i int) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: job + "-" + role + "-0-" + string(rune('0'+i)) + "-abcde", Namespace: "team-a",
		Labels: map[string]string{jobsetv1alpha2.JobSetNameKey: job, jobsetv1alpha2.ReplicatedJobNameKey: role},
	}}
}

func TestDeleteVerb(t *testing.T) {
	type call struct {
		kind  string
		grace int64
	}
	cases := map[string]struct {
		names    []string
		grace    int64
		objs     []client.Object
		code     int
		msg      string
		out      string
		calls    []call
		leftJobs []string
	}{
		"one job": {
			names: []string{"a"}, grace: -1, objs: []client.Object{fakeJob("a"), fakeJob("b")},
			out: "mpijob a deleted\n", calls: []call{{"TrainJob", -1}}, leftJobs: []string{"b"},
		},
		"a wrong name deletes nothing, with did-you-mean": {
			names: []string{"a", "bb"}, grace: -1, objs: []client.Object{fakeJob("a"), fakeJob("b")},
			code: ExitNotFound, msg: `MPI job "bb" not found in namespace team-a: did you mean "b"?`, leftJobs: []string{"a", "b"},
		},
		"a grace period reaches the pods": {
			names: []string{"a"}, grace: 0, objs: []client.Object{fakeJob("a"), fakePod("a", "launcher", 0), fakePod("a", "node", 0)},
			out: "mpijob a deleted\n", calls: []call{{"TrainJob", -1}, {"Pods", 0}},
		},
		"bad grace period": {names: []string{"a"}, grace: -2, code: ExitUsage, msg: "--grace-period -2: use seconds"},
		"no name":          {grace: -1, code: ExitUsage, msg: "delete takes one or more job NAMEs"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var calls []call
			o, out, errOut := fakeOptions(t, interceptor.Funcs{
				Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
					do := &client.DeleteOptions{}
					do.ApplyOptions(opts)
					if _, ok := obj.(*trainer.TrainJob); ok {
						g := int64(-1)
						if do.GracePeriodSeconds != nil {
							g = *do.GracePeriodSeconds
						}
						calls = append(calls, call{"TrainJob", g})
					}
					return c.Delete(ctx, obj, opts...)
				},
				DeleteAllOf: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteAllOfOption) error {
					do := &client.DeleteAllOfOptions{}
					do.ApplyOptions(opts)
					if do.LabelSelector.String() != jobsetv1alpha2.JobSetNameKey+"=a" {
						t.Errorf("pods selected by %q, want the job's", do.LabelSelector)
					}
					calls = append(calls, call{"Pods", *do.GracePeriodSeconds})
					return c.DeleteAllOf(ctx, obj, opts...)
				},
			}, tc.objs...)
			d := &deleteOptions{Options: o, wait: true, timeout: 5 * time.Second, grace: tc.grace}
			err := d.Complete(tc.names)
			if err == nil {
				err = d.Validate()
			}
			if err == nil {
				err = d.Run(context.Background())
			}
			var ee *exitError
			switch {
			case tc.code == 0 && err != nil:
				t.Fatalf("error %v", err)
			case tc.code != 0 && (!errors.As(err, &ee) || ee.code != tc.code || !strings.Contains(ee.msg, tc.msg)):
				t.Fatalf("error %v, want exit %d with %q", err, tc.code, tc.msg)
			}
			if diff := cmp.Diff(tc.out, out.String()); diff != "" {
				t.Errorf("output (-want,+got):\n%s", diff)
			}
			if errOut.Len() > 0 {
				t.Errorf("stderr: %s", errOut)
			}
			if diff := cmp.Diff(tc.calls, calls, cmp.AllowUnexported(call{})); diff != "" {
				t.Errorf("delete calls (-want,+got):\n%s", diff)
			}
			if tc.code == ExitUsage {
				return
			}
			cl, _ := o.clients()
			l := &trainer.TrainJobList{}
			if err := cl.List(context.Background(), l); err != nil {
				t.Fatal(err)
			}
			var left []string
			for _, j := range l.Items {
				left = append(left, j.Name)
			}
			if diff := cmp.Diff(tc.leftJobs, left); diff != "" {
				t.Errorf("jobs left (-want,+got):\n%s", diff)
			}
			if tc.grace >= 0 {
				p := &corev1.Pod{}
				if err := cl.Get(context.Background(), client.ObjectKeyFromObject(fakePod("a", "launcher", 0)), p); !apierrors.IsNotFound(err) {
					t.Errorf("the Launcher pod is still there: %v", err)
				}
			}
		})
	}
}

// events through the verb: the job's own objects' events only, oldest first.
func TestEventsVerb(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	ev := func(name, kind, obj, reason string, at time.Duration) *corev1.Event {
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a"}, Type: corev1.EventTypeNormal, Reason: reason,
			Message: reason + " of " + obj, InvolvedObject: corev1.ObjectReference{Kind: kind, Name: obj, Namespace: "team-a"},
			LastTimestamp: metav1.NewTime(t0.Add(at))}
	}
	o, out, _ := fakeOptions(t, interceptor.Funcs{}, fakeJob("hello"), fakeJob("hello-4"),
		ev("e1", "Pod", "hello-node-0-0-abcde", "Started", 5*time.Second),
		ev("e2", "TrainJob", "hello-4", "Created", 0),
		ev("e3", "TrainJob", "hello", "Created", time.Second),
		ev("e4", "Pod", "hello-4-node-0-0-abcde", "Started", 2*time.Second))
	e := &eventsOptions{Options: o, name: "hello", now: func() time.Time { return t0.Add(time.Minute) }}
	if err := e.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := `  AGE  TYPE    REASON   OBJECT                    MESSAGE
  59s  Normal  Created  trainjob/hello            Created of hello
  55s  Normal  Started  pod/hello-node-0-0-abcde  Started of hello-node-0-0-abcde
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("events (-want,+got):\n%s", diff)
	}
}

func shippedRuntime(t *testing.T, name string) *trainer.ClusterTrainingRuntime {
	t.Helper()
	rt, err := config.Runtime(name)
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// create through the verb on fakes: what it creates is jobspec.Build's job
// for the same flags (per-job runtime owned by the TrainJob); a client dry
// run prints and creates nothing; bad input exits 2 before any call.
func TestCreateVerb(t *testing.T) {
	base := shippedRuntime(t, "mpi-openmpi")
	in := jobspec.Input{Name: "train", Namespace: "team-a", Runtime: "mpi-openmpi", Workers: 3, SlotsPerWorker: 2,
		Image: "registry.example.com/train:1", ResourcesPerWorker: map[string]string{"cpu": "2", "memory": "4Gi"},
		Command: []string{"mpirun", "python3", "train.py"}}
	want, err := jobspec.Build(in, base)
	if err != nil {
		t.Fatal(err)
	}
	flags := func(c *createOptions) {
		c.workers, c.slots, c.image, c.cpu, c.memory, c.runtime = 3, 2, "registry.example.com/train:1", "2", "4Gi", "mpi-openmpi"
	}
	set := func(names ...string) func(string) bool {
		return func(n string) bool { return slices.Contains(names, n) }
	}
	args := []string{"train", "mpirun", "python3", "train.py"}
	jobSet := set("workers", "slots-per-worker", "image", "cpu", "memory")

	t.Run("creates what the builder builds", func(t *testing.T) {
		var creates []string
		o, out, _ := fakeOptions(t, interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			creates = append(creates, fmt.Sprintf("%T", obj))
			return c.Create(ctx, obj, opts...)
		}}, base)
		c := &createOptions{Options: o, dryRun: "none"}
		flags(c)
		if err := c.Complete(args, 1, jobSet); err != nil {
			t.Fatal(err)
		}
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		if err := c.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"*v1alpha1.TrainingRuntime", "*v1alpha1.TrainJob"}, creates); diff != "" {
			t.Errorf("creates, in order (-want,+got):\n%s", diff)
		}
		cl, _ := o.clients()
		tj, rt := &trainer.TrainJob{}, &trainer.TrainingRuntime{}
		if err := cl.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: "train"}, tj); err != nil {
			t.Fatal(err)
		}
		if err := cl.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: "train"}, rt); err != nil {
			t.Fatal(err)
		}
		ignore := cmpopts.IgnoreFields(metav1.ObjectMeta{}, "ResourceVersion", "OwnerReferences", "UID", "CreationTimestamp")
		if diff := cmp.Diff(want.TrainJob, tj, ignore, cmpopts.IgnoreFields(metav1.TypeMeta{}, "Kind", "APIVersion")); diff != "" {
			t.Errorf("TrainJob (-built,+created):\n%s", diff)
		}
		if diff := cmp.Diff(want.Runtime, rt, ignore, cmpopts.IgnoreFields(metav1.TypeMeta{}, "Kind", "APIVersion")); diff != "" {
			t.Errorf("per-job runtime (-built,+created):\n%s", diff)
		}
		if len(rt.OwnerReferences) != 1 || rt.OwnerReferences[0].Name != "train" || rt.OwnerReferences[0].Kind != "TrainJob" {
			t.Errorf("the runtime is not owned by its job: %+v", rt.OwnerReferences)
		}
		if !strings.Contains(out.String(), "mpijob train created in namespace team-a") {
			t.Errorf("output: %s", out)
		}
	})

	t.Run("a client dry run prints JSON with apiVersion and kind and creates nothing", func(t *testing.T) {
		o, out, _ := fakeOptions(t, interceptor.Funcs{Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
			t.Error("a client dry run created something")
			return nil
		}}, base)
		c := &createOptions{Options: o, dryRun: "client", output: "json"}
		flags(c)
		if err := c.Complete(args, 1, jobSet); err != nil {
			t.Fatal(err)
		}
		if err := c.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{`"apiVersion": "trainer.kubeflow.org/v1alpha1"`, `"kind": "TrainJob"`, `"kind": "TrainingRuntime"`} {
			if !strings.Contains(out.String(), s) {
				t.Errorf("output lacks %s:\n%s", s, out)
			}
		}
	})

	for name, tc := range map[string]struct {
		args []string
		dash int
		set  func(string) bool
		c    createOptions
		msg  string
	}{
		"no NAME":            {args: nil, dash: -1, set: set("workers"), msg: "give the job a NAME"},
		"no --workers":       {args: []string{"x"}, dash: -1, set: set(), msg: "--workers is required"},
		"command without --": {args: []string{"x", "mpirun"}, dash: -1, set: set("workers"), msg: "put the command after --"},
		"bad --dry-run":      {args: []string{"x"}, dash: -1, set: set("workers"), c: createOptions{dryRun: "maybe"}, msg: `--dry-run "maybe": use client or server`},
		"bad -o":             {args: []string{"x"}, dash: -1, set: set("workers"), c: createOptions{dryRun: "none", output: "table"}, msg: `--output "table": use yaml or json`},
		"bad memory":         {args: []string{"x"}, dash: -1, set: set("workers", "memory"), c: createOptions{dryRun: "none", jobFlags: jobFlags{workers: 1, memory: "lots"}}, msg: `--memory "lots"`},
	} {
		t.Run(name, func(t *testing.T) {
			o, _, _ := fakeOptions(t, interceptor.Funcs{})
			c := tc.c
			c.Options = o
			if c.dryRun == "" {
				c.dryRun = "none"
			}
			err := c.Complete(tc.args, tc.dash, tc.set)
			if err == nil {
				err = c.Validate()
			}
			var ee *exitError
			if !errors.As(err, &ee) || ee.code != ExitUsage || !strings.Contains(ee.msg, tc.msg) {
				t.Errorf("error %v, want exit 2 with %q", err, tc.msg)
			}
		})
	}
}

// get through the verb on fakes.
func TestGetVerb(t *testing.T) {
	a := testJob("team-a", "a", "mpi-openmpi", 2, &api.Status{Phase: api.PhaseRunning, WorkersReady: 2, WorkersTotal: 2}, time.Minute)
	b := testJob("team-a", "b", "mpi-openmpi", 1, &api.Status{Phase: api.PhaseSucceeded, WorkersTotal: 1}, time.Hour)
	other := testJob("team-b", "c", "mpi-openmpi", 1, nil, time.Hour)
	for name, tc := range map[string]struct {
		names  []string
		output string
		code   int
		want   []string
		absent []string
	}{
		"a table of the namespace": {want: []string{"NAME", "PHASE", "a", "Running", "b", "Succeeded"}, absent: []string{"team-b"}},
		"names of a list":          {output: "name", want: []string{"trainjob.trainer.kubeflow.org/a\ntrainjob.trainer.kubeflow.org/b\n"}},
		"one job as yaml":          {names: []string{"a"}, output: "yaml", want: []string{"apiVersion: trainer.kubeflow.org/v1alpha1", "kind: TrainJob", "name: a"}},
		"a typo":                   {names: []string{"aa"}, code: ExitNotFound, want: []string{`MPI job "aa" not found in namespace team-a: did you mean "a"?`}},
		"a bad -o":                 {output: "wid", code: ExitUsage, want: []string{"-o wid: not an output format", "custom-columns"}},
		"custom columns (kubectl's printer)": {output: "custom-columns=NAME:.metadata.name,RUNTIME:.spec.runtimeRef.name",
			want: []string{"NAME   RUNTIME\na      mpi-openmpi\nb      mpi-openmpi\n"}},
		"custom columns without a spec": {output: "custom-columns=", code: ExitUsage, want: []string{"-o custom-columns="}},
		"jsonpath":                      {output: "jsonpath={.items[*].metadata.name}", want: []string{"a b"}},
	} {
		t.Run(name, func(t *testing.T) {
			o, out, _ := fakeOptions(t, interceptor.Funcs{}, &a, &b, &other)
			g := newGetOptions(o)
			g.print.OutputFormat = &tc.output
			g.Complete(tc.names)
			err := g.Validate()
			if err == nil {
				err = g.Run(context.Background())
			}
			got := out.String()
			if tc.code != 0 {
				var ee *exitError
				if !errors.As(err, &ee) || ee.code != tc.code {
					t.Fatalf("error %v, want exit %d", err, tc.code)
				}
				got = ee.msg
			} else if err != nil {
				t.Fatal(err)
			}
			checkOutput(t, got, tc.want, tc.absent)
		})
	}
}

// logs' flags are checked before any API call.
func TestLogsValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		l    logsOptions
		set  bool
		want string
	}{
		"all and worker":   {l: logsOptions{all: true, worker: 1}, set: true, want: "--all and --worker exclude each other"},
		"negative worker":  {l: logsOptions{worker: -2}, set: true, want: "--worker -2: use a Worker index"},
		"bad grep":         {l: logsOptions{grep: "("}, want: `--grep "(" is not a regular expression`},
		"negative since":   {l: logsOptions{since: -time.Minute}, want: "--since -1m0s: use a positive duration"},
		"fine":             {l: logsOptions{worker: 1, grep: "rank [0-9]+"}, set: true},
		"rank with worker": {l: logsOptions{worker: 1, rank: "2"}, set: true, want: "--rank 2: the ranks' output is in the Launcher's log, so --rank goes without --all and --worker"},
		"rank with all":    {l: logsOptions{all: true, rank: "0-3"}, want: "--rank 0-3: the ranks' output is in the Launcher's log"},
		"rank typo":        {l: logsOptions{rank: "0-three"}, want: `--rank "0-three": 0-three: give a rank number, a range like 0-3, or a list like 0,2,5-7`},
		"rank backwards":   {l: logsOptions{rank: "3-1"}, want: `--rank "3-1": 3-1: a range goes from low to high, e.g. 1-3`},
		"ranks":            {l: logsOptions{rank: "0,2-3"}},
		"source typo":      {l: logsOptions{source: "stor"}, want: `--source "stor": use auto, pods or store`},
		"store and follow": {l: logsOptions{source: "store", follow: true}, want: "--source store reads what is stored and ends: drop --follow"},
		"store":            {l: logsOptions{source: "store"}},
	} {
		t.Run(name, func(t *testing.T) {
			l := tc.l
			l.Complete([]string{"hello"}, tc.set)
			err := l.Validate()
			if tc.want == "" {
				if err != nil || l.re == nil && l.grep != "" {
					t.Fatalf("error %v", err)
				}
				return
			}
			var ee *exitError
			if !errors.As(err, &ee) || ee.code != ExitUsage || !strings.Contains(ee.msg, tc.want) {
				t.Errorf("error %v, want exit 2 with %q", err, tc.want)
			}
		})
	}
}

// convert --apply on fakes: the job's own runtime (when the legacy job has
// its own images or resources) and the TrainJob, in the namespace given.
func TestConvertApplyVerb(t *testing.T) {
	for name, tc := range map[string]struct {
		file    string
		creates []string
	}{
		"a legacy job with its own images: its runtime, then the TrainJob": {file: "../legacy/testdata/basic-cpu.yaml", creates: []string{"*v1alpha1.TrainingRuntime", "*v1alpha1.TrainJob"}},
	} {
		t.Run(name, func(t *testing.T) {
			var creates []string
			o, out, errOut := fakeOptions(t, interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				creates = append(creates, fmt.Sprintf("%T", obj))
				if obj.GetNamespace() != "team-a" {
					t.Errorf("%T created in %q, want team-a", obj, obj.GetNamespace())
				}
				return c.Create(ctx, obj, opts...)
			}})
			c := &convertOptions{Options: o, file: tc.file, output: "yaml", apply: true, namespaceGiven: true}
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			if err := c.Complete(); err != nil {
				t.Fatal(err)
			}
			if err := c.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.creates, creates); diff != "" {
				t.Errorf("creates (-want,+got):\n%s", diff)
			}
			if !strings.Contains(out.String(), "created in namespace team-a") || !strings.Contains(errOut.String(), "mapped") {
				t.Errorf("stdout %q, stderr %q: want the created objects and the report", out, errOut)
			}
		})
	}
	o, _, _ := fakeOptions(t, interceptor.Funcs{})
	c := &convertOptions{Options: o, output: "toml"}
	var ee *exitError
	if err := c.Validate(); !errors.As(err, &ee) || ee.code != ExitUsage || !strings.Contains(ee.msg, "-f is required") {
		t.Errorf("no -f: %v", err)
	}
}

// While no manager renews its Lease, get warns that the phases may be
// stale and describe says how old the status is; a renewed Lease (or none,
// or one the user may not read) claims nothing.
func TestStaleStatusIsSaid(t *testing.T) {
	observed := metav1.NewTime(time.Now().Add(-12 * time.Minute))
	a := testJob("team-a", "a", "mpi-openmpi", 2, &api.Status{Phase: api.PhaseRunning, WorkersReady: 2, WorkersTotal: 2, ObservedTime: &observed}, time.Hour)
	lease := func(renewed time.Duration, holder string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: api.ManagerLeaseName, Namespace: api.ManagerLeaseNamespace},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: ptr.To[int32](15), RenewTime: &metav1.MicroTime{Time: time.Now().Add(-renewed)}}}
	}
	for name, tc := range map[string]struct {
		lease    *coordinationv1.Lease
		get      string
		describe string
	}{
		"the manager runs": {lease: lease(time.Second, "m")},
		"no Lease":         {},
		"stopped 6 minutes ago": {lease: lease(6*time.Minute, "m"),
			get:      "Warning: mpijob-manager is not running (its Lease was last renewed 6m ago): the phases shown are as it last saw them and may be stale.",
			describe: "mpijob-manager is not running (its Lease was last renewed 6m ago): this status is as it saw the job 12m ago, and may be stale"},
		"handed back": {lease: lease(10*time.Second, ""),
			get:      "Warning: mpijob-manager is not running (its Lease was last renewed 10s ago)",
			describe: "this status is as it saw the job 12m ago, and may be stale"},
	} {
		t.Run(name, func(t *testing.T) {
			cs := kfake.NewClientset()
			if tc.lease != nil {
				cs = kfake.NewClientset(tc.lease)
			}
			o, out, errOut := fakeOptions(t, interceptor.Funcs{}, &a)
			cl, _ := o.ClientsFunc()
			cl.cs = cs
			o.ClientsFunc = func() (*clients, error) { return cl, nil }
			g := newGetOptions(o)
			empty := ""
			g.print.OutputFormat = &empty
			g.Complete(nil)
			if err := g.Validate(); err != nil {
				t.Fatal(err)
			}
			if err := g.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimSpace(errOut.String()); (tc.get == "") != (got == "") || !strings.Contains(got, tc.get) {
				t.Errorf("get warned %q, want %q", got, tc.get)
			}
			out.Reset()
			if err := describe(context.Background(), cl, "a", out, time.Now()); err != nil {
				t.Fatal(err)
			}
			has := strings.Contains(out.String(), "Status:")
			if (tc.describe == "") == has || (tc.describe != "" && !strings.Contains(out.String(), tc.describe)) {
				t.Errorf("describe:\n%s\nwant a Status line %q", out.String(), tc.describe)
			}
		})
	}
}

// checkOutput checks that got holds every want and none of absent.
func checkOutput(t *testing.T, got string, want, absent []string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("output lacks %q:\n%s", w, got)
		}
	}
	for _, w := range absent {
		if strings.Contains(got, w) {
			t.Errorf("output has %q:\n%s", w, got)
		}
	}
}

// fakeLogStore is the log store's read API as the CLI sees it: stored lines
// per role and index, and the queries asked.
type fakeLogStore struct {
	lines   map[string]string // "launcher" or "worker-N" → "TIME TEXT" lines
	asked   []logstore.Query
	refuse  bool
	missing bool
	// broken fails the reads of these ("launcher", "worker-N").
	broken map[string]bool
}

func (f *fakeLogStore) Available(context.Context) bool { return !f.missing }

func (f *fakeLogStore) Open(_ context.Context, ns, job string, q logstore.Query) (io.ReadCloser, error) {
	f.asked = append(f.asked, q)
	if f.refuse {
		return nil, apierrors.NewForbidden(schema.GroupResource{Group: "logs.mpijob.dev", Resource: "trainjobs/log"}, job, errors.New("dev-b cannot read pods/log in team-a"))
	}
	key := q.Role
	if q.Role == "worker" {
		key = fmt.Sprintf("worker-%d", q.Index)
	}
	if f.broken[key] {
		return nil, apierrors.NewServiceUnavailable("the log store (Loki) did not answer")
	}
	var keep []string
	for _, l := range strings.Split(strings.TrimSpace(f.lines[key]), "\n") {
		if l == "" {
			continue
		}
		ts, _, _ := strings.Cut(l, " ")
		if t, err := time.Parse(time.RFC3339Nano, ts); err == nil && !q.End.IsZero() && !t.Before(q.End) {
			continue
		}
		keep = append(keep, l)
	}
	if len(keep) == 0 {
		return io.NopCloser(strings.NewReader("")), nil
	}
	return io.NopCloser(strings.NewReader(strings.Join(keep, "\n") + "\n")), nil
}

// A finished job whose pods are gone: logs read the store, say so, and
// keep --all's labels, --rank and --tail; no store, or a refusal, says so.
func TestLogsFromTheStore(t *testing.T) {
	done := fakeJob("pi")
	done.Spec.Trainer = &trainer.Trainer{NumNodes: ptr.To[int32](2)}
	done.Status.Conditions = []metav1.Condition{{Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue, Reason: "Done"}}
	stored := map[string]string{
		"launcher": "2026-11-24T06:00:00.1Z [1,0]<stdout>:rank 0 of 2 on pi-node-0-0\n2026-11-24T06:00:00.3Z [1,1]<stdout>:rank 1 of 2 on pi-node-0-1\n2026-11-24T06:00:01Z done",
		"worker-0": "2026-11-24T06:00:00.2Z sshd started",
		"worker-1": "2026-11-24T06:00:00.25Z sshd started too",
	}
	cases := map[string]struct {
		args     []string
		store    *fakeLogStore
		wantOut  string
		wantErr  string
		wantNote string
	}{
		"the Launcher's stored lines": {
			args: []string{"pi"}, store: &fakeLogStore{lines: stored},
			wantOut:  "[1,0]<stdout>:rank 0 of 2 on pi-node-0-0\n[1,1]<stdout>:rank 1 of 2 on pi-node-0-1\ndone\n",
			wantNote: "Lines of launcher come from the log store: the pod is gone",
		},
		"all, merged by time with labels": {
			args: []string{"pi", "--all"}, store: &fakeLogStore{lines: stored},
			wantOut:  "[launcher] [1,0]<stdout>:rank 0 of 2 on pi-node-0-0\n[worker-0] sshd started\n[worker-1] sshd started too\n[launcher] [1,1]<stdout>:rank 1 of 2 on pi-node-0-1\n[launcher] done\n",
			wantNote: "Lines of launcher, worker-0, worker-1 come from the log store",
		},
		"one rank": {
			args: []string{"pi", "--rank", "1"}, store: &fakeLogStore{lines: stored},
			wantOut: "[1,1]<stdout>:rank 1 of 2 on pi-node-0-1\n",
		},
		"tail": {
			args: []string{"pi", "--tail", "1"}, store: &fakeLogStore{lines: stored},
			wantOut: "done\n",
		},
		"one Worker": {
			args: []string{"pi", "--worker", "1"}, store: &fakeLogStore{lines: stored},
			wantOut: "sshd started too\n",
		},
		"a Worker the job never had": {
			args: []string{"pi", "--worker", "5"}, store: &fakeLogStore{lines: stored},
			wantErr: "--worker 5: job pi has 2 Workers (0 to 1)",
		},
		"no store": {
			args: []string{"pi"}, store: &fakeLogStore{missing: true},
			wantErr: "job pi has no Launcher pod (phase Succeeded), and this cluster keeps no log store to read once pods are gone",
		},
		"store asked, none there": {
			args: []string{"pi", "--source", "store"}, store: &fakeLogStore{missing: true},
			wantErr: "--source store: this cluster keeps no log store",
		},
		"pods only": {
			args: []string{"pi", "--source", "pods"}, store: &fakeLogStore{lines: stored},
			wantErr: "job pi has no Launcher pod (phase Succeeded), and this cluster keeps no log store",
		},
		"refused": {
			args: []string{"pi"}, store: &fakeLogStore{lines: stored, refuse: true},
			wantErr: "the log store refused to show launcher of job pi",
		},
		"the tail of one rank: cut after the rank filter": {
			args: []string{"pi", "--rank", "0", "--tail", "1"}, store: &fakeLogStore{lines: stored},
			wantOut: "[1,0]<stdout>:rank 0 of 2 on pi-node-0-0\n",
		},
		"the tail of what --grep keeps": {
			args: []string{"pi", "--grep", "rank", "--tail", "1"}, store: &fakeLogStore{lines: stored},
			wantOut: "[1,1]<stdout>:rank 1 of 2 on pi-node-0-1\n",
		},
		"nothing stored: said, with where to look": {
			args: []string{"pi"}, store: &fakeLogStore{lines: map[string]string{}},
			wantNote: "No line of job pi: its pods are gone and the log store holds nothing of launcher. The job may have stopped before its programs printed, " +
				"or the store has not received the last lines yet (it gets them within seconds: run this again) (phase Succeeded). What happened to it: kubectl mpijob describe pi",
		},
		"one read fails: the others shown, and the exit is not 0": {
			args: []string{"pi", "--all"}, store: &fakeLogStore{lines: stored, broken: map[string]bool{"worker-1": true}},
			wantOut: "[launcher] [1,0]<stdout>:rank 0 of 2 on pi-node-0-0\n[worker-0] sshd started\n[launcher] [1,1]<stdout>:rank 1 of 2 on pi-node-0-1\n[launcher] done\n",
			wantErr: "the log store could not be read for worker-1 (above); the other lines are shown",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o, out, errOut := fakeOptions(t, interceptor.Funcs{}, done.DeepCopy())
			cl, _ := o.ClientsFunc()
			cl.store = tc.store
			o.ClientsFunc = func() (*clients, error) { return cl, nil }
			cmd := newRoot(o)
			cmd.SetArgs(append([]string{"logs"}, tc.args...))
			cmd.SetOut(out)
			cmd.SetErr(errOut)
			err := cmd.Execute()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				if tc.wantOut == "" {
					return
				}
			} else if err != nil {
				t.Fatalf("error %v (stderr %s)", err, errOut)
			}
			if diff := cmp.Diff(tc.wantOut, out.String()); diff != "" {
				t.Errorf("stdout (-want,+got):\n%s", diff)
			}
			if !strings.Contains(errOut.String(), tc.wantNote) {
				t.Errorf("stderr %q, want %q", errOut, tc.wantNote)
			}
		})
	}
}
