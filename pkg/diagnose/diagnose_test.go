package diagnose

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/diagnose/diagnosetest"
	"github.com/mpijob/mpijob/pkg/queue"
	"github.com/mpijob/mpijob/pkg/runtimes"
)

// The builders the diagnosis's tests share (package diagnosetest).
var (
	t0       = diagnosetest.T0
	job      = diagnosetest.Job
	jobset   = diagnosetest.JobSet
	worker   = diagnosetest.Worker
	launcher = diagnosetest.Launcher
	pods     = diagnosetest.Pods
)

// builderEvent is what the local cluster's image builder records on
// Worker 1's pod.
func builderEvent(reason, msg string, at time.Time) corev1.Event {
	return corev1.Event{Reason: reason, Message: msg, Source: corev1.EventSource{Component: BuilderComponent},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "hello-node-0-1"}, LastTimestamp: metav1.NewTime(at)}
}

func gpuNodes(free ...string) []NodeFree {
	out := make([]NodeFree, 0, len(free))
	for i, f := range free {
		out = append(out, NodeFree{Name: "n" + string(rune('a'+i)), Free: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse(f)}})
	}
	return out
}

// --- the table ---------------------------------------------------------------

func TestDiagnose(t *testing.T) {
	cases := map[string]struct {
		in Input
		// next is the ranked list of next steps, most likely first.
		next []string
		want api.Status
	}{
		"no JobSet yet": {
			next: []string{"Wait a few seconds; if this lasts, check that the Trainer controller runs and read `kubectl mpijob events hello`."},
			in:   Input{TrainJob: job(2).Obj()},
			want: api.Status{Phase: api.PhasePending, Reason: ReasonJobSetNotCreated, Launcher: api.LauncherNotCreated, WorkersTotal: 2, Message: "Trainer has not created the job's pods yet."},
		},
		"the JobSet removed at the timeout, before Trainer says so": {
			next: []string{"Give the job a longer timeout: `kubectl mpijob clone hello hello-2 --timeout 2h`.", "Or find out why it is slow: `kubectl mpijob logs hello --all`."},
			in: Input{TrainJob: func() *trainer.TrainJob {
				tj := job(2).Deadline(40).Obj()
				tj.CreationTimestamp = metav1.NewTime(t0.Add(-time.Minute))
				return tj
			}(), Previous: &api.Status{Phase: api.PhaseRunning, Reason: "Running", StartTime: ptr.To(metav1.NewTime(t0.Add(-50 * time.Second)))}, Now: t0},
			// The Launcher's start seen before stays: its pod is gone.
			want: api.Status{Phase: api.PhaseRunning, Reason: ReasonDeadlineExceeded, Launcher: api.LauncherNotCreated, WorkersTotal: 2,
				StartTime: ptr.To(metav1.NewTime(t0.Add(-50 * time.Second))),
				Message:   "The job reached its timeout of 40s (spec.activeDeadlineSeconds 40); Trainer is stopping it."},
		},
		"a JobSet not created yet, timeout or not": {
			next: []string{"Wait a few seconds; if this lasts, check that the Trainer controller runs and read `kubectl mpijob events hello`."},
			in:   Input{TrainJob: job(2).Deadline(40).Obj(), Previous: &api.Status{Phase: api.PhasePending, Reason: ReasonJobSetNotCreated}, Now: t0},
			want: api.Status{Phase: api.PhasePending, Reason: ReasonJobSetNotCreated, Launcher: api.LauncherNotCreated, WorkersTotal: 2, Message: "Trainer has not created the job's pods yet."},
		},
		"no Worker placed: Pending with the scarce resource": {
			next: []string{"The job starts when capacity frees up; to start sooner use fewer Workers or smaller Workers."},
			in: Input{TrainJob: job(4).Obj(), JobSet: jobset(4),
				Workers: pods(worker("0").GPUs("3"), worker("1").GPUs("3"), worker("2").GPUs("3"), worker("3").GPUs("3")),
				Nodes:   gpuNodes("8", "3", "2", "0")},
			want: api.Status{Phase: api.PhasePending, Reason: ReasonUnschedulable, Launcher: api.LauncherNotCreated, WorkersTotal: 4,
				Message: "Waiting for 4 Workers to be scheduled: only 2 nodes have 3 free nvidia.com/gpu."},
		},
		"some Workers placed: GangScheduling": {
			next: []string{"The job starts when capacity frees up; to start sooner use fewer Workers or smaller Workers."},
			in: Input{TrainJob: job(3).Obj(), JobSet: jobset(3),
				Workers: pods(worker("0").GPUs("1").Running(true), worker("1").GPUs("1"), worker("2").GPUs("1"))},
			want: api.Status{Phase: api.PhaseGangScheduling, Reason: ReasonUnschedulable, Launcher: api.LauncherNotCreated, WorkersTotal: 3, WorkersReady: 1,
				Message: "Waiting for 2 Workers to be scheduled: 0/18 nodes are available: 16 Insufficient nvidia.com/gpu."},
		},
		"gang timeout passed": {
			next: []string{"Use fewer Workers or fewer GPUs per worker, or ask an administrator for capacity; delete the job to free what it holds."},
			in: Input{TrainJob: job(2).Obj(), JobSet: jobset(2), GangTimeout: time.Minute, Now: t0.Add(2 * time.Minute),
				Previous: &api.Status{Phase: api.PhaseGangScheduling, LastTransitionTime: ptr.To(metav1.NewTime(t0))},
				Workers:  pods(worker("0").Running(true), worker("1"))},
			want: api.Status{Phase: api.PhaseGangScheduling, Reason: ReasonGangSchedulingTimeout, Launcher: api.LauncherNotCreated, WorkersTotal: 2, WorkersReady: 1,
				Message: "Waiting for 1 Worker to be scheduled: 0/18 nodes are available: 16 Insufficient nvidia.com/gpu (waiting longer than the gang-scheduling timeout of 1m0s)."},
		},
		"image pull error names the Worker, image and registry": {
			next: []string{"Check the image name and tag, that the registry is reachable from the nodes, and add an imagePullSecret for a private registry."},
			in: Input{TrainJob: job(2).Obj(), JobSet: jobset(2),
				Workers: pods(worker("0").Running(true), worker("1").Image("quay.io/team/train:1").Waiting("ImagePullBackOff", `Back-off pulling image "quay.io/team/train:1"`))},
			want: api.Status{Subject: api.WorkerRef(1), Phase: api.PhaseStarting, Reason: ReasonImagePullFailed, Launcher: api.LauncherNotCreated, WorkersTotal: 2, WorkersReady: 1,
				Message: `Worker 1 (pod hello-node-0-1) cannot pull image "quay.io/team/train:1" from quay.io (ImagePullBackOff): Back-off pulling image "quay.io/team/train:1"`},
		},
		"one of mpijob's own images missing from the registry: build and push it": {
			next: []string{"This is one of mpijob's MPI images, which are built from the repository, not pulled from ghcr.io: build and push them to your registry with `make images REGISTRY=registry.example.com/team`, then install with `kubectl apply --server-side -k config/registry` (docs/admin.md, Images from your registry)."},
			in: Input{TrainJob: job(2).Obj(), JobSet: jobset(2),
				Workers: pods(worker("0").Running(true), worker("1").Waiting("ErrImagePull", `failed to resolve reference "ghcr.io/mpijob/openmpi:4.1": not found`))},
			want: api.Status{Subject: api.WorkerRef(1), Phase: api.PhaseStarting, Reason: ReasonImagePullFailed, Launcher: api.LauncherNotCreated, WorkersTotal: 2, WorkersReady: 1,
				Message: `Worker 1 (pod hello-node-0-1) cannot pull image "ghcr.io/mpijob/openmpi:4.1" from ghcr.io (ErrImagePull): failed to resolve reference "ghcr.io/mpijob/openmpi:4.1": not found`},
		},
		"the CUDA image on a Worker without a GPU: GPUs, or a CPU runtime": {
			next: []string{"This is one of mpijob's MPI images, which are built from the repository, not pulled from ghcr.io: build and push them to your registry with `make images REGISTRY=registry.example.com/team`, then install with `kubectl apply --server-side -k config/registry` (docs/admin.md, Images from your registry).",
				"ghcr.io/mpijob/openmpi-cuda:4.1 is a CUDA image, and this pod asks for no GPU: give the Workers GPUs (kubectl mpijob create --gpus 1), or run on a CPU runtime such as mpi-openmpi, whose image needs no GPU."},
			in: Input{TrainJob: job(1).Obj(), JobSet: jobset(1),
				Workers: pods(worker("0").Image("ghcr.io/mpijob/openmpi-cuda:4.1").Waiting("ErrImagePull", `failed to resolve reference "ghcr.io/mpijob/openmpi-cuda:4.1": no such host`))},
			want: api.Status{Subject: api.WorkerRef(0), Phase: api.PhaseStarting, Reason: ReasonImagePullFailed, Launcher: api.LauncherNotCreated, WorkersTotal: 1, WorkersReady: 0,
				Message: `Worker 0 (pod hello-node-0-0) cannot pull image "ghcr.io/mpijob/openmpi-cuda:4.1" from ghcr.io (ErrImagePull): failed to resolve reference "ghcr.io/mpijob/openmpi-cuda:4.1": no such host`},
		},
		"the CUDA image on a Worker with a GPU: only the registry's step": {
			next: []string{"This is one of mpijob's MPI images, which are built from the repository, not pulled from ghcr.io: build and push them to your registry with `make images REGISTRY=registry.example.com/team`, then install with `kubectl apply --server-side -k config/registry` (docs/admin.md, Images from your registry)."},
			in: Input{TrainJob: job(1).Obj(), JobSet: jobset(1),
				Workers: pods(worker("0").Image("ghcr.io/mpijob/openmpi-cuda:4.1").GPUs("1").Waiting("ErrImagePull", `not found`))},
			want: api.Status{Subject: api.WorkerRef(0), Phase: api.PhaseStarting, Reason: ReasonImagePullFailed, Launcher: api.LauncherNotCreated, WorkersTotal: 1, WorkersReady: 0,
				Message: `Worker 0 (pod hello-node-0-0) cannot pull image "ghcr.io/mpijob/openmpi-cuda:4.1" from ghcr.io (ErrImagePull): not found`},
		},
		"the local cluster builds the image for its first use: the job waits": {
			next: []string{"Nothing to do: the pods start once the image is imported; `make images` builds every image ahead of time."},
			in: Input{TrainJob: job(2).Obj(), JobSet: jobset(2), Now: t0.Add(90 * time.Second),
				Events:  []corev1.Event{builderEvent("BuildingImage", "The local cluster builds ghcr.io/mpijob/openmpi:4.1 for its first use (about 4m on this machine).", t0)},
				Workers: pods(worker("0").Running(true), worker("1").Waiting("ImagePullBackOff", `Back-off pulling image "ghcr.io/mpijob/openmpi:4.1"`))},
			want: api.Status{Phase: api.PhaseStarting, Reason: ReasonImageBuilding, Launcher: api.LauncherNotCreated, WorkersTotal: 2, WorkersReady: 1,
				Message: `The local cluster is building image "ghcr.io/mpijob/openmpi:4.1" for its first use (for 1m30s so far): The local cluster builds ghcr.io/mpijob/openmpi:4.1 for its first use (about 4m on this machine).`},
		},
		"built and imported: the pod waits for the kubelet's next pull": {
			next: []string{"Nothing to do: the pods start once the image is imported; `make images` builds every image ahead of time."},
			in: Input{TrainJob: job(2).Obj(), JobSet: jobset(2), Now: t0.Add(5 * time.Minute),
				Events: []corev1.Event{
					builderEvent("BuildingImage", "building", t0),
					builderEvent("ImageBuilt", "ghcr.io/mpijob/openmpi:4.1 was built and imported into every node in 4m0s.", t0.Add(4*time.Minute)),
				},
				Workers: pods(worker("0").Running(true), worker("1").Waiting("ImagePullBackOff", `Back-off pulling image "ghcr.io/mpijob/openmpi:4.1"`))},
			want: api.Status{Phase: api.PhaseStarting, Reason: ReasonImageBuilding, Launcher: api.LauncherNotCreated, WorkersTotal: 2, WorkersReady: 1,
				Message: `The local cluster built image "ghcr.io/mpijob/openmpi:4.1" for its first use: ghcr.io/mpijob/openmpi:4.1 was built and imported into every node in 4m0s. The pod starts at the kubelet's next pull retry.`},
		},
		"a failed Launcher with retries left: the whole job starts again": {
			in: Input{TrainJob: job(2).Obj(), JobSet: func() *jobsetv1alpha2.JobSet {
				js := jobset(2)
				js.Spec.FailurePolicy = &jobsetv1alpha2.FailurePolicy{MaxRestarts: 2}
				js.Status.Restarts = 1
				return js
			}(), Workers: pods(worker("0").Running(true), worker("1").Running(true)), Launcher: pods(launcher().Terminated("Error", 1))},
			want: api.Status{Subject: api.LauncherRef(), Phase: api.PhaseRunning, Reason: ReasonLauncherFailed, Attempts: &api.Attempts{Retries: 1, MaxRetries: 2}, Launcher: api.LauncherFailed, WorkersTotal: 2, WorkersReady: 2,
				StartTime: ptr.To(metav1.NewTime(t0)), Message: "The Launcher failed on try 2 of 3; JobSet starts the whole job again (retries)."},
		},
		"a build that failed is a pull failure again": {
			next: []string{"This is one of mpijob's MPI images, which are built from the repository, not pulled from ghcr.io: build and push them to your registry with `make images REGISTRY=registry.example.com/team`, then install with `kubectl apply --server-side -k config/registry` (docs/admin.md, Images from your registry)."},
			in: Input{TrainJob: job(2).Obj(), JobSet: jobset(2), Now: t0.Add(5 * time.Minute),
				Events: []corev1.Event{
					builderEvent("BuildingImage", "building", t0),
					builderEvent("ImageBuildFailed", "The local cluster could not build it", t0.Add(4*time.Minute)),
				},
				Workers: pods(worker("0").Running(true), worker("1").Waiting("ImagePullBackOff", `Back-off pulling image "ghcr.io/mpijob/openmpi:4.1"`))},
			want: api.Status{Subject: api.WorkerRef(1), Phase: api.PhaseStarting, Reason: ReasonImagePullFailed, Launcher: api.LauncherNotCreated, WorkersTotal: 2, WorkersReady: 1,
				Message: `Worker 1 (pod hello-node-0-1) cannot pull image "ghcr.io/mpijob/openmpi:4.1" from ghcr.io (ImagePullBackOff): Back-off pulling image "ghcr.io/mpijob/openmpi:4.1"`},
		},
		"quota exceeded after admission": {
			next: []string{"Wait for other jobs in the namespace to finish, delete some, or ask an administrator for a larger quota."},
			in: Input{TrainJob: job(2).Obj(), JobSet: jobset(2), Events: []corev1.Event{{Reason: "FailedCreate",
				Message: `Error creating: pods "hello-node-0-1-x" is forbidden: exceeded quota: team-quota, requested: requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=8, limited: requests.nvidia.com/gpu=8`}}},
			want: api.Status{Phase: api.PhasePending, Reason: ReasonQuotaExceeded, Launcher: api.LauncherNotCreated, WorkersTotal: 2,
				Message: "Pods cannot be created: ResourceQuota team-quota is used up (requested requests.nvidia.com/gpu=1, in use requests.nvidia.com/gpu=8, limit requests.nvidia.com/gpu=8)."},
		},
		"Workers placed, not Ready": {
			next: []string{"Nothing to do yet; if this lasts, `kubectl mpijob describe hello` shows which Worker is not Ready and why."},
			in:   Input{TrainJob: job(2).Obj(), JobSet: jobset(2), Workers: pods(worker("0").Running(true), worker("1").Running(false))},
			want: api.Status{Phase: api.PhaseStarting, Reason: ReasonWorkersNotReady, Launcher: api.LauncherNotCreated, WorkersTotal: 2, WorkersReady: 1, Message: "Waiting for Workers to be Ready: 1 of 2 Ready."},
		},
		"a Worker whose volumes do not mount for want of memory names the limit": {
			next: []string{
				"The kubelet sizes a pod's in-memory volumes (the SSH key Trainer mounts) by the pod's memory: its memory limit of 10 bytes is too small. Delete the job and run it again with more memory per Worker, e.g. kubectl mpijob clone hello hello-2 --memory 1Gi (memory is in bytes unless it has a unit: Mi, Gi).",
				"Until then the job holds its Workers: delete it (kubectl mpijob delete hello).",
			},
			in: Input{TrainJob: job(2).Obj(), JobSet: jobset(2),
				Workers: pods(worker("0").Running(true), worker("1").MemLimit("10").Waiting("ContainerCreating", "")),
				Events: []corev1.Event{
					{Reason: "FailedMount", InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "hello-node-0-0"}, Message: "an older event about a pod that started since"},
					{Reason: "FailedMount", InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "hello-node-0-1"},
						Message: `MountVolume.SetUp failed for volume "mpi-ssh-auth" : write /var/lib/kubelet/pods/x/volumes/kubernetes.io~secret/mpi-ssh-auth/..2026: no space left on device`},
				}},
			want: api.Status{Subject: api.WorkerRef(1), Phase: api.PhaseStarting, Reason: ReasonVolumeMountFailed, Launcher: api.LauncherNotCreated, WorkersTotal: 2, WorkersReady: 1,
				Message: `Worker 1 (pod hello-node-0-1) cannot start: a volume does not mount: MountVolume.SetUp failed for volume "mpi-ssh-auth" : write /var/lib/kubelet/pods/x/volumes/kubernetes.io~secret/mpi-ssh-auth/..2026: no space left on device.`},
		},
		"a Worker whose ConfigMap is missing is told to read the pod's Events": {
			next: []string{
				"Read the pod's Events (kubectl mpijob describe hello, or kubectl describe pod hello-node-0-0): a missing Secret, ConfigMap or PersistentVolumeClaim, or a volume another node holds, keeps it from starting.",
				"Fix the volume, or delete the job (kubectl mpijob delete hello): until then it holds its Workers.",
			},
			in: Input{TrainJob: job(1).Obj(), JobSet: jobset(1),
				Workers: pods(worker("0").Waiting("ContainerCreating", "")),
				Events:  []corev1.Event{{Reason: "FailedMount", InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "hello-node-0-0"}, Message: `MountVolume.SetUp failed for volume "cfg" : configmap "train-cfg" not found`}}},
			want: api.Status{Subject: api.WorkerRef(0), Phase: api.PhaseStarting, Reason: ReasonVolumeMountFailed, Launcher: api.LauncherNotCreated, WorkersTotal: 1,
				Message: `Worker 0 (pod hello-node-0-0) cannot start: a volume does not mount: MountVolume.SetUp failed for volume "cfg" : configmap "train-cfg" not found.`},
		},
		"Workers Ready, the Launcher on a taint it does not tolerate": {
			next: []string{
				"The nodes carry a taint the Launcher does not tolerate: add it with --toleration (`kubectl mpijob clone hello hello-2 --toleration KEY=VALUE:NoSchedule`), or ask an administrator which nodes take the Launcher.",
				"Delete the job while it waits (`kubectl mpijob delete hello`): its Workers hold their resources until the Launcher runs.",
			},
			in: Input{TrainJob: job(2).Obj(), JobSet: jobset(2), Workers: pods(worker("0").Running(true), worker("1").Running(true)),
				Launcher: pods(launcher().Unschedulable("0/3 nodes are available: 3 node(s) had untolerated taint {dedicated: infra}."))},
			want: api.Status{Phase: api.PhaseStarting, Reason: ReasonUnschedulable, Launcher: api.LauncherPending, WorkersTotal: 2, WorkersReady: 2,
				Message: "All Workers are Ready, but the Launcher cannot be scheduled: 0/3 nodes are available: 3 node(s) had untolerated taint {dedicated: infra}."},
		},
		"Workers Ready, no room for the Launcher: told of room, not of tolerations": {
			next: []string{
				"No node has room for the Launcher now (Insufficient cpu): lower what it asks with --launcher-cpu or --launcher-memory (`kubectl mpijob clone hello hello-2 --launcher-cpu 100m`), or wait until running pods finish.",
				"Delete the job while it waits (`kubectl mpijob delete hello`): its Workers hold their resources until the Launcher runs.",
			},
			in: Input{TrainJob: job(2).Obj(), JobSet: jobset(2), Workers: pods(worker("0").Running(true), worker("1").Running(true)),
				Launcher: pods(launcher().Unschedulable("0/3 nodes are available: 3 Insufficient cpu."))},
			want: api.Status{Phase: api.PhaseStarting, Reason: ReasonUnschedulable, Launcher: api.LauncherPending, WorkersTotal: 2, WorkersReady: 2,
				Message: "All Workers are Ready, but the Launcher cannot be scheduled: 0/3 nodes are available: 3 Insufficient cpu."},
		},
		"Running": {
			in: Input{TrainJob: job(2).Obj(), JobSet: jobset(2), Workers: pods(worker("0").Running(true), worker("1").Running(true)),
				Launcher: pods(launcher().Running(false))},
			want: api.Status{Phase: api.PhaseRunning, Launcher: api.LauncherRunning, WorkersTotal: 2, WorkersReady: 2, StartTime: ptr.To(metav1.NewTime(t0)), Message: "Running on 2 Workers."},
		},
		"launcher deleted while Workers run": {
			next: []string{"The job cannot finish without its Launcher: delete it and resubmit (`kubectl mpijob clone hello hello-2`)."},
			in: Input{TrainJob: job(2).Obj(), JobSet: jobset(2), Workers: pods(worker("0").Running(true), worker("1").Running(true)),
				Previous: &api.Status{Phase: api.PhaseRunning, Launcher: api.LauncherRunning}},
			want: api.Status{Subject: api.LauncherRef(), Phase: api.PhaseRunning, Reason: ReasonLauncherDeleted, Launcher: api.LauncherDeleted, WorkersTotal: 2, WorkersReady: 2,
				Message: "The Launcher pod was deleted while the Workers run."},
		},
		"launcher being deleted": {
			next: []string{"The job cannot finish without its Launcher: delete it and resubmit (`kubectl mpijob clone hello hello-2`)."},
			in: Input{TrainJob: job(1).Obj(), JobSet: jobset(1), Workers: pods(worker("0").Running(true)),
				Launcher: pods(launcher().Running(false).Deleting())},
			want: api.Status{Subject: api.LauncherRef(), Phase: api.PhaseRunning, Reason: ReasonLauncherDeleted, Launcher: api.LauncherDeleted, WorkersTotal: 1, WorkersReady: 1, StartTime: ptr.To(metav1.NewTime(t0)),
				Message: "The Launcher pod was deleted while the Workers run."},
		},
		"failed after its Launcher was deleted": {
			next: []string{"Resubmit the job (`kubectl mpijob clone hello hello-2`); do not delete the Launcher pod of a running job."},
			in: Input{TrainJob: job(2).Cond(trainer.TrainJobFailed, "JobSetFailed", "").Obj(), JobSet: jobset(2),
				Workers: pods(worker("0").Running(true), worker("1").Running(true)), Launcher: pods(launcher().Terminated("Error", 143)),
				Previous: &api.Status{Phase: api.PhaseRunning, Reason: ReasonLauncherDeleted, Launcher: api.LauncherDeleted}},
			want: api.Status{Subject: api.LauncherRef(), Phase: api.PhaseFailed, Reason: ReasonLauncherDeleted, Launcher: api.LauncherFailed, WorkersTotal: 2, WorkersReady: 2,
				StartTime: ptr.To(metav1.NewTime(t0)), CompletionTime: ptr.To(metav1.NewTime(t0)),
				Message: "The Launcher pod was deleted while the Workers ran, so the job could not finish."},
		},
		"a deleted Launcher stays deleted while its pod ends": {
			next: []string{"The job cannot finish without its Launcher: delete it and resubmit (`kubectl mpijob clone hello hello-2`)."},
			in: Input{TrainJob: job(1).Obj(), JobSet: jobset(1), Workers: pods(worker("0").Running(true)),
				Launcher: pods(launcher().Terminated("Error", 137).Deleting())},
			want: api.Status{Subject: api.LauncherRef(), Phase: api.PhaseRunning, Reason: ReasonLauncherDeleted, Launcher: api.LauncherDeleted, WorkersTotal: 1, WorkersReady: 1,
				StartTime: ptr.To(metav1.NewTime(t0)), Message: "The Launcher pod was deleted while the Workers run."},
		},
		"a deleted Launcher's pod is gone": {
			next: []string{"The job cannot finish without its Launcher: delete it and resubmit (`kubectl mpijob clone hello hello-2`)."},
			in: Input{TrainJob: job(1).Obj(), JobSet: jobset(1), Workers: pods(worker("0").Terminated("Completed", 0)),
				Previous: &api.Status{Phase: api.PhaseRunning, Reason: ReasonLauncherDeleted, Launcher: api.LauncherDeleted}},
			want: api.Status{Subject: api.LauncherRef(), Phase: api.PhaseRunning, Reason: ReasonLauncherDeleted, Launcher: api.LauncherDeleted, WorkersTotal: 1, WorkersReady: 1,
				Message: "The Launcher pod was deleted while the Workers run."},
		},
		"Succeeded": {
			in: Input{TrainJob: job(2).Cond(trainer.TrainJobComplete, "JobSetCompleted", "").Obj(), JobSet: jobset(2),
				Workers: pods(worker("0").Terminated("Completed", 0), worker("1").Terminated("Completed", 0)), Launcher: pods(launcher().Terminated("Completed", 0))},
			want: api.Status{Phase: api.PhaseSucceeded, Launcher: api.LauncherSucceeded, WorkersTotal: 2, WorkersReady: 2,
				StartTime: ptr.To(metav1.NewTime(t0)), CompletionTime: ptr.To(metav1.NewTime(t0)), Message: "The job finished successfully on 2 Workers."},
		},
		"Launcher done, Workers stopped, job not yet Complete: still Running, never back to Pending": {
			in: Input{TrainJob: job(2).Obj(), JobSet: jobset(2), Launcher: pods(launcher().Terminated("Completed", 0))},
			want: api.Status{Phase: api.PhaseRunning, Launcher: api.LauncherSucceeded, WorkersTotal: 2, StartTime: ptr.To(metav1.NewTime(t0)),
				Message: "The Launcher finished; Trainer is completing the job."},
		},
		"Succeeded after JobSet removed the Workers: still every Worker counted": {
			in: Input{TrainJob: job(2).Cond(trainer.TrainJobComplete, "JobSetCompleted", "").Obj(), JobSet: jobset(2),
				Launcher: pods(launcher().Terminated("Completed", 0))},
			want: api.Status{Phase: api.PhaseSucceeded, Launcher: api.LauncherSucceeded, WorkersTotal: 2, WorkersReady: 2,
				StartTime: ptr.To(metav1.NewTime(t0)), CompletionTime: ptr.To(metav1.NewTime(t0)), Message: "The job finished successfully on 2 Workers."},
		},
		"Worker OOMKilled names the Worker and its limit": {
			next: []string{"Give each Worker more memory (a higher memory limit per worker) or run fewer slots per worker."},
			in: Input{TrainJob: job(4).Cond(trainer.TrainJobFailed, "JobSetFailed", "jobset failed").Obj(), JobSet: jobset(4),
				Workers:  pods(worker("0").Running(true), worker("3").Terminated("OOMKilled", 137).MemLimit("4Gi"), worker("2").Terminated("OOMKilled", 137)),
				Launcher: pods(launcher().Terminated("Error", 1))},
			want: api.Status{Subject: api.WorkerRef(2), Phase: api.PhaseFailed, Reason: ReasonWorkerOOMKilled, Launcher: api.LauncherFailed, WorkersTotal: 4, WorkersReady: 1,
				StartTime: ptr.To(metav1.NewTime(t0)), CompletionTime: ptr.To(metav1.NewTime(t0)),
				Message: "Worker 2 (pod hello-node-0-2) ran out of memory and was killed (exit code 137, OOMKilled): it has no memory limit, so the node itself ran out."},
		},
		"Worker evicted": {
			next: []string{"The node ran short of a resource; set requests for memory and ephemeral storage that cover what the job uses, then resubmit."},
			in: Input{TrainJob: job(2).Cond(trainer.TrainJobFailed, "JobSetFailed", "").Obj(), JobSet: jobset(2),
				Workers: pods(worker("0").Running(true), worker("1").Evicted("The node was low on resource: memory."))},
			want: api.Status{Subject: api.WorkerRef(1), Phase: api.PhaseFailed, Reason: ReasonWorkerEvicted, Launcher: api.LauncherNotCreated, WorkersTotal: 2, WorkersReady: 1,
				CompletionTime: ptr.To(metav1.NewTime(t0)),
				Message:        "Worker 1 (pod hello-node-0-1) was evicted from node mpijob-node-2: The node was low on resource: memory."},
		},
		"Worker evicted for its ephemeral-storage limit": {
			next: []string{"Write large files to a PVC (--pvc) or the job's artifacts instead of the container's own file system, and log less; " +
				"or ask your administrator for a higher ephemeral-storage limit (the namespace's LimitRange)."},
			in: Input{TrainJob: job(2).Cond(trainer.TrainJobFailed, "JobSetFailed", "").Obj(), JobSet: jobset(2),
				Workers: pods(worker("0").Running(true), worker("1").Evicted("Pod ephemeral local storage usage exceeds the total limit of containers 1Gi. "))},
			want: api.Status{Subject: api.WorkerRef(1), Phase: api.PhaseFailed, Reason: ReasonWorkerEvicted, Launcher: api.LauncherNotCreated, WorkersTotal: 2, WorkersReady: 1,
				CompletionTime: ptr.To(metav1.NewTime(t0)),
				Message: "Worker 1 (pod hello-node-0-1) was evicted from node mpijob-node-2: it wrote more than its ephemeral-storage limit allows " +
					"(its log and what it writes to its own file system count): Pod ephemeral local storage usage exceeds the total limit of containers 1Gi."},
		},
		"deadline exceeded": {
			next: []string{"Give the job a longer timeout: `kubectl mpijob clone hello hello-2 --timeout 2h`.", "Or find out why it is slow: `kubectl mpijob logs hello --all`."},
			in:   Input{TrainJob: job(2).Deadline(600).Cond(trainer.TrainJobFailed, trainer.TrainJobDeadlineExceededReason, "").Obj(), JobSet: jobset(2)},
			want: api.Status{Phase: api.PhaseFailed, Reason: ReasonDeadlineExceeded, Launcher: api.LauncherNotCreated, WorkersTotal: 2,
				CompletionTime: ptr.To(metav1.NewTime(t0)), Message: "The job ran longer than its timeout of 10m (spec.activeDeadlineSeconds 600) and was stopped."},
		},
		"ssh connection refused in the launcher log": {
			next: []string{"Check that the Worker image starts sshd on port 2222 (the runtime's Worker command) and that no NetworkPolicy blocks traffic between the job's pods."},
			in: Input{TrainJob: job(2).Cond(trainer.TrainJobFailed, "JobSetFailed", "").Obj(), JobSet: jobset(2), Launcher: pods(launcher().Terminated("Error", 1)),
				LauncherLog: "ssh: connect to host hello-node-0-1.hello port 2222: Connection refused\n--------\nORTE was unable to reliably start one or more daemons."},
			want: api.Status{Subject: api.WorkerRef(1), Phase: api.PhaseFailed, Reason: ReasonSSHConnectionRefused, Launcher: api.LauncherFailed, WorkersTotal: 2,
				StartTime: ptr.To(metav1.NewTime(t0)), CompletionTime: ptr.To(metav1.NewTime(t0)),
				Message: "The Launcher could not open an SSH connection to Worker 1 (hello-node-0-1) on port 2222: the connection was refused."},
		},
		"host unreachable": {
			next: []string{"Check that cluster DNS works and that the Worker pods are Running; a NetworkPolicy may block the job's pods from each other."},
			in: Input{TrainJob: job(2).Cond(trainer.TrainJobFailed, "JobSetFailed", "").Obj(), JobSet: jobset(2), Launcher: pods(launcher().Terminated("Error", 1)),
				LauncherLog: "ssh: Could not resolve hostname hello-node-0-0.hello: Name or service not known"},
			want: api.Status{Subject: api.WorkerRef(0), Phase: api.PhaseFailed, Reason: ReasonHostUnreachable, Launcher: api.LauncherFailed, WorkersTotal: 2,
				StartTime: ptr.To(metav1.NewTime(t0)), CompletionTime: ptr.To(metav1.NewTime(t0)),
				Message: "The Launcher could not reach Worker 0 (hello-node-0-0): the host did not resolve or did not answer."},
		},
		"rank exited on signal 9 is translated": {
			next: []string{"Give each Worker more memory or run fewer slots per worker; `kubectl mpijob describe hello` shows each Worker's memory limit."},
			in: Input{TrainJob: job(4).Cond(trainer.TrainJobFailed, "JobSetFailed", "").Obj(), JobSet: jobset(4), Launcher: pods(launcher().Terminated("Error", 137)),
				LauncherLog: "mpirun noticed that process rank 3 with PID 0 on node hello-node-0-3 exited on signal 9 (Killed)."},
			want: api.Status{Subject: api.WorkerRef(3), Phase: api.PhaseFailed, Reason: ReasonRankKilled, Launcher: api.LauncherFailed, WorkersTotal: 4,
				StartTime: ptr.To(metav1.NewTime(t0)), CompletionTime: ptr.To(metav1.NewTime(t0)),
				Message: "Rank 3 on Worker 3 (hello-node-0-3) was killed (signal 9), most likely because it ran out of memory and the system stopped it to protect the node."},
		},
		"rank segfault": {
			next: []string{"Read the Launcher log around the crash (`kubectl mpijob logs hello --all`); signal 11 is a segmentation fault in the program."},
			in: Input{TrainJob: job(2).Cond(trainer.TrainJobFailed, "JobSetFailed", "").Obj(), JobSet: jobset(2), Launcher: pods(launcher().Terminated("Error", 139)),
				LauncherLog: "mpirun noticed that process rank 1 with PID 51 on node hello-node-0-1 exited on signal 11 (Segmentation fault)."},
			want: api.Status{Subject: api.WorkerRef(1), Phase: api.PhaseFailed, Reason: ReasonRankSignaled, Launcher: api.LauncherFailed, WorkersTotal: 2,
				StartTime: ptr.To(metav1.NewTime(t0)), CompletionTime: ptr.To(metav1.NewTime(t0)),
				Message: "Rank 1 on Worker 1 (hello-node-0-1) crashed on signal 11 (Segmentation fault)."},
		},
		"launcher exit code without a known cause": {
			next: []string{"Read the Launcher log (`kubectl mpijob logs hello`) for the program's own error."},
			in: Input{TrainJob: job(2).Cond(trainer.TrainJobFailed, "JobSetFailed", "").Obj(), JobSet: jobset(2), Launcher: pods(launcher().Terminated("Error", 3)),
				LauncherLog: "Traceback (most recent call last):\nValueError: bad input"},
			want: api.Status{Subject: api.LauncherRef(), Phase: api.PhaseFailed, Reason: ReasonLauncherFailed, Launcher: api.LauncherFailed, WorkersTotal: 2,
				StartTime: ptr.To(metav1.NewTime(t0)), CompletionTime: ptr.To(metav1.NewTime(t0)), Message: `The Launcher exited with code 3. The last output: "ValueError: bad input".`},
		},
		"launcher exit code, nothing printed": {
			next: []string{"Read the Launcher log (`kubectl mpijob logs hello`) for the program's own error."},
			in:   Input{TrainJob: job(2).Cond(trainer.TrainJobFailed, "JobSetFailed", "").Obj(), JobSet: jobset(2), Launcher: pods(launcher().Terminated("Error", 3))},
			want: api.Status{Subject: api.LauncherRef(), Phase: api.PhaseFailed, Reason: ReasonLauncherFailed, Launcher: api.LauncherFailed, WorkersTotal: 2,
				StartTime: ptr.To(metav1.NewTime(t0)), CompletionTime: ptr.To(metav1.NewTime(t0)), Message: "The Launcher exited with code 3."},
		},
		"launcher killed by the node's OOM killer": {
			next: []string{"Set the Launcher's memory request and limit to what it uses (--launcher-memory), so the scheduler reserves it.", "Ask an administrator which pods on node mpijob-node-1 use more memory than they request.", "Resubmit the job (`kubectl mpijob clone hello hello-2`)."},
			in: Input{TrainJob: job(2).Cond(trainer.TrainJobFailed, "JobSetFailed", "").Obj(), JobSet: jobset(2), Launcher: pods(launcher().Terminated("Error", 137)),
				Events: []corev1.Event{{ObjectMeta: metav1.ObjectMeta{Namespace: "default"}, Source: corev1.EventSource{Component: "kubelet"},
					Reason: "SystemOOM", Type: corev1.EventTypeWarning, InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: "mpijob-node-1"},
					Message: "System OOM encountered, victim process: mpirun, pid: 4242", LastTimestamp: metav1.NewTime(t0)}}},
			want: api.Status{Subject: api.LauncherRef(), Phase: api.PhaseFailed, Reason: ReasonLauncherOOMKilled, Launcher: api.LauncherFailed, WorkersTotal: 2,
				StartTime: ptr.To(metav1.NewTime(t0)), CompletionTime: ptr.To(metav1.NewTime(t0)),
				Message: "The Launcher (pod hello-launcher-0-0) was killed (exit code 137) when node mpijob-node-1 ran out of memory: the node's out-of-memory killer chose process mpirun. The Launcher has no memory limit, so what it uses is not reserved for it."},
		},
		"launcher killed, another node's OOM is not its cause": {
			next: []string{"Set the Launcher's memory request and limit to what it uses (--launcher-memory), so the scheduler reserves it.", "Ask an administrator whether node mpijob-node-1 ran out of memory (its SystemOOM events).", "Read the Launcher log (`kubectl mpijob logs hello`) for what it did last.", "Resubmit the job (`kubectl mpijob clone hello hello-2`)."},
			in: Input{TrainJob: job(2).Cond(trainer.TrainJobFailed, "JobSetFailed", "").Obj(), JobSet: jobset(2), Launcher: pods(launcher().Terminated("Error", 137)),
				Events: []corev1.Event{{Reason: "SystemOOM", Type: corev1.EventTypeWarning, InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: "mpijob-node-2"},
					Message: "System OOM encountered, victim process: python, pid: 1", LastTimestamp: metav1.NewTime(t0)}}},
			want: api.Status{Subject: api.LauncherRef(), Phase: api.PhaseFailed, Reason: ReasonLauncherFailed, Launcher: api.LauncherFailed, WorkersTotal: 2,
				StartTime: ptr.To(metav1.NewTime(t0)), CompletionTime: ptr.To(metav1.NewTime(t0)),
				Message: "The Launcher (pod hello-launcher-0-0) was killed with SIGKILL (exit code 137) without a container memory limit being hit: the node's out-of-memory killer or a process outside the job stopped it."},
		},
		"launcher killed, a tenant's forged SystemOOM Event about its node is not the node's": {
			next: []string{"Set the Launcher's memory request and limit to what it uses (--launcher-memory), so the scheduler reserves it.", "Ask an administrator whether node mpijob-node-1 ran out of memory (its SystemOOM events).", "Read the Launcher log (`kubectl mpijob logs hello`) for what it did last.", "Resubmit the job (`kubectl mpijob clone hello hello-2`)."},
			in: Input{TrainJob: job(2).Cond(trainer.TrainJobFailed, "JobSetFailed", "").Obj(), JobSet: jobset(2), Launcher: pods(launcher().Terminated("Error", 137)),
				Events: []corev1.Event{{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a"}, Source: corev1.EventSource{Component: "kubelet"},
					Reason: "SystemOOM", Type: corev1.EventTypeWarning, InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: "mpijob-node-1"},
					Message: "System OOM encountered, victim process: forged-by-team-a, pid: 1", LastTimestamp: metav1.NewTime(t0)}}},
			want: api.Status{Subject: api.LauncherRef(), Phase: api.PhaseFailed, Reason: ReasonLauncherFailed, Launcher: api.LauncherFailed, WorkersTotal: 2,
				StartTime: ptr.To(metav1.NewTime(t0)), CompletionTime: ptr.To(metav1.NewTime(t0)),
				Message: "The Launcher (pod hello-launcher-0-0) was killed with SIGKILL (exit code 137) without a container memory limit being hit: the node's out-of-memory killer or a process outside the job stopped it."},
		},
		"suspended by its owner": {
			next: []string{"Resume it by setting spec.suspend to false."},
			in:   Input{TrainJob: job(2).Suspend().Obj()},
			want: api.Status{Phase: api.PhaseSuspended, Reason: ReasonSuspended, Launcher: api.LauncherNotCreated, WorkersTotal: 2, Message: "The job is suspended: no pods run."},
		},
		"suspended through Kueue: its Workload is inactive": {
			next: []string{"Resume it with Resume in the dashboard, or `kubectl -n ns patch workload trainjob-hello-1a2b3 --type=merge -p '{\"spec\":{\"active\":true}}'`: it queues again and starts when team-a/default admits it."},
			in:   Input{TrainJob: job(2).Suspend().Obj(), Queue: &Queue{Name: "team-a/default", Workload: "trainjob-hello-1a2b3", Inactive: true, Message: "The workload is deactivated"}},
			want: api.Status{Phase: api.PhaseSuspended, Reason: ReasonSuspended, Launcher: api.LauncherNotCreated, WorkersTotal: 2,
				Message: "The job is suspended: its Kueue Workload trainjob-hello-1a2b3 is inactive, so no pods run and it does not queue (suspended by a user, or by Kueue after too many requeues)."},
		},
		"admitted by the queue, not yet resumed": {
			next: []string{"Nothing to do: the Launcher and Workers are being created."},
			in:   Input{TrainJob: job(2).Suspend().Obj(), Queue: &Queue{Name: "team-a/default", Admitted: true}},
			want: api.Status{Phase: api.PhaseQueued, Reason: ReasonAdmitted, Launcher: api.LauncherNotCreated, WorkersTotal: 2,
				Message:  "Admitted by queue team-a/default: the whole job fits and starts now.",
				NextStep: "Nothing to do: the Launcher and Workers are being created."},
		},
		"queued with its position": {
			next: []string{"Nothing to do: the job starts as soon as the queue admits it; `kubectl mpijob describe hello` shows its place in the queue."},
			in:   Input{TrainJob: job(8).Suspend().Obj(), Queue: &Queue{Name: "team-a", Position: 3}},
			want: api.Status{Phase: api.PhaseQueued, Reason: ReasonQueued, Launcher: api.LauncherNotCreated, WorkersTotal: 8, QueuePosition: ptr.To[int32](3),
				Message: "Waiting in queue team-a at position 3 until the Launcher and 8 Workers fit at once."},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if tc.in.Now.IsZero() {
				tc.in.Now = t0
			}
			got := diagnoseBoth(t, tc.in)
			tc.want.SlotsPerWorker = 2
			tc.want.ObservedGeneration = 1
			if len(tc.next) > 0 {
				tc.want.NextStep = tc.next[0]
			}
			if len(tc.next) > 1 {
				tc.want.NextSteps = tc.next
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(api.Status{}, "LastTransitionTime", "Steps")); diff != "" { // Steps: their texts are NextSteps (checkSteps)
				t.Errorf("Diagnose (-want,+got):\n%s", diff)
			}
			if got.Reason != "" && got.Phase != api.PhaseRunning && got.NextStep == "" && got.Reason != ReasonLauncherNotStarted {
				t.Errorf("reason %s comes without a next step", got.Reason)
			}
		})
	}
}

