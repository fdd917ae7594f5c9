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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	// A job the manager has not written a status for yet, one by one.
	fresh := func(n int) []trainer.TrainJob {
		var out []trainer.TrainJob
		for i := range n {
			out = append(out, testJob("team-a", fmt.Sprintf("new-%02d", i), "mpi-mpich", 3, nil, time.Second))
		}
		return out
	}
	metadata, whole, get := "*v1.PartialObjectMetadataList", "*v1alpha1.TrainJobList", "get"
	cases := map[string]struct {
		jobs   []trainer.TrainJob
		output string
		calls  []string
		// deleted is a job deleted between the list and its read.
		deleted string
	}{
		"every job has the manager's status and runtime": {jobs: withRuntime, calls: []string{metadata}},
		"a status an older manager wrote, without the runtime: read whole": {jobs: append(withRuntime[:1:1], managed("old", "mpi-mpich", api.Status{Phase: api.PhaseSucceeded, WorkersTotal: 2})),
			calls: []string{metadata, get}},
		"a status without the runtime's shape (slots): read whole": {jobs: append(withRuntime[:1:1], managed("gone", "deleted-runtime", api.Status{Phase: api.PhasePending, WorkersTotal: 2, Runtime: "deleted-runtime"})),
			calls: []string{metadata, get}},
		"two jobs the manager has not seen":        {jobs: append(withRuntime[:1:1], fresh(2)...), calls: []string{metadata, get, get}},
		"one deleted before it is read: not shown": {jobs: append(withRuntime[:1:1], fresh(2)...), calls: []string{metadata, get, get}, deleted: "new-00"},
		"more such jobs than are read one by one: a list of whole jobs": {jobs: append(withRuntime[:1:1], fresh(api.MaxWholeReads+1)...),
			calls: []string{metadata, whole}},
		"wide":             {jobs: withRuntime, output: "wide", calls: []string{metadata}},
		"yaml: whole jobs": {jobs: withRuntime, output: "yaml", calls: []string{whole}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var calls []string
			funcs := interceptor.Funcs{
				List: func(ctx context.Context, c client.WithWatch, l client.ObjectList, opts ...client.ListOption) error {
					calls = append(calls, fmt.Sprintf("%T", l))
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
