package admission

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/mpijob/mpijob/pkg/runtimes"
)

type jobW struct{ Job }

func mpiJob(name string) *jobW {
	return &jobW{Job{
		TrainJob: &trainer.TrainJob{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a"},
			Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: "mpi-openmpi"},
				Trainer: &trainer.Trainer{NumNodes: ptr.To[int32](2), NumProcPerNode: ptr.To[int32](1)}},
		},
		RuntimeFound: true, KnownRuntimes: []string{"mpi-openmpi", "mpi-openmpi-gpu", "mpi-mpich"}, Workers: 2,
		WorkerPod:   &corev1.PodSpec{Containers: []corev1.Container{{Name: "node", Resources: corev1.ResourceRequirements{Limits: rl("memory", "1Gi")}}}},
		LauncherPod: &corev1.PodSpec{Containers: []corev1.Container{{Name: "node", Resources: corev1.ResourceRequirements{Limits: rl("memory", "512Mi")}}}},
	}}
}

func (w *jobW) workers(n int32) *jobW {
	w.TrainJob.Spec.Trainer.NumNodes = ptr.To(n)
	w.Workers = n
	return w
}
func (w *jobW) slots(n int32) *jobW { w.TrainJob.Spec.Trainer.NumProcPerNode = ptr.To(n); return w }
func (w *jobW) runtime(name string, found bool) *jobW {
	w.TrainJob.Spec.RuntimeRef.Name = name
	w.RuntimeFound = found
	return w
}
func (w *jobW) gpus(n string) *jobW {
	w.WorkerPod.Containers[0].Resources.Limits["nvidia.com/gpu"] = resource.MustParse(n)
	return w
}
func (w *jobW) nodeSelector(sel map[string]string) *jobW {
	w.WorkerPod.NodeSelector, w.LauncherPod.NodeSelector = sel, sel
	return w
}
func (w *jobW) tolerations(tols ...corev1.Toleration) *jobW {
	w.WorkerPod.Tolerations, w.LauncherPod.Tolerations = tols, tols
	return w
}
func (w *jobW) noMemoryLimits() *jobW {
	w.WorkerPod.Containers[0].Resources.Limits = corev1.ResourceList{}
	w.LauncherPod.Containers[0].Resources.Limits = corev1.ResourceList{}
	return w
}

// missingToleration is the denial of a job whose pods do not tolerate tol.
func missingToleration(tol string) []string {
	var out []string
	for _, role := range []string{"launcher", "node"} {
		out = append(out, "spec.runtimePatches["+role+"].tolerations: Required value: runtime mpi-openmpi requires every pod to tolerate "+tol+
			" (policy.mpijob.dev/required-tolerations): add the toleration to the job or the runtime")
	}
	return out
}

var dedicatedGPU = corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gpu", Effect: corev1.TaintEffectNoSchedule}