func TestLastTransitionTime(t *testing.T) {
	earlier := metav1.NewTime(t0.Add(-time.Hour))
	in := Input{TrainJob: job(1).Obj(), Now: t0, Previous: &api.Status{Phase: api.PhasePending, LastTransitionTime: &earlier}}
	if got := diagnoseBoth(t, in).LastTransitionTime; !got.Equal(&earlier) {
		t.Errorf("same phase: LastTransitionTime = %v, want the earlier %v", got, earlier)
	}
	in.Previous.Phase = api.PhaseQueued
	if got := diagnoseBoth(t, in).LastTransitionTime; !got.Equal(ptr.To(metav1.NewTime(t0))) {
		t.Errorf("new phase: LastTransitionTime = %v, want now", got)
	}
}

func TestRegistryOf(t *testing.T) {
	cases := map[string]string{
		"ubuntu":                             "docker.io",
		"library/ubuntu:22.04":               "docker.io",
		"ghcr.io/mpijob/openmpi:4.1":         "ghcr.io",
		"localhost:5000/x":                   "localhost:5000",
		"registry.example.com/a/b@sha256:00": "registry.example.com",
	}
	for in, want := range cases {
		if got := registryOf(in); got != want {
			t.Errorf("registryOf(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPodsOverdueAndUnschedulable(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	js := func(age time.Duration) *jobsetv1alpha2.JobSet {
		return &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(now.Add(-age))}}
	}
	tj := job(2).Obj()
	pending := corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}}
	refused := corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}}}
	cases := map[string]struct {
		in   Input
		want bool
	}{
		"no JobSet yet":              {in: Input{TrainJob: tj}},
		"JobSet just created":        {in: Input{TrainJob: tj, JobSet: js(time.Second)}},
		"pods missing after a while": {in: Input{TrainJob: tj, JobSet: js(5 * time.Second), Workers: []corev1.Pod{pending}}, want: true},
		"all pods there": {in: Input{TrainJob: tj, JobSet: js(5 * time.Second),
			Launcher: []corev1.Pod{pending}, Workers: []corev1.Pod{pending, pending}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := podsOverdue(tc.in, now); got != tc.want {
				t.Errorf("podsOverdue = %v, want %v", got, tc.want)
			}
		})
	}
	if got := unschedulable([]corev1.Pod{pending, refused}); got != 1 {
		t.Errorf("unschedulable = %d, want 1 (a pod not yet tried is not unschedulable)", got)
	}
}

