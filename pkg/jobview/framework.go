package jobview

import (
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"

	"github.com/mpijob/mpijob/pkg/api"
)

// FrameworkMPI is the framework of an MPI job.
const FrameworkMPI = "mpi"

// FrameworkUnknown is the framework of a job whose runtime cannot be read.
const FrameworkUnknown = "unknown"

// JobRef is what the MPI rule reads of a TrainJob.
type JobRef struct {
	Name, Namespace string
	Labels          map[string]string
	// RuntimeKind and RuntimeName are spec.runtimeRef's (kind empty:
	// ClusterTrainingRuntime, Trainer's default).
	RuntimeKind, RuntimeName string
}

// RefOf is a TrainJob's JobRef.
func RefOf(tj *trainer.TrainJob) JobRef {
	kind := ""
	if tj.Spec.RuntimeRef.Kind != nil {
		kind = *tj.Spec.RuntimeRef.Kind
	}
	return JobRef{Name: tj.Name, Namespace: tj.Namespace, Labels: tj.Labels, RuntimeKind: kind, RuntimeName: tj.Spec.RuntimeRef.Name}
}

// Frameworks is the framework of each runtime a job may name: "mpi" for a
// runtime with an MPI ML policy, else its trainer.kubeflow.org/framework
// label (torch, jax, ...), else what its ML policy is (RuntimeFramework).
type Frameworks struct {
	// Cluster is by ClusterTrainingRuntime name.
	Cluster map[string]string `json:"cluster,omitempty"`
	// Namespaced is by namespace, then TrainingRuntime name.
	Namespaced map[string]map[string]string `json:"namespaced,omitempty"`
}

// FrameworkLabel is Trainer's label naming a runtime's framework.
const FrameworkLabel = "trainer.kubeflow.org/framework"

// RuntimeFramework is the framework of a runtime: mpi when its ML policy
// is MPI (DeepSpeed and Horovod runtimes included), else its label's,
// else torch for a Torch policy, else unknown.
func RuntimeFramework(spec *trainer.TrainingRuntimeSpec, labels map[string]string) string {
	if spec != nil && spec.MLPolicy != nil && spec.MLPolicy.MPI != nil {
		return FrameworkMPI
	}
	if f := strings.ToLower(labels[FrameworkLabel]); f != "" && f != FrameworkMPI {
		return f
	}
	if spec != nil && spec.MLPolicy != nil && spec.MLPolicy.Torch != nil {
		return "torch"
	}
	return FrameworkUnknown
}

// FrameworkOf is a job's framework, by the rule admission scopes MPI jobs
// with (admission.ScopeExpression) and namespaced MPI runtimes:
//   - made by mpijob's job builder (label mpijob.dev/base-runtime): mpi;
//   - on a TrainingRuntime named after itself (mpijob's per-job runtime):
//     mpi;
//   - on another TrainingRuntime of its namespace: that runtime's;
//   - on a ClusterTrainingRuntime: that runtime's, and mpi for a missing
//     one whose name starts with "mpi-" (a typo of an MPI runtime, which
//     admission refuses with a suggestion).
//
// The same rule, from the same vectors, is the SDK's (mpijob.jobview).
func FrameworkOf(j JobRef, rts Frameworks) string {
	if _, ok := j.Labels[api.BaseRuntimeLabel]; ok {
		return FrameworkMPI
	}
	if j.RuntimeKind == trainer.TrainingRuntimeKind {
		if j.RuntimeName == j.Name {
			return FrameworkMPI
		}
		if f, ok := rts.Namespaced[j.Namespace][j.RuntimeName]; ok {
			return f
		}
		return FrameworkUnknown
	}
	if f, ok := rts.Cluster[j.RuntimeName]; ok {
		return f
	}
	if strings.HasPrefix(j.RuntimeName, "mpi-") {
		return FrameworkMPI
	}
	return FrameworkUnknown
}

// IsMPIJob tells an MPI job: FrameworkOf says mpi.
func IsMPIJob(j JobRef, rts Frameworks) bool { return FrameworkOf(j, rts) == FrameworkMPI }
