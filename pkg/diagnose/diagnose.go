package diagnose

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/logs"
	"github.com/mpijob/mpijob/pkg/placement"
	"github.com/mpijob/mpijob/pkg/queue"
)

// Reasons the diagnosis gives. They are stable words that alerts and
// scripts can match; the Message says the same for people.
const (
	ReasonJobSetNotCreated = "JobSetNotCreated"
	ReasonUnschedulable    = "Unschedulable"
	ReasonQuotaExceeded    = "QuotaExceeded"
	ReasonImagePullFailed  = "ImagePullFailed"
	// ReasonImageBuilding: the local cluster builds an image for its first use.
	ReasonImageBuilding   = "ImageBuilding"
	ReasonWorkersNotReady = "WorkersNotReady"
	// ReasonVolumeMountFailed: a placed Worker cannot start because the
	// kubelet cannot mount one of its volumes.
	ReasonVolumeMountFailed     = "VolumeMountFailed"
	ReasonLauncherNotStarted    = "LauncherNotStarted"
	ReasonWorkerOOMKilled       = "WorkerOOMKilled"
	ReasonLauncherOOMKilled     = "LauncherOOMKilled"
	ReasonWorkerEvicted         = "WorkerEvicted"
	ReasonLauncherDeleted       = "LauncherDeleted"
	ReasonDeadlineExceeded      = "DeadlineExceeded"
	ReasonSSHConnectionRefused  = "SSHConnectionRefused"
	ReasonHostUnreachable       = "HostUnreachable"
	ReasonRankKilled            = "RankKilled"
	ReasonRankSignaled          = "RankSignaled"
	ReasonLauncherFailed        = "LauncherFailed"
	ReasonGangSchedulingTimeout = "GangSchedulingTimeout"
	ReasonSuspended             = "Suspended"
	// ReasonPreempted: Kueue stopped the job to make room for another of
	// higher priority (or to reclaim quota lent in its cohort); it queues
	// again and starts when it fits.
	ReasonPreempted = "Preempted"
	ReasonQueued    = "Queued"
	ReasonAdmitted  = "Admitted"
	ReasonFailed    = "Failed"
)

// completionIndexLabel numbers the pods of an indexed Job: Worker i is the
// Worker Job's pod with index i.
const completionIndexLabel = "batch.kubernetes.io/job-completion-index"

// NodeFree is what one schedulable node still has free.
type NodeFree = placement.NodeFree

// Queue is what the queueing system (Kueue) says about the job.
type Queue struct {
	// Name of the LocalQueue.
	Name string
	// Admitted is true once the whole job fits and may start.
	Admitted bool
	// Position in the queue, 1 = next; 0 when unknown.
	Position int32
	// Pending is how many jobs wait in the same ClusterQueue.
	Pending int32
	// Message is the queueing system's reason for holding the job.
	Message string
	// EvictedPodsReadyTimeout: Kueue stopped the job's pods after its
	// waitForPodsReady timeout and queued it again.
	EvictedPodsReadyTimeout bool
	// Workload names the job's Kueue Workload; Inactive says its
	// spec.active is false: the job was suspended through Kueue.
	Workload string
	Inactive bool
	// Preempted: Kueue evicted the job for another and has not admitted it
	// again yet. PreemptedBy names the job it made room for when that job
	// is in the same namespace ("" otherwise: another tenant's job is not
	// named), PreemptedWhy is Kueue's reason in words ("prioritization in
	// the ClusterQueue"), Preemptions how often it happened to this job.
	Preempted    bool
	PreemptedBy  string
	PreemptedWhy string
	Preemptions  int32
}

