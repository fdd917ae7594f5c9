package api

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Label and annotation keys of mpijob.
const (
	// StatusAnnotation holds the manager's Status of a TrainJob as JSON.
	StatusAnnotation = "mpijob.dev/status"
	// SuspendedByAnnotation says why mpijob-manager suspended a job (set
	// with spec.suspend=true): "gang-scheduling-timeout" when its Workers
	// could not all be placed in time, so the placed ones were released.
	SuspendedByAnnotation = "mpijob.dev/suspended-by"
	// SuspendedByGangTimeout is SuspendedByAnnotation's value for a gang-scheduling timeout.
	SuspendedByGangTimeout = "gang-scheduling-timeout"
	// EndedByAnnotation is set by mpijob-manager when it ends a job that
	// could never finish: an Ended as JSON, the diagnosis at the time
	// (RankFailedOthersWaiting, ImagePullFailed, CannotStart) and the grace
	// period waited. Only the manager writes it (admission).
	EndedByAnnotation = "mpijob.dev/ended-by"
	// MaxActiveJobsAnnotation, on a Namespace (set by an administrator:
	// tenants cannot edit namespaces), caps the MPI jobs there that have
	// not finished; admission refuses one more, naming the active ones.
	MaxActiveJobsAnnotation = "mpijob.dev/max-active-jobs"
	// CreatorAnnotation names the user who created the TrainJob; admission
	// sets it and refuses changes to it.
	CreatorAnnotation = "mpijob.dev/creator"
	// ManagerRunningPolicy is the ValidatingAdmissionPolicy (config/webhook)
	// that refuses MPI jobs while no mpijob-manager replica is ready; the
	// API server names it in its denial, which the CLI, SDK and dashboard
	// recognise.
	ManagerRunningPolicy = "mpijob-manager-running.mpijob.dev"
	// RuntimeLabel marks a ClusterTrainingRuntime as one of mpijob's MPI runtimes.
	RuntimeLabel = "mpijob.dev/runtime"
	// MPIImplementationAnnotation names a runtime's MPI (OpenMPI, MPICH, Intel).
	MPIImplementationAnnotation = "mpijob.dev/mpi-implementation"
	// DescriptionAnnotation is a runtime's one-line description.
	DescriptionAnnotation = "mpijob.dev/description"
	// NetworkPolicyAnnotation set to "disabled" on a TrainJob opts it out of
	// its per-job NetworkPolicy.
	NetworkPolicyAnnotation = "mpijob.dev/network-policy"
	// NetworkPolicyScopeAnnotation on a Namespace (an administrator's:
	// tenants cannot edit Namespaces) chooses how its MPI jobs are
	// isolated: "job" (the default) gives each job its own NetworkPolicy;
	// "namespace" gives the namespace one policy for all its MPI jobs
	// (NamespaceNetworkPolicy), which admits a job's pods to each other
	// and to the namespace's other MPI jobs' pods: fewer policies for the
	// network plugin to sync, for less isolation between one tenant's jobs.
	NetworkPolicyScopeAnnotation = "mpijob.dev/network-policy-scope"
	// NamespaceNetworkPolicy names the one NetworkPolicy of a namespace
	// whose scope is "namespace" (no job's policy, "<job>-mpi", has it).
	NamespaceNetworkPolicy = "mpijob-jobs"
	// FieldManager is the field owner of everything mpijob-manager writes.
	FieldManager = "mpijob-manager"
	// JobLabel on a TrainingRuntime names the one MPI job it was derived
	// for (a per-job runtime, see pkg/jobspec); that job owns it.
	JobLabel = "mpijob.dev/job"
	// BaseRuntimeLabel on a per-job TrainingRuntime, and on its TrainJob,
	// names the ClusterTrainingRuntime it was derived from: the runtime the
	// user chose, whose policy admission applies.
	BaseRuntimeLabel = "mpijob.dev/base-runtime"
	// BaseRuntimeKindLabel, beside BaseRuntimeLabel, is "TrainingRuntime"
	// when the base is a runtime of the job's own namespace (absent: a
	// ClusterTrainingRuntime).
	BaseRuntimeKindLabel = "mpijob.dev/base-runtime-kind"
	// CostCenterLabel on a Namespace names who pays for its MPI jobs: the
	// usage series and kubectl mpijob usage carry it.
	CostCenterLabel = "mpijob.dev/cost-center"
	// JobRuntimeFinalizer keeps a per-job runtime until its TrainJob is
	// gone: Trainer's webhook refuses every update of a TrainJob whose
	// runtime is missing, the garbage collector's last one included.
	JobRuntimeFinalizer = "mpijob.dev/job-runtime"
	// CopiedFromAnnotation on a per-job runtime names the job whose
	// runtime mpijob-manager copied for a job created from that job's
	// exported YAML (admission.RuntimeCopier).
	CopiedFromAnnotation = "mpijob.dev/copied-from"
)

