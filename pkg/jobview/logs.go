package jobview

import (
	"strconv"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mpijob/mpijob/pkg/api"
)

// LogSource is where one Launcher's or Worker's log is read.
type LogSource string

const (
	// LogNone is nowhere: the pod is not there and the store has nothing
	// of it, or there is no store.
	LogNone LogSource = "none"
	// LogPod is the pod's own log, from the kubelet.
	LogPod LogSource = "pod"
	// LogStore is the log store's lines (config/logstore): the pod is
	// gone, or the store was asked for.
	LogStore LogSource = "store"
)

// LogWhere is what decides where a log is read.
type LogWhere struct {
	// Role is launcher or worker.
	Role string `json:"role"`
	// PodLive: the job has this Launcher's or Worker's pod now.
	PodLive bool `json:"podLive"`
	// LauncherLive: the job has its Launcher pod now.
	LauncherLive bool `json:"launcherLive"`
	// Finished: the job Succeeded or Failed.
	Finished bool `json:"finished"`
	// Store: the cluster keeps a log store the user may read.
	Store bool `json:"store"`
	// StoreOnly: the user asked for the store's lines (--source store).
	StoreOnly bool `json:"storeOnly"`
}

// LogFrom says where a Launcher's or Worker's log is read, the same in the
// CLI, the dashboard and the SDK (vectors: testdata/log-sources.json): its
// pod while the job has it; else the store for a job that ran, that is one
// that finished, or a Worker gone while its Launcher still runs. A job
// that never started has nothing in the store.
func LogFrom(w LogWhere) LogSource {
	if w.PodLive && !w.StoreOnly {
		return LogPod
	}
	if !w.Store {
		return LogNone
	}
	if w.Finished || w.StoreOnly || (w.Role == "worker" && w.LauncherLive) {
		return LogStore
	}
	return LogNone
}

// LogRequest is a selection of a job's logs: Target is "launcher",
// "worker-N" or "all"; StoreOnly asks for the log store's lines alone
// (--source store).
type LogRequest struct {
	Target    string `json:"target"`
	StoreOnly bool   `json:"storeOnly,omitempty"`
}

// LogJob is what the plan needs of a job.
type LogJob struct {
	// Workers is the job's Workers: its spec's, or its status's when
	// that says more.
	Workers int `json:"workers"`
	// LauncherLive: the job has its Launcher pod now.
	LauncherLive bool `json:"launcherLive,omitempty"`
	// LiveWorkers are the indexes of the Workers whose pod is there now.
	LiveWorkers []int `json:"liveWorkers,omitempty"`
	// Finished: the job Succeeded or Failed, or it is suspended or
	// preempted (its pods gone until it starts again).
	Finished bool `json:"finished,omitempty"`
	// Store: the cluster keeps a log store the user may read.
	Store bool `json:"store,omitempty"`
}

// TrainerFinished reports a TrainJob that Trainer has marked Complete or
// Failed.
func TrainerFinished(tj *trainer.TrainJob) bool {
	for _, c := range tj.Status.Conditions {
		if (c.Type == trainer.TrainJobComplete || c.Type == trainer.TrainJobFailed) && c.Status == metav1.ConditionTrue {
			return true
		}
	}
	return false
}

// LogJobOf is what a plan needs of tj that its spec and status st say:
// its Workers (the spec's, or the status's when that says more) and
// whether it finished; the caller adds its live pods and the store.
func LogJobOf(tj *trainer.TrainJob, st api.Status) LogJob {
	// Finished by the manager's status, or by Trainer's own condition,
	// which the status follows a moment later: JobSet removes a failed
	// job's pods at once, and in that moment the Launcher's lines are the
	// store's.
	// A suspended or preempted job's pods are gone until it starts again:
	// what it printed is the store's too.
	stopped := st.Phase == api.PhaseSuspended || st.Reason == reasonPreempted
	job := LogJob{Workers: int(st.WorkersTotal), Finished: st.Phase.Finished() || TrainerFinished(tj) || stopped}
	if tj.Spec.Trainer != nil && tj.Spec.Trainer.NumNodes != nil {
		job.Workers = max(job.Workers, int(*tj.Spec.Trainer.NumNodes))
	}
	return job
}