func TestValidateTrainJob(t *testing.T) {
	four := resource.MustParse("4")
	cases := map[string]struct {
		job    *jobW
		policy runtimes.Policy
		want   []string
	}{
		"valid": {job: mpiJob("hello")},
		"zero workers": {
			job:  mpiJob("hello").workers(0),
			want: []string{`spec.trainer.numNodes: Invalid value: 0: an MPI job needs at least 1 Worker`},
		},
		"zero slots": {
			job:  mpiJob("hello").slots(0),
			want: []string{`spec.trainer.numProcPerNode: Invalid value: 0: slots per worker must be at least 1`},
		},
		"unknown runtime suggests the close one": {
			job:  mpiJob("hello").runtime("mpi-opnempi", false),
			want: []string{`spec.runtimeRef.name: Not found: "mpi-opnempi": no runtime "mpi-opnempi"; did you mean "mpi-openmpi"?`},
		},
		"unknown runtime lists the runtimes": {
			job:  mpiJob("hello").runtime("tensorflow", false),
			want: []string{`spec.runtimeRef.name: Not found: "tensorflow": MPI runtimes here: mpi-openmpi, mpi-openmpi-gpu, mpi-mpich`},
		},
		"name too long after suffixes": {
			job:  mpiJob(strings.Repeat("a", 45)),
			want: []string{"metadata.name: Too long: use at most 44 characters: JobSet names the Launcher pod " + strings.Repeat("a", 45) + "-launcher-0-0-xxxxx, and a pod's hostname has at most 63"},
		},
		"name exactly at the limit": {job: mpiJob(strings.Repeat("a", 44))},
		"too many workers for the runtime": {
			job: mpiJob("hello").workers(9), policy: runtimes.Policy{MaxWorkers: 8},
			want: []string{`spec.trainer.numNodes: Invalid value: 9: runtime mpi-openmpi allows at most 8 Workers per job (policy.mpijob.dev/max-workers): use at most 8 Workers`},
		},
		"workers at the cap": {job: mpiJob("hello").workers(8), policy: runtimes.Policy{MaxWorkers: 8}},
		"too many GPUs per worker": {
			job: mpiJob("hello").gpus("8"), policy: runtimes.Policy{MaxGPUsPerWorker: &four},
			want: []string{`spec.trainer.resourcesPerNode.limits[nvidia.com/gpu]: Invalid value: "8": runtime mpi-openmpi allows at most 4 GPUs per Worker (policy.mpijob.dev/max-gpus-per-worker): ask for 4 or fewer`},
		},
		"missing required node selector on both pods": {
			job: mpiJob("hello"), policy: runtimes.Policy{RequiredNodeSelector: map[string]string{"pool": "gpu"}},
			want: []string{
				`spec.runtimePatches[launcher].nodeSelector[pool]: Invalid value: "": runtime mpi-openmpi requires nodeSelector pool=gpu on every pod (policy.mpijob.dev/required-node-selector)`,
				`spec.runtimePatches[node].nodeSelector[pool]: Invalid value: "": runtime mpi-openmpi requires nodeSelector pool=gpu on every pod (policy.mpijob.dev/required-node-selector)`,
			},
		},
		"missing required toleration on both pods": {
			job: mpiJob("hello"), policy: runtimes.Policy{RequiredTolerations: []corev1.Toleration{dedicatedGPU}},
			want: missingToleration("dedicated=gpu:NoSchedule"),
		},
		"a toleration of another value is not enough": {
			job:    mpiJob("hello").tolerations(corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "cpu", Effect: corev1.TaintEffectNoSchedule}),
			policy: runtimes.Policy{RequiredTolerations: []corev1.Toleration{dedicatedGPU}},
			want:   missingToleration("dedicated=gpu:NoSchedule"),
		},
		"required toleration present": {
			job:    mpiJob("hello").tolerations(corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gpu", Effect: corev1.TaintEffectNoSchedule}),
			policy: runtimes.Policy{RequiredTolerations: []corev1.Toleration{dedicatedGPU}},
		},
		"an Exists toleration of the key covers every value": {
			job:    mpiJob("hello").tolerations(corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpExists}),
			policy: runtimes.Policy{RequiredTolerations: []corev1.Toleration{dedicatedGPU, {Key: "dedicated", Operator: corev1.TolerationOpExists}}},
		},
		"a toleration of one effect does not cover every effect": {
			job:    mpiJob("hello").tolerations(corev1.Toleration{Key: "pool", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}),
			policy: runtimes.Policy{RequiredTolerations: []corev1.Toleration{{Key: "pool", Operator: corev1.TolerationOpExists}}},
			want:   missingToleration("pool"),
		},
		"required node selector present": {
			job: mpiJob("hello").nodeSelector(map[string]string{"pool": "gpu", "x": "y"}), policy: runtimes.Policy{RequiredNodeSelector: map[string]string{"pool": "gpu"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, e := range ValidateTrainJob(tc.job.Job, tc.policy) {
				got = append(got, e.Error())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("errors (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestWarnings(t *testing.T) {
	cases := map[string]struct {
		job  *jobW
		want []string
	}{
		"fine": {job: mpiJob("hello").gpus("1")},
		"slots differ from GPUs": {
			job:  mpiJob("hello").gpus("4").slots(2),
			want: []string{"slots per worker (2) differs from GPUs per worker (4): ranks will share GPUs or leave some idle"},
		},
		"no memory limits": {
			job: mpiJob("hello").noMemoryLimits(),
			want: []string{
				"Workers have no memory limit: a rank that leaks memory can take the whole node; set a memory limit per worker",
				"the Launcher has no memory limit; set one so it cannot starve its node",
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Warnings(tc.job.Job)); diff != "" {
				t.Errorf("warnings (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestValidateWorkerFields(t *testing.T) {
	worker := &corev1.PodSpec{Containers: []corev1.Container{{Name: "node", Image: "ghcr.io/mpijob/openmpi:4.1"}}}
	res := &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}
	job := func(image *string, r *corev1.ResourceRequirements, asNode bool) Job {
		tj := &trainer.TrainJob{}
		tj.Name = "j"
		tj.Spec.RuntimeRef.Name = "mpi-openmpi"
		tj.Spec.Trainer = &trainer.Trainer{Image: image, ResourcesPerNode: r}
		return Job{TrainJob: tj, WorkerPod: worker, LauncherAsNode: asNode}
	}
	const wayOut = "give the job to kubectl mpijob create -f (it moves them into a runtime of the job's own, for the Workers too), or use kubectl mpijob create "
	cases := map[string]struct {
		job  Job
		want []string
	}{
		"nothing set": {job: job(nil, nil, false)},
		"resources on a separate Launcher": {job: job(nil, res, false), want: []string{
			"spec.trainer.resourcesPerNode: Forbidden: runtime mpi-openmpi has a separate Launcher, and Trainer v2.3 gives resourcesPerNode to the Launcher only, never to the Workers (kubeflow/trainer#2650): " + wayOut + "--cpu/--memory/--gpus or the mpijob SDK's resources_per_worker"}},
		"resources where the Launcher hosts ranks reach every pod": {job: job(nil, res, true)},
		"an image the Workers do not have": {job: job(ptr.To("registry.example.com/train:1"), nil, false), want: []string{
			"spec.trainer.image: Forbidden: runtime mpi-openmpi gives spec.trainer.image to the Launcher only; the Workers would keep ghcr.io/mpijob/openmpi:4.1 and not find your program (kubeflow/trainer#2650): " + wayOut + "--image or the mpijob SDK's image="}},
		"the Workers' own image": {job: job(ptr.To("ghcr.io/mpijob/openmpi:4.1"), nil, false)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, e := range ValidateWorkerFields(tc.job) {
				got = append(got, e.Error())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("errors (-want,+got):\n%s", diff)
			}
		})
	}
}