// MaxJobNameLength is the longest MPI job name: JobSet names the Launcher
// pod "<name>-launcher-0-0-xxxxx" and a pod's hostname is a DNS label of at
// most 63 characters. The SDK has the same number, checked by the shared
// vectors in pkg/jobspec/testdata.
const MaxJobNameLength = 63 - len("-launcher-0-0-xxxxx")

// RuntimeOf is the runtime a user chose for tj: the base of its per-job
// runtime, or the runtime it references.
func RuntimeOf(labels map[string]string, refName string) string {
	if b := labels[BaseRuntimeLabel]; b != "" {
		return b
	}
	return refName
}

// Replicated job names of MPI runtimes, fixed by Trainer V2's MPI plugin.
const (
	LauncherJob = "launcher"
	WorkerJob   = "node"
	// NodeContainer is the container of the Launcher and Workers that runs
	// mpirun or sshd; Trainer applies a job's settings to it.
	NodeContainer = "node"
)

// The roles of an MPI job's pods, in the project's words.
const (
	RoleLauncher = "Launcher"
	RoleWorker   = "Worker"
)

// PodRole is the role of a pod of replicated job replicatedJob: the
// Launcher's, or a Worker's (every other replicated job of an MPI runtime).
func PodRole(replicatedJob string) string {
	if replicatedJob == LauncherJob {
		return RoleLauncher
	}
	return RoleWorker
}

// Phase is where an MPI job is in its life.
type Phase string

// The phases, in the order a job goes through them.
const (
	// PhasePending: accepted, nothing scheduled yet.
	PhasePending Phase = "Pending"
	// PhaseQueued: a queue (Kueue) holds the job until all of it fits.
	PhaseQueued Phase = "Queued"
	// PhaseGangScheduling: some pods are placed, the job waits for the rest.
	PhaseGangScheduling Phase = "GangScheduling"
	// PhaseStarting: every pod is placed; Workers are not all Ready or the
	// Launcher has not started.
	PhaseStarting Phase = "Starting"
	// PhaseRunning: the Launcher runs with every Worker Ready.
	PhaseRunning Phase = "Running"
	// PhaseSucceeded: the Launcher finished successfully.
	PhaseSucceeded Phase = "Succeeded"
	// PhaseFailed: the job failed; Reason and NextStep say why and what to do.
	PhaseFailed Phase = "Failed"
	// PhaseSuspended: the job is suspended by its owner.
	PhaseSuspended Phase = "Suspended"
)

// Phases lists every phase.
var Phases = []Phase{PhasePending, PhaseQueued, PhaseGangScheduling, PhaseStarting, PhaseRunning, PhaseSucceeded, PhaseFailed, PhaseSuspended}

// Finished reports whether p is a final phase.
func (p Phase) Finished() bool { return p == PhaseSucceeded || p == PhaseFailed }

// ParsePhase accepts a phase name in any letter case.
func ParsePhase(s string) (Phase, error) {
	for _, p := range Phases {
		if strings.EqualFold(string(p), s) {
			return p, nil
		}
	}
	return "", fmt.Errorf("unknown phase %q: use one of %v", s, Phases)
}

// LauncherState is the state of the Launcher pod.
type LauncherState string

// Launcher states.
const (
	LauncherNotCreated LauncherState = "NotCreated"
	LauncherPending    LauncherState = "Pending"
	LauncherRunning    LauncherState = "Running"
	LauncherSucceeded  LauncherState = "Succeeded"
	LauncherFailed     LauncherState = "Failed"
	LauncherDeleted    LauncherState = "Deleted"
)

