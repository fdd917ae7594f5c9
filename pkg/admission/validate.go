package admission

import (
	"fmt"
	"sort"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/runtimes"
	"github.com/mpijob/mpijob/pkg/suggest"
)

// Job is an MPI TrainJob as admission sees it: the object, its runtime's
// name and whether that runtime exists, and the effective pod shape.
type Job struct {
	TrainJob *trainer.TrainJob
	// RuntimeFound is false when spec.runtimeRef names no runtime.
	RuntimeFound bool
	// KnownRuntimes are the names of the MPI runtimes, for suggestions.
	KnownRuntimes []string
	// Workers is the number of Worker pods the job will have.
	Workers int32
	// WorkerPod and LauncherPod are the effective pod specs (runtime
	// template with the job's resources and patches).
	WorkerPod, LauncherPod *corev1.PodSpec
	// BaseRuntime is the ClusterTrainingRuntime a per-job runtime was
	// derived from ("" when the job references its runtime directly).
	BaseRuntime string
	// LauncherAsNode is true when the runtime's Launcher hosts ranks.
	LauncherAsNode bool
	// ClusterMaxWorkers caps Workers where the runtime's policy sets no
	// max-workers (0: no cap).
	ClusterMaxWorkers int32
	// NamespaceRuntime is true when the job runs on a TrainingRuntime of
	// its namespace's own (not mpijob's per-job copy): its policy may
	// lower ClusterMaxWorkers, never raise it.
	NamespaceRuntime bool
}

// clusterCapDetail explains the cluster-wide Worker cap.
func clusterCapDetail(runtime string, limit int32) string {
	return fmt.Sprintf("this cluster allows at most %d Workers per job (mpijob-manager --max-workers), and runtime %s sets no %s of its own: use at most %d Workers, or ask an administrator for a runtime whose %s allows more",
		limit, runtime, runtimes.MaxWorkersAnnotation, limit, runtimes.MaxWorkersAnnotation)
}

func (j Job) runtimeName() string {
	if j.BaseRuntime != "" {
		return j.BaseRuntime
	}
	return j.TrainJob.Spec.RuntimeRef.Name
}

