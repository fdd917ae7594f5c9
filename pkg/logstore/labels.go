package logstore

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/mpijob/mpijob/pkg/api"
)

// The stream labels every line of a job's pod carries in the store: the
// schema OpenShift Logging 6's collector (Vector, a ClusterLogForwarder to
// a LokiStack, ViaQ data model) writes, so that the read API reads a
// LokiStack fed by OpenShift Logging and the local cluster's store alike.
// Vector names a pod label kubernetes.labels.KEY as
// kubernetes_labels_KEY with every '.', '/', '\\' and '-' made '_' (the
// ClusterLogForwarder's labelKeys must list the four pod labels below;
// docs/admin.md shows it).
const (
	LabelNamespace = "kubernetes_namespace_name"
	LabelPod       = "kubernetes_pod_name"
	LabelContainer = "kubernetes_container_name"
	LabelHost      = "kubernetes_host"
	LabelLogType   = "log_type"
	// LabelOpenShiftLogType is OpenShift Logging 6's second name of the
	// log type (its OTel-style label), written beside log_type.
	LabelOpenShiftLogType = "openshift_log_type"
	// LogTypeApplication is the log type of every container of a tenant's
	// namespace, in OpenShift Logging's words.
	LogTypeApplication = "application"
	// LabelJob, LabelRole, LabelIndex and LabelJobSetUID are the pod's
	// JobSet name, replicated job (launcher or node), Job completion index
	// and JobSet UID labels. The UID binds reads to the job that exists
	// now, not an earlier job of the same name, nor one of a namespace
	// deleted and made again.
	LabelJob       = "kubernetes_labels_jobset_sigs_k8s_io_jobset_name"
	LabelRole      = "kubernetes_labels_jobset_sigs_k8s_io_replicatedjob_name"
	LabelIndex     = "kubernetes_labels_batch_kubernetes_io_job_completion_index"
	LabelJobSetUID = "kubernetes_labels_jobset_sigs_k8s_io_jobset_uid"
)

// otelNames are the second names OpenShift Logging 6 writes beside the
// ViaQ ones (k8s_*: its OTel-style labels, for the listed labelKeys and
// the node always). Readers use the ViaQ names.
var otelNames = map[string]string{
	LabelNamespace: "k8s_namespace_name", LabelPod: "k8s_pod_name", LabelContainer: "k8s_container_name", LabelHost: "k8s_node_name",
}

// PodLabelKeys are the ClusterLogForwarder labelKeys that give the
// labels above (OpenShift Logging 6's defaults plus the pod's JobSet
// labels).
var PodLabelKeys = []string{
	"log_type", "kubernetes.namespace_name", "kubernetes.pod_name", "kubernetes.container_name",
	"kubernetes.labels.jobset.sigs.k8s.io/jobset-name",
	"kubernetes.labels.jobset.sigs.k8s.io/replicatedjob-name",
	"kubernetes.labels.batch.kubernetes.io/job-completion-index",
	"kubernetes.labels.jobset.sigs.k8s.io/jobset-uid",
}

// VectorLabelName is the stream label Vector, as OpenShift Logging 6
// configures it, makes of a labelKeys entry.
func VectorLabelName(key string) string {
	return strings.NewReplacer(".", "_", "/", "_", "\\", "_", "-", "_").Replace(key)
}

// Target is one container's log as the collector finds it: where it
// lies and the labels its lines get.
type Target struct {
	Namespace, Pod, UID, Container, Node string
	// Job, Role and Index are empty for a pod of no MPI job (skipped).
	Job, Role string
	Index     int
	// JobSetUID is the UID of the pod's JobSet ("" when unknown: a pod
	// gone before the collector saw it).
	JobSetUID string
}

// Labels are the target's stream labels.
func (t Target) Labels() map[string]string {
	l := map[string]string{
		LabelNamespace: t.Namespace, LabelJob: t.Job, LabelRole: t.Role, LabelIndex: strconv.Itoa(t.Index),
		LabelPod: t.Pod, LabelContainer: t.Container, LabelHost: t.Node,
		LabelLogType: LogTypeApplication, LabelOpenShiftLogType: LogTypeApplication,
	}
	if t.JobSetUID != "" {
		l[LabelJobSetUID] = t.JobSetUID
	}
	for viaq, otel := range otelNames {
		l[otel] = l[viaq]
	}
	return l
}

// podDir is the kubelet's folder of a pod's logs: NAMESPACE_NAME_UID.
var podDir = regexp.MustCompile(`^([a-z0-9-]+)_([a-z0-9.-]+)_([0-9a-f-]{36})$`)

// ParsePodDir reads a /var/log/pods folder name.
func ParsePodDir(name string) (ns, pod, uid string, ok bool) {
	m := podDir.FindStringSubmatch(name)
	if m == nil {
		return "", "", "", false
	}
	return m[1], m[2], m[3], true
}

