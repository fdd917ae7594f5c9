package cli

import (
	"fmt"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/queue"
	"github.com/mpijob/mpijob/pkg/runtimes"
)

// patchManager names the runtime patches kubectl-mpijob writes.
const patchManager = "mpijob.dev/kubectl-mpijob"

// jobFlags are the job settings create and clone share.
type jobFlags struct {
	workers, slots          int32
	runtime, image, queue   string
	gpus                    int64
	cpu, memory             string
	launcherCPU, launcherMe string
	env, nodeSelector       []string
}

func (f *jobFlags) add(fs *pflag.FlagSet, defaults bool) {
	runtimeDefault := ""
	if defaults {
		runtimeDefault = "mpi-openmpi"
	}
	fs.Int32Var(&f.workers, "workers", 0, "number of Workers")
	fs.Int32Var(&f.slots, "slots-per-worker", 0, "MPI ranks per Worker (default: the runtime's, or the GPUs per Worker)")
	fs.StringVar(&f.runtime, "runtime", runtimeDefault, "MPI runtime (kubectl mpijob runtimes list)")
	fs.StringVar(&f.image, "image", "", "image of the Launcher (default: the runtime's)")
	fs.Int64Var(&f.gpus, "gpus", 0, "nvidia.com/gpu per Worker")
	fs.StringVar(&f.cpu, "cpu", "", "CPU per Worker, e.g. 4 or 500m")
	fs.StringVar(&f.memory, "memory", "", "memory per Worker, e.g. 16Gi")
	fs.StringVar(&f.launcherCPU, "launcher-cpu", "", "CPU of the Launcher")
	fs.StringVar(&f.launcherMe, "launcher-memory", "", "memory of the Launcher")
	fs.StringArrayVar(&f.env, "env", nil, "environment variable of the Launcher, KEY=VALUE (repeatable; mpirun -x passes it to ranks)")
	fs.StringArrayVar(&f.nodeSelector, "node-selector", nil, "node label the Launcher and Workers need, key=value (repeatable)")
	fs.StringVar(&f.queue, "queue", "", "Kueue LocalQueue to submit to (the job waits Queued until it fits whole)")
}