// Input is everything the diagnosis looks at.
type Input struct {
	TrainJob *trainer.TrainJob
	// JobSet is nil until Trainer creates it.
	JobSet *jobsetv1alpha2.JobSet
	// Launcher and Workers are the pods of the two replicated jobs.
	Launcher []corev1.Pod
	Workers  []corev1.Pod
	// SlotsPerWorker and GPUsPerWorker are what the Workers' pods get
	// (from the job's runtime when the job does not say).
	SlotsPerWorker int32
	GPUsPerWorker  string
	// ShapeWorkers is the number of Workers the job's runtime gives it
	// (runtimes.Shape.Workers: one fewer than numNodes when the Launcher
	// hosts ranks), 0 when the runtime is unknown: the Worker count
	// until the JobSet exists.
	ShapeWorkers int32
	// WorkerImage is the image the Workers run (from the job's runtime),
	// named when they do not answer SSH.
	WorkerImage string
	// Events concern the TrainJob, its JobSet, Jobs and pods.
	Events []corev1.Event
	// LauncherLog is the tail of the Launcher's log, read when it failed.
	LauncherLog string
	// Nodes and their free capacity, to explain why Workers do not fit.
	Nodes []NodeFree
	// AllNodes are the cluster's nodes (ready or not, cordoned or not), to
	// tell a job that waits for capacity from one no node could ever take.
	AllNodes []corev1.Node
	// Queue is nil when no queueing system manages the job.
	Queue *Queue
	// Previous is the last Status written, to see what changed.
	Previous *api.Status
	// GangTimeout is how long Workers may wait to be placed together
	// before the job is called stuck (0: no limit).
	GangTimeout time.Duration
	// ProgressTimeout is how long a running Launcher may print nothing
	// before the job is said to make no progress (0: never).
	ProgressTimeout time.Duration
	// EndStuckAfter is how long a job that can never finish is left
	// before mpijob-manager ends it (0: never).
	EndStuckAfter time.Duration
	// LastOutput is when the running Launcher last printed, and LastLine
	// what (nil: nothing yet, or not read).
	LastOutput *time.Time
	LastLine   string
	// SlowRank is a rank whose steps stayed slower than the others' (the
	// ranks' step times in the Launcher's log; nil: none, or not read).
	SlowRank *SlowRank
	// Stacks is where the ranks were when the manager last took their
	// stacks (api.StacksAnnotation; nil: never).
	Stacks *api.StackSnapshot
	// Now is the time of the diagnosis.
	Now time.Time
}

// finding is what a rule concludes: the reason, the message, the next
// steps (one per line, most likely fix first) and the pod it is about
// (subject, nil for the job as a whole), found from the same pod, rank or
// host the message names, never read back from the message.
type finding struct {
	reason, message string
	next            []api.Step
	subject         *api.PodRef
}

// workerRef is a Worker pod's PodRef, from its completion index (nil when
// it has none).
func workerRef(p *corev1.Pod) *api.PodRef {
	idx, ok := p.Labels[completionIndexLabel]
	if !ok {
		idx, ok = p.Annotations[completionIndexLabel]
	}
	if i, err := strconv.Atoi(idx); ok && err == nil {
		return api.WorkerRef(int32(i))
	}
	return nil
}

