// Package jobview is the one computed view of an MPI job that every
// interface shows: the job as a list shows it (Job), its Launcher and
// Workers with their state in words and their health (Pods), and what it
// asks for (Resources). describe and get (pkg/cli), the dashboard and the
// SDK's vectors (testdata/) read a job through it, so a word means the same
// everywhere. Anchor: Kueue's workload.Info.
package jobview

import (
	"slices"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/progress"
	"github.com/mpijob/mpijob/pkg/queue"
	"github.com/mpijob/mpijob/pkg/runtimes"
)

// Job is one job as a list shows it (the dashboard's Training jobs page):
// the manager's Status in the same words as the CLI and the SDK.
type Job struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	// Runtime is the runtime the user chose (the base of a per-job runtime).
	Runtime string `json:"runtime"`
	// MPI is true for jobs on an MPI runtime (those mpijob-manager reports on).
	MPI bool `json:"mpi"`
	// Reported is true once mpijob-manager has written the job's status;
	// until then the phase is Trainer's and the Workers ready are unknown.
	Reported  bool      `json:"reported"`
	Phase     api.Phase `json:"phase"`
	Reason    string    `json:"reason,omitempty"`
	Message   string    `json:"message,omitempty"`
	NextStep  string    `json:"nextStep,omitempty"`
	NextSteps []string  `json:"nextSteps,omitempty"`
	// Steps are the next steps as data (api.Step): the dashboard shows
	// each one's command as a command.
	Steps          []api.Step        `json:"steps,omitempty"`
	QueuePosition  *int32            `json:"queuePosition,omitempty"`
	Launcher       api.LauncherState `json:"launcher,omitempty"`
	WorkersReady   int32             `json:"workersReady"`
	WorkersTotal   int32             `json:"workersTotal"`
	SlotsPerWorker int32             `json:"slotsPerWorker"`
	// GPUsPerWorker is what each Worker pod asks of GPUs in the words of
	// runtimes.GPUsOf ("2", "1 amd.com/gpu"; "" for none): as the manager
	// read it from the runtime, else from the job's resourcesPerNode.
	GPUsPerWorker string     `json:"gpusPerWorker,omitempty"`
	Creator       string     `json:"creator,omitempty"`
	Created       time.Time  `json:"created"`
	Started       *time.Time `json:"started,omitempty"`
	// AttemptStarted is when this attempt's Launcher started, once the job
	// was started again (Started is then its first attempt's).
	AttemptStarted *time.Time `json:"attemptStarted,omitempty"`
	Finished       *time.Time `json:"finished,omitempty"`
	Transitioned   *time.Time `json:"transitioned,omitempty"`
	// Observed is when mpijob-manager last wrote this status.
	Observed *time.Time `json:"observed,omitempty"`
	// Estimate is a queued job's estimated start (estimateStarts).
	Estimate  *Estimate `json:"estimate,omitempty"`
	Suspended bool      `json:"suspended"`
	Deleting  bool      `json:"deleting,omitempty"`
	// Failed are the Launcher and Workers that failed, as the diagnosis
	// names them (the status's structured list; no message is parsed).
	Failed []api.FailedPod `json:"failed,omitempty"`
	// Progress is the last progress the ranks reported (nil: none).
	Progress *progress.TrainerStatus `json:"progress,omitempty"`
}

// Copy is a copy of j that shares nothing a caller may change in place: its
// slices are copied (its pointers point at values nobody changes).
func (j Job) Copy() Job {
	j.NextSteps = slices.Clone(j.NextSteps)
	j.Steps = slices.Clone(j.Steps)
	j.Failed = slices.Clone(j.Failed)
	return j
}

// JobOf is a TrainJob as a list shows it.
func JobOf(tj *trainer.TrainJob) Job {
	st, ok := api.StatusOf(tj)
	return JobWith(tj, st, ok)
}

// JobWith is JobOf for a caller that has read the job's status already
// (api.StatusOf): the status is not decoded again.
func JobWith(tj *trainer.TrainJob, st api.Status, ok bool) Job {
	j := Job{
		Name: tj.Name, Namespace: tj.Namespace,
		Runtime:  api.RuntimeOf(tj.Labels, tj.Spec.RuntimeRef.Name),
		Creator:  tj.Annotations[api.CreatorAnnotation],
		Created:  tj.CreationTimestamp.Time,
		Deleting: tj.DeletionTimestamp != nil,
	}
	// Kueue keeps every job it manages suspended until it admits it: such
	// a job is suspended by its user only when the diagnosis says so (its
	// Workload is inactive), below.
	kueue := tj.Labels[queue.NameLabel] != ""
	j.Suspended = !kueue && ptr.Deref(tj.Spec.Suspend, false)
	if p, ok := progress.Of(tj); ok {
		j.Progress = &p
	}
	if tr := tj.Spec.Trainer; tr != nil {
		j.WorkersTotal = ptr.Deref(tr.NumNodes, 0)
		j.SlotsPerWorker = ptr.Deref(tr.NumProcPerNode, 0)
		if tr.ResourcesPerNode != nil {
			j.GPUsPerWorker = runtimes.GPUsOf(&corev1.PodSpec{Containers: []corev1.Container{{Resources: *tr.ResourcesPerNode}}})
		}
	}
	// The manager's status, or the fallback the CLI and the SDK use too.
	j.MPI = ok || tj.Labels[api.BaseRuntimeLabel] != ""
	if !ok {
		j.Phase, j.Message = st.Phase, st.Message
		if st.CompletionTime != nil {
			j.Finished = &st.CompletionTime.Time
		}
		return j
	}
	j.Reported = true
	j.Phase, j.Reason, j.Message, j.NextStep, j.NextSteps, j.Steps = st.Phase, st.Reason, st.Message, st.NextStep, st.NextSteps, st.Steps
	j.Failed = st.Failed
	if kueue {
		j.Suspended = st.Phase == api.PhaseSuspended
	}
	j.QueuePosition, j.Launcher = st.QueuePosition, st.Launcher
	j.WorkersReady, j.WorkersTotal = st.WorkersReady, st.WorkersTotal
	if st.SlotsPerWorker > 0 {
		j.SlotsPerWorker = st.SlotsPerWorker
	}
	if st.GPUsPerWorker != "" {
		j.GPUsPerWorker = st.GPUsPerWorker
	}
	if st.StartTime != nil {
		j.Started = &st.StartTime.Time
	}
	// A job started again (a retry, a preemption) has run since its first
	// attempt: its duration counts them all.
	if st.FirstStartTime != nil {
		j.Started, j.AttemptStarted = &st.FirstStartTime.Time, j.Started
	}
	if st.CompletionTime != nil {
		j.Finished = &st.CompletionTime.Time
	}
	if st.LastTransitionTime != nil {
		j.Transitioned = &st.LastTransitionTime.Time
	}
	if st.ObservedTime != nil {
		j.Observed = &st.ObservedTime.Time
	}
	return j
}
