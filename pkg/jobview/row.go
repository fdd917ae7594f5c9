package jobview

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/mpijob/mpijob/pkg/api"
)

// Row is a job as one line of a list, in words: the cells `kubectl mpijob
// get` prints (NAME, RUNTIME, PHASE, WORKERS, PROGRESS, AGE, DURATION, and
// with -o wide SLOTS, GPUS, CREATOR, REASON) and the SDK's MPIJob.row
// returns. "-" stands for nothing. testdata/jobs.json holds its vectors,
// which the SDK's tests load too.
type Row struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	Runtime   string `json:"runtime"`
	// Phase is the job's phase, with its place in the queue: "Queued (#2)".
	Phase string `json:"phase"`
	// Workers is ready/total ("1/2"), "?/2" while mpijob-manager has
	// written no status.
	Workers  string `json:"workers"`
	Progress string `json:"progress"`
	Age      string `json:"age"`
	Duration string `json:"duration"`
	// Slots is the slots per worker (at least 1).
	Slots   int32  `json:"slots"`
	GPUs    string `json:"gpus"`
	Creator string `json:"creator"`
	// Reason is the manager's reason, or "(no mpijob-manager status)".
	Reason string `json:"reason"`
}

// NoStatusReason is a row's reason while mpijob-manager has written no
// status for the job.
const NoStatusReason = "(no mpijob-manager status)"

// RowOf is j as one line of a list, at now.
func RowOf(j Job, now time.Time) Row {
	r := Row{
		Name: j.Name, Namespace: j.Namespace, Runtime: j.Runtime, Phase: string(j.Phase),
		Workers:  fmt.Sprintf("%d/%d", j.WorkersReady, j.WorkersTotal),
		Progress: "-", Age: duration.HumanDuration(now.Sub(j.Created)), Duration: Ran(j.Started, j.Finished, now),
		Slots: max(j.SlotsPerWorker, 1), GPUs: dash(j.GPUsPerWorker), Creator: dash(j.Creator), Reason: dash(j.Reason),
	}
	if !j.Reported {
		r.Workers, r.Reason = fmt.Sprintf("?/%d", j.WorkersTotal), NoStatusReason
	}
	if j.Phase == api.PhaseQueued && j.QueuePosition != nil {
		r.Phase = fmt.Sprintf("Queued (#%d)", *j.QueuePosition)
	}
	if j.Progress != nil {
		r.Progress = dash(j.Progress.Short())
	}
	return r
}

// Ran is how long a job ran: from its start to its end, or to now while it
// runs ("-": it has not started).
func Ran(started, finished *time.Time, now time.Time) string {
	if started == nil {
		return "-"
	}
	end := now
	if finished != nil {
		end = *finished
	}
	return duration.HumanDuration(end.Sub(*started))
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