// Status is the manager's diagnosis of one MPI job: what CLI, SDK and
// dashboard show. None of them computes its own.
type Status struct {
	// Phase is where the job is.
	Phase Phase `json:"phase"`
	// Reason is a CamelCase word for why the job is in Phase (for example
	// WorkerOOMKilled); empty when there is nothing to explain.
	Reason string `json:"reason,omitempty"`
	// Message says in plain language what is happening, naming the pod.
	Message string `json:"message,omitempty"`
	// NextStep says what the user can do about it: the first of NextSteps.
	NextStep string `json:"nextStep,omitempty"`
	// NextSteps are the things to try, most likely fix first (when there
	// are more than one): the texts of Steps.
	NextSteps []string `json:"nextSteps,omitempty"`
	// Steps are the next steps as data: each one's text and the command
	// in it. NextStep and NextSteps say the same for readers of the
	// texts alone.
	Steps []Step `json:"steps,omitempty"`
	// Launcher is the Launcher pod's state.
	Launcher LauncherState `json:"launcher"`
	// WorkersReady counts Workers whose pod is Ready (or has succeeded).
	WorkersReady int32 `json:"workersReady"`
	// WorkersTotal is the number of Workers the job asks for.
	WorkersTotal int32 `json:"workersTotal"`
	// SlotsPerWorker is the number of MPI ranks per Worker.
	SlotsPerWorker int32 `json:"slotsPerWorker,omitempty"`
	// GPUsPerWorker is what each Worker pod asks of GPUs, as its spec
	// says: "2" for nvidia.com/gpu, "1 amd.com/gpu" for another kind.
	GPUsPerWorker string `json:"gpusPerWorker,omitempty"`
	// Runtime is the job's runtime as RuntimeOf names it (the base of a
	// per-job runtime): with it, a list of the jobs' metadata alone (their
	// labels and annotations) is a whole list row; `kubectl mpijob get`
	// lists 10,000 jobs that way.
	Runtime string `json:"runtime,omitempty"`
	// QueuePosition is the job's place in its queue while Queued (1 = next).
	QueuePosition *int32 `json:"queuePosition,omitempty"`
	// Resumed is where the program took up again from a checkpoint (its
	// progress report that said so); nil when it started from its first
	// step.
	Resumed *Resumed `json:"resumed,omitempty"`
	// Attempts says how often the job started again (retries after a
	// failure, Kueue's preemptions); nil for a first attempt.
	Attempts *Attempts `json:"attempts,omitempty"`
	// StartTime is when the Launcher started running.
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// FirstStartTime is when the job's first Launcher started, when that
	// was before StartTime (a retry or a preemption started the job
	// again): a job's duration counts every attempt.
	FirstStartTime *metav1.Time `json:"firstStartTime,omitempty"`
	// CompletionTime is when the job succeeded or failed.
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// LastTransitionTime is when Phase last changed.
	LastTransitionTime *metav1.Time `json:"lastTransitionTime,omitempty"`
	// ObservedGeneration is the TrainJob generation this diagnosis saw.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// ObservedTime is when the manager wrote this status. It is written
	// when the status changes, so with the manager's Lease (ManagerLease)
	// it tells how old a status shown while no manager runs is.
	ObservedTime *metav1.Time `json:"observedTime,omitempty"`
	// EventDigests vouch for the manager's latest Events about the job
	// (EventDigest of each, oldest first, at most MaxEventDigests): an
	// Event that claims to be the manager's and is not here is forged.
	EventDigests []string `json:"eventDigests,omitempty"`
	// Pods are the job's Launcher and Workers as the manager last saw
	// them, kept after JobSet removes them (a post-mortem): at most
	// MaxPodRecords, the Launcher first, then Workers by index.
	Pods []PodRecord `json:"pods,omitempty"`
	// Subject is the pod the diagnosis is about (the Worker that ran out of
	// memory, the rank's Worker, the Launcher), as the rule that wrote
	// Message found it; nil when it is about the job as a whole.
	Subject *PodRef `json:"subject,omitempty"`
	// Failed are the Launcher and Workers that failed: those whose last
	// state ended badly, and the Subject when the status warns or failed.
	// Every interface reads them from here instead of from Message.
	Failed []FailedPod `json:"failed,omitempty"`
	// History is the job's transitions (phase and reason), oldest first,
	// at most MaxHistory: what its Events said, kept after the cluster's
	// Events expire (an hour by default).
	History []Transition `json:"history,omitempty"`
}