// Diagnose returns the Status of an MPI job.
func Diagnose(in Input) api.Status {
	tj := in.TrainJob
	in.Launcher, in.Workers = thisAttempt(tj, in.Launcher), thisAttempt(tj, in.Workers)
	s := api.Status{
		Launcher:           launcherState(in),
		WorkersTotal:       workersTotal(in),
		WorkersReady:       workersReady(in.Workers),
		ObservedGeneration: tj.Generation,
		StartTime:          launcherStart(in.Launcher),
	}
	// The Launcher's pod goes with the job (JobSet removes a finished
	// job's pods; Trainer deletes the JobSet of a job past its deadline):
	// the start seen before stays.
	if s.StartTime == nil && in.Previous != nil {
		s.StartTime = in.Previous.StartTime
	}
	s.FirstStartTime = firstStart(in.Previous, s.StartTime)
	s.SlotsPerWorker, s.GPUsPerWorker = in.SlotsPerWorker, in.GPUsPerWorker
	if tj.Spec.Trainer != nil && tj.Spec.Trainer.NumProcPerNode != nil {
		s.SlotsPerWorker = *tj.Spec.Trainer.NumProcPerNode
	}

	switch {
	case condTrue(tj, trainer.TrainJobComplete):
		s.Phase = api.PhaseSucceeded
		// Every Worker ran to the end, whether or not JobSet has already
		// removed their pods when the job is seen Complete.
		s.WorkersReady = s.WorkersTotal
		s.CompletionTime = condTime(tj, trainer.TrainJobComplete)
		s.Message = fmt.Sprintf("The job finished successfully on %s.", api.Count(int(s.WorkersTotal), "Worker", "Workers"))
		registration(tj, &s)
	case condTrue(tj, trainer.TrainJobFailed):
		s.Phase = api.PhaseFailed
		s.CompletionTime = condTime(tj, trainer.TrainJobFailed)
		f := explainFailure(in)
		if e, err := api.ReadEnded(tj.Annotations); err == nil && e != nil {
			// mpijob-manager ended it: that, not the Jobs' deadline, is why.
			f = endedFinding(e, true)
		}
		s.Reason, s.Message, s.Steps, s.Subject = f.reason, f.message, f.next, f.subject
	case in.Queue != nil && in.Queue.Preempted && !in.Queue.Inactive:
		// Kueue evicted the job for another: its pods stop (the Launcher
		// may exit with an error as they go), and it queues again. Said
		// as such from the eviction on, not as an admission or a failure.
		s.Phase, s.Reason = api.PhaseQueued, ReasonPreempted
		s.Message, s.Steps = preempted(in)
		s.QueuePosition = nil
		if in.Queue.Position > 0 {
			s.QueuePosition = &in.Queue.Position
		}
	case tj.Spec.Suspend != nil && *tj.Spec.Suspend:
		if in.Queue != nil && in.Queue.Inactive {
			// Suspended the way Kueue honours: its Workload is inactive,
			// so Kueue neither queues it nor resumes it.
			s.Phase, s.Reason = api.PhaseSuspended, ReasonSuspended
			s.Message = fmt.Sprintf("The job is suspended: its Kueue Workload %s is inactive, so no pods run and it does not queue (suspended by a user, or by Kueue after too many requeues).", in.Queue.Workload)
			s.Steps = ranked(step(fmt.Sprintf("Resume it with Resume in the dashboard, or `kubectl -n %s patch workload %s --type=merge -p '{\"spec\":{\"active\":true}}'`: it queues again and starts when %s admits it.", tj.Namespace, in.Queue.Workload, in.Queue.Name)))
		} else if in.Queue != nil && !in.Queue.Admitted && missingQueue.MatchString(in.Queue.Message) {
			lq := in.Queue.Name[strings.LastIndex(in.Queue.Name, "/")+1:]
			s.Phase, s.Reason = api.PhaseQueued, ReasonCannotStart
			s.Message = fmt.Sprintf("The job can never start: its LocalQueue %s does not exist in namespace %s.", lq, tj.Namespace)
			s.Steps = ranked(
				step("Delete the job and create it again with a queue that exists (kubectl get localqueues -n "+tj.Namespace+"; --queue)."),
				step("Or ask an administrator to create LocalQueue "+lq+" in namespace "+tj.Namespace+"."))
		} else if m, next, ok := neverAdmitted(in); ok {
			s.Phase, s.Reason, s.Message, s.Steps = api.PhaseQueued, ReasonCannotStart, m, next
		} else if in.Queue != nil && !in.Queue.Admitted {
			s.Phase, s.Reason = api.PhaseQueued, ReasonQueued
			whole := "the Launcher and " + api.Count(int(s.WorkersTotal), "Worker", "Workers")
			s.Message = fmt.Sprintf("Waiting in queue %s until %s fit at once.", in.Queue.Name, whole)
			if in.Queue.Position > 0 {
				s.QueuePosition = &in.Queue.Position
				of := ""
				if in.Queue.Pending > 0 {
					of = fmt.Sprintf(" of %d", in.Queue.Pending)
				}
				s.Message = fmt.Sprintf("Waiting in queue %s at position %d%s until %s fit at once.", in.Queue.Name, in.Queue.Position, of, whole)
			}
			if in.Queue.Message != "" {
				s.Message += " Kueue: " + in.Queue.Message + "."
			}
			if in.Queue.EvictedPodsReadyTimeout {
				s.Message += " Kueue stopped its pods and queued it again: they were not all Ready within its waitForPodsReady timeout (Workers that could not all be placed)."
			}
			s.Steps = ranked(stepf("Nothing to do: the job starts as soon as the queue admits it; `%s` shows its place in the queue.", cli("describe")))
		} else if in.Queue != nil && in.Queue.Admitted {
			// Kueue admitted the job and is about to resume it.
			s.Phase, s.Reason = api.PhaseQueued, ReasonAdmitted
			s.Message = fmt.Sprintf("Admitted by queue %s: the whole job fits and starts now.", in.Queue.Name)
			s.Steps = ranked(step("Nothing to do: the Launcher and Workers are being created."))
		} else if q := tj.Labels[queue.NameLabel]; q != "" && !userSuspended(in) {
			// Kueue suspends every job it manages until it admits it:
			// that is queueing, not a user's suspension.
			s.Phase, s.Reason = api.PhaseQueued, ReasonQueued
			s.Message = fmt.Sprintf("Waiting for queue %s to take the job.", q)
			s.Steps = ranked(step("Nothing to do: the job starts as soon as the queue admits it. If this lasts, check that LocalQueue " + q + " exists in the namespace (`kubectl get localqueues`)."))
		} else if tj.Annotations[api.SuspendedByAnnotation] == api.SuspendedByGangTimeout {
			s.Phase, s.Reason = api.PhaseSuspended, ReasonGangSchedulingTimeout
			s.Message = "mpijob-manager suspended the job: its Workers could not all be placed within the runtime's gang-scheduling timeout, so the placed ones were stopped to free what they held."
			if p := in.Previous; p != nil && p.Reason == ReasonGangSchedulingTimeout && p.Phase != api.PhaseSuspended {
				s.Message += " It waited with: " + strings.TrimSuffix(p.Message, ".") + "."
			} else if p != nil && p.Phase == api.PhaseSuspended && p.Reason == ReasonGangSchedulingTimeout {
				s.Message = p.Message
			}
			s.Steps = ranked(
				step("Resume it when the cluster has room (spec.suspend: false, e.g. `kubectl patch trainjob "+tj.Name+" --type=merge -p '{\"spec\":{\"suspend\":false}}'`, or Resume in the dashboard)."),
				stepf("Or resubmit it smaller: %s.", cli("clone", "--workers", "N")),
				step("Or submit it through a Kueue queue, which admits a job only when all of it fits."))
		} else {
			s.Phase, s.Reason = api.PhaseSuspended, ReasonSuspended
			s.Message = "The job is suspended: no pods run."
			s.Steps = ranked(step("Resume it by setting spec.suspend to false."))
		}
	default:
		var f finding
		s.Phase, f = explainUnfinished(in, s)
		if e, err := api.ReadEnded(tj.Annotations); err == nil && e != nil {
			// Its pods are stopping: say so until Trainer marks it Failed.
			f = endedFinding(e, false)
		}
		s.Reason, s.Message, s.Steps, s.Subject = f.reason, f.message, f.next, f.subject
	}
	// Where the program took up again, and how often the job started
	// again: every interface shows them beside the phase.
	if r, err := api.ReadResumed(tj.Annotations); err == nil && r != nil {
		s.Resumed = r
	}
	s.Attempts = attemptsOf(in)
	// Commands in next steps name this job, ready to paste.
	s.Steps = namedSteps(s.Steps, tj.Name)
	if len(s.Steps) > 0 {
		s.NextStep = s.Steps[0].Text
	}
	if len(s.Steps) > 1 {
		s.NextSteps = api.StepTexts(s.Steps)
	}
	s.LastTransitionTime = transitionTime(in, s.Phase)
	return redactStatus(s)
}