// A Worker image without sshd on the runtime's port: the diagnosis says
// SSH is refused, naming the image the Workers ran, whether the Launcher
// saw the refusal, the Worker could not start sshd, or sshd never answered
// the readiness probe.
func TestSSHRefusedNamesTheWorkerImage(t *testing.T) {
	const image = "registry.example.com/team/train:3"
	failed := job(2).Cond(trainer.TrainJobFailed, "JobSetFailed", "").Obj()
	withSSHD := func(w *diagnosetest.PodW) *diagnosetest.PodW {
		w.Spec.Containers[0].Command = []string{"/usr/sbin/sshd", "-De"}
		w.Spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(2222)}}}
		return w
	}
	noSSHD := withSSHD(worker("0")).Terminated("StartError", 128)
	noSSHD.Status.ContainerStatuses[0].State.Terminated.Message = `exec: "/usr/sbin/sshd": stat /usr/sbin/sshd: no such file or directory`
	cases := map[string]struct {
		in        Input
		wantPhase api.Phase
		want      string
		contains  []string
	}{
		"the Launcher's ssh is refused": {
			in: Input{TrainJob: failed, JobSet: jobset(2), Launcher: pods(launcher().Terminated("Error", 1)), WorkerImage: image,
				LauncherLog: "ssh: connect to host hello-node-0-1.hello port 2222: Connection refused"},
			wantPhase: api.PhaseFailed, want: ReasonSSHConnectionRefused,
			contains: []string{"Check that the Worker image " + image + " starts sshd on port 2222"},
		},
		"the Launcher's ssh is refused, image unknown": {
			in: Input{TrainJob: failed, JobSet: jobset(2), Launcher: pods(launcher().Terminated("Error", 1)),
				LauncherLog: "ssh: connect to host hello-node-0-1.hello port 2222: Connection refused"},
			wantPhase: api.PhaseFailed, want: ReasonSSHConnectionRefused,
			contains: []string{"Check that the Worker image starts sshd on port 2222"},
		},
		"the Worker cannot start sshd": {
			in:        Input{TrainJob: failed, JobSet: jobset(2), Workers: pods(noSSHD), WorkerImage: image},
			wantPhase: api.PhaseFailed, want: ReasonSSHConnectionRefused,
			contains: []string{"Worker 0 (pod hello-node-0-0) could not start /usr/sbin/sshd", "image " + image + " lacks it", "no such file or directory", "--launcher-image"},
		},
		"the Worker's pod is gone, its Event says sshd is missing": {
			in: Input{TrainJob: failed, JobSet: jobset(2), WorkerImage: image, Events: []corev1.Event{{
				InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "hello-node-0-0-x7k2p"}, Type: corev1.EventTypeWarning, Reason: "Failed",
				Message: `Error: failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: exec: "/usr/sbin/sshd": stat /usr/sbin/sshd: no such file or directory: unknown`,
			}}},
			wantPhase: api.PhaseFailed, want: ReasonSSHConnectionRefused,
			contains: []string{"Worker 0 (pod hello-node-0-0-x7k2p) could not start /usr/sbin/sshd", "image " + image + " lacks it"},
		},
		"sshd does not answer the readiness probe": {
			in: Input{TrainJob: job(2).Obj(), JobSet: jobset(2), Workers: pods(withSSHD(worker("0")).Running(false), withSSHD(worker("1")).Running(true)),
				WorkerImage: image, Now: t0.Add(30 * time.Second)},
			wantPhase: api.PhaseStarting, want: ReasonSSHConnectionRefused,
			contains: []string{"Worker 0 (pod hello-node-0-0) runs but nothing answers SSH on port 2222", "image " + image},
		},
		"a Worker that just started is only not Ready yet": {
			in: Input{TrainJob: job(2).Obj(), JobSet: jobset(2), Workers: pods(withSSHD(worker("0")).Running(false), withSSHD(worker("1")).Running(true)),
				WorkerImage: image, Now: t0.Add(5 * time.Second)},
			wantPhase: api.PhaseStarting, want: ReasonWorkersNotReady,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if tc.in.Now.IsZero() {
				tc.in.Now = t0
			}
			got := diagnoseBoth(t, tc.in)
			if got.Phase != tc.wantPhase || got.Reason != tc.want {
				t.Fatalf("%s/%s (%s), want %s/%s", got.Phase, got.Reason, got.Message, tc.wantPhase, tc.want)
			}
			for _, c := range tc.contains {
				if !strings.Contains(got.Message+" "+got.NextStep, c) {
					t.Errorf("message %q / next step %q lack %q", got.Message, got.NextStep, c)
				}
			}
		})
	}
}

