//go:build e2e

package integration

import (
	"context"
	"strings"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/test/framework"
)

// Admission of MPI TrainJobs in team-a (quota: 8 nvidia.com/gpu, 64Gi),
// as dev-a, through the real API server and mpijob-manager's webhooks.
// Dry runs go through admission without leaving objects behind.
func TestAdmission(t *testing.T) {
	c := framework.Get(t)
	devA := c.As(t, "dev-a")
	cases := map[string]struct {
		job        *trainer.TrainJob
		wantDenied []string
	}{
		"quota pre-flight denies with the numbers and a way out": {
			// mpi-openmpi-gpu: the Launcher is a node too, so 5 nodes = Launcher + 4 Workers.
			job: framework.MakeTrainJob("too-big", "team-a", "mpi-openmpi-gpu").NumNodes(5).GPUsPerNode(3).Obj(),
			wantDenied: []string{
				"does not fit the quota of namespace team-a",
				"requested 15 nvidia.com/gpu (4 workers × 3 + launcher 3), quota 8, in use 0: use at most 1 workers or ask for a larger quota",
			},
		},
		"a job that exactly fits is admitted": {
			job: framework.MakeTrainJob("fits", "team-a", "mpi-openmpi-gpu").NumNodes(4).GPUsPerNode(2).Obj(),
		},
		"unknown runtime suggests the close one": {
			job:        framework.MakeTrainJob("typo", "team-a", "mpi-opnempi").NumNodes(2).Obj(),
			wantDenied: []string{`spec.runtimeRef.name: Not found: "mpi-opnempi": no runtime "mpi-opnempi"; did you mean "mpi-openmpi"?`},
		},
		"zero slots per worker": {
			job:        framework.MakeTrainJob("noslots", "team-a", "mpi-openmpi").NumNodes(2).SlotsPerWorker(0).Obj(),
			wantDenied: []string{"spec.trainer.numProcPerNode: Invalid value: 0: slots per worker must be at least 1"},
		},
		"name too long for the Launcher's Job": {
			job:        framework.MakeTrainJob(strings.Repeat("n", 53), "team-a", "mpi-openmpi").NumNodes(1).Obj(),
			wantDenied: []string{"metadata.name: Too long: may not be more than 52 bytes"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := devA.Create(context.Background(), tc.job, client.DryRunAll)
			if len(tc.wantDenied) == 0 {
				if err != nil {
					t.Fatalf("denied: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("admitted, want denied")
			}
			for _, want := range tc.wantDenied {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("denial %q lacks %q", err.Error(), want)
				}
			}
		})
	}
}

// The creator is the requesting user, whatever the request claims, and it
// cannot be changed afterwards.
func TestCreatorAttribution(t *testing.T) {
	c := framework.Get(t)
	devA := c.As(t, "dev-a")
	ctx := context.Background()
	job := framework.MakeTrainJob(framework.UniqueName("creator"), "team-a", "mpi-openmpi").NumNodes(1).Obj()
	job.Spec.Suspend = new(bool)
	*job.Spec.Suspend = true
	job.Annotations = map[string]string{api.CreatorAnnotation: "admin"}
	if err := devA.Create(ctx, job); err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() { _ = c.Client.Delete(context.Background(), job) })

	got := &trainer.TrainJob{}
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(job), got); err != nil {
		t.Fatal(err)
	}
	if who := got.Annotations[api.CreatorAnnotation]; who != "dev-a" {
		t.Errorf("creator = %q, want dev-a (the forged value must be replaced)", who)
	}

	// mpijob-manager writes the job's status annotation meanwhile: retry on conflict.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &trainer.TrainJob{}
		if err := devA.Get(ctx, client.ObjectKeyFromObject(job), cur); err != nil {
			return err
		}
		cur.Annotations[api.CreatorAnnotation] = "dev-b"
		return devA.Update(ctx, cur)
	})
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	after := &trainer.TrainJob{}
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(job), after); err != nil {
		t.Fatal(err)
	}
	if who := after.Annotations[api.CreatorAnnotation]; who != "dev-a" {
		t.Errorf("after an update that tried dev-b, creator = %q, want dev-a", who)
	}
}
