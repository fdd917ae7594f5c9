package jobview

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/runtimes"
)

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func TestJobOf(t *testing.T) {
	status := func(s api.Status) map[string]string {
		enc, err := s.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return map[string]string{api.StatusAnnotation: enc, api.CreatorAnnotation: "dev-a"}
	}
	job := func(ann, labels map[string]string, conds ...metav1.Condition) *trainer.TrainJob {
		return &trainer.TrainJob{
			ObjectMeta: metav1.ObjectMeta{Name: "pi", Namespace: "team-a", CreationTimestamp: metav1.NewTime(t0), Annotations: ann, Labels: labels},
			Spec: trainer.TrainJobSpec{
				RuntimeRef: trainer.RuntimeRef{Name: "pi", Kind: ptr.To(trainer.TrainingRuntimeKind)},
				Trainer:    &trainer.Trainer{NumNodes: ptr.To[int32](4), NumProcPerNode: ptr.To[int32](2)},
			},
			Status: trainer.TrainJobStatus{Conditions: conds},
		}
	}
	started := metav1.NewTime(t0.Add(time.Minute))
	cases := map[string]struct {
		in   *trainer.TrainJob
		want Job
	}{
		"the manager's status, on a per-job runtime": {
			in: job(status(api.Status{Phase: api.PhaseQueued, Reason: "Queued", Message: "Waiting in queue", QueuePosition: ptr.To[int32](2), WorkersTotal: 4, SlotsPerWorker: 2, StartTime: &started}),
				map[string]string{api.BaseRuntimeLabel: "mpi-openmpi"}),
			want: Job{Name: "pi", Namespace: "team-a", Runtime: "mpi-openmpi", MPI: true, Reported: true, Phase: api.PhaseQueued, Reason: "Queued", Message: "Waiting in queue",
				QueuePosition: ptr.To[int32](2), WorkersTotal: 4, SlotsPerWorker: 2, Creator: "dev-a", Created: t0, Started: &started.Time},
		},
		"no status yet: Trainer's conditions": {
			in: job(nil, nil, metav1.Condition{Type: trainer.TrainJobFailed, Status: metav1.ConditionTrue, Message: "jobset failed"}),
			want: Job{Name: "pi", Namespace: "team-a", Runtime: "pi", Phase: api.PhaseFailed, Message: "jobset failed",
				WorkersTotal: 4, SlotsPerWorker: 2, Created: t0},
		},
		"no status, nothing happened yet": {
			in:   job(nil, nil),
			want: Job{Name: "pi", Namespace: "team-a", Runtime: "pi", Phase: api.PhasePending, WorkersTotal: 4, SlotsPerWorker: 2, Created: t0},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, JobOf(tc.in)); diff != "" {
				t.Errorf("JobOf (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestPodHealth(t *testing.T) {
	pod := func(phase corev1.PodPhase, ready bool, mut func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "pi-node-0-1-x", Labels: map[string]string{
				"jobset.sigs.k8s.io/replicatedjob-name": "node", "batch.kubernetes.io/job-completion-index": "1"}},
			Status: corev1.PodStatus{Phase: phase},
		}
		if ready {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		}
		if mut != nil {
			mut(p)
		}
		return p
	}
	cases := map[string]struct {
		in         *corev1.Pod
		health     string
		state      string
		role       string
		index      int
		isLauncher bool
	}{
		"running and ready":  {in: pod(corev1.PodRunning, true, nil), health: "green", state: "Running", role: "worker", index: 1},
		"running, not ready": {in: pod(corev1.PodRunning, false, nil), health: "yellow", state: "Running", role: "worker", index: 1},
		"pending":            {in: pod(corev1.PodPending, false, nil), health: "yellow", state: "Pending", role: "worker", index: 1},
		"failed": {in: pod(corev1.PodFailed, false, func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137}}}}
		}), health: "red", state: "OOMKilled (exit 137)", role: "worker", index: 1},
		"image pull back-off": {in: pod(corev1.PodPending, false, func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}}}
		}), health: "red", state: "ImagePullBackOff", role: "worker", index: 1},
		"being deleted": {in: pod(corev1.PodRunning, true, func(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(metav1.NewTime(t0)) }), health: "grey", state: "Running", role: "worker", index: 1},
		"the Launcher": {in: pod(corev1.PodSucceeded, false, func(p *corev1.Pod) {
			p.Labels["jobset.sigs.k8s.io/replicatedjob-name"] = "launcher"
			p.Labels["batch.kubernetes.io/job-completion-index"] = "0"
		}), health: "green", state: "Succeeded", role: "launcher", index: 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := PodOf(tc.in)
			if got.Health != tc.health || got.State != tc.state || got.Role != tc.role || got.Index != tc.index {
				t.Errorf("PodOf = health %s, state %q, role %s, index %d; want %s, %q, %s, %d", got.Health, got.State, got.Role, got.Index, tc.health, tc.state, tc.role, tc.index)
			}
		})
	}
}

func TestResourcesSummary(t *testing.T) {
	pod := func(req, lim corev1.ResourceList) corev1.PodSpec {
		return corev1.PodSpec{Containers: []corev1.Container{{Name: "node", Image: "img:1", Resources: corev1.ResourceRequirements{Requests: req, Limits: lim}}}}
	}
	worker := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"), "nvidia.com/gpu": resource.MustParse("1")}
	s := runtimes.Shape{Workers: 2, Launchers: 1, SlotsPerWorker: 2,
		WorkerPod: pod(worker, corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("6Gi"), "nvidia.com/gpu": resource.MustParse("1")}),
		// A Launcher with limits alone: its requests are its limits.
		LauncherPod: pod(nil, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")}),
	}
	got := ResourcesOf(s)
	want := &Resources{
		Workers: 2, SlotsPerWorker: 2,
		Worker:      map[string]string{"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": "1"},
		Launcher:    map[string]string{"cpu": "500m", "memory": "1Gi"},
		Total:       map[string]string{"cpu": "4.5", "memory": "9Gi", "nvidia.com/gpu": "2"},
		Summary:     "2 Workers × 2 slots = 4 ranks, 4 CPUs, 8Gi, 2 GPUs",
		WorkerImage: "img:1", LauncherImage: "img:1",
		Launchers:        1,
		LauncherRequests: map[string]string{"cpu": "500m", "memory": "1Gi"},
		LauncherLimits:   map[string]string{"cpu": "500m", "memory": "1Gi"},
		WorkerRequests:   map[string]string{"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": "1"},
		WorkerLimits:     map[string]string{"memory": "6Gi", "nvidia.com/gpu": "1"},
		TotalRequests:    map[string]string{"cpu": "4.5", "memory": "9Gi", "nvidia.com/gpu": "2"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ResourcesOf (-want,+got):\n%s", diff)
	}
}