// The Launcher logs of real failures (testdata/launcher-logs: captured on
// the local cluster for OpenMPI 4, upstream message texts for MPICH/Hydra,
// PyTorch and NCCL) give the right reason, the rank and Worker, and ranked
// next steps.
func TestLauncherLogVectors(t *testing.T) {
	b, err := os.ReadFile("testdata/launcher-logs.json")
	if err != nil {
		t.Fatal(err)
	}
	var vectors map[string]struct {
		Workers, Slots int32
		Reason         string
		Contains       []string
		// Absent are secrets the log holds that no text may repeat.
		Absent    []string
		FirstStep string `json:"first_step"`
		Steps     int
	}
	if err := json.Unmarshal(b, &vectors); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("testdata/launcher-logs/*.log")
	if len(files) != len(vectors) {
		t.Errorf("%d logs, %d vectors: every log needs its expectation", len(files), len(vectors))
	}
	for name, v := range vectors {
		t.Run(name, func(t *testing.T) {
			log, err := os.ReadFile(filepath.Join("testdata/launcher-logs", name))
			if err != nil {
				t.Fatal(err)
			}
			tj := job(v.Workers).Cond(trainer.TrainJobFailed, "JobSetFailed", "").Obj()
			tj.Spec.Trainer.NumProcPerNode = ptr.To(v.Slots)
			got := diagnoseBoth(t, Input{TrainJob: tj, JobSet: jobset(v.Workers), Launcher: pods(launcher().Terminated("Error", 1)), LauncherLog: string(log), Now: t0})
			if got.Phase != api.PhaseFailed || got.Reason != v.Reason {
				t.Fatalf("%s/%s: %s; want Failed/%s", got.Phase, got.Reason, got.Message, v.Reason)
			}
			for _, c := range v.Contains {
				if !strings.Contains(got.Message, c) {
					t.Errorf("message %q lacks %q", got.Message, c)
				}
			}
			all, _ := json.Marshal(got)
			for _, secret := range v.Absent {
				if strings.Contains(string(all), secret) {
					t.Errorf("the status repeats the secret %q: %s", secret, all)
				}
			}
			if v.Steps == 1 && got.NextStep != "" && len(got.NextSteps) == 0 {
				// One step: NextStep alone.
			} else if len(got.NextSteps) != v.Steps || got.NextStep != got.NextSteps[0] {
				t.Errorf("next steps %q (first %q), want %d ranked steps with the first as NextStep", got.NextSteps, got.NextStep, v.Steps)
			}
			if v.FirstStep != "" {
				if diff := cmp.Diff(v.FirstStep, got.NextStep); diff != "" {
					t.Errorf("first next step (-want,+got):\n%s", diff)
				}
			}
		})
	}
}

