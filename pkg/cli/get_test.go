package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/mpijob/mpijob/pkg/api"
)

// `get` lists the jobs' metadata alone when every job carries the
// manager's status with its runtime (all the table reads), and whole jobs
// otherwise; the table is the same either way.
func TestGetListsMetadataWhenItIsEnough(t *testing.T) {
	managed := func(name, rt string, s api.Status) trainer.TrainJob {
		return testJob("team-a", name, rt, 2, &s, 2*time.Minute)
	}
	withRuntime := []trainer.TrainJob{
		managed("hello", "mpi-openmpi", api.Status{Phase: api.PhaseRunning, WorkersReady: 2, WorkersTotal: 2, SlotsPerWorker: 2, Runtime: "mpi-openmpi"}),
		managed("amd", "amd", api.Status{Phase: api.PhaseQueued, WorkersTotal: 2, SlotsPerWorker: 1, QueuePosition: ptr.To[int32](3), GPUsPerWorker: "1 amd.com/gpu", Runtime: "amd"}),
	}
	withRuntime[0].Labels = map[string]string{api.BaseRuntimeLabel: "mpi-openmpi"}
	withRuntime[1].Labels = map[string]string{api.BaseRuntimeLabel: "amd"}
	withRuntime[0].Spec.RuntimeRef.Name = "hello-runtime"
	// A job the manager has not written a status for yet, one by one.
	fresh := func(n int) []trainer.TrainJob {
		var out []trainer.TrainJob
		for i := range n {
			out = append(out, testJob("team-a", fmt.Sprintf("new-%02d", i), "mpi-mpich", 3, nil, time.Second))
		}
		return out
	}
	madeByMPIJob := func(tj trainer.TrainJob) trainer.TrainJob {
		tj.Labels = map[string]string{api.BaseRuntimeLabel: tj.Spec.RuntimeRef.Name}
		return tj
	}
	// Each list of jobs comes with a list of their JobStatuses (the
	// manager's statuses), joined by name.
	metadata, whole, get := "*v1.PartialObjectMetadataList", "*v1alpha1.TrainJobList", "get"
	statuses := "*api.JobStatusList"
	cases := map[string]struct {
		jobs   []trainer.TrainJob
		output string
		calls  []string
		// deleted is a job deleted between the list and its read.
		deleted string
		// unread: the user may not list JobStatuses (a role made before them).
		unread bool
	}{
		"every job has the manager's status and runtime": {jobs: withRuntime, calls: []string{metadata, statuses}},
		"a status an older manager wrote, without the runtime: read whole": {jobs: append(withRuntime[:1:1], managed("old", "mpi-mpich", api.Status{Phase: api.PhaseSucceeded, WorkersTotal: 2})),
			calls: []string{metadata, statuses, get}},
		"a status without the runtime's shape (slots): read whole": {jobs: append(withRuntime[:1:1], madeByMPIJob(managed("gone", "deleted-runtime", api.Status{Phase: api.PhasePending, WorkersTotal: 2, Runtime: "deleted-runtime"}))),
			calls: []string{metadata, statuses, get}},
		"two jobs the manager has not seen":        {jobs: append(withRuntime[:1:1], fresh(2)...), calls: []string{metadata, statuses, get, get}},
		"one deleted before it is read: not shown": {jobs: append(withRuntime[:1:1], fresh(2)...), calls: []string{metadata, statuses, get, get}, deleted: "new-00"},
		// The JobStatuses listed for the table serve the whole jobs too.
		"more such jobs than are read one by one: a list of whole jobs, the JobStatuses listed once": {jobs: append(withRuntime[:1:1], fresh(api.MaxWholeReads+1)...),
			calls: []string{metadata, statuses, whole}},
		"JobStatuses the user may not list, and more jobs than are read one by one: asked once": {jobs: append(withRuntime[:1:1], fresh(api.MaxWholeReads+1)...),
			unread: true, calls: []string{metadata, statuses, whole}},
		"wide":             {jobs: withRuntime, output: "wide", calls: []string{metadata, statuses}},
		"yaml: whole jobs": {jobs: withRuntime, output: "yaml", calls: []string{whole, statuses}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var calls []string
			funcs := interceptor.Funcs{
				List: func(ctx context.Context, c client.WithWatch, l client.ObjectList, opts ...client.ListOption) error {
					calls = append(calls, fmt.Sprintf("%T", l))
					if _, ok := l.(*api.JobStatusList); ok && tc.unread {
						return apierrors.NewForbidden(api.JobStatusResource.GroupResource(), "", errors.New("no role"))
					}
					return c.List(ctx, l, opts...)
				},
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					if _, ok := obj.(*trainer.TrainJob); ok {
						calls = append(calls, "get")
						if key.Name == tc.deleted {
							return apierrors.NewNotFound(trainer.GroupVersion.WithResource("trainjobs").GroupResource(), key.Name)
						}
					}
					return c.Get(ctx, key, obj, opts...)
				},
			}
			var objs []client.Object
			for i := range tc.jobs {
				objs = append(objs, tc.jobs[i].DeepCopy())
			}
			o, out, _ := fakeOptions(t, funcs, objs...)
			g := newGetOptions(o)
			g.print.OutputFormat = ptr.To(tc.output)
			if err := g.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			// Then the runtimes, which tell MPI jobs from the others.
			tc.calls = append(tc.calls, "*v1alpha1.ClusterTrainingRuntimeList", "*v1alpha1.TrainingRuntimeList")
			if d := cmp.Diff(tc.calls, calls); d != "" {
				t.Errorf("calls (-want +got):\n%s", d)
			}
			if tc.output == "yaml" {
				return
			}
			// The table of the whole jobs, by name as the API server lists them.
			jobs := slices.DeleteFunc(slices.Clone(tc.jobs), func(j trainer.TrainJob) bool { return j.Name == tc.deleted })
			slices.SortFunc(jobs, func(a, b trainer.TrainJob) int { return strings.Compare(a.Name, b.Name) })
			want := &bytes.Buffer{}
			if err := printers.NewTablePrinter(printers.PrintOptions{Wide: tc.output == "wide"}).PrintObj(JobTable(jobs, time.Now()), want); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(want.String(), out.String()); d != "" {
				t.Errorf("table (-whole jobs +as printed):\n%s", d)
			}
		})
	}
}