// attemptsOf counts the job's new starts: JobSet's restarts after a
// failure (of its failure policy's maxRestarts) and Kueue's preemptions;
// nil for a first attempt.
func attemptsOf(in Input) *api.Attempts {
	var a api.Attempts
	if js := in.JobSet; js != nil {
		a.Retries = js.Status.Restarts
		if fp := js.Spec.FailurePolicy; fp != nil {
			a.MaxRetries = fp.MaxRestarts
		}
	}
	if in.Queue != nil {
		a.Preemptions = in.Queue.Preemptions
	}
	if a.Retries == 0 && a.Preemptions == 0 {
		return nil
	}
	return &a
}

// preempted says that Kueue preempted the job, for what, and that it
// starts again by itself when it fits.
func preempted(in Input) (string, []api.Step) {
	q := in.Queue
	by := "another job"
	if q.PreemptedBy != "" {
		by = "job " + q.PreemptedBy
	} else if q.PreemptedWhy != "" && strings.Contains(q.PreemptedWhy, "cohort") {
		by = "a job of another queue in its cohort"
	}
	why := ""
	if q.PreemptedWhy != "" {
		why = " (Kueue: " + q.PreemptedWhy + ")"
	}
	m := fmt.Sprintf("Preempted: Kueue stopped the whole job to make room for %s%s in queue %s.", by, why, q.Name)
	if q.Preemptions > 1 {
		m = strings.TrimSuffix(m, ".") + fmt.Sprintf(", the %s time.", ordinal(int(q.Preemptions)))
	}
	where := ""
	if q.Position > 0 {
		where = fmt.Sprintf(" It is at position %d", q.Position)
		if q.Pending > 0 {
			where += fmt.Sprintf(" of %d", q.Pending)
		}
		where += "."
	}
	m += " It starts again by itself when it fits again, from its last checkpoint if its program writes one ($MPIJOB_CHECKPOINT_URI)." + where
	return m, ranked(
		stepf("Nothing to do: it starts again when queue "+q.Name+" has room; `%s` shows where it waits.", cli("describe")),
		step("To keep it from being preempted, give it a higher priority: resubmit it with a higher --priority (an administrator knows the cluster's WorkloadPriorityClasses), or ask about the ClusterQueue's preemption policy."))
}

