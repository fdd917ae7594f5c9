package diagnose

import (
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"

	"github.com/mpijob/mpijob/pkg/api"
)

// What a diagnosis needs beyond a job's pods. The diagnosis controller
// (package diagnose/controller) gathers an Input in steps: the job, its
// JobSet and pods first, then only the reads these say the rules will
// look at, so a job that starts and runs normally costs no Event, log or
// node reads. Each is a pure question about what was gathered so far.

// NeedsFailedCreate reports that pods are overdue, and the FailedCreate Events on the
// job's Jobs say why they do not appear (quota, admission).
func (in Input) NeedsFailedCreate() bool { return podsOverdue(in, in.Now) }

// NeedsFailedMount reports that a placed Worker does not start, and its FailedMount
// Events may say which volume the kubelet cannot mount.
func (in Input) NeedsFailedMount() bool { return workersMounting(in) }

// NeedsKilling reports that a Worker is gone while the Launcher runs (or ran), and
// the kubelet's Killing Event still names its pod and node.
func (in Input) NeedsKilling() bool {
	ls := launcherState(in)
	return (ls == api.LauncherRunning || ls == api.LauncherDeleted) && int32(len(in.Workers)) < workersTotal(in)
}

// NeedsFailedEvents reports that the job failed, and its Workers' Warning "Failed"
// Events say why a container did not start, though the pods are gone.
func (in Input) NeedsFailedEvents() bool { return JobFailed(in.TrainJob) }

// NeedsLauncherLog says which read of the Launcher's log the rules take:
// failed, a failed job's lines (its MPI errors); watch, a running job's
// last line and step times, which a progress timeout judges.
func (in Input) NeedsLauncherLog() (failed, watch bool) {
	failed = JobFailed(in.TrainJob) && len(in.Launcher) > 0
	watch = in.ProgressTimeout > 0 && launcherState(in) == api.LauncherRunning
	return failed, watch
}

// NeedsNodeOOM reports that a failed job's Launcher was killed with SIGKILL, which
// the node's own OOM kill (a SystemOOM Event on the Node) may explain.
func (in Input) NeedsNodeOOM() bool {
	if !JobFailed(in.TrainJob) || len(in.Launcher) == 0 {
		return false
	}
	code, ok := launcherExitCode(in.Launcher)
	return ok && code == 137
}

// NeedsCapacity reports that the scheduler cannot place a Worker, or a rank is slow,
// and the nodes' free capacity (or what differs on the slow rank's node)
// says why.
func (in Input) NeedsCapacity() bool {
	return in.Nodes == nil && (unschedulable(in.Workers) > 0 || in.SlowRank != nil)
}

// NewestLauncher is the job's newest Launcher pod (nil: none).
func (in Input) NewestLauncher() *corev1.Pod {
	if len(in.Launcher) == 0 {
		return nil
	}
	return newest(in.Launcher)
}

// JobFailed reports Trainer's Failed condition on tj.
func JobFailed(tj *trainer.TrainJob) bool { return tj != nil && condTrue(tj, trainer.TrainJobFailed) }

// JobComplete reports Trainer's Complete condition on tj.
func JobComplete(tj *trainer.TrainJob) bool {
	return tj != nil && condTrue(tj, trainer.TrainJobComplete)
}