// Kueue suspends every job it manages until it admits it: that is Queued,
// never Suspended; only a job suspended after it ran is Suspended.
func TestKueueSuspensionIsQueued(t *testing.T) {
	queued := job(2).Suspend().Obj()
	queued.Labels = map[string]string{queue.NameLabel: "default"}
	got := diagnoseBoth(t, Input{TrainJob: queued, Now: t0})
	if got.Phase != api.PhaseQueued || got.Reason != ReasonQueued || !strings.Contains(got.Message, "queue default") {
		t.Errorf("a new job Kueue holds: %s/%s %q, want Queued naming the queue", got.Phase, got.Reason, got.Message)
	}
	got = diagnoseBoth(t, Input{TrainJob: queued, Now: t0, Previous: &api.Status{Phase: api.PhaseRunning}})
	if got.Phase != api.PhaseSuspended {
		t.Errorf("a job suspended after it ran: %s, want Suspended", got.Phase)
	}
	got = diagnoseBoth(t, Input{TrainJob: job(2).Suspend().Obj(), Now: t0})
	if got.Phase != api.PhaseSuspended {
		t.Errorf("a job without a queue, suspended: %s, want Suspended", got.Phase)
	}
}

// Waiting reasons follow the scheduler; a job that can never start says so.
func TestSchedulerTruthAndCannotStart(t *testing.T) {
	sched := func(msg string) *diagnosetest.PodW {
		w := worker("1")
		w.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: msg}}
		return w
	}
	placed := worker("0").Running(true)
	cases := map[string]struct {
		in        Input
		reason    string
		contains  []string
		lacks     string
		nextSteps int
	}{
		"an untolerated taint: the scheduler's words, not free capacity": {
			in: Input{TrainJob: job(3).Obj(), JobSet: jobset(3), Nodes: gpuNodes("8"),
				Workers: pods(placed, sched("0/18 nodes are available: 16 node(s) had untolerated taint(s), 2 Insufficient nvidia.com/gpu.").GPUs("1"),
					func() *diagnosetest.PodW {
						w := sched("0/18 nodes are available: 16 node(s) had untolerated taint(s), 2 Insufficient nvidia.com/gpu.").GPUs("1")
						w.Name, w.Labels[completionIndexLabel] = "hello-node-0-2", "2"
						return w
					}())},
			reason: ReasonUnschedulable, contains: []string{"16 node(s) had untolerated taint(s)"}, lacks: "free nvidia.com/gpu",
		},
		"no node has the GPUs, others excluded by selector: the count holds and the scheduler is quoted": {
			in: Input{TrainJob: job(2).Obj(), JobSet: jobset(2), Nodes: gpuNodes("8", "8"),
				Workers: pods(sched("0/18 nodes are available: 16 Insufficient nvidia.com/gpu, 2 node(s) didn't match Pod's node affinity/selector.").GPUs("9"),
					func() *diagnosetest.PodW {
						w := sched("0/18 nodes are available: 16 Insufficient nvidia.com/gpu, 2 node(s) didn't match Pod's node affinity/selector.").GPUs("9")
						w.Name, w.Labels[completionIndexLabel] = "hello-node-0-0", "0"
						return w
					}())},
			reason: ReasonUnschedulable, contains: []string{"only 0 nodes have 9 free nvidia.com/gpu", "(scheduler: 0/18 nodes are available"},
		},
		"more Workers than nodes under one-Worker-per-node": {
			in: Input{TrainJob: job(4).Obj(), JobSet: jobset(4),
				Workers: pods(placed, sched("0/18 nodes are available: 2 node(s) didn't match pod anti-affinity rules, 16 node(s) had untolerated taint(s).")), Now: t0},
			reason: ReasonCannotStart, contains: []string{"The job can never start: it asks for 4 Workers", "only 2 nodes can take one"}, nextSteps: 3,
		},
		"anti-affinity and capacity: waiting, not never": {
			in: Input{TrainJob: job(4).Obj(), JobSet: jobset(4),
				Workers: pods(placed, sched("0/18 nodes are available: 2 node(s) didn't match pod anti-affinity rules, 16 Insufficient cpu."))},
			reason: ReasonUnschedulable,
		},
		"a resource the ClusterQueue has no quota for": {
			in: Input{TrainJob: job(1).Suspend().Obj(), Queue: &Queue{Name: "team-a/default",
				Message: "couldn't assign flavors to pod set node: resource example.com/fpga unavailable in ClusterQueue"}},
			reason: ReasonCannotStart, contains: []string{"queue team-a/default has no quota for example.com/fpga"}, nextSteps: 3,
		},
		"more than the ClusterQueue could ever admit": {
			in: Input{TrainJob: job(3).Suspend().Obj(), Queue: &Queue{Name: "team-a/default",
				Message: "couldn't assign flavors to pod set node: insufficient quota for nvidia.com/gpu in flavor gpu, previously considered podsets requests (0) + current podset request (24) > maximum capacity (16)"}},
			reason: ReasonCannotStart, contains: []string{"asks for 24 nvidia.com/gpu, more than queue team-a/default could ever admit (at most 16 nvidia.com/gpu in flavor gpu, borrowing"}, nextSteps: 2,
		},
		"more than the ClusterQueue could ever admit, two resources (Kueue v0.19's words)": {
			in:     Input{TrainJob: job(2).Suspend().Obj(), Queue: &Queue{Name: "team-a/default", Message: "couldn't assign flavors to pod set node: insufficient quota for cpu in flavor default-flavor, previously considered podsets requests (0) + current podset request (200m) > maximum capacity (0), insufficient quota for memory in flavor default-flavor, previously considered podsets requests (0) + current podset request (256Mi) > maximum capacity (0)"}},
			reason: ReasonCannotStart, contains: []string{"it asks for 200m cpu and 256Mi memory, more than queue team-a/default could ever admit (at most 0 cpu in flavor default-flavor and 0 memory in flavor default-flavor, borrowing included)"}, nextSteps: 2,
		},
		"over the unused quota only: waiting": {
			in: Input{TrainJob: job(3).Suspend().Obj(), Queue: &Queue{Name: "team-a/default",
				Message: "couldn't assign flavors to pod set node: insufficient unused quota for nvidia.com/gpu in flavor gpu, 8 more needed"}},
			reason: ReasonQueued,
		},
		"a queue that does not exist": {
			in: Input{TrainJob: func() *trainer.TrainJob {
				tj := job(2).Suspend().Obj()
				tj.Labels = map[string]string{queue.NameLabel: "nope"}
				return tj
			}(), Queue: &Queue{Name: "team-a/nope", Message: "LocalQueue nope doesn't exist"}},
			reason: ReasonCannotStart, contains: []string{"its LocalQueue nope does not exist"}, nextSteps: 2,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if tc.in.Now.IsZero() {
				tc.in.Now = t0
			}
			got := diagnoseBoth(t, tc.in)
			if got.Reason != tc.reason {
				t.Fatalf("reason %s (%s), want %s", got.Reason, got.Message, tc.reason)
			}
			for _, c := range tc.contains {
				if !strings.Contains(got.Message, c) {
					t.Errorf("message %q lacks %q", got.Message, c)
				}
			}
			if tc.lacks != "" && strings.Contains(got.Message, tc.lacks) {
				t.Errorf("message %q contradicts the scheduler (%q)", got.Message, tc.lacks)
			}
			if len(got.NextSteps) != tc.nextSteps {
				t.Errorf("next steps %q, want %d", got.NextSteps, tc.nextSteps)
			}
		})
	}
}