// ordinal is 2nd, 3rd, 4th, ...
func ordinal(n int) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return strconv.Itoa(n) + suffix
}

// redactStatus hides the secrets a program printed: the diagnosis quotes
// the Launcher's log, a container's termination message and Events, and
// whatever it writes reaches the status annotation, the Warning Event,
// describe, the SDK and the dashboard. The rules are the logs' own, and a
// bare run of 32 or more hex digits is masked too (logs.Quoted).
func redactStatus(s api.Status) api.Status {
	return s.MapProse(func(t string) string {
		masked, _ := logs.Quoted(t)
		return masked
	})
}

// ranked are next steps, most likely fix first, as rules return them.
func ranked(steps ...api.Step) []api.Step {
	return slices.DeleteFunc(steps, func(s api.Step) bool { return s.Text == "" })
}

// onOneWorker is the step that reproduces a failure on one Worker
// (format has one %s, the clone command); none for a job of one Worker,
// which already runs on one.
func onOneWorker(in Input, format string) api.Step {
	if workersTotal(in) <= 1 {
		return api.Step{}
	}
	return stepf(format, cli("clone", "--workers", "1"))
}

// step is a next step in words alone.
func step(text string) api.Step { return api.Step{Text: text} }

// stepf is a next step that runs c: format says where, with one %s.
func stepf(format string, c api.Command) api.Step {
	return api.Step{Text: fmt.Sprintf(format, c), Command: &c}
}