// MaxPodRecords and MaxHistory bound what a status keeps of its pods and
// transitions (an annotation holds at most 256 KiB with the others).
const (
	MaxPodRecords = 65
	MaxHistory    = 20
)

// PodRecord is one of a job's pods as the manager last saw it.
type PodRecord struct {
	// Role is launcher or worker.
	Role string `json:"role"`
	// Index is the Worker's index (0 for the Launcher).
	Index int32  `json:"index"`
	Pod   string `json:"pod"`
	Node  string `json:"node,omitempty"`
	// State is the pod's state in words: Running, Completed (exit 0),
	// OOMKilled (exit 137), Pending: Unschedulable, ...
	State    string `json:"state"`
	Restarts int32  `json:"restarts,omitempty"`
	// ExitCode is how its container (the one State is of) last ended,
	// when it did: 137 for a kill.
	ExitCode *int32 `json:"exitCode,omitempty"`
	// Signal is the signal that ended it (9 for SIGKILL), when one did:
	// the runtime's, or ExitCode above 128.
	Signal int32 `json:"signal,omitempty"`
	// Gone is true when the manager saw the pod removed while the job
	// ran; State is then its last state. (A finished job's status is not
	// written again: its pods' records are as the job ended.)
	Gone bool `json:"gone,omitempty"`
}

// PodRef names one of a job's pods by its role: the Launcher, or Worker
// Index.
type PodRef struct {
	// Role is launcher or worker.
	Role string `json:"role" ts:"'launcher' | 'worker'"`
	// Index is the Worker's index (0 for the Launcher).
	Index int32 `json:"index"`
}

// LauncherRef is the Launcher's PodRef.
func LauncherRef() *PodRef { return &PodRef{Role: "launcher"} }

// WorkerRef is Worker i's PodRef.
func WorkerRef(i int32) *PodRef { return &PodRef{Role: "worker", Index: i} }

// FailedPod is a Launcher or Worker that failed.
type FailedPod struct {
	// Role is launcher or worker.
	Role string `json:"role" ts:"'launcher' | 'worker'"`
	// Index is the Worker's index (0 for the Launcher).
	Index int32  `json:"index"`
	Pod   string `json:"pod,omitempty"`
	Node  string `json:"node,omitempty"`
	// Reason is the status's reason for the pod the diagnosis names, else
	// the pod's last state in words ("Error (exit 1)").
	Reason string `json:"reason"`
	// ExitCode and Signal are the pod's record's: how it ended, as
	// numbers (none for a pod that left no record, such as one an Event
	// or a log line names).
	ExitCode *int32 `json:"exitCode,omitempty"`
	Signal   int32  `json:"signal,omitempty"`
}

// Transition is a change of a job's phase or reason.
type Transition struct {
	Time    metav1.Time `json:"time"`
	Phase   Phase       `json:"phase"`
	Reason  string      `json:"reason,omitempty"`
	Message string      `json:"message,omitempty"`
}

// Where mpijob-manager's leader-election Lease lives: every signed-in
// user may read it (config/rbac/aggregate/manager-lease.yaml).
const (
	ManagerLeaseNamespace = "mpijob-system"
	ManagerLeaseName      = "mpijob-manager.mpijob.dev"
)

// ReadStatus decodes the Status from a TrainJob's annotations, cleaned of
// control characters (see CleanText); ok is false when the manager has
// not written one (it does not run, or not yet).
func ReadStatus(annotations map[string]string) (s Status, ok bool, err error) {
	if ok, err := decodeStatus(annotations, &s); !ok || err != nil {
		return Status{}, false, err
	}
	return s.Clean(), true, nil
}

// HasStatus says whether the manager has written a status on a TrainJob,
// decoding nothing: what decides whether the manager's Lease is worth
// reading beside it (its stale note), before jobview.DetailOf decodes it.
func HasStatus(annotations map[string]string) bool {
	return annotations[StatusAnnotation] != ""
}

// Summary is what the metrics scrape reports of a status: its phase, the
// diagnosis's reason and when the job entered the phase (zero: not
// known).
type Summary struct {
	Phase  Phase
	Reason string
	Since  time.Time
}