// apply sets what the flags say on tj; fs tells which flags were given.
// It checks every value first and names the flag of the first bad one.
func (f *jobFlags) apply(tj *trainer.TrainJob, rt *trainer.TrainingRuntimeSpec, runtimeName string, changed func(string) bool) error {
	if tj.Spec.Trainer == nil {
		tj.Spec.Trainer = &trainer.Trainer{}
	}
	tr := tj.Spec.Trainer
	allRanks := runtimes.LauncherAsNode(rt)
	if changed("workers") {
		if f.workers < 1 {
			return usageErr("--workers %d: a job needs at least 1 Worker", f.workers)
		}
		n := f.workers
		if allRanks {
			// The Launcher is a rank host: numNodes counts it.
			n = f.workers + 1
		}
		tr.NumNodes = ptr.To(n)
	}
	if changed("slots-per-worker") {
		if f.slots < 1 {
			return usageErr("--slots-per-worker %d: use 1 or more (MPI ranks per Worker)", f.slots)
		}
		tr.NumProcPerNode = ptr.To(f.slots)
	}
	if changed("image") {
		if strings.TrimSpace(f.image) == "" {
			return usageErr("--image is empty: give an image reference, e.g. ghcr.io/mpijob/openmpi:4.1")
		}
		tr.Image = ptr.To(f.image)
	}
	worker := corev1.ResourceList{}
	if changed("gpus") {
		if f.gpus < 0 {
			return usageErr("--gpus %d: use 0 or more", f.gpus)
		}
		if f.gpus > 0 {
			worker["nvidia.com/gpu"] = *resource.NewQuantity(f.gpus, resource.DecimalSI)
		}
	}
	for flag, val := range map[string]string{"cpu": f.cpu, "memory": f.memory} {
		if !changed(flag) {
			continue
		}
		q, err := resource.ParseQuantity(val)
		if err != nil || q.Sign() <= 0 {
			return usageErr("--%s %q is not a positive quantity: use e.g. %s", flag, val, map[string]string{"cpu": "4 or 500m", "memory": "16Gi"}[flag])
		}
		worker[corev1.ResourceName(flag)] = q
	}
	launcher := corev1.ResourceList{}
	for flag, val := range map[string]string{"launcher-cpu": f.launcherCPU, "launcher-memory": f.launcherMe} {
		if !changed(flag) {
			continue
		}
		q, err := resource.ParseQuantity(val)
		if err != nil || q.Sign() <= 0 {
			return usageErr("--%s %q is not a positive quantity: use e.g. 1 or 2Gi", flag, val)
		}
		launcher[corev1.ResourceName(strings.TrimPrefix(flag, "launcher-"))] = q
	}
	switch {
	case len(worker) > 0 && !allRanks:
		return usageErr("--gpus/--cpu/--memory: runtime %s sets its Workers' resources itself (Trainer V2 applies per-job resources only to runtimes whose Launcher hosts ranks, such as mpi-openmpi-gpu); use such a runtime, or ask an administrator for a runtime sized for you", runtimeName)
	case len(launcher) > 0 && allRanks:
		return usageErr("--launcher-cpu/--launcher-memory: on runtime %s the Launcher is a rank host sized like every Worker; use --cpu/--memory/--gpus", runtimeName)
	case len(worker) > 0:
		tr.ResourcesPerNode = requirements(worker)
	case len(launcher) > 0:
		tr.ResourcesPerNode = requirements(launcher)
	}
	if changed("env") {
		for _, kv := range f.env {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return usageErr("--env %q: use KEY=VALUE", kv)
			}
			tr.Env = setEnv(tr.Env, k, v)
		}
	}
	if changed("node-selector") {
		sel := map[string]string{}
		for _, kv := range f.nodeSelector {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return usageErr("--node-selector %q: use key=value, e.g. nvidia.com/gpu.product=A100", kv)
			}
			sel[k] = v
		}
		setNodeSelector(tj, sel)
	}
	if changed("queue") {
		if tj.Labels == nil {
			tj.Labels = map[string]string{}
		}
		if f.queue == "" {
			delete(tj.Labels, queue.NameLabel)
		} else {
			tj.Labels[queue.NameLabel] = f.queue
		}
	}
	return nil
}

// requirements asks for rl and limits what must be limited: memory (an
// OOM kill beats a starved node) and extended resources such as GPUs.
func requirements(rl corev1.ResourceList) *corev1.ResourceRequirements {
	r := &corev1.ResourceRequirements{Requests: rl.DeepCopy(), Limits: corev1.ResourceList{}}
	for k, q := range rl {
		if k != corev1.ResourceCPU {
			r.Limits[k] = q
		}
	}
	return r
}

func setEnv(env []corev1.EnvVar, k, v string) []corev1.EnvVar {
	for i := range env {
		if env[i].Name == k {
			env[i].Value = v
			return env
		}
	}
	return append(env, corev1.EnvVar{Name: k, Value: v})
}

// setNodeSelector replaces kubectl-mpijob's runtime patch with one that
// sends the Launcher and the Workers to nodes with the labels sel.
func setNodeSelector(tj *trainer.TrainJob, sel map[string]string) {
	var kept []trainer.RuntimePatch
	for _, p := range tj.Spec.RuntimePatches {
		if p.Manager != patchManager {
			kept = append(kept, p)
		}
	}
	var rjobs []trainer.ReplicatedJobPatch
	for _, name := range []string{api.LauncherJob, api.WorkerJob} {
		rjobs = append(rjobs, trainer.ReplicatedJobPatch{
			Name: name,
			Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{Template: &trainer.PodTemplatePatch{
				Spec: &trainer.PodSpecPatch{NodeSelector: sel},
			}}},
		})
	}
	tj.Spec.RuntimePatches = append(kept, trainer.RuntimePatch{
		Manager:             patchManager,
		TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{Template: &trainer.JobSetTemplatePatch{Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: rjobs}}},
	})
}

func describeResources(rl corev1.ResourceList) string {
	if len(rl) == 0 {
		return "-"
	}
	var parts []string
	for _, k := range []corev1.ResourceName{"nvidia.com/gpu", corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := rl[k]; ok {
			parts = append(parts, fmt.Sprintf("%s=%s", k, q.String()))
		}
	}
	return strings.Join(parts, ",")
}