// jobVerbs are the commands of one job: their first argument is its name
// (and a clone's second the new name), which cli puts in as placeholders
// and api.Step.Named fills in.
var jobVerbs = map[string]int{"logs": 1, "describe": 1, "events": 1, "delete": 1, "clone": 2, "register": 1}

// cli is a kubectl mpijob command of a next step: verb, the job's name
// (and a clone's new name) for a command of one job, then args.
func cli(verb string, args ...string) api.Command {
	names := []string{api.NamePlaceholder, api.NewPlaceholder}[:jobVerbs[verb]]
	return api.Command{Verb: verb, Args: slices.Concat(names, args)}
}

// namedSteps fills the job's name into each step's command.
func namedSteps(steps []api.Step, job string) []api.Step {
	out := make([]api.Step, len(steps))
	for i, st := range steps {
		out[i] = st.Named(job)
	}
	return out
}

func transitionTime(in Input, p api.Phase) *metav1.Time {
	if in.Previous != nil && in.Previous.Phase == p && in.Previous.LastTransitionTime != nil {
		return in.Previous.LastTransitionTime
	}
	t := metav1.NewTime(in.Now)
	return &t
}

func condTrue(tj *trainer.TrainJob, t string) bool {
	for _, c := range tj.Status.Conditions {
		if c.Type == t && c.Status == metav1.ConditionTrue {
			return true
		}
	}
	return false
}

func cond(tj *trainer.TrainJob, t string) *metav1.Condition {
	for i := range tj.Status.Conditions {
		if tj.Status.Conditions[i].Type == t {
			return &tj.Status.Conditions[i]
		}
	}
	return nil
}

func condTime(tj *trainer.TrainJob, t string) *metav1.Time {
	if c := cond(tj, t); c != nil {
		ts := c.LastTransitionTime
		return &ts
	}
	return nil
}

// workersTotal is the Worker pod count: the JobSet's when it exists, else
// what the TrainJob asks for.
func workersTotal(in Input) int32 {
	if in.JobSet != nil {
		for _, rj := range in.JobSet.Spec.ReplicatedJobs {
			if rj.Name == api.WorkerJob {
				p := int32(1)
				if rj.Template.Spec.Parallelism != nil {
					p = *rj.Template.Spec.Parallelism
				}
				return rj.Replicas * p
			}
		}
	}
	if in.ShapeWorkers > 0 {
		return in.ShapeWorkers
	}
	if tr := in.TrainJob.Spec.Trainer; tr != nil && tr.NumNodes != nil {
		return *tr.NumNodes
	}
	return 1
}

