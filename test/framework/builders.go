//go:build e2e

package framework

import (
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/mpijob/mpijob/config"
	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/jobspec"
)

// TrainJobWrapper builds TrainJobs fluently for tests. Jobs that change
// the Workers' resources carry a per-job runtime (pkg/jobspec), derived
// from the shipped runtime; Submit creates both.
type TrainJobWrapper struct {
	trainer.TrainJob
	runtime *trainer.TrainingRuntime
}

// MakeTrainJob starts a TrainJob that references the ClusterTrainingRuntime runtime.
func MakeTrainJob(name, ns, runtime string) *TrainJobWrapper {
	return &TrainJobWrapper{TrainJob: trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{Name: runtime, Kind: ptr.To(trainer.ClusterTrainingRuntimeKind), APIGroup: ptr.To(trainer.GroupVersion.Group)},
			Trainer:    &trainer.Trainer{},
		},
	}}
}

// NumNodes sets spec.trainer.numNodes.
func (w *TrainJobWrapper) NumNodes(n int32) *TrainJobWrapper {
	w.Spec.Trainer.NumNodes = ptr.To(n)
	return w
}

// SlotsPerWorker sets spec.trainer.numProcPerNode.
func (w *TrainJobWrapper) SlotsPerWorker(n int32) *TrainJobWrapper {
	w.Spec.Trainer.NumProcPerNode = ptr.To(n)
	return w
}

// Command sets the Launcher's command.
func (w *TrainJobWrapper) Command(cmd ...string) *TrainJobWrapper {
	w.Spec.Trainer.Command = cmd
	return w
}

// GPUsPerWorker gives every Worker n nvidia.com/gpu through a per-job
// runtime derived from the shipped runtime the job names, as kubectl
// mpijob create --gpus does.
func (w *TrainJobWrapper) GPUsPerWorker(n int64) *TrainJobWrapper {
	return w.perJob(jobspec.Overrides{Worker: corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(n, resource.DecimalSI)}})
}

// ResourcesPerNode sets spec.trainer.resourcesPerNode as a plain TrainJob
// (or the Kubeflow SDK) would.
func (w *TrainJobWrapper) ResourcesPerNode(rl corev1.ResourceList) *TrainJobWrapper {
	w.Spec.Trainer.ResourcesPerNode = &corev1.ResourceRequirements{Requests: rl, Limits: rl}
	return w
}

// LauncherImage gives the Launcher its own image through a per-job
// runtime, as kubectl mpijob create --launcher-image does.
func (w *TrainJobWrapper) LauncherImage(image string) *TrainJobWrapper {
	return w.perJob(jobspec.Overrides{LauncherImage: image})
}

// WorkerImage gives the Workers their own image through a per-job
// runtime, as kubectl mpijob create --worker-image does.
func (w *TrainJobWrapper) WorkerImage(image string) *TrainJobWrapper {
	return w.perJob(jobspec.Overrides{WorkerImage: image})
}

// perJob gives the job a per-job runtime derived from the shipped runtime
// it names, with o, as the job builder does.
func (w *TrainJobWrapper) perJob(o jobspec.Overrides) *TrainJobWrapper {
	base := ShippedRuntime(w.Spec.RuntimeRef.Name)
	w.runtime = jobspec.Derive(base, w.Name, w.Namespace, o)
	w.Spec.RuntimeRef = trainer.RuntimeRef{Name: w.Name, Kind: ptr.To(trainer.TrainingRuntimeKind), APIGroup: ptr.To(trainer.GroupVersion.Group)}
	if w.Labels == nil {
		w.Labels = map[string]string{}
	}
	w.Labels[api.BaseRuntimeLabel] = base.Name
	return w
}

// Runtime is the job's per-job runtime, nil when it has none.
func (w *TrainJobWrapper) Runtime() *trainer.TrainingRuntime { return w.runtime }

// ShippedRuntime reads one of config/runtimes.
func ShippedRuntime(name string) *trainer.ClusterTrainingRuntime {
	rt, err := config.Runtime(name)
	if err != nil {
		panic(err)
	}
	return rt
}

// GPUToleration tolerates the GPU nodes' taint: what the API server's
// ExtendedResourceToleration gives pods that ask for GPUs, written out for
// pods that do not (a CPU Launcher sent to the kwok nodes).
var GPUToleration = corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}