// Pods that admission refuses can never run: said at once, with the
// policy's own words, never "waiting to be scheduled".
func TestPodsRefused(t *testing.T) {
	failedCreate := func(job, msg string) corev1.Event {
		return corev1.Event{Reason: "FailedCreate", Type: corev1.EventTypeWarning, ObjectMeta: metav1.ObjectMeta{Namespace: "team-a"},
			InvolvedObject: corev1.ObjectReference{Kind: "Job", Name: job}, Message: msg}
	}
	cases := map[string]struct {
		events []corev1.Event
		want   api.Status
		next   []string
	}{
		// Captured on the local cluster: a hostPath volume in runtimePatches,
		// namespace team-a enforcing restricted.
		"Pod Security refuses the Workers": {
			events: []corev1.Event{failedCreate("hello-node-0", `Error creating: pods "hello-node-0-0-gg9fs" is forbidden: violates PodSecurity "restricted:latest": restricted volume types (volume "host" uses restricted volume type "hostPath")`)},
			want: api.Status{Phase: api.PhasePending, Reason: ReasonPodsRefused,
				Message: `The job can never start: namespace team-a's Pod Security level "restricted" refuses the Workers' pods: restricted volume types (volume "host" uses restricted volume type "hostPath").`},
			next: []string{
				`Remove from the job what Pod Security level "restricted" forbids (restricted volume types (volume "host" uses restricted volume type "hostPath")): it comes from the job's runtimePatches or its runtime's pod template; then resubmit.`,
				"Delete this job: a queue keeps its quota while it waits.",
				"Or ask an administrator for a namespace whose Pod Security level allows it."},
		},
		"Pod Security refuses the Launcher": {
			events: []corev1.Event{failedCreate("hello-launcher-0", `Error creating: pods "hello-launcher-0-0-x" is forbidden: violates PodSecurity "baseline:latest": privileged (container "node" must not set securityContext.privileged=true)`)},
			want: api.Status{Phase: api.PhasePending, Reason: ReasonPodsRefused,
				Message: `The job can never start: namespace team-a's Pod Security level "baseline" refuses the Launcher's pod: privileged (container "node" must not set securityContext.privileged=true).`},
			next: []string{
				`Remove from the job what Pod Security level "baseline" forbids (privileged (container "node" must not set securityContext.privileged=true)): it comes from the job's runtimePatches or its runtime's pod template; then resubmit.`,
				"Delete this job: a queue keeps its quota while it waits.",
				"Or ask an administrator for a namespace whose Pod Security level allows it."},
		},
		"a policy webhook refuses the Workers": {
			events: []corev1.Event{failedCreate("hello-node-0", `Error creating: admission webhook "validation.gatekeeper.sh" denied the request: [allowed-repos] container <node> has an invalid image repo <evil.io/x>`)},
			want: api.Status{Phase: api.PhasePending, Reason: ReasonPodsRefused,
				Message: `The job can never start: admission webhook validation.gatekeeper.sh refuses the Workers' pods: [allowed-repos] container <node> has an invalid image repo <evil.io/x>.`},
			next: []string{"Change the job as the webhook says, then resubmit.", "Delete this job: a queue keeps its quota while it waits.",
				"Or ask an administrator about the policy behind webhook validation.gatekeeper.sh."},
		},
		"a quota refusal is not a policy refusal": {
			events: []corev1.Event{failedCreate("hello-node-0", `Error creating: pods "hello-node-0-0-x" is forbidden: exceeded quota: team-a, requested: cpu=2, used: cpu=7, limited: cpu=8`)},
			want: api.Status{Phase: api.PhasePending, Reason: ReasonQuotaExceeded,
				Message: "Pods cannot be created: ResourceQuota team-a is used up (requested cpu=2, in use cpu=7, limit cpu=8)."},
			next: []string{"Wait for other jobs in the namespace to finish, delete some, or ask an administrator for a larger quota."},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tj := job(2).Obj()
			tj.Namespace = "team-a"
			got := diagnoseBoth(t, Input{TrainJob: tj, JobSet: jobset(2), Events: tc.events, Now: t0})
			tc.want.Launcher, tc.want.WorkersTotal, tc.want.SlotsPerWorker, tc.want.ObservedGeneration = api.LauncherNotCreated, 2, 2, 1
			tc.want.NextStep = tc.next[0]
			if len(tc.next) > 1 {
				tc.want.NextSteps = tc.next
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(api.Status{}, "LastTransitionTime", "Steps")); diff != "" { // Steps: their texts are NextSteps (checkSteps)
				t.Errorf("Diagnose (-want,+got):\n%s", diff)
			}
		})
	}
}

// A Worker that stops while the Launcher runs (a drain, a delete) is named
// at once, and stays the reason when mpirun then fails.
func TestWorkerLostWhileTheLauncherRuns(t *testing.T) {
	running := launcher().Running(true)
	evictedPod := worker("1").Running(true).Deleting()
	evictedPod.Spec.NodeName = "mpijob-node-2"
	evictedPod.Status.Phase = corev1.PodSucceeded
	evictedPod.Status.Conditions = append(evictedPod.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "EvictionByEvictionAPI"})
	killing := corev1.Event{Reason: "Killing", InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "hello-node-0-1-x7bg2"}, Source: corev1.EventSource{Host: "mpijob-node-2"}}
	steps := []string{
		"Resubmit the job (`kubectl mpijob clone hello hello-2`); delete this one, its Launcher and other Workers hold their resources until mpirun gives up.",
		"Ask an administrator to drain nodes only when no MPI job runs there, or to protect running Workers with a PodDisruptionBudget."}
	cases := map[string]struct {
		in      Input
		phase   api.Phase
		reason  string
		message string
	}{
		"evicted through the API, pod still terminating": {
			in:    Input{TrainJob: job(2).Obj(), JobSet: jobset(2), Launcher: pods(running), Workers: pods(worker("0").Running(true), evictedPod)},
			phase: api.PhaseRunning, reason: ReasonWorkerEvicted,
			message: "Worker 1 (pod hello-node-0-1 on node mpijob-node-2) was evicted through the API (a node drain) while the Launcher ran: MPI cannot go on without it, and its Job does not replace a Worker that stopped cleanly.",
		},
		"the Launcher gone in the same moment (JobSet ending the job)": {
			in:    Input{TrainJob: job(2).Obj(), JobSet: jobset(2), Launcher: pods(launcher().Running(true).Deleting()), Workers: pods(worker("0").Running(true)), Events: []corev1.Event{killing}},
			phase: api.PhaseRunning, reason: ReasonWorkerEvicted,
			message: "Worker 1 (pod hello-node-0-1-x7bg2 on node mpijob-node-2) was deleted or evicted through the API (a node drain) while the Launcher ran: MPI cannot go on without it, and its Job does not replace a Worker that stopped cleanly.",
		},
		"gone: named from the kubelet's Killing Event": {
			in:    Input{TrainJob: job(2).Obj(), JobSet: jobset(2), Launcher: pods(running), Workers: pods(worker("0").Running(true)), Events: []corev1.Event{killing}},
			phase: api.PhaseRunning, reason: ReasonWorkerEvicted,
			message: "Worker 1 (pod hello-node-0-1-x7bg2 on node mpijob-node-2) was deleted or evicted through the API (a node drain) while the Launcher ran: MPI cannot go on without it, and its Job does not replace a Worker that stopped cleanly.",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.in.Now = t0
			got := diagnoseBoth(t, tc.in)
			if got.Phase != tc.phase || got.Reason != tc.reason || (tc.message != "" && got.Message != tc.message) {
				t.Fatalf("got %s/%s %q\nwant %s/%s %q", got.Phase, got.Reason, got.Message, tc.phase, tc.reason, tc.message)
			}
			if tc.reason != "" {
				if diff := cmp.Diff(steps, got.NextSteps); diff != "" {
					t.Errorf("next steps (-want,+got):\n%s", diff)
				}
			}
		})
	}
	if got := diagnoseBoth(t, Input{TrainJob: job(2).Obj(), JobSet: jobset(2), Launcher: pods(running), Now: t0,
		Workers: pods(worker("0").Running(true), worker("1").Terminated("Error", 1))}); got.Reason == ReasonWorkerEvicted {
		t.Errorf("a Worker whose program failed is called lost: %q", got.Message)
	}
	// mpirun then fails (it cannot reach the Worker): the lost Worker stays
	// the reason.
	prev := diagnoseBoth(t, Input{TrainJob: job(2).Obj(), JobSet: jobset(2), Launcher: pods(running), Workers: pods(worker("0").Running(true)), Events: []corev1.Event{killing}, Now: t0})
	// Trainer may stop the other Workers before the Launcher's pod shows
	// it failed (the integration test saw this): the first Worker lost
	// stays the one named.
	worker0Stopping := worker("0").Running(true).Deleting()
	again := diagnoseBoth(t, Input{TrainJob: job(2).Obj(), JobSet: jobset(2), Previous: &prev, Launcher: pods(running), Workers: pods(worker0Stopping), Events: []corev1.Event{killing}, Now: t0})
	if again.Reason != ReasonWorkerEvicted || again.Message != prev.Message || len(again.NextSteps) != 2 {
		t.Errorf("when Worker 0 stops after Worker 1: %s %q %q, want Worker 1 still named with its 2 steps", again.Reason, again.Message, again.NextSteps)
	}
	// First the Launcher fails while Trainer finishes the job.
	finishing := diagnoseBoth(t, Input{TrainJob: job(2).Obj(), JobSet: jobset(2), Previous: &prev, Launcher: pods(launcher().Terminated("Error", 1)), Workers: pods(worker("0").Running(true)), Now: t0})
	if finishing.Reason != ReasonWorkerEvicted || finishing.Message != prev.Message || len(finishing.NextSteps) != 2 {
		t.Errorf("while Trainer finishes the job: %s %q %q, want the lost Worker with its 2 steps", finishing.Reason, finishing.Message, finishing.NextSteps)
	}
	prev = finishing
	failed := diagnoseBoth(t, Input{TrainJob: job(2).Cond(trainer.TrainJobFailed, "JobSetFailed", "").Obj(), JobSet: jobset(2), Previous: &prev,
		Launcher: pods(launcher().Terminated("Error", 1)), LauncherLog: "ssh: Could not resolve hostname hello-node-0-1.hello: Name or service not known", Now: t0})
	if failed.Phase != api.PhaseFailed || failed.Reason != ReasonWorkerEvicted || failed.Message != prev.Message {
		t.Errorf("after mpirun failed: %s/%s %q, want Failed/%s %q", failed.Phase, failed.Reason, failed.Message, ReasonWorkerEvicted, prev.Message)
	}
}