// gpuResources lists the GPU resources (nvidia.com/gpu, amd.com/gpu, ...)
// a pod asks for.
func gpuResources(rls ...corev1.ResourceList) []corev1.ResourceName {
	seen := map[corev1.ResourceName]bool{}
	for _, rl := range rls {
		for k := range rl {
			if strings.HasSuffix(string(k), "/gpu") {
				seen[k] = true
			}
		}
	}
	out := make([]corev1.ResourceName, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Slice(out, func(a, b int) bool { return out[a] < out[b] })
	return out
}

// ValidateWorkerFields refuses a TrainJob whose image or resourcesPerNode
// its runtime would give the Launcher alone: Trainer v2.3 applies
// spec.trainer.image only to the Launcher, and spec.trainer.resourcesPerNode
// only to the Launcher unless the Launcher hosts ranks
// (kubeflow/trainer#2650). Nothing is silently misapplied.
func ValidateWorkerFields(j Job) field.ErrorList {
	var errs field.ErrorList
	tr := j.TrainJob.Spec.Trainer
	if tr == nil {
		return nil
	}
	path := field.NewPath("spec", "trainer")
	wayOut := "give the job to kubectl mpijob create -f (it moves them into a runtime of the job's own, for the Workers too), or use kubectl mpijob create %s or the mpijob SDK's %s"
	if tr.ResourcesPerNode != nil && !j.LauncherAsNode {
		errs = append(errs, field.Forbidden(path.Child("resourcesPerNode"),
			fmt.Sprintf("runtime %s has a separate Launcher, and Trainer v2.3 gives resourcesPerNode to the Launcher only, never to the Workers (kubeflow/trainer#2650): "+wayOut,
				j.runtimeName(), "--cpu/--memory/--gpus", "resources_per_worker")))
	}
	if tr.Image != nil && j.WorkerPod != nil {
		for _, c := range j.WorkerPod.Containers {
			if c.Name == api.NodeContainer && c.Image != *tr.Image {
				errs = append(errs, field.Forbidden(path.Child("image"),
					fmt.Sprintf("runtime %s gives spec.trainer.image to the Launcher only; the Workers would keep %s and not find your program (kubeflow/trainer#2650): "+wayOut,
						j.runtimeName(), c.Image, "--image", "image=")))
			}
		}
	}
	return errs
}

// ValidateTrainJob checks what Trainer's own webhook does not: Worker and
// slot counts, the runtime, names after suffixes, and the runtime policy.
func ValidateTrainJob(j Job, p runtimes.Policy) field.ErrorList {
	var errs field.ErrorList
	tj := j.TrainJob
	spec := field.NewPath("spec")

	if len(tj.Name) > api.MaxJobNameLength {
		errs = append(errs, field.TooLong(field.NewPath("metadata", "name"), tj.Name, api.MaxJobNameLength))
		errs[len(errs)-1].Detail = fmt.Sprintf("use at most %d characters: JobSet names the Launcher pod %s-launcher-0-0-xxxxx, and a pod's hostname has at most 63", api.MaxJobNameLength, tj.Name)
	}
	if !j.RuntimeFound {
		errs = append(errs, field.NotFound(spec.Child("runtimeRef", "name"), tj.Spec.RuntimeRef.Name))
		if hint := suggest.Closest(tj.Spec.RuntimeRef.Name, j.KnownRuntimes); hint != "" {
			errs[len(errs)-1].Detail = fmt.Sprintf("no runtime %q; did you mean %q?", tj.Spec.RuntimeRef.Name, hint)
		} else if len(j.KnownRuntimes) > 0 {
			errs[len(errs)-1].Detail = "MPI runtimes here: " + strings.Join(j.KnownRuntimes, ", ")
		}
	}
	if tr := tj.Spec.Trainer; tr != nil {
		if tr.NumNodes != nil && *tr.NumNodes < 1 {
			errs = append(errs, field.Invalid(spec.Child("trainer", "numNodes"), *tr.NumNodes, "an MPI job needs at least 1 Worker"))
		}
		if tr.NumProcPerNode != nil && *tr.NumProcPerNode < 1 {
			errs = append(errs, field.Invalid(spec.Child("trainer", "numProcPerNode"), *tr.NumProcPerNode, "slots per worker must be at least 1"))
		}
	}
	if j.NamespaceRuntime && j.ClusterMaxWorkers > 0 && j.Workers > j.ClusterMaxWorkers && (p.MaxWorkers == 0 || p.MaxWorkers > j.ClusterMaxWorkers) {
		errs = append(errs, field.Invalid(spec.Child("trainer", "numNodes"), j.Workers, fmt.Sprintf(
			"this cluster allows at most %d Workers per job (mpijob-manager --max-workers), and runtime %s is namespace %s's own, whose %s cannot raise that: use at most %d Workers, or ask an administrator for a ClusterTrainingRuntime that allows more",
			j.ClusterMaxWorkers, j.runtimeName(), tj.Namespace, runtimes.MaxWorkersAnnotation, j.ClusterMaxWorkers)))
	} else if p.MaxWorkers > 0 && j.Workers > p.MaxWorkers {
		errs = append(errs, field.Invalid(spec.Child("trainer", "numNodes"), j.Workers,
			fmt.Sprintf("runtime %s allows at most %d Workers per job (%s): use at most %d Workers", j.runtimeName(), p.MaxWorkers, runtimes.MaxWorkersAnnotation, p.MaxWorkers)))
	} else if p.MaxWorkers == 0 && j.ClusterMaxWorkers > 0 && j.Workers > j.ClusterMaxWorkers {
		errs = append(errs, field.Invalid(spec.Child("trainer", "numNodes"), j.Workers, clusterCapDetail(j.runtimeName(), j.ClusterMaxWorkers)))
	}
	if p.MaxGPUsPerWorker != nil && j.WorkerPod != nil {
		req, lim := runtimes.PodDemand(j.WorkerPod)
		for _, name := range gpuResources(req, lim) {
			gpus := req[name]
			if l, ok := lim[name]; ok && l.Cmp(gpus) > 0 {
				gpus = l
			}
			if gpus.Cmp(*p.MaxGPUsPerWorker) > 0 {
				errs = append(errs, field.Invalid(spec.Child("trainer", "resourcesPerNode", "limits").Key(string(name)), gpus.String(),
					fmt.Sprintf("runtime %s allows at most %s GPUs per Worker (%s): ask for %s or fewer", j.runtimeName(), p.MaxGPUsPerWorker.String(), runtimes.MaxGPUsPerWorkerAnnotation, p.MaxGPUsPerWorker.String())))
			}
		}
	}
	for name, pod := range map[string]*corev1.PodSpec{"node": j.WorkerPod, "launcher": j.LauncherPod} {
		if pod == nil {
			continue
		}
		path := spec.Child("runtimePatches").Key(name).Child("nodeSelector")
		for k, want := range p.RequiredNodeSelector {
			if got, ok := pod.NodeSelector[k]; !ok || got != want {
				errs = append(errs, field.Invalid(path.Key(k), got,
					fmt.Sprintf("runtime %s requires nodeSelector %s=%s on every pod (%s)", j.runtimeName(), k, want, runtimes.RequiredNodeSelectorAnnotation)))
			}
		}
		for _, want := range p.RequiredTolerations {
			if !runtimes.Tolerates(pod.Tolerations, want) {
				errs = append(errs, field.Required(spec.Child("runtimePatches").Key(name).Child("tolerations"),
					fmt.Sprintf("runtime %s requires every pod to tolerate %s (%s): add the toleration to the job or the runtime", j.runtimeName(), runtimes.FormatToleration(want), runtimes.RequiredTolerationsAnnotation)))
			}
		}
	}
	sort.SliceStable(errs, func(i, k int) bool { return errs[i].Field < errs[k].Field })
	return errs
}

// Warnings are allowed-but-suspicious choices, said at admission.
func Warnings(j Job) []string {
	var out []string
	if j.WorkerPod != nil {
		req, lim := runtimes.PodDemand(j.WorkerPod)
		gpus := lim["nvidia.com/gpu"]
		if gpus.IsZero() {
			gpus = req["nvidia.com/gpu"]
		}
		if tr := j.TrainJob.Spec.Trainer; tr != nil && tr.NumProcPerNode != nil && !gpus.IsZero() && int64(*tr.NumProcPerNode) != gpus.Value() {
			out = append(out, fmt.Sprintf("slots per worker (%d) differs from GPUs per worker (%s): ranks will share GPUs or leave some idle", *tr.NumProcPerNode, gpus.String()))
		}
		if _, ok := lim[corev1.ResourceMemory]; !ok {
			out = append(out, "Workers have no memory limit: a rank that leaks memory can take the whole node; set a memory limit per worker")
		}
	}
	if j.LauncherPod != nil {
		if _, lim := runtimes.PodDemand(j.LauncherPod); lim.Memory().IsZero() {
			out = append(out, "the Launcher has no memory limit; set one so it cannot starve its node")
		}
	}
	return out
}
