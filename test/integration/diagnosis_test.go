//go:build e2e

package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/diagnose"
	"github.com/mpijob/mpijob/pkg/localcluster"
	"github.com/mpijob/mpijob/test/framework"
)

// Real jobs on the real nodes fail in the ways users meet, and
// mpijob-manager says why in plain words, with a next step and an Event.
func TestDiagnosisOfRealFailures(t *testing.T) {
	c := framework.Get(t)
	cases := map[string]struct {
		job         *framework.TrainJobWrapper
		wantPhase   api.Phase
		wantReason  string
		wantMessage []string
	}{
		"the Launcher's program fails": {
			job:       framework.MakeTrainJob("exit3", "", "mpi-openmpi").NumNodes(1).Command("sh", "-c", "echo giving up; exit 3"),
			wantPhase: api.PhaseFailed, wantReason: diagnose.ReasonLauncherFailed,
			wantMessage: []string{`The Launcher exited with code 3. The last output: "giving up".`},
		},
		"ssh to a Worker is refused": {
			// Nothing listens on 2299: the ssh error is what a Worker without sshd gives.
			job:       framework.MakeTrainJob("refused", "", "mpi-openmpi").NumNodes(1).Command("sh", "-c", "ssh -p 2299 refused-node-0-0.refused true"),
			wantPhase: api.PhaseFailed, wantReason: diagnose.ReasonSSHConnectionRefused,
			wantMessage: []string{"could not open an SSH connection to Worker 0 (refused-node-0-0) on port 2299"},
		},
		"a Worker image without sshd": {
			// The job fails or is still starting when it is judged: either
			// way the reason is SSH and the image is named.
			job:         framework.MakeTrainJob("nosshd", "", "mpi-openmpi").NumNodes(1).WorkerImage(localcluster.PauseImage),
			wantReason:  diagnose.ReasonSSHConnectionRefused,
			wantMessage: []string{"Worker 0 (pod nosshd-node-0-0-", "could not start /usr/sbin/sshd", "image " + localcluster.PauseImage + " lacks it"},
		},
		"mpirun asks for more ranks than slots": {
			job:       framework.MakeTrainJob("slots", "", "mpi-openmpi").NumNodes(2).Command("mpirun", "-np", "4", "/usr/local/bin/mpi-hello"),
			wantPhase: api.PhaseFailed, wantReason: diagnose.ReasonNotEnoughSlots,
			wantMessage: []string{"mpirun asked for 4 ranks of /usr/local/bin/mpi-hello, but the job has 2 Workers × 1 slot = 2 slots."},
		},
		"one rank exits non-zero": {
			job: framework.MakeTrainJob("rankexit", "", "mpi-openmpi").NumNodes(2).
				Command("mpirun", "sh", "-c", `if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then echo rank1 failing; exit 3; fi; sleep 2`),
			// OpenMPI names the rank ("Process name: [[…],1]") in most runs;
			// in some it stops at its first banner and the message says
			// "A rank exited with code 3" (both are vectors in pkg/diagnose).
			wantPhase: api.PhaseFailed, wantReason: diagnose.ReasonRankFailed,
			wantMessage: []string{"exited with code 3", `"rank1 failing"`},
		},
		"a Python exception on one rank": {
			job: framework.MakeTrainJob("pyerr", "", "mpi-openmpi").NumNodes(2).
				Command("mpirun", "python3", "-c", `import os; r = int(os.environ["OMPI_COMM_WORLD_RANK"]); x = 1 / 0 if r == 1 else 0`),
			wantPhase: api.PhaseFailed, wantReason: diagnose.ReasonProgramError,
			wantMessage: []string{"The program raised ZeroDivisionError: division by zero at <string>:1 on "},
		},
		"the program is not in the Workers' image": {
			job:       framework.MakeTrainJob("noexec", "", "mpi-openmpi").NumNodes(2).Command("mpirun", "/opt/app/train"),
			wantPhase: api.PhaseFailed, wantReason: diagnose.ReasonExecutableNotFound,
			wantMessage: []string{"mpirun could not start /opt/app/train on Worker"},
		},
		"more Workers than nodes under one-Worker-per-node": {
			// The two real nodes take one Worker each; the kwok nodes are
			// tainted: Workers 3 and 4 can never be placed.
			job:         framework.MakeTrainJob("toomany", "", "mpi-openmpi").NumNodes(4),
			wantReason:  diagnose.ReasonCannotStart,
			wantMessage: []string{"The job can never start: it asks for 4 Workers", "only 2 nodes can take one"},
		},
		"a node selector no node has": {
			job: framework.MakeTrainJob("nossd", "", "mpi-openmpi").NumNodes(1).PatchWorkers(trainer.PodSpecPatch{
				NodeSelector: map[string]string{"disktype": "ssd"}}),
			wantReason:  diagnose.ReasonCannotStart,
			wantMessage: []string{"The job can never start", "2 nodes do not match the Workers' node selector disktype=ssd", "16 nodes carry taint nvidia.com/gpu:NoSchedule"},
		},
		"CPU Workers sent to the GPU nodes, whose taint they do not tolerate": {
			// The 16 GPU nodes are tainted nvidia.com/gpu:NoSchedule; only
			// pods that ask for GPUs get the toleration (the API server's
			// ExtendedResourceToleration).
			job: framework.MakeTrainJob("tainted", "", "mpi-openmpi").NumNodes(1).PatchWorkers(trainer.PodSpecPatch{
				NodeSelector: map[string]string{"type": "kwok"}}),
			wantReason:  diagnose.ReasonCannotStart,
			wantMessage: []string{"The job can never start", "16 nodes carry taint nvidia.com/gpu:NoSchedule, which the Workers do not tolerate", "2 nodes do not match the Workers' node selector type=kwok"},
		},
		"a PersistentVolumeClaim that does not exist": {
			job: framework.MakeTrainJob("noclaim", "", "mpi-openmpi").NumNodes(1).PatchWorkers(trainer.PodSpecPatch{
				Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "train-data"}}}},
			}),
			wantReason:  diagnose.ReasonUnschedulable,
			wantMessage: []string{"their PersistentVolumeClaim train-data does not exist in namespace"},
		},
		"a queue that does not exist": {
			job:         framework.MakeTrainJob("noqueue", "", "mpi-openmpi").NumNodes(1).Queue("nope"),
			wantReason:  diagnose.ReasonCannotStart,
			wantMessage: []string{"its LocalQueue nope does not exist"},
		},
		"the Launcher's image cannot be pulled": {
			job:       framework.MakeTrainJob("badimage", "", "mpi-openmpi").NumNodes(1).LauncherImage("registry.invalid/mpijob/nope:1"),
			wantPhase: api.PhaseStarting, wantReason: diagnose.ReasonImagePullFailed,
			wantMessage: []string{`cannot pull image "registry.invalid/mpijob/nope:1" from registry.invalid`, "The Launcher (pod badimage-launcher-0-0-"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ns := c.NewNamespace(t, "diag")
			job := tc.job.Obj()
			job.Namespace = ns
			if err := framework.Submit(context.Background(), c.Client, job, tc.job.Runtime()); err != nil {
				t.Fatal(err)
			}
			// The diagnosis may name the reason before it knows all of the
			// why (a Worker is unscheduled before the scheduler has said
			// why): wait for the whole message.
			s := c.WaitForStatus(t, ns, job.Name, 3*time.Minute, func(s api.Status) bool {
				if (tc.wantPhase != "" && s.Phase != tc.wantPhase) || s.Reason != tc.wantReason {
					return false
				}
				for _, want := range tc.wantMessage {
					if !strings.Contains(s.Message, want) {
						return false
					}
				}
				return true
			})
			for _, want := range tc.wantMessage {
				if !strings.Contains(s.Message, want) {
					t.Errorf("message %q lacks %q", s.Message, want)
				}
			}
			if s.NextStep == "" {
				t.Error("no next step")
			}
			if len(s.NextSteps) > 0 && s.NextSteps[0] != s.NextStep {
				t.Errorf("next steps %q do not start with the next step %q", s.NextSteps, s.NextStep)
			}
			// The Event follows the status write within 10 seconds.
			err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
				evs := &corev1.EventList{}
				if err := c.Client.List(ctx, evs, client.InNamespace(ns)); err != nil {
					return false, err
				}
				for _, e := range evs.Items {
					if e.InvolvedObject.Name == job.Name && e.Reason == tc.wantReason {
						return true, nil
					}
				}
				return false, nil
			})
			if err != nil {
				t.Errorf("no Event with reason %s on the TrainJob within 10s: %v", tc.wantReason, err)
			}
		})
	}
}