// OnKwokNodes sends the Launcher and the Workers to the fake kwok nodes.
func (w *TrainJobWrapper) OnKwokNodes() *TrainJobWrapper {
	spec := &trainer.PodSpecPatch{
		NodeSelector: map[string]string{"type": "kwok"},
		Tolerations:  []corev1.Toleration{GPUToleration},
	}
	var rjobs []trainer.ReplicatedJobPatch
	for _, name := range []string{"launcher", "node"} {
		rjobs = append(rjobs, trainer.ReplicatedJobPatch{
			Name:     name,
			Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{Template: &trainer.PodTemplatePatch{Spec: spec.DeepCopy()}}},
		})
	}
	w.Spec.RuntimePatches = append(w.Spec.RuntimePatches, trainer.RuntimePatch{
		Manager:             "mpijob.dev/e2e",
		TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{Template: &trainer.JobSetTemplatePatch{Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: rjobs}}},
	})
	return w
}

// PatchWorkers adds a runtime patch of the Workers' pod spec (volumes,
// node selector, tolerations, containers), as a user's runtimePatches do.
func (w *TrainJobWrapper) PatchWorkers(spec trainer.PodSpecPatch) *TrainJobWrapper {
	w.Spec.RuntimePatches = append(w.Spec.RuntimePatches, trainer.RuntimePatch{
		Manager: "mpijob.dev/e2e-workers",
		TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{Template: &trainer.JobSetTemplatePatch{Spec: &trainer.JobSetSpecPatch{
			ReplicatedJobs: []trainer.ReplicatedJobPatch{{
				Name:     "node",
				Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{Template: &trainer.PodTemplatePatch{Spec: &spec}}},
			}},
		}}},
	})
	return w
}

// Obj returns the TrainJob.
func (w *TrainJobWrapper) Obj() *trainer.TrainJob { return &w.TrainJob }

// Image sets the Launcher's image (spec.trainer.image).
func (w *TrainJobWrapper) Image(image string) *TrainJobWrapper {
	w.Spec.Trainer.Image = &image
	return w
}

// FailWorkersOnKwok labels the Worker pods so mpijob's kwok stages end
// them with reason (OOMKilled or Evicted) instead of completing. It needs
// OnKwokNodes first.
func (w *TrainJobWrapper) FailWorkersOnKwok(reason string) *TrainJobWrapper {
	for i := range w.Spec.RuntimePatches {
		p := &w.Spec.RuntimePatches[i]
		for j := range p.TrainingRuntimeSpec.Template.Spec.ReplicatedJobs {
			rj := &p.TrainingRuntimeSpec.Template.Spec.ReplicatedJobs[j]
			if rj.Name == "node" {
				rj.Template.Spec.Template.Metadata = &metav1.ObjectMeta{Labels: map[string]string{"kwok.mpijob.dev/fail": reason}}
			}
		}
	}
	return w
}

// HoldOnKwok keeps the Launcher and Workers Running on kwok nodes (for an
// hour) instead of completing, so the job holds its resources. It needs
// OnKwokNodes first.
func (w *TrainJobWrapper) HoldOnKwok() *TrainJobWrapper {
	for i := range w.Spec.RuntimePatches {
		p := &w.Spec.RuntimePatches[i]
		for j := range p.TrainingRuntimeSpec.Template.Spec.ReplicatedJobs {
			rj := &p.TrainingRuntimeSpec.Template.Spec.ReplicatedJobs[j]
			if rj.Template.Spec.Template.Metadata == nil {
				rj.Template.Spec.Template.Metadata = &metav1.ObjectMeta{}
			}
			if rj.Template.Spec.Template.Metadata.Labels == nil {
				rj.Template.Spec.Template.Metadata.Labels = map[string]string{}
			}
			rj.Template.Spec.Template.Metadata.Labels["kwok.mpijob.dev/hold"] = "true"
		}
	}
	return w
}

// Queue submits the job to the Kueue LocalQueue name.
func (w *TrainJobWrapper) Queue(name string) *TrainJobWrapper {
	if w.Labels == nil {
		w.Labels = map[string]string{}
	}
	w.Labels["kueue.x-k8s.io/queue-name"] = name
	return w
}

// Suspend creates the job suspended.
func (w *TrainJobWrapper) Suspend() *TrainJobWrapper {
	w.Spec.Suspend = ptr.To(true)
	return w
}