func workersReady(pods []corev1.Pod) int32 {
	var n int32
	for i := range pods {
		if pods[i].Status.Phase == corev1.PodSucceeded || podReady(&pods[i]) {
			n++
		}
	}
	return n
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// launcherState is the Launcher's state. A Launcher that was seen and is
// gone keeps what was last known of it: deleted while it ran stays
// Deleted, through its pod's termination and removal.
func launcherState(in Input) api.LauncherState {
	if len(in.Launcher) == 0 {
		// A job that waited in a queue or suspended runs a new attempt:
		// its earlier Launcher is not this one.
		if in.Previous != nil && in.Previous.Phase != api.PhaseQueued && in.Previous.Phase != api.PhaseSuspended {
			switch in.Previous.Launcher {
			case api.LauncherRunning, api.LauncherDeleted:
				return api.LauncherDeleted
			case api.LauncherFailed, api.LauncherSucceeded:
				return in.Previous.Launcher
			}
		}
		return api.LauncherNotCreated
	}
	p := newest(in.Launcher)
	if p.DeletionTimestamp != nil && p.Status.Phase != corev1.PodSucceeded {
		return api.LauncherDeleted
	}
	switch p.Status.Phase {
	case corev1.PodRunning:
		return api.LauncherRunning
	case corev1.PodSucceeded:
		return api.LauncherSucceeded
	case corev1.PodFailed:
		return api.LauncherFailed
	default:
		return api.LauncherPending
	}
}

// thisAttempt drops the pods of an earlier attempt: those created before
// Trainer last resumed the job (its Suspended condition turned False, on
// a Kueue admission after a preemption or a user's resume) that are
// stopping or finished. JobSet suspends the Jobs rather than deleting
// them, so a Launcher that failed as the job was preempted stays, and the
// pods stopped then take their grace period to go; neither is news about
// the attempt that runs now. A pod of this attempt is never dropped: one
// created before the condition's time (Trainer writes it after resuming
// the JobSet) is still pending or running.
//
// Between Kueue's (or a user's) resume and Trainer's condition, the job is
// no longer suspended while its condition still says so: every pod that is
// stopping or finished then is the earlier attempt's.
func thisAttempt(tj *trainer.TrainJob, pods []corev1.Pod) []corev1.Pod {
	c := cond(tj, trainer.TrainJobSuspended)
	resuming := c != nil && c.Status == metav1.ConditionTrue && !ptr.Deref(tj.Spec.Suspend, false)
	resumed := c != nil && c.Status == metav1.ConditionFalse && c.Reason == trainer.TrainJobResumedReason
	if !resuming && !resumed {
		return pods
	}
	var out []corev1.Pod
	for i := range pods {
		p := &pods[i]
		over := p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
		if over && (resuming || p.CreationTimestamp.Before(&c.LastTransitionTime)) {
			continue
		}
		out = append(out, *p)
	}
	if len(out) == len(pods) {
		return pods
	}
	return out
}

func newest(pods []corev1.Pod) *corev1.Pod {
	best := &pods[0]
	for i := range pods {
		if pods[i].CreationTimestamp.After(best.CreationTimestamp.Time) {
			best = &pods[i]
		}
	}
	return best
}

func launcherStart(pods []corev1.Pod) *metav1.Time {
	for i := range pods {
		for _, cs := range pods[i].Status.ContainerStatuses {
			if r := cs.State.Running; r != nil {
				t := r.StartedAt
				return &t
			}
			if t := cs.State.Terminated; t != nil && !t.StartedAt.IsZero() {
				ts := t.StartedAt
				return &ts
			}
		}
	}
	return nil
}

// workerName names a Worker for people: "Worker 3 (pod hello-node-0-3-x7k)".
func workerName(p *corev1.Pod) string {
	if idx, ok := p.Labels[completionIndexLabel]; ok {
		return fmt.Sprintf("Worker %s (pod %s)", idx, p.Name)
	}
	if idx, ok := p.Annotations[completionIndexLabel]; ok {
		return fmt.Sprintf("Worker %s (pod %s)", idx, p.Name)
	}
	return "Worker pod " + p.Name
}

// sortedByIndex orders pods by Worker index so messages name the lowest:
// the pods of each list in turn, where indexes are equal, pointing at the
// lists' own pods (a list of copies of a job's pods was the diagnosis's
// largest allocation, bench/scale, 2026-12-03).
func sortedByIndex(lists ...[]corev1.Pod) []*corev1.Pod {
	n := 0
	for _, pods := range lists {
		n += len(pods)
	}
	out := make([]*corev1.Pod, 0, n)
	for _, pods := range lists {
		for i := range pods {
			out = append(out, &pods[i])
		}
	}
	idx := func(p *corev1.Pod) int {
		n, err := strconv.Atoi(p.Labels[completionIndexLabel])
		if err != nil {
			return 1 << 30
		}
		return n
	}
	sort.SliceStable(out, func(i, j int) bool { return idx(out[i]) < idx(out[j]) })
	return out
}

// memoryLimit is the memory limit of the container, or "" when none.
func memoryLimit(p *corev1.Pod, container string) string {
	for _, c := range p.Spec.Containers {
		if c.Name == container {
			if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
				return q.String()
			}
		}
	}
	return ""
}