// reasonPreempted is the diagnosis' reason for a job Kueue stopped to make
// room for another (diagnose.ReasonPreempted).
const reasonPreempted = "Preempted"

// LogRead is one log of a plan: whose, and where it is read.
type LogRead struct {
	// Label is launcher or worker-N, the prefix of its lines when several
	// are merged.
	Label string `json:"label"`
	Role  string `json:"role"`
	// Index is the Worker's index (-1: the Launcher).
	Index int       `json:"index"`
	From  LogSource `json:"from"`
}

// Why a plan reads nothing (LogPlan.Missing); each interface says it in
// its own words.
const (
	// MissingBadTarget: the target is none of launcher, worker-N, all.
	MissingBadTarget = "bad-target"
	// MissingWorkerOutOfRange: the job has no Worker of that index.
	MissingWorkerOutOfRange = "worker-out-of-range"
	// MissingWorker: that Worker has no pod and the store nothing of it.
	MissingWorker = "no-worker-log"
	// MissingLauncher: the Launcher has no pod and the store nothing of it.
	MissingLauncher = "no-launcher-log"
	// MissingAll: no pod of the job has a log anywhere (yet).
	MissingAll = "no-logs"
)

// LogPlan is where each log a request asks for is read, in the order they
// are shown: the Launcher first, then the Workers by index.
type LogPlan struct {
	Reads []LogRead `json:"reads,omitempty"`
	// Workers is how many Workers the job has, counting pods beyond its
	// spec (the range a worker-N target must be in).
	Workers int `json:"workers"`
	// Missing says why nothing is read (Reads is empty).
	Missing string `json:"missing,omitempty"`
}

// PlanLogs decides, for the CLI, the dashboard and the SDK alike, which
// logs a request reads and where each one comes from (LogFrom): its pod,
// the log store, or nowhere (left out). Vectors: testdata/log-plans.json.
func PlanLogs(req LogRequest, job LogJob) LogPlan {
	plan := LogPlan{Workers: job.Workers}
	live := map[int]bool{}
	for _, i := range job.LiveWorkers {
		live[i] = true
		plan.Workers = max(plan.Workers, i+1)
	}
	where := LogWhere{LauncherLive: job.LauncherLive, Finished: job.Finished, Store: job.Store, StoreOnly: req.StoreOnly}
	read := func(role string, index int) (LogRead, bool) {
		w := where
		w.Role = role
		label := PodLabel(role, index)
		if role == "worker" {
			w.PodLive = live[index]
		} else {
			w.PodLive = job.LauncherLive
		}
		from := LogFrom(w)
		return LogRead{Label: label, Role: role, Index: index, From: from}, from != LogNone
	}
	switch req.Target {
	case "", "launcher":
		if r, ok := read("launcher", -1); ok {
			plan.Reads = []LogRead{r}
		} else {
			plan.Missing = MissingLauncher
		}
	case "all":
		if r, ok := read("launcher", -1); ok {
			plan.Reads = append(plan.Reads, r)
		}
		for i := range plan.Workers {
			if r, ok := read("worker", i); ok {
				plan.Reads = append(plan.Reads, r)
			}
		}
		if len(plan.Reads) == 0 {
			plan.Missing = MissingAll
		}
	default:
		n, ok := strings.CutPrefix(req.Target, "worker-")
		i, err := strconv.Atoi(n)
		switch {
		case !ok || err != nil || i < 0 || strconv.Itoa(i) != n:
			plan.Missing = MissingBadTarget
		case i >= plan.Workers:
			plan.Missing = MissingWorkerOutOfRange
		default:
			if r, ok := read("worker", i); ok {
				plan.Reads = []LogRead{r}
			} else {
				plan.Missing = MissingWorker
			}
		}
	}
	return plan
}