// FromPod fills the job, role and index of a target from its pod's
// labels (JobSet's and the Job controller's); false for a pod of no MPI
// job's Launcher or Workers.
func FromPod(t Target, pod *corev1.Pod) (Target, bool) {
	job := pod.Labels[jobsetv1alpha2.JobSetNameKey]
	role := pod.Labels[jobsetv1alpha2.ReplicatedJobNameKey]
	if job == "" || (role != api.LauncherJob && role != api.WorkerJob) {
		return t, false
	}
	idx, err := strconv.Atoi(pod.Labels["batch.kubernetes.io/job-completion-index"])
	if err != nil {
		idx = 0
	}
	t.Job, t.Role, t.Index = job, role, idx
	t.JobSetUID = pod.Labels[jobsetv1alpha2.JobSetUIDKey]
	if t.Node == "" {
		t.Node = pod.Spec.NodeName
	}
	return t, true
}

// jobPodName is JobSet's pod name: JOB-ROLE-JOBINDEX-PODINDEX-RANDOM.
var jobPodName = regexp.MustCompile(`^(.+)-(` + api.LauncherJob + `|` + api.WorkerJob + `)-(\d+)-(\d+)-[a-z0-9]{5}$`)

// FromName fills job, role and index from the pod's name alone, for a pod
// that was deleted before the collector saw it.
func FromName(t Target) (Target, bool) {
	m := jobPodName.FindStringSubmatch(t.Pod)
	if m == nil {
		return t, false
	}
	idx, _ := strconv.Atoi(m[4])
	t.Job, t.Role, t.Index = m[1], m[2], idx
	return t, true
}

// Selector is what a reader asks of one job's logs.
type Selector struct {
	Namespace, Job string
	// Role is launcher or node; empty for both.
	Role string
	// Index is the Worker's index (-1: every one).
	Index int
	// Init includes the lines of every container of the pods, init
	// containers and sidecars too; without it, the main container's
	// (named node, as Trainer names it in the Launcher and the Workers).
	Init bool
	// JobSetUID, when set, keeps the lines of that JobSet's pods and
	// those that carry no JobSet UID (a pod gone before the collector saw
	// it; lines stored before the label existed): the reader bounds the
	// time to the JobSet's life too.
	JobSetUID string
}

// LogQL is the selector as a Loki stream selector.
func (s Selector) LogQL() string {
	var b strings.Builder
	fmt.Fprintf(&b, `{%s=%q, %s=%q`, LabelNamespace, s.Namespace, LabelJob, s.Job)
	if s.Role != "" {
		fmt.Fprintf(&b, `, %s=%q`, LabelRole, s.Role)
	}
	if s.Index >= 0 {
		fmt.Fprintf(&b, `, %s="%d"`, LabelIndex, s.Index)
	}
	if !s.Init {
		fmt.Fprintf(&b, `, %s=%q`, LabelContainer, api.NodeContainer)
	}
	if s.JobSetUID != "" {
		fmt.Fprintf(&b, `, %s=~%q`, LabelJobSetUID, regexp.QuoteMeta(s.JobSetUID)+"|")
	}
	b.WriteString("}")
	return b.String()
}

// JobOwner is what the collector keeps of a Job that a JobSet controls:
// the JobSet's name and UID.
type JobOwner struct {
	JobSet    string
	JobSetUID string
}

// JobOwnerOf is the JobSet that controls job (false for a Job no JobSet
// controls).
func JobOwnerOf(job metav1.Object) (JobOwner, bool) {
	ref := metav1.GetControllerOfNoCopy(job)
	if ref == nil || ref.Kind != "JobSet" || ref.APIVersion != jobsetv1alpha2.GroupVersion.String() {
		return JobOwner{}, false
	}
	return JobOwner{JobSet: ref.Name, JobSetUID: string(ref.UID)}, true
}

// PodJob is the Job that controls pod, by name and UID ("" when no Job
// does): the owner the collector checks before it takes the pod's lines
// as its job's.
func PodJob(pod metav1.Object) (name, uid string) {
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil || ref.Kind != "Job" || ref.APIVersion != batchv1.SchemeGroupVersion.String() {
		return "", ""
	}
	return ref.Name, string(ref.UID)
}

// Owned is the rule for whose lines a pod's are: t (read from the pod's
// labels by FromPod) speaks for its job only when the pod's controller is
// a Job (jobUID) that the job's JobSet controls, as the collector saw that
// Job (owner). Labels and names are anyone's to write in a namespace; the
// owners' UIDs are the Job and JobSet controllers'. The JobSet's UID is
// taken from the Job, not from the pod's label.
func Owned(t Target, jobUID string, owner JobOwner, ownerKnown bool) (Target, bool) {
	if jobUID == "" || !ownerKnown || owner.JobSet != t.Job || owner.JobSetUID == "" {
		return t, false
	}
	t.JobSetUID = owner.JobSetUID
	return t, true
}
