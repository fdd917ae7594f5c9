package cli

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
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
	withRuntime[0].Spec.RuntimeRef.Name = "hello-runtime"
	cases := map[string]struct {
		jobs   []trainer.TrainJob
		output string
		lists  []string
	}{
		"every job has the manager's status and runtime": {jobs: withRuntime,
			lists: []string{"*v1.PartialObjectMetadataList"}},
		"a status an older manager wrote, without the runtime": {jobs: append(withRuntime[:1:1], managed("old", "mpi-mpich", api.Status{Phase: api.PhaseSucceeded, WorkersTotal: 2})),
			lists: []string{"*v1.PartialObjectMetadataList", "*v1alpha1.TrainJobList"}},
		"a status without the runtime's shape (slots)": {jobs: append(withRuntime[:1:1], managed("gone", "deleted-runtime", api.Status{Phase: api.PhasePending, WorkersTotal: 2, Runtime: "deleted-runtime"})),
			lists: []string{"*v1.PartialObjectMetadataList", "*v1alpha1.TrainJobList"}},
		"a job the manager has not seen": {jobs: append(withRuntime[:1:1], testJob("team-a", "new", "mpi-mpich", 3, nil, time.Second)),
			lists: []string{"*v1.PartialObjectMetadataList", "*v1alpha1.TrainJobList"}},
		"wide":             {jobs: withRuntime, output: "wide", lists: []string{"*v1.PartialObjectMetadataList"}},
		"yaml: whole jobs": {jobs: withRuntime, output: "yaml", lists: []string{"*v1alpha1.TrainJobList"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var lists []string
			funcs := interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, l client.ObjectList, opts ...client.ListOption) error {
				lists = append(lists, fmt.Sprintf("%T", l))
				return c.List(ctx, l, opts...)
			}}
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
			if d := cmp.Diff(tc.lists, lists); d != "" {
				t.Errorf("lists (-want +got):\n%s", d)
			}
			if tc.output == "yaml" {
				return
			}
			// The table of the whole jobs, by name as the API server lists them.
			jobs := slices.Clone(tc.jobs)
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
