package runtimes

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/mpijob/mpijob/config"
)

// loadRuntime reads one of the shipped runtimes, so the test follows them.
func loadRuntime(t *testing.T, name string) *trainer.ClusterTrainingRuntime {
	t.Helper()
	rt, err := config.Runtime(name)
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

func TestShapeOf(t *testing.T) {
	gpu := func(n string) *corev1.ResourceRequirements {
		return &corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse(n)}}
	}
	cases := map[string]struct {
		runtime       string
		asNode        bool
		trainer       *trainer.Trainer
		patches       []trainer.RuntimePatch
		wantWorkers   int32
		wantSlots     int32
		wantWorkerGPU string
		wantLaunchGPU string
		wantSelector  map[string]string
	}{
		"cpu runtime: numNodes is the Worker count": {
			runtime: "mpi-openmpi", trainer: &trainer.Trainer{NumNodes: ptr.To[int32](4), NumProcPerNode: ptr.To[int32](2)},
			wantWorkers: 4, wantSlots: 2, wantWorkerGPU: "0", wantLaunchGPU: "0",
		},
		"cpu runtime default: one Worker": {
			runtime: "mpi-openmpi", wantWorkers: 1, wantSlots: 1, wantWorkerGPU: "0", wantLaunchGPU: "0",
		},
		"gpu runtime: Workers have the GPUs, the Launcher none": {
			runtime: "mpi-openmpi-gpu", trainer: &trainer.Trainer{NumNodes: ptr.To[int32](3)},
			wantWorkers: 3, wantSlots: 1, wantWorkerGPU: "1", wantLaunchGPU: "0",
		},
		"resourcesPerNode on a separate Launcher reaches the Launcher only": {
			runtime: "mpi-openmpi-gpu", trainer: &trainer.Trainer{NumNodes: ptr.To[int32](2), ResourcesPerNode: gpu("4")},
			wantWorkers: 2, wantSlots: 1, wantWorkerGPU: "1", wantLaunchGPU: "4",
		},
		"a Launcher that hosts ranks counts as a node and resources reach both": {
			runtime: "mpi-openmpi-gpu", asNode: true, trainer: &trainer.Trainer{NumNodes: ptr.To[int32](5), ResourcesPerNode: gpu("4")},
			wantWorkers: 4, wantSlots: 1, wantWorkerGPU: "4", wantLaunchGPU: "4",
		},
		"patches add a node selector": {
			runtime: "mpi-openmpi", trainer: &trainer.Trainer{NumNodes: ptr.To[int32](2)},
			patches: []trainer.RuntimePatch{{TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{Template: &trainer.JobSetTemplatePatch{Spec: &trainer.JobSetSpecPatch{
				ReplicatedJobs: []trainer.ReplicatedJobPatch{{Name: "node", Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{Template: &trainer.PodTemplatePatch{
					Spec: &trainer.PodSpecPatch{NodeSelector: map[string]string{"pool": "cpu"}}}}}}},
			}}}}},
			wantWorkers: 2, wantSlots: 1, wantWorkerGPU: "0", wantLaunchGPU: "0", wantSelector: map[string]string{"pool": "cpu"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rt := loadRuntime(t, tc.runtime)
			rt.Spec.MLPolicy.MPI.RunLauncherAsNode = ptr.To(tc.asNode)
			tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "j"}, Spec: trainer.TrainJobSpec{
				RuntimeRef: trainer.RuntimeRef{Name: tc.runtime}, Trainer: tc.trainer, RuntimePatches: tc.patches}}
			before := rt.Spec.DeepCopy()
			s, err := ShapeOf(tj, &rt.Spec)
			if err != nil {
				t.Fatal(err)
			}
			// The controllers hand ShapeOf the cache's own runtime
			// (RuntimeLookup.GetShared): it must leave it as it was.
			if diff := cmp.Diff(before, &rt.Spec); diff != "" {
				t.Errorf("ShapeOf changed the runtime (-before,+after):\n%s", diff)
			}
			if s.Workers != tc.wantWorkers || s.SlotsPerWorker != tc.wantSlots || s.Launchers != 1 {
				t.Errorf("workers=%d slots=%d launchers=%d, want %d, %d, 1", s.Workers, s.SlotsPerWorker, s.Launchers, tc.wantWorkers, tc.wantSlots)
			}
			wg := s.WorkerPod.Containers[0].Resources.Limits["nvidia.com/gpu"]
			lg := s.LauncherPod.Containers[0].Resources.Limits["nvidia.com/gpu"]
			if wg.String() != tc.wantWorkerGPU || lg.String() != tc.wantLaunchGPU {
				t.Errorf("GPUs worker=%s launcher=%s, want %s and %s", wg.String(), lg.String(), tc.wantWorkerGPU, tc.wantLaunchGPU)
			}
			if diff := cmp.Diff(tc.wantSelector, s.WorkerPod.NodeSelector); diff != "" {
				t.Errorf("worker nodeSelector (-want,+got):\n%s", diff)
			}
			if s.LauncherPod.NodeSelector != nil {
				t.Errorf("launcher got nodeSelector %v from a Worker patch", s.LauncherPod.NodeSelector)
			}
		})
	}
}

func TestShapeOfRejectsNonMPI(t *testing.T) {
	tj := &trainer.TrainJob{Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: "torch"}}}
	if _, err := ShapeOf(tj, &trainer.TrainingRuntimeSpec{MLPolicy: &trainer.MLPolicy{}}); err == nil {
		t.Error("a runtime without MPI policy got a shape")
	}
}
