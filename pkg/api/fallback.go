package api

import (
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// queueNameLabel is the label with which a job asks Kueue for a LocalQueue
// (queue.NameLabel; pkg/queue imports this package).
const queueNameLabel = "kueue.x-k8s.io/queue-name"

// StatusOf is the job's status as mpijob-manager wrote it (fromManager),
// or, until it has, what Trainer's conditions and the spec say: the phase
// (a job held by a queue is Queued, never Suspended), Trainer's failure
// message, the completion time and the Worker count. The CLI, the
// dashboard and the Python SDK (JobStatus.from_trainjob) follow this one
// rule; testdata/fallback-status.json holds the vectors both test.
func StatusOf(tj *trainer.TrainJob) (s Status, fromManager bool) {
	if s, ok, err := ReadStatus(tj.Annotations); ok && err == nil {
		return s, true
	}
	s = Status{Phase: PhasePending}
	suspended := tj.Spec.Suspend != nil && *tj.Spec.Suspend
	for _, c := range tj.Status.Conditions {
		if c.Status != "True" {
			continue
		}
		switch c.Type {
		case trainer.TrainJobComplete:
			s.Phase, s.CompletionTime, s.Message = PhaseSucceeded, timeOf(c.LastTransitionTime), ""
		case trainer.TrainJobFailed:
			s.Phase, s.CompletionTime, s.Message = PhaseFailed, timeOf(c.LastTransitionTime), CleanText(c.Message)
		case trainer.TrainJobSuspended:
			suspended = true
		}
	}
	if !s.Phase.Finished() && suspended {
		s.Phase = PhaseSuspended
		if _, queued := tj.Labels[queueNameLabel]; queued {
			// A queue holds suspended jobs until they fit.
			s.Phase = PhaseQueued
		}
	}
	if tj.Spec.Trainer != nil && tj.Spec.Trainer.NumNodes != nil {
		s.WorkersTotal = *tj.Spec.Trainer.NumNodes
	}
	return s, false
}

// timeOf is t, or nil when it is unset.
func timeOf(t metav1.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
