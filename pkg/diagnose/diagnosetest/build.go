// Package diagnosetest builds the TrainJobs, JobSets and pods that the
// diagnosis's tests (package diagnose and its controller) diagnose: one
// job "hello" in namespace "ns", its Launcher and Workers in every state
// the rules read.
package diagnosetest

import (
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
)

// T0 is the tests' clock at the start.
var T0 = time.Date(2026, 11, 22, 4, 0, 0, 0, time.UTC)

// JobW builds a TrainJob.
type JobW struct{ trainer.TrainJob }

// Job is the TrainJob "hello" in namespace "ns" with workers Workers of 2 slots.
func Job(workers int32) *JobW {
	return &JobW{trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "ns", Generation: 1},
		Spec:       trainer.TrainJobSpec{Trainer: &trainer.Trainer{NumNodes: ptr.To(workers), NumProcPerNode: ptr.To[int32](2)}},
	}}
}

// Cond sets one of Trainer's conditions true.
func (w *JobW) Cond(t, reason, msg string) *JobW {
	w.Status.Conditions = append(w.Status.Conditions, metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: reason, Message: msg, LastTransitionTime: metav1.NewTime(T0)})
	return w
}

// Suspend suspends the job.
func (w *JobW) Suspend() *JobW { w.Spec.Suspend = ptr.To(true); return w }

// Deadline sets the job's active deadline in seconds.
func (w *JobW) Deadline(s int64) *JobW { w.Spec.ActiveDeadlineSeconds = s; return w }

// Obj is the TrainJob built.
func (w *JobW) Obj() *trainer.TrainJob { return &w.TrainJob }

// JobSet is the job's JobSet with workers Workers and a Launcher.
func JobSet(workers int32) *jobsetv1alpha2.JobSet {
	return &jobsetv1alpha2.JobSet{Spec: jobsetv1alpha2.JobSetSpec{ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{
		{Name: "node", Replicas: 1, Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Parallelism: ptr.To(workers)}}},
		{Name: "launcher", Replicas: 1},
	}}}
}

// PodW builds a pod of the job.
type PodW struct{ corev1.Pod }

// Worker is Worker i's pod, pending and unschedulable.
func Worker(i string) *PodW {
	return &PodW{corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hello-node-0-" + i, Labels: map[string]string{
			"jobset.sigs.k8s.io/replicatedjob-name": "node", batchv1.JobCompletionIndexAnnotation: i,
		}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "node", Image: "ghcr.io/mpijob/openmpi:4.1"}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending,
			Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/18 nodes are available: 16 Insufficient nvidia.com/gpu."}}},
	}}
}

// Launcher is the Launcher's pod, pending and unschedulable.
func Launcher() *PodW {
	p := Worker("0")
	p.Name = "hello-launcher-0-0"
	p.Labels["jobset.sigs.k8s.io/replicatedjob-name"] = "launcher"
	return p
}

// Unschedulable says the scheduler cannot place the pod, with msg.
func (w *PodW) Unschedulable(msg string) *PodW {
	w.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: msg}}
	return w
}

// On places the pod on node.
func (w *PodW) On(node string) {
	w.Spec.NodeName = node
	w.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
}

// Running runs the pod (on mpijob-node-1 unless placed), ready or not.
func (w *PodW) Running(ready bool) *PodW {
	if w.Spec.NodeName == "" {
		w.On("mpijob-node-1")
	}
	w.Status.Phase = corev1.PodRunning
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	w.Status.Conditions = append(w.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: st})
	w.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "node", Image: w.Spec.Containers[0].Image,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(T0)}}}}
	return w
}

// Terminated ends the pod's container with reason and exit code.
func (w *PodW) Terminated(reason string, code int32) *PodW {
	w.On("mpijob-node-1")
	w.Status.Phase = corev1.PodFailed
	if code == 0 {
		w.Status.Phase = corev1.PodSucceeded
	}
	w.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "node", State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{Reason: reason, ExitCode: code, StartedAt: metav1.NewTime(T0)}}}}
	return w
}

// Waiting holds the pod's container waiting for reason, with msg.
func (w *PodW) Waiting(reason, msg string) *PodW {
	w.On("mpijob-node-1")
	w.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "node", Image: w.Spec.Containers[0].Image,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}}
	return w
}

// Image sets the node container's image.
func (w *PodW) Image(ref string) *PodW {
	w.Spec.Containers[0].Image = ref
	return w
}

// MemLimit sets the node container's memory limit.
func (w *PodW) MemLimit(q string) *PodW {
	w.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(q)}
	return w
}

// GPUs sets the GPUs the node container asks for.
func (w *PodW) GPUs(n string) *PodW {
	w.Spec.Containers[0].Resources.Requests = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse(n)}
	return w
}

// Evicted evicts the pod from mpijob-node-2 with msg.
func (w *PodW) Evicted(msg string) *PodW {
	w.On("mpijob-node-2")
	w.Status.Phase = corev1.PodFailed
	w.Status.Reason, w.Status.Message = "Evicted", msg
	return w
}

// Deleting marks the pod as being deleted.
func (w *PodW) Deleting() *PodW {
	w.DeletionTimestamp = ptr.To(metav1.NewTime(T0))
	return w
}

// Obj is the pod built.
func (w *PodW) Obj() corev1.Pod { return w.Pod }

// Pods are the pods built.
func Pods(ws ...*PodW) []corev1.Pod {
	out := make([]corev1.Pod, 0, len(ws))
	for _, w := range ws {
		out = append(out, w.Obj())
	}
	return out
}

// LogReads are the options of every log read the fake client saw.
func LogReads(cs *kubefake.Clientset) []corev1.PodLogOptions {
	var out []corev1.PodLogOptions
	for _, a := range cs.Actions() {
		if a.GetSubresource() != "log" {
			continue
		}
		if g, ok := a.(clienttesting.GenericAction); ok {
			if o, ok := g.GetValue().(*corev1.PodLogOptions); ok {
				out = append(out, *o)
			}
		}
	}
	return out
}