// A job no node could ever take, even with the cluster empty, is
// CannotStart with the reason; a job that only waits for capacity is not.
func TestNeverFits(t *testing.T) {
	node := func(name string, alloc corev1.ResourceList, labels map[string]string, taints ...corev1.Taint) corev1.Node {
		return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{Taints: taints}, Status: corev1.NodeStatus{Allocatable: alloc}}
	}
	cpu := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi")}
	gpu := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse("256Gi"), "nvidia.com/gpu": resource.MustParse("8")}
	fake := corev1.Taint{Key: "kwok.x-k8s.io/node", Value: "fake", Effect: corev1.TaintEffectNoSchedule}
	cluster := []corev1.Node{
		node("mpijob-node-1", cpu, map[string]string{"type": "real"}), node("mpijob-node-2", cpu, map[string]string{"type": "real"}),
		node("kwok-gpu-01", gpu, map[string]string{"type": "kwok"}, fake), node("kwok-gpu-02", gpu, map[string]string{"type": "kwok"}, fake),
	}
	waitingWorker := func(mut func(*corev1.Pod)) *diagnosetest.PodW {
		w := worker("1")
		w.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
		mut(&w.Pod)
		return w
	}
	tolerate := func(p *corev1.Pod) {
		p.Spec.Tolerations = []corev1.Toleration{{Key: "kwok.x-k8s.io/node", Operator: corev1.TolerationOpEqual, Value: "fake", Effect: corev1.TaintEffectNoSchedule}}
	}
	cases := map[string]struct {
		worker  *diagnosetest.PodW
		nodes   []corev1.Node // the cluster above when nil
		reason  string
		message string
		first   string
	}{
		"GPUs only on tainted nodes the Workers do not tolerate": {
			worker: waitingWorker(func(p *corev1.Pod) {
				p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = resource.MustParse("1")
			}),
			reason:  ReasonCannotStart,
			message: "The job can never start: no node could take a Worker even if the cluster were empty: 2 nodes carry taint kwok.x-k8s.io/node=fake:NoSchedule, which the Workers do not tolerate; 2 nodes have no nvidia.com/gpu.",
			first:   "If the Workers belong on the nodes with taint kwok.x-k8s.io/node=fake:NoSchedule, use a runtime that tolerates it (`kubectl mpijob runtimes list`) or add the toleration in the job's runtimePatches.",
		},
		"CPU Workers sent to GPU nodes tainted as real GPU clusters do": {
			worker: waitingWorker(func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"type": "gpu"} }),
			nodes: []corev1.Node{
				node("mpijob-node-1", cpu, map[string]string{"type": "real"}),
				node("gpu-1", gpu, map[string]string{"type": "gpu"}, corev1.Taint{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}),
			},
			reason:  ReasonCannotStart,
			message: "The job can never start: no node could take a Worker even if the cluster were empty: 1 node carries taint nvidia.com/gpu:NoSchedule, which the Workers do not tolerate; 1 node does not match the Workers' node selector type=gpu.",
			first:   "The nodes with taint nvidia.com/gpu:NoSchedule are kept for pods that ask for nvidia.com/gpu (those are given the toleration): if the Workers need it, ask for it (--gpus N, or resources per Worker); otherwise they run elsewhere.",
		},
		"a node selector no node has": {
			worker:  waitingWorker(func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"disktype": "ssd"} }),
			reason:  ReasonCannotStart,
			message: "The job can never start: no node could take a Worker even if the cluster were empty: 2 nodes carry taint kwok.x-k8s.io/node=fake:NoSchedule, which the Workers do not tolerate; 2 nodes do not match the Workers' node selector disktype=ssd.",
			first:   "If the Workers belong on the nodes with taint kwok.x-k8s.io/node=fake:NoSchedule, use a runtime that tolerates it (`kubectl mpijob runtimes list`) or add the toleration in the job's runtimePatches.",
		},
		"a resource no node offers": {
			worker: waitingWorker(func(p *corev1.Pod) {
				p.Spec.Containers[0].Resources.Requests["example.com/fpga"] = resource.MustParse("1")
			}),
			reason:  ReasonCannotStart,
			message: "The job can never start: no node could take a Worker even if the cluster were empty: 2 nodes carry taint kwok.x-k8s.io/node=fake:NoSchedule, which the Workers do not tolerate; no node offers example.com/fpga at all, and one Worker asks for 1.",
			first:   "Check the resource name example.com/fpga (GPUs are nvidia.com/gpu or amd.com/gpu), or remove it from the job.",
		},
		"more GPUs than the largest node": {
			worker: waitingWorker(func(p *corev1.Pod) {
				tolerate(p)
				p.Spec.NodeSelector = map[string]string{"type": "kwok"}
				p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = resource.MustParse("9")
			}),
			reason:  ReasonCannotStart,
			message: "The job can never start: no node could take a Worker even if the cluster were empty: 2 nodes do not match the Workers' node selector type=kwok; 2 nodes have less than the 9 nvidia.com/gpu one Worker asks for (the largest has 8).",
			first:   "Fix the Workers' node selector type=kwok: no node that could take them has it (ask an administrator which node labels exist).",
		},
		"fits a node once others finish: waiting, not never": {
			worker: waitingWorker(func(p *corev1.Pod) {
				tolerate(p)
				p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = resource.MustParse("8")
			}),
			reason: ReasonUnschedulable,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			nodes := cluster
			if tc.nodes != nil {
				nodes = tc.nodes
			}
			got := diagnoseBoth(t, Input{TrainJob: job(2).Obj(), JobSet: jobset(2), Workers: pods(worker("0").Running(true), tc.worker), AllNodes: nodes, Now: t0})
			if got.Reason != tc.reason {
				t.Fatalf("reason %s (%q), want %s", got.Reason, got.Message, tc.reason)
			}
			if tc.message != "" && got.Message != tc.message {
				t.Errorf("message\n got %q\nwant %q", got.Message, tc.message)
			}
			if tc.first != "" && got.NextStep != tc.first {
				t.Errorf("first next step\n got %q\nwant %q", got.NextStep, tc.first)
			}
			if tc.reason == ReasonCannotStart && !strings.HasPrefix(got.NextSteps[len(got.NextSteps)-1], "Delete this job") {
				t.Errorf("last next step %q, want the way to release what the job holds", got.NextSteps[len(got.NextSteps)-1])
			}
		})
	}
}

// Kueue's waitForPodsReady eviction is said in the Queued message.
func TestQueuedAfterPodsReadyTimeout(t *testing.T) {
	tj := job(2).Suspend().Obj()
	tj.Labels = map[string]string{queue.NameLabel: "default"}
	got := diagnoseBoth(t, Input{TrainJob: tj, Queue: &Queue{Name: "team-a/default", EvictedPodsReadyTimeout: true}, Now: t0})
	if got.Phase != api.PhaseQueued || got.Reason != ReasonQueued || !strings.Contains(got.Message, "not all Ready within its waitForPodsReady timeout") {
		t.Errorf("got %s/%s %q, want Queued saying Kueue's timeout stopped its pods", got.Phase, got.Reason, got.Message)
	}
}

// A running job whose Launcher is silent for longer than its progress
// timeout gets NoProgress with the evidence, and keeps running.
func TestNoProgress(t *testing.T) {
	running := func() Input {
		return Input{TrainJob: job(2).Obj(), JobSet: jobset(2), Launcher: pods(launcher().Running(true)),
			Workers: pods(worker("0").Running(true), worker("1").Running(true))}
	}
	last := t0.Add(2 * time.Minute)
	cases := map[string]struct {
		timeout time.Duration
		now     time.Time
		last    *time.Time
		line    string
		reason  string
		message string
	}{
		"no timeout set: never":           {now: t0.Add(time.Hour), last: &last},
		"quiet for less than the timeout": {timeout: 10 * time.Minute, now: last.Add(9 * time.Minute), last: &last},
		"quiet for longer, with the last line": {
			timeout: 10 * time.Minute, now: last.Add(12 * time.Minute), last: &last, reason: ReasonNoProgress,
			message: `The Launcher has printed nothing since 2026-11-22T04:02:00Z, longer than the job's progress timeout of 10m0s; its last line: "step 1200 loss 0.31". The job keeps running.`,
		},
		"a bare hex token in the last line is not copied into the status": {
			timeout: 10 * time.Minute, now: last.Add(12 * time.Minute), last: &last, reason: ReasonNoProgress,
			line:    "wandb: logging in with 3f9c1a7e5b2d4c6e8a0b1d3f5e7a9c2b4d6f8e0a",
			message: `The Launcher has printed nothing since 2026-11-22T04:02:00Z, longer than the job's progress timeout of 10m0s; its last line: "wandb: logging in with [REDACTED]". The job keeps running.`,
		},
		"nothing printed since the Launcher started": {
			timeout: time.Minute, now: t0.Add(2 * time.Minute), reason: ReasonNoProgress,
			message: "The Launcher has printed nothing since it started, at 2026-11-22T04:00:00Z, longer than the job's progress timeout of 1m0s; the job keeps running.",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := running()
			in.ProgressTimeout, in.Now, in.LastOutput, in.LastLine = tc.timeout, tc.now, tc.last, "step 1200 loss 0.31"
			if tc.line != "" {
				in.LastLine = tc.line
			}
			got := diagnoseBoth(t, in)
			if got.Phase != api.PhaseRunning || got.Reason != tc.reason {
				t.Fatalf("%s/%s %q, want Running/%q", got.Phase, got.Reason, got.Message, tc.reason)
			}
			if tc.message != "" && got.Message != tc.message {
				t.Errorf("message\n got %q\nwant %q", got.Message, tc.message)
			}
			if tc.reason != "" && len(got.NextSteps) != 3 {
				t.Errorf("next steps %q, want 3 ranked", got.NextSteps)
			}
		})
	}
}

// Workers waiting for a volume say which claim and what to check.
func TestWaitingForAVolume(t *testing.T) {
	waiting := func(msg string) *diagnosetest.PodW {
		w := worker("1")
		w.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "train-data"}}}}
		w.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: msg}}
		return w
	}
	cases := map[string]struct {
		sched, message, first string
	}{
		"not bound yet": {
			sched:   "0/18 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/18 nodes are available: 18 Preemption is not helpful for scheduling.",
			message: "Waiting for 1 Worker to be scheduled: their PersistentVolumeClaim train-data is not bound to a volume yet (scheduler: 0/18 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/18 nodes are available: 18 Preemption is not helpful for scheduling).",
			first:   "Check the claim (`kubectl get pvc train-data -n team-a`): it needs a StorageClass that provisions volumes or a PersistentVolume that matches it; the job starts once it is Bound.",
		},
		"does not exist": {
			sched:   `persistentvolumeclaim "train-data" not found`,
			message: `Waiting for 1 Worker to be scheduled: their PersistentVolumeClaim train-data does not exist in namespace team-a (scheduler: persistentvolumeclaim "train-data" not found).`,
			first:   "Create PersistentVolumeClaim train-data in namespace team-a: the job starts once it is bound.",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tj := job(2).Obj()
			tj.Namespace = "team-a"
			got := diagnoseBoth(t, Input{TrainJob: tj, JobSet: jobset(2), Workers: pods(worker("0").Running(true), waiting(tc.sched)), Now: t0})
			if got.Reason != ReasonUnschedulable || got.Message != tc.message || got.NextStep != tc.first || len(got.NextSteps) != 2 {
				t.Errorf("got %s %q %q\nwant %s %q %q", got.Reason, got.Message, got.NextSteps, ReasonUnschedulable, tc.message, tc.first)
			}
		})
	}
}

// The status says the slots and GPUs the Worker pods really get: from the
// job's runtime when the job does not set them.
func TestSlotsAndGPUsFromTheRuntime(t *testing.T) {
	tj := job(2).Obj()
	tj.Spec.Trainer.NumProcPerNode = nil
	got := diagnoseBoth(t, Input{TrainJob: tj, SlotsPerWorker: 4, GPUsPerWorker: "4", Now: t0})
	if got.SlotsPerWorker != 4 || got.GPUsPerWorker != "4" {
		t.Errorf("slots %d, GPUs %q; want the runtime's 4 and 4", got.SlotsPerWorker, got.GPUsPerWorker)
	}
	if got := diagnoseBoth(t, Input{TrainJob: job(2).Obj(), SlotsPerWorker: 4, Now: t0}); got.SlotsPerWorker != 2 {
		t.Errorf("slots %d; the job's own numProcPerNode (2) wins", got.SlotsPerWorker)
	}
	spec := &corev1.PodSpec{Containers: []corev1.Container{{Name: "node", Resources: corev1.ResourceRequirements{
		Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2"), "amd.com/gpu": resource.MustParse("1"), corev1.ResourceCPU: resource.MustParse("4")}}}}}
	if got := runtimes.GPUsOf(spec); got != "2, 1 amd.com/gpu" {
		t.Errorf("GPUsOf = %q, want %q", got, "2, 1 amd.com/gpu")
	}
	if got := runtimes.GPUsOf(&corev1.PodSpec{Containers: []corev1.Container{{Name: "node"}}}); got != "" {
		t.Errorf("GPUsOf without GPUs = %q, want empty", got)
	}
}

// The capacity cache keeps of a pod what free capacity needs, and free
// capacity counted from the stripped pod is that of the whole pod.
func TestCapacityPodKeepsWhatFreeCapacityNeeds(t *testing.T) {
	full := worker("0").Running(true).Obj()
	full.Spec.NodeName = "mpijob-node-1"
	full.Spec.Containers[0].Resources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("4Gi"), "nvidia.com/gpu": resource.MustParse("1")},
	}
	full.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "BIG", Value: strings.Repeat("x", 4096)}}
	got, err := CapacityPod(full.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	p := got.(*corev1.Pod)
	want := &corev1.Pod{
		TypeMeta:   full.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: full.Name, Namespace: full.Namespace, UID: full.UID, ResourceVersion: full.ResourceVersion},
		Spec: corev1.PodSpec{NodeName: "mpijob-node-1", Containers: []corev1.Container{
			{Name: full.Spec.Containers[0].Name, Resources: full.Spec.Containers[0].Resources}}},
		Status: corev1.PodStatus{Phase: full.Status.Phase},
	}
	if diff := cmp.Diff(want, p); diff != "" {
		t.Errorf("stripped pod (-want,+got):\n%s", diff)
	}
	wr, wl := runtimes.PodDemand(&full.Spec)
	gr, gl := runtimes.PodDemand(&p.Spec)
	if diff := cmp.Diff([]corev1.ResourceList{wr, wl}, []corev1.ResourceList{gr, gl}); diff != "" {
		t.Errorf("demand of the stripped pod (-full,+stripped):\n%s", diff)
	}
	node := &corev1.Node{Status: corev1.NodeStatus{Images: []corev1.ContainerImage{{Names: []string{"a"}}}}}
	if n, _ := CapacityNode(node); len(n.(*corev1.Node).Status.Images) != 0 {
		t.Error("the node's image list was kept")
	}
}

