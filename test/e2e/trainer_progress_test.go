//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/progress"
	"github.com/mpijob/mpijob/test/framework"
)

// reportingProgram prints one progress report on rank 0 and keeps the
// job running long enough for mpijob-manager to read it (every 10 s).
const reportingProgram = `from mpi4py import MPI
import json, time
if MPI.COMM_WORLD.Get_rank() == 0:
    print("MPIJOB_PROGRESS " + json.dumps({"epoch": 9, "total_epochs": 20, "loss": 0.31, "accuracy": 0.91, "eta_seconds": 120}), flush=True)
time.sleep(25)
`

// trainerReportProgram reports to Trainer's runtime status server as
// Trainer's own e2e suite does (test/e2e/testdata/status_update.py), from
// the Launcher, the pod Trainer gives the endpoint and token to, and
// prints no MPIJOB_PROGRESS line.
const trainerReportProgram = `import json, os, ssl, time
from urllib import request
payload = {"trainerStatus": {"progressPercentage": 42, "estimatedRemainingSeconds": 90,
    "metrics": [{"name": "loss", "value": "0.123"}, {"name": "accuracy", "value": "0.95"}],
    "lastUpdatedTime": "2026-11-26T00:00:00Z"}}
token = open(os.environ["KUBEFLOW_TRAINER_SERVER_TOKEN"]).read().strip()
req = request.Request(os.environ["KUBEFLOW_TRAINER_SERVER_URL"], data=json.dumps(payload).encode(),
    headers={"Authorization": "Bearer " + token})
print("Trainer answered", request.urlopen(req, context=ssl.create_default_context(cafile=os.environ["KUBEFLOW_TRAINER_SERVER_CA_CERT"])).getcode(), flush=True)
time.sleep(20)
`

// Trainer's own progress (status.trainerStatus, its TrainJobStatus
// feature, enabled on the local cluster as upstream's CI enables it) and
// mpijob's agree both ways: a rank's MPIJOB_PROGRESS report reaches
// Trainer's field through mpijob-manager, and a job that reports to
// Trainer's runtime status server only is shown by kubectl mpijob (and
// OpenShift AI's dashboard, from the annotation).
func TestTrainerAndMPIJobProgressAgree(t *testing.T) {
	t.Parallel()
	c := framework.Get(t)
	const ns, user = "team-a", "dev-a"

	t.Run("an MPIJOB_PROGRESS report reaches Trainer's status.trainerStatus", func(t *testing.T) {
		name := framework.UniqueName("agree")
		t.Cleanup(func() { mpijob(t, user, ns, "delete", name, "--wait=false") })
		expect(t, mpijob(t, user, ns, "create", name, "--workers", "2", "--", "mpirun", "python3", "-c", reportingProgram), 0)
		var ours, theirs progress.TrainerStatus
		waitFor(t, 4*time.Minute, "mpijob's progress and Trainer's status.trainerStatus", func() (bool, string) {
			tj := &trainer.TrainJob{}
			if err := c.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, tj); err != nil {
				return false, err.Error()
			}
			var ok1, ok2 bool
			ours, ok1 = progress.Read(tj.Annotations)
			theirs, ok2 = progress.FromTrainer(tj.Status.TrainerStatus)
			return ok1 && ok2, fmt.Sprintf("mpijob's: %v, Trainer's: %+v", ok1, tj.Status.TrainerStatus)
		})
		if ours.ProgressPercentage == nil || *ours.ProgressPercentage != 45 {
			t.Fatalf("mpijob's progress %+v, want 45%% (epoch 9 of 20)", ours)
		}
		// Trainer's shape has no epochs: all else is the same.
		want := ours
		want.CurrentEpoch, want.TotalEpochs, want.LastUpdatedTime, theirs.LastUpdatedTime = nil, nil, "", ""
		if diff := cmp.Diff(want, theirs); diff != "" {
			t.Fatalf("Trainer's status.trainerStatus differs from mpijob's progress (-mpijob +Trainer):\n%s", diff)
		}
	})

	t.Run("a job that reports to Trainer's status server is shown by kubectl mpijob", func(t *testing.T) {
		name := framework.UniqueName("trainer-report")
		t.Cleanup(func() { mpijob(t, user, ns, "delete", name, "--wait=false") })
		expect(t, mpijob(t, user, ns, "create", name, "--workers", "1", "--", "python3", "-c", trainerReportProgram), 0)
		// Trainer's runtime status server writes status.trainerStatus;
		// mpijob-manager puts the same in the annotation OpenShift AI's
		// dashboard and mpijob's job lists read.
		waitFor(t, 4*time.Minute, "Trainer's status.trainerStatus, and mpijob's annotation saying the same", func() (bool, string) {
			tj := &trainer.TrainJob{}
			if err := c.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, tj); err != nil {
				return false, err.Error()
			}
			theirs, ok1 := progress.FromTrainer(tj.Status.TrainerStatus)
			ours, ok2 := progress.Read(tj.Annotations)
			return ok1 && ok2 && ours.SameForTrainer(theirs), fmt.Sprintf("Trainer's %+v, mpijob's %q", tj.Status.TrainerStatus, tj.Annotations[progress.Annotation])
		})
		expect(t, mpijob(t, user, ns, "describe", name), 0, "42%, about 1 minute left", "loss 0.123, accuracy 0.95")
		expect(t, mpijob(t, user, ns, "get", name), 0, "PROGRESS", "42%")
	})
}
