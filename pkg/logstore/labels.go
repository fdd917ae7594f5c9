package logstore

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/mpijob/mpijob/pkg/api"
)

// The stream labels every line of a job's pod carries in the store.
const (
	LabelNamespace = "namespace"
	LabelJob       = "trainjob"
	LabelRole      = "role"
	LabelIndex     = "index"
	LabelPod       = "pod"
	LabelContainer = "container"
	LabelNode      = "node"
	// LabelInit is "true" on an init container's lines; readers leave them
	// out unless asked.
	LabelInit = "init"
	// LabelJobSetUID is the UID of the JobSet whose pod wrote the line:
	// reads are bound to the job that exists now, not an earlier job of
	// the same name, nor one of a namespace deleted and made again.
	LabelJobSetUID = "jobset_uid"
	// MetaRank is the structured metadata of a line mpirun tagged with
	// its rank; MetaStream says stdout or stderr.
	MetaRank   = "rank"
	MetaStream = "stream"
)

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
	// Init is true for an init container.
	Init bool
	// inits are the pod's init containers' names.
	inits []string
}

// Labels are the target's stream labels.
func (t Target) Labels() map[string]string {
	l := map[string]string{
		LabelNamespace: t.Namespace, LabelJob: t.Job, LabelRole: t.Role, LabelIndex: strconv.Itoa(t.Index),
		LabelPod: t.Pod, LabelContainer: t.Container, LabelNode: t.Node,
	}
	if t.Init {
		l[LabelInit] = "true"
	}
	if t.JobSetUID != "" {
		l[LabelJobSetUID] = t.JobSetUID
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
	for _, c := range pod.Spec.InitContainers {
		t.inits = append(t.inits, c.Name)
	}
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
	// Init includes init containers' lines.
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
		fmt.Fprintf(&b, `, %s=""`, LabelInit)
	}
	if s.JobSetUID != "" {
		fmt.Fprintf(&b, `, %s=~%q`, LabelJobSetUID, regexp.QuoteMeta(s.JobSetUID)+"|")
	}
	b.WriteString("}")
	return b.String()
}
