package runtimes

import (
	"fmt"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	trainingruntimeutil "github.com/kubeflow/trainer/v2/pkg/util/trainingruntime"
	corev1 "k8s.io/api/core/v1"

	"github.com/mpijob/mpijob/pkg/api"
)

// ancestorLabel marks the replicated job that takes the TrainJob's trainer
// fields (command, image, resources).
const ancestorLabel = "trainer.kubeflow.org/trainjob-ancestor-step"

// IsMPI reports whether a runtime has an MPI ML policy.
func IsMPI(spec *trainer.TrainingRuntimeSpec) bool {
	return spec != nil && spec.MLPolicy != nil && spec.MLPolicy.MPI != nil
}

// LauncherAsNode reports whether the runtime's Launcher also hosts ranks.
func LauncherAsNode(spec *trainer.TrainingRuntimeSpec) bool {
	return IsMPI(spec) && spec.MLPolicy.MPI.RunLauncherAsNode != nil && *spec.MLPolicy.MPI.RunLauncherAsNode
}

// Shape is how many pods an MPI job runs and what each looks like.
type Shape struct {
	// Workers is the number of Worker pods; Launchers of Launcher pods (1).
	Workers, Launchers int32
	// SlotsPerWorker is the MPI ranks per Worker.
	SlotsPerWorker int32
	// LauncherAsNode is true when the Launcher hosts ranks too.
	LauncherAsNode bool
	// WorkerPod and LauncherPod are the effective pod specs.
	WorkerPod, LauncherPod corev1.PodSpec
}

// ShapeOf computes the Shape of tj on runtime spec, the way Trainer V2's
// jobset and MPI plugins do.
func ShapeOf(tj *trainer.TrainJob, spec *trainer.TrainingRuntimeSpec) (Shape, error) {
	if !IsMPI(spec) {
		return Shape{}, fmt.Errorf("runtime %s has no MPI policy", tj.Spec.RuntimeRef.Name)
	}
	mpi := spec.MLPolicy.MPI
	s := Shape{Launchers: 1, SlotsPerWorker: 1, LauncherAsNode: LauncherAsNode(spec)}
	if mpi.NumProcPerNode != nil {
		s.SlotsPerWorker = *mpi.NumProcPerNode
	}
	numNodes := int32(1)
	if spec.MLPolicy.NumNodes != nil {
		numNodes = *spec.MLPolicy.NumNodes
	}
	tr := tj.Spec.Trainer
	if tr != nil && tr.NumNodes != nil {
		numNodes = *tr.NumNodes
	}
	if tr != nil && tr.NumProcPerNode != nil {
		s.SlotsPerWorker = *tr.NumProcPerNode
	}
	s.Workers = numNodes
	if s.LauncherAsNode {
		s.Workers = max(numNodes-1, 1)
	}

	var foundLauncher, foundWorker bool
	for _, rj := range spec.Template.Spec.ReplicatedJobs {
		pod := *rj.Template.Spec.Template.Spec.DeepCopy()
		trainerStep := rj.Template.Labels[ancestorLabel] == "trainer"
		if tr != nil && tr.ResourcesPerNode != nil && (trainerStep || (s.LauncherAsNode && rj.Name == api.WorkerJob)) {
			for i := range pod.Containers {
				if pod.Containers[i].Name != "node" {
					continue
				}
				merged, err := trainingruntimeutil.MergeResourceRequirements(pod.Containers[i].Resources, *tr.ResourcesPerNode)
				if err != nil {
					return Shape{}, fmt.Errorf("failed to merge spec.trainer.resourcesPerNode: %w", err)
				}
				pod.Containers[i].Resources = merged
				break
			}
		}
		applyPatches(&pod, rj.Name, tj.Spec.RuntimePatches)
		switch rj.Name {
		case api.LauncherJob:
			s.LauncherPod, foundLauncher = pod, true
		case api.WorkerJob:
			s.WorkerPod, foundWorker = pod, true
		}
	}
	if !foundLauncher || !foundWorker {
		return Shape{}, fmt.Errorf("runtime %s lacks the %q or %q replicated job that MPI runtimes need", tj.Spec.RuntimeRef.Name, api.LauncherJob, api.WorkerJob)
	}
	return s, nil
}

// applyPatches applies the scheduling parts of runtimePatches that matter
// for admission: node selector, tolerations, affinity.
func applyPatches(pod *corev1.PodSpec, rjName string, patches []trainer.RuntimePatch) {
	for _, p := range patches {
		if p.TrainingRuntimeSpec == nil || p.TrainingRuntimeSpec.Template == nil || p.TrainingRuntimeSpec.Template.Spec == nil {
			continue
		}
		for _, rj := range p.TrainingRuntimeSpec.Template.Spec.ReplicatedJobs {
			if rj.Name != rjName || rj.Template == nil || rj.Template.Spec == nil || rj.Template.Spec.Template == nil || rj.Template.Spec.Template.Spec == nil {
				continue
			}
			ps := rj.Template.Spec.Template.Spec
			if len(ps.NodeSelector) > 0 && pod.NodeSelector == nil {
				pod.NodeSelector = map[string]string{}
			}
			for k, v := range ps.NodeSelector {
				pod.NodeSelector[k] = v
			}
			pod.Tolerations = append(pod.Tolerations, ps.Tolerations...)
			if ps.Affinity != nil {
				pod.Affinity = ps.Affinity.DeepCopy()
			}
		}
	}
}

// WorkerImage is the image of the Workers' node container ("" when the
// runtime has none).
func WorkerImage(spec *trainer.TrainingRuntimeSpec) string {
	for _, rj := range spec.Template.Spec.ReplicatedJobs {
		if rj.Name != api.WorkerJob {
			continue
		}
		for _, c := range rj.Template.Spec.Template.Spec.Containers {
			if c.Name == api.NodeContainer {
				return c.Image
			}
		}
	}
	return ""
}