// requestOf sums a resource over a pod's containers.
func requestOf(p *corev1.Pod, name corev1.ResourceName) resource.Quantity {
	var total resource.Quantity
	for _, c := range p.Spec.Containers {
		if q, ok := c.Resources.Requests[name]; ok {
			total.Add(q)
		} else if q, ok := c.Resources.Limits[name]; ok {
			total.Add(q)
		}
	}
	return total
}

func trimMessage(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// userSuspended tells a user's spec.suspend from Kueue's: a job Kueue
// admitted before (or that ran) and is suspended again was suspended by
// someone.
func userSuspended(in Input) bool {
	return in.Previous != nil && (in.Previous.Phase == api.PhaseRunning || in.Previous.Phase == api.PhaseStarting || in.Previous.Phase == api.PhaseSuspended)
}

// missingQueue is Kueue's word for a LocalQueue that does not exist.
var missingQueue = regexp.MustCompile(`(?i)LocalQueue \S+ (?:doesn't|does not) exist`)

var (
	// kueueNoResource: no flavor of the ClusterQueue has the resource.
	kueueNoResource = regexp.MustCompile(`resource (\S+) unavailable in ClusterQueue`)
	// kueueOverMax: more than the ClusterQueue could ever lend the job.
	// Kueue names every such resource in one message: each match is one.
	kueueOverMax = regexp.MustCompile(`insufficient quota for (\S+) in flavor (\S+), [^,]*current podset request \(([^)]+)\) > maximum capacity \(([^)]+)\)`)
)

// neverAdmitted reads Kueue's reasons that no finished job can change: the
// ClusterQueue has no quota for a resource the job asks for, or less than
// the job asks for even with everything it may borrow.
func neverAdmitted(in Input) (message string, next []api.Step, ok bool) {
	q := in.Queue
	if q == nil || q.Admitted || strings.Contains(q.Message, "insufficient unused quota") {
		return "", nil, false
	}
	if m := kueueNoResource.FindStringSubmatch(q.Message); m != nil {
		return fmt.Sprintf("The job can never start: queue %s has no quota for %s, which the job asks for (Kueue: %s).", q.Name, m[1], q.Message),
			ranked(
				step(fmt.Sprintf("Check the resource name %s (GPUs are nvidia.com/gpu or amd.com/gpu), or remove it from the job, and resubmit.", m[1])),
				step("Or submit to a queue whose ClusterQueue covers "+m[1]+" (kubectl get localqueues)."),
				step("Or ask an administrator to add "+m[1]+" to the ClusterQueue's resource groups.")), true
	}
	if ms := kueueOverMax.FindAllStringSubmatch(q.Message, -1); ms != nil {
		var asks, most []string
		for _, m := range ms {
			asks = append(asks, m[3]+" "+m[1])
			most = append(most, fmt.Sprintf("%s %s in flavor %s", m[4], m[1], m[2]))
		}
		return fmt.Sprintf("The job can never start: it asks for %s, more than queue %s could ever admit (at most %s, borrowing included).", strings.Join(asks, " and "), q.Name, strings.Join(most, " and ")),
			ranked(
				stepf("Ask for at most "+strings.Join(most, " and ")+" in all: fewer Workers or less per Worker (%s).", cli("clone", "--workers", "N")),
				step("Or ask an administrator for a larger ClusterQueue quota.")), true
	}
	return "", nil, false
}

// firstStart is the start of the job's first attempt when it came before
// start, this attempt's (nil otherwise): kept from the previous status
// across retries and preemptions.
func firstStart(prev *api.Status, start *metav1.Time) *metav1.Time {
	if prev == nil {
		return nil
	}
	first := prev.FirstStartTime
	if first == nil {
		first = prev.StartTime
	}
	if first == nil || (start != nil && !first.Before(start)) {
		return nil
	}
	return first.DeepCopy()
}