// MPI views show MPI jobs: a PyTorch TrainJob in the namespace is left out
// of get, shown marked with --all-frameworks, and another verb on it says
// what it is instead of acting on it.
func TestGetShowsMPIJobsOnly(t *testing.T) {
	torchRT := &trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "torch-distributed", Labels: map[string]string{"trainer.kubeflow.org/framework": "torch"}},
		Spec: trainer.TrainingRuntimeSpec{MLPolicy: &trainer.MLPolicy{MLPolicySource: trainer.MLPolicySource{Torch: &trainer.TorchMLPolicySource{}}}}}
	mpiRT := &trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "amd"},
		Spec: trainer.TrainingRuntimeSpec{MLPolicy: &trainer.MLPolicy{MLPolicySource: trainer.MLPolicySource{MPI: &trainer.MPIMLPolicySource{}}}}}
	mpi := testJob("team-a", "hello", "mpi-openmpi", 2, &api.Status{Phase: api.PhaseRunning, WorkersReady: 2, WorkersTotal: 2, SlotsPerWorker: 2, Runtime: "mpi-openmpi"}, time.Minute)
	mpi.Labels = map[string]string{api.BaseRuntimeLabel: "mpi-openmpi"}
	custom := testJob("team-a", "amd-job", "amd", 2, nil, time.Minute)
	// A status annotation on another framework's job is anyone's to write:
	// it does not make the job an MPI job.
	torch := testJob("team-a", "bert", "torch-distributed", 2, &api.Status{Phase: api.PhaseRunning, Runtime: "torch-distributed", SlotsPerWorker: 1}, time.Minute)
	cases := map[string]struct {
		args    []string
		code    int
		want    []string
		notWant []string
	}{
		"MPI jobs only":             {args: []string{"get"}, want: []string{"hello", "amd-job"}, notWant: []string{"bert", "FRAMEWORK"}},
		"every framework, marked":   {args: []string{"get", "--all-frameworks"}, want: []string{"FRAMEWORK", "hello", "amd-job", "bert", "torch"}},
		"the PyTorch job by name":   {args: []string{"get", "bert"}, code: ExitNotFound, want: []string{`TrainJob "bert" in namespace team-a is a torch job (runtime torch-distributed), not an MPI job`, "kubectl get trainjob bert -n team-a"}},
		"describe of a PyTorch job": {args: []string{"describe", "bert"}, code: ExitNotFound, want: []string{"is a torch job (runtime torch-distributed), not an MPI job"}},
		"delete of a PyTorch job":   {args: []string{"delete", "bert"}, code: ExitNotFound, want: []string{"not an MPI job"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o, out, errOut := fakeOptions(t, interceptor.Funcs{}, torchRT, mpiRT, mpi.DeepCopy(), custom.DeepCopy(), torch.DeepCopy())
			cmd := newRoot(o)
			cmd.SetArgs(tc.args)
			cmd.SetOut(out)
			cmd.SetErr(errOut)
			code := 0
			if err := cmd.Execute(); err != nil {
				code = 1
				var exit *exitError
				if errors.As(err, &exit) {
					code = exit.code
				}
				errOut.WriteString(err.Error())
			}
			if code != tc.code {
				t.Errorf("exit %d, want %d (stdout %q, stderr %q)", code, tc.code, out, errOut)
			}
			checkOutput(t, out.String()+errOut.String(), tc.want, tc.notWant)
		})
	}
}
