package cli

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/jobspec"
)

// clone on fakes: the copy is the source's job with the flags' changes and
// its own command; the source is untouched; a name that is taken, or no
// NEW name, is refused.
func TestCloneVerb(t *testing.T) {
	base := shippedRuntime(t, "mpi-openmpi")
	src, err := jobspec.Build(jobspec.Input{Name: "train", Namespace: "team-a", Runtime: "mpi-openmpi", Workers: 2, SlotsPerWorker: 2,
		Image: "registry.example.com/train:1", Command: []string{"mpirun", "python3", "train.py"}, Description: "the first try"}, base)
	if err != nil {
		t.Fatal(err)
	}
	src.TrainJob.Labels["team"] = "a"
	objs := []client.Object{base, src.TrainJob}
	if src.Runtime != nil {
		objs = append(objs, src.Runtime)
	}
	o, out, _ := fakeOptions(t, interceptor.Funcs{}, objs...)
	c := &cloneOptions{Options: o}
	c.workers = 4
	if err := c.Complete([]string{"train", "train-4", "mpirun", "python3", "train.py", "--lr", "0.02"}, 2, func(n string) bool { return n == "workers" }); err != nil {
		t.Fatal(err)
	}
	if err := c.Run(context.Background()); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !strings.Contains(out.String(), "mpijob train-4 created in namespace team-a (a clone of train)") {
		t.Errorf("output: %q", out)
	}
	cl, _ := o.clients()
	got := &trainer.TrainJob{}
	if err := cl.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: "train-4"}, got); err != nil {
		t.Fatal(err)
	}
	if n := ptr.Deref(got.Spec.Trainer.NumNodes, 0); n != 4 {
		t.Errorf("the clone has %d Workers, want 4 (--workers)", n)
	}
	if diff := strings.Join(got.Spec.Trainer.Command, " "); diff != "mpirun python3 train.py --lr 0.02" {
		t.Errorf("the clone's command: %q, want the one after --", diff)
	}
	if got.Labels["team"] != "a" || got.Annotations[api.DescriptionAnnotation] != "the first try" {
		t.Errorf("the clone lost the source's label or description: %v %v", got.Labels, got.Annotations)
	}
	orig := &trainer.TrainJob{}
	if err := cl.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: "train"}, orig); err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(orig.Spec.Trainer.NumNodes, 0) != 2 {
		t.Errorf("the source changed: %d Workers", ptr.Deref(orig.Spec.Trainer.NumNodes, 0))
	}

	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"no NEW name":                {args: []string{"train"}, want: "clone takes the job NAME and the NEW name"},
		"a source that is not there": {args: []string{"trian", "x"}, want: `MPI job "trian" not found in namespace team-a: did you mean "train"?`},
	} {
		t.Run(name, func(t *testing.T) {
			c := &cloneOptions{Options: o}
			err := c.Complete(tc.args, -1, func(string) bool { return false })
			if err == nil {
				err = c.Run(context.Background())
			}
			var ee *exitError
			if !errors.As(err, &ee) || !strings.Contains(ee.msg, tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// runtimes list shows the MPI runtimes only, by name, with their MPI and
// image; runtimes describe shows one and refuses one that is not MPI.
func TestRuntimesVerbs(t *testing.T) {
	mpi, hydra := shippedRuntime(t, "mpi-openmpi"), shippedRuntime(t, "mpi-mpich")
	torch := mpi.DeepCopy()
	torch.Name, torch.Spec.MLPolicy.MPI, torch.Spec.MLPolicy.Torch = "torch-distributed", nil, &trainer.TorchMLPolicySource{}
	// The namespace's own MPI runtime is listed after the cluster's,
	// marked; another namespace's and a job's own runtime are not.
	own := &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "team-mpi", Namespace: "team-a"}, Spec: *mpi.Spec.DeepCopy()}
	theirs := own.DeepCopy()
	theirs.Namespace = "team-b"
	perJob := own.DeepCopy()
	perJob.Name, perJob.Labels = "job-1", map[string]string{api.JobLabel: "job-1", api.BaseRuntimeLabel: "mpi-openmpi"}
	o, out, _ := fakeOptions(t, interceptor.Funcs{}, mpi, hydra, torch, own, theirs, perJob)
	if err := (&runtimesListOptions{Options: o}).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "NAME") || !strings.HasPrefix(lines[1], "mpi-mpich") || !strings.HasPrefix(lines[2], "mpi-openmpi") ||
		!strings.HasPrefix(lines[3], "team-mpi") || !strings.Contains(lines[3], "namespace team-a") || !strings.Contains(lines[2], "cluster") {
		t.Fatalf("runtimes list:\n%s", out)
	}
	if !strings.Contains(lines[2], "ghcr.io/mpijob/openmpi:4.1") || strings.Contains(out.String(), "torch-distributed") {
		t.Errorf("runtimes list: want the Worker image and no PyTorch runtime:\n%s", out)
	}

	out.Reset()
	if err := (&runtimesDescribeOptions{Options: o, name: "mpi-openmpi"}).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"mpi-openmpi", "ghcr.io/mpijob/openmpi:4.1"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("runtimes describe lacks %q:\n%s", w, out)
		}
	}
	err := (&runtimesDescribeOptions{Options: o, name: "torch-distributed"}).Run(context.Background())
	var ee *exitError
	if !errors.As(err, &ee) || !strings.Contains(ee.msg, "runtime torch-distributed has no MPI policy") {
		t.Errorf("describe of a PyTorch runtime: %v", err)
	}

	// No MPI runtime at all: said, with how to install them.
	o2, out2, errOut2 := fakeOptions(t, interceptor.Funcs{}, torch)
	if err := (&runtimesListOptions{Options: o2}).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if out2.Len() != 0 || !strings.Contains(errOut2.String(), "No MPI runtimes: install them with kubectl apply --server-side -k config/runtimes") {
		t.Errorf("no MPI runtime: out %q, err %q", out2, errOut2)
	}
}

// get -w on an empty namespace says it watches, then prints a row with
// the header for a job that comes, and its changes; it stops with the
// context.
func TestGetWatchOnFakes(t *testing.T) {
	o, _, _ := fakeOptions(t, interceptor.Funcs{})
	out, errs := &syncBuffer{}, &syncBuffer{}
	o.Out, o.ErrOut = out, errs
	g := newGetOptions(o)
	g.watch = true
	empty := ""
	g.print.OutputFormat = &empty
	g.Complete(nil)
	if err := g.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	eventually(t, func() bool {
		return strings.Contains(errs.String(), "No MPI jobs in namespace team-a yet; watching for them")
	})
	cl, _ := o.clients()
	tj := testJob("team-a", "later", "mpi-openmpi", 2, &api.Status{Phase: api.PhasePending, WorkersTotal: 2}, 0)
	if err := cl.Create(context.Background(), &tj); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool { return strings.Contains(out.String(), "later") })
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("get -w stopped with %v", err)
	}
	if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); len(lines) < 2 || !strings.HasPrefix(lines[0], "NAME") || !slices.ContainsFunc(lines[1:], func(l string) bool { return strings.HasPrefix(l, "later") }) {
		t.Errorf("get -w printed:\n%s", out)
	}
}

// eventually polls cond for up to 10 s.
func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// syncBuffer is a bytes.Buffer that a verb's goroutine writes while the
// test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