// ReadSummary is ReadStatus's Phase, Reason and LastTransitionTime,
// decoding nothing else: the metrics scrape reads every job's summary,
// and a status with its history and pods is most of a kilobyte to decode
// and clean. A status whose other fields have the wrong JSON types (only
// the manager writes it) gives its summary here, and an error from
// ReadStatus.
func ReadSummary(annotations map[string]string) (sum Summary, ok bool, err error) {
	var s struct {
		Phase              Phase        `json:"phase"`
		Reason             string       `json:"reason"`
		LastTransitionTime *metav1.Time `json:"lastTransitionTime"`
	}
	if ok, err := decodeStatus(annotations, &s); !ok || err != nil {
		return Summary{}, false, err
	}
	sum = Summary{Phase: Phase(CleanText(string(s.Phase))), Reason: CleanText(s.Reason)}
	if s.LastTransitionTime != nil {
		sum.Since = s.LastTransitionTime.Time
	}
	return sum, true, nil
}

// decodeStatus decodes StatusAnnotation into v; ok is false when there is
// none.
func decodeStatus(annotations map[string]string, v any) (ok bool, err error) {
	raw, found := annotations[StatusAnnotation]
	if !found {
		return false, nil
	}
	if err := json.Unmarshal([]byte(raw), v); err != nil {
		return false, fmt.Errorf("annotation %s is not a valid mpijob status: %w", StatusAnnotation, err)
	}
	return true, nil
}

// Encode renders s for StatusAnnotation.
func (s Status) Encode() (string, error) {
	b, err := json.Marshal(s)
	return string(b), err
}

// NetworkPolicySuffix names a job's NetworkPolicy: the job's name and it.
const NetworkPolicySuffix = "-mpi"

// IsJobObject reports whether an object of kind named name belongs to the
// MPI job job, by the exact names Trainer, JobSet, Kueue and mpijob give:
// the TrainJob, its JobSet, per-job TrainingRuntime and NetworkPolicy
// (job), its Jobs (job-launcher-N, job-node-N), their pods
// (job-ROLE-N-M-xxxxx) and Kueue's Workload (trainjob-job-xxxxx). A prefix
// match would give job "hello" the events of "hello-4".
func IsJobObject(job, kind, name string) bool {
	switch kind {
	case "Workload":
		rest, ok := strings.CutPrefix(name, "trainjob-"+job)
		return ok && workloadRe.MatchString(rest)
	case "Job":
		rest, ok := strings.CutPrefix(name, job)
		return ok && childJobRe.MatchString(rest)
	case "Pod":
		rest, ok := strings.CutPrefix(name, job)
		return ok && childPodRe.MatchString(rest)
	case "NetworkPolicy":
		return name == job+NetworkPolicySuffix
	}
	return name == job
}

var (
	childJobRe = regexp.MustCompile(`^-(` + LauncherJob + `|` + WorkerJob + `)-\d+$`)
	childPodRe = regexp.MustCompile(`^-(` + LauncherJob + `|` + WorkerJob + `)-\d+-\d+-[a-z0-9]{5}$`)
	workloadRe = regexp.MustCompile(`^-[a-z0-9]{5}$`)
)

// EventTime is when an Event last happened: its last timestamp, else its
// event time (events.k8s.io), else when it was created.
func EventTime(e corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.FirstTimestamp.IsZero():
		return e.FirstTimestamp.Time
	}
	return e.CreationTimestamp.Time
}

// JobEvents keeps the events of job's own objects (by exact names, see
// IsJobObject), oldest first: what the CLI and the dashboard show.
func JobEvents(job string, events []corev1.Event) []corev1.Event {
	var out []corev1.Event
	for _, e := range events {
		if IsJobObject(job, e.InvolvedObject.Kind, e.InvolvedObject.Name) {
			out = append(out, e)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return EventTime(out[i]).Before(EventTime(out[j])) })
	return out
}

// PullFailed reports a container the kubelet cannot start because its
// image cannot be pulled (or named, or is not there to run): the one image
// pull rule of the diagnosis and `kubectl mpijob runtimes test`.
func PullFailed(cs corev1.ContainerStatus) bool {
	w := cs.State.Waiting
	if w == nil {
		return false
	}
	switch w.Reason {
	case "ImagePullBackOff", "ErrImagePull", "InvalidImageName", "ErrImageNeverPull":
		return true
	}
	return false
}