func TestStepsNameTheJob(t *testing.T) {
	cases := map[string]struct {
		step api.Step
		want api.Step
	}{
		"clone gets the job and a new name": {
			step: stepf("Use fewer Workers: %s.", cli("clone", "--workers", "4")),
			want: api.Step{Text: "Use fewer Workers: kubectl mpijob clone pm-13485 pm-13485-2 --workers 4.",
				Command: &api.Command{Verb: "clone", Args: []string{"pm-13485", "pm-13485-2", "--workers", "4"}}},
		},
		"a clone of nothing else names the job and a new one": {
			step: stepf("Resubmit it (`%s`).", cli("clone")),
			want: api.Step{Text: "Resubmit it (`kubectl mpijob clone pm-13485 pm-13485-2`).",
				Command: &api.Command{Verb: "clone", Args: []string{"pm-13485", "pm-13485-2"}}},
		},
		"logs: a placeholder flag value stays": {
			step: stepf("Read it (`%s`).", cli("logs", "--worker", "N")),
			want: api.Step{Text: "Read it (`kubectl mpijob logs pm-13485 --worker N`).",
				Command: &api.Command{Verb: "logs", Args: []string{"pm-13485", "--worker", "N"}}},
		},
		"a command of no job": {
			step: stepf("List them: `%s`.", cli("runtimes list")),
			want: api.Step{Text: "List them: `kubectl mpijob runtimes list`.", Command: &api.Command{Verb: "runtimes list"}},
		},
		"words alone, NAME in them too, are left alone": {
			step: step("Check NAME in `kubectl get localqueues`."),
			want: api.Step{Text: "Check NAME in `kubectl get localqueues`."},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := namedSteps([]api.Step{tc.step}, "pm-13485")
			if diff := cmp.Diff([]api.Step{tc.want}, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// A job Kueue preempted is said to be preempted, from the eviction (its
// Workload still holding quota, its Launcher failing as its pods stop) to
// its admission again: not "Admitted ... starts now", not a failed job.
func TestPreemptedIsNamed(t *testing.T) {
	low := job(2).Suspend().Obj()
	low.Labels = map[string]string{queue.NameLabel: "default"}
	q := &Queue{Name: "team-a/default", Admitted: true, Preempted: true, PreemptedBy: "high", PreemptedWhy: "prioritization in the ClusterQueue", Preemptions: 1}
	got := diagnoseBoth(t, Input{TrainJob: low, Queue: q, Now: t0, Previous: &api.Status{Phase: api.PhaseRunning}})
	if got.Phase != api.PhaseQueued || got.Reason != ReasonPreempted {
		t.Fatalf("while evicted: %s/%s %q, want Queued/Preempted", got.Phase, got.Reason, got.Message)
	}
	for _, want := range []string{"make room for job high", "prioritization in the ClusterQueue", "queue team-a/default", "starts again by itself when it fits"} {
		if !strings.Contains(got.Message, want) {
			t.Errorf("message %q lacks %q", got.Message, want)
		}
	}
	// Back in the queue, at a position; another tenant's job is not named.
	q = &Queue{Name: "team-a/default", Preempted: true, PreemptedWhy: "reclamation within the cohort", Preemptions: 2, Position: 1, Pending: 3}
	got = diagnoseBoth(t, Input{TrainJob: low, Queue: q, Now: t0})
	if got.Reason != ReasonPreempted || got.QueuePosition == nil || *got.QueuePosition != 1 ||
		!strings.Contains(got.Message, "a job of another queue in its cohort") || !strings.Contains(got.Message, "the 2nd time") || !strings.Contains(got.Message, "position 1 of 3") {
		t.Errorf("queued again: %s %v %q", got.Reason, got.QueuePosition, got.Message)
	}
	// Still running when the eviction is seen (not yet suspended): preempted, not Running or Failed.
	running := job(2).Obj()
	running.Labels = map[string]string{queue.NameLabel: "default"}
	got = diagnoseBoth(t, Input{TrainJob: running, Queue: &Queue{Name: "team-a/default", Admitted: true, Preempted: true}, Now: t0})
	if got.Reason != ReasonPreempted {
		t.Errorf("evicted while running: %s/%s", got.Phase, got.Reason)
	}
	// Admitted again: no longer preempted.
	got = diagnoseBoth(t, Input{TrainJob: low, Queue: &Queue{Name: "team-a/default", Admitted: true, Preemptions: 1}, Now: t0})
	if got.Reason == ReasonPreempted {
		t.Errorf("admitted again: still %s", got.Reason)
	}
}

// A job Kueue admits again after a preemption (or a user resumes) runs a
// new attempt: the Launcher deleted, the Launcher that failed as its
// Workers stopped and the Workers still terminating are the earlier
// attempt's, and no Event names them again as news.
func TestReadmittedJobIsANewAttempt(t *testing.T) {
	resumed := t0.Add(10 * time.Minute)
	tj := job(2).Obj()
	tj.Labels = map[string]string{queue.NameLabel: "default"}
	tj.Status.Conditions = []metav1.Condition{{Type: trainer.TrainJobSuspended, Status: metav1.ConditionFalse, Reason: trainer.TrainJobResumedReason, LastTransitionTime: metav1.NewTime(resumed)}}
	at := func(w *diagnosetest.PodW, created time.Time) *diagnosetest.PodW {
		w.CreationTimestamp = metav1.NewTime(created)
		return w
	}
	oldLauncher := at(launcher().Terminated("Error", 1), t0)
	oldWorker := at(worker("1").Running(true).Deleting(), t0)
	admitted := &api.Status{Phase: api.PhaseQueued, Reason: ReasonAdmitted, Launcher: api.LauncherDeleted, WorkersTotal: 2}
	q := &Queue{Name: "team-a/default", Admitted: true, Preemptions: 1}
	cases := map[string]struct {
		in       Input
		launcher api.LauncherState
		phase    api.Phase
		reason   string
		ready    int32
	}{
		"no pods yet": {
			in:       Input{Previous: admitted},
			launcher: api.LauncherNotCreated, phase: api.PhasePending, reason: ReasonUnschedulable,
		},
		"the earlier Launcher failed, a Worker still terminating, the new Workers placed": {
			in:       Input{Previous: admitted, Launcher: pods(oldLauncher), Workers: pods(oldWorker, at(worker("0").Running(false), resumed.Add(time.Second)), at(worker("1").Running(false), resumed.Add(time.Second)))},
			launcher: api.LauncherNotCreated, phase: api.PhaseStarting, reason: ReasonWorkersNotReady,
		},
		"the new attempt runs; a pod made before Trainer wrote its condition is this attempt's": {
			in: Input{Previous: &api.Status{Phase: api.PhaseStarting, Reason: ReasonWorkersNotReady, Launcher: api.LauncherNotCreated, WorkersTotal: 2},
				Launcher: pods(oldLauncher, at(launcher().Running(true), resumed.Add(5*time.Second))),
				Workers:  pods(oldWorker, at(worker("0").Running(true), resumed.Add(-2*time.Second)), at(worker("1").Running(true), resumed.Add(time.Second)))},
			launcher: api.LauncherRunning, phase: api.PhaseRunning, reason: "", ready: 2,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.in.TrainJob, tc.in.JobSet, tc.in.Queue, tc.in.Now = tj, jobset(2), q, resumed.Add(10*time.Second)
			got := diagnoseBoth(t, tc.in)
			if got.Launcher != tc.launcher || got.Phase != tc.phase || got.Reason != tc.reason || got.WorkersReady != tc.ready {
				t.Errorf("got Launcher %s, %s/%s, %d Ready %q\nwant Launcher %s, %s/%s, %d Ready", got.Launcher, got.Phase, got.Reason, got.WorkersReady, got.Message, tc.launcher, tc.phase, tc.reason, tc.ready)
			}
		})
	}
	// Resumed a moment ago: no longer suspended, Trainer's condition not
	// yet written.
	resuming := job(2).Obj()
	resuming.Labels = tj.Labels
	resuming.Status.Conditions = []metav1.Condition{{Type: trainer.TrainJobSuspended, Status: metav1.ConditionTrue, Reason: "Suspended", LastTransitionTime: metav1.NewTime(t0)}}
	got := diagnoseBoth(t, Input{TrainJob: resuming, JobSet: jobset(2), Queue: q, Previous: admitted, Launcher: pods(oldLauncher), Workers: pods(oldWorker), Now: resumed})
	if got.Launcher != api.LauncherNotCreated || got.Reason == ReasonLauncherFailed || got.Reason == ReasonWorkerEvicted {
		t.Errorf("resumed, before Trainer's condition: Launcher %s, %s/%s %q", got.Launcher, got.Phase, got.Reason, got.Message)
	}
	// Without Trainer's Resumed condition, nothing is dropped: a Launcher
	// deleted while its Workers run is still named.
	plain := diagnoseBoth(t, Input{TrainJob: job(2).Obj(), JobSet: jobset(2), Previous: &api.Status{Phase: api.PhaseRunning, Launcher: api.LauncherRunning},
		Workers: pods(worker("0").Running(true), worker("1").Running(true)), Now: t0})
	if plain.Reason != ReasonLauncherDeleted {
		t.Errorf("a Launcher deleted while the Workers run: %s %q, want %s", plain.Reason, plain.Message, ReasonLauncherDeleted)
	}
}

// A job of one Worker is not told to reproduce its failure on one Worker:
// the same log on two Workers is.
func TestOneWorkerJobIsNotToldToUseOneWorker(t *testing.T) {
	log, err := os.ReadFile("testdata/launcher-logs/openmpi4-exit.log")
	if err != nil {
		t.Fatal(err)
	}
	for workers, want := range map[int32]bool{1: false, 2: true} {
		tj := job(workers).Cond(trainer.TrainJobFailed, "JobSetFailed", "").Obj()
		got := diagnoseBoth(t, Input{TrainJob: tj, JobSet: jobset(workers), Launcher: pods(launcher().Terminated("Error", 1)), LauncherLog: string(log), Now: t0})
		if got.Reason != ReasonRankFailed {
			t.Fatalf("%d Workers: %s %s", workers, got.Reason, got.Message)
		}
		told := false
		for _, s := range append([]string{got.NextStep}, got.NextSteps...) {
			told = told || strings.Contains(s, "on one Worker")
		}
		if told != want {
			t.Errorf("%d Worker(s): told to reproduce on one Worker %v, want %v (steps %q)", workers, told, want, got.NextSteps)
		}
	}
}

// A job started again (a retry, a preemption) keeps its first attempt's
// start, so its duration counts every attempt; a first attempt has none.
func TestFirstStart(t *testing.T) {
	at := func(m int) *metav1.Time { return &metav1.Time{Time: time.Date(2026, 11, 28, 10, m, 0, 0, time.UTC)} }
	cases := map[string]struct {
		prev  *api.Status
		start *metav1.Time
		want  *metav1.Time
	}{
		"no previous status":                  {start: at(5)},
		"the same attempt":                    {prev: &api.Status{StartTime: at(5)}, start: at(5)},
		"a retry started a new Launcher":      {prev: &api.Status{StartTime: at(5)}, start: at(20), want: at(5)},
		"a second retry keeps the first":      {prev: &api.Status{StartTime: at(20), FirstStartTime: at(5)}, start: at(40), want: at(5)},
		"between attempts (no Launcher)":      {prev: &api.Status{StartTime: at(20), FirstStartTime: at(5)}, start: at(20), want: at(5)},
		"never started":                       {prev: &api.Status{}, start: nil},
		"preempted before the new one starts": {prev: &api.Status{StartTime: at(5)}, start: nil, want: at(5)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, firstStart(tc.prev, tc.start)); diff != "" {
				t.Errorf("firstStart (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRunningRoundCopiesNoPods: a round on a running job of 8 Workers
// reads its pods where they are. The image checks took a list of copies
// of the job's pods and of each pod's container statuses, and sorted the
// pods twice: 21 allocations, the diagnosis's largest (22 MB of the
// leader's 810 MB over 200 jobs, bench/scale, 2026-12-03); 7 now.
func TestRunningRoundCopiesNoPods(t *testing.T) {
	var ws []*diagnosetest.PodW
	for i := range 8 {
		ws = append(ws, worker(strconv.Itoa(i)).Running(true))
	}
	in := Input{TrainJob: job(8).Obj(), JobSet: jobset(8), Now: t0, Launcher: pods(launcher().Running(true)), Workers: pods(ws...)}
	s := Diagnose(in)
	if s.Phase != api.PhaseRunning {
		t.Fatalf("phase %s (%s), want Running", s.Phase, s.Reason)
	}
	if allocs := testing.AllocsPerRun(100, func() { explainUnfinished(in, s) }); allocs > 7 {
		t.Errorf("explaining a running job of 8 Workers made %.0f allocations, want at most 7", allocs)
	}
}
