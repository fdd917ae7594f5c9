package api

import (
	"encoding/json"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// Where the status lives: a JobStatus of mpijob's own per job.
//
// mpijob-manager writes its Status of an MPI job into a JobStatus
// (jobstatuses.mpijob.dev, config/crd) named after the TrainJob, in its
// namespace, owned by it: a write there wakes neither Trainer nor Kueue,
// where each write to the TrainJob went through their webhooks and made
// Trainer apply the job's ConfigMaps again (docs/development.md, "Where the
// status lives": 10 ms of the control plane's CPU a write against 75 ms).
// Tenants may read JobStatuses and never write them (config/rbac), so no
// tenant can forge one.
//
// Every reader joins a job's JobStatus to its TrainJob (JoinStatus): the
// status goes into the in-memory copy of the TrainJob's StatusAnnotation,
// where every rule that reads a status (ReadStatus, StatusOf, RowFromStatus,
// jobview) already looks, so the rules and their shared vectors stay one. A
// TrainJob without a JobStatus of its own (an older manager wrote the
// annotation, or the manager has not seen the job yet) keeps what its
// annotation says: admission keeps that annotation the manager's.

// JobStatusGroupVersion is the API group and version of JobStatus.
var JobStatusGroupVersion = schema.GroupVersion{Group: "mpijob.dev", Version: "v1alpha1"}

// JobStatusResource is JobStatus's resource name.
var JobStatusResource = JobStatusGroupVersion.WithResource("jobstatuses")

// JobStatusKind is JobStatus's kind.
const JobStatusKind = "JobStatus"

// JobStatus is mpijob-manager's status of one MPI job: Status holds the
// Status as JSON, exactly what StatusAnnotation held; Phase and Reason
// repeat its phase and reason for `kubectl get jobstatuses`. Stacks holds
// the StackSnapshot the manager took of a stuck job, exactly what
// StacksAnnotation held ("" until it takes one).
type JobStatus struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Phase             string `json:"phase,omitempty"`
	Reason            string `json:"reason,omitempty"`
	Status            string `json:"status,omitempty"`
	Stacks            string `json:"stacks,omitempty"`
}

// JobStatusList is a list of JobStatuses.
type JobStatusList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []JobStatus `json:"items"`
}

// DeepCopyObject copies s.
func (s *JobStatus) DeepCopyObject() runtime.Object {
	if s == nil {
		return nil
	}
	out := *s
	s.DeepCopyInto(&out.ObjectMeta)
	return &out
}

// DeepCopyObject copies l.
func (l *JobStatusList) DeepCopyObject() runtime.Object {
	if l == nil {
		return nil
	}
	out := *l
	l.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]JobStatus, len(l.Items))
		for i := range l.Items {
			out.Items[i] = *l.Items[i].DeepCopyObject().(*JobStatus)
		}
	}
	return &out
}

// AddJobStatusToScheme registers JobStatus and JobStatusList.
func AddJobStatusToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(JobStatusGroupVersion, &JobStatus{}, &JobStatusList{})
	metav1.AddToGroupVersion(s, JobStatusGroupVersion)
	return nil
}

// JobStatusOf is the server-side apply object of tj's JobStatus holding
// raw (an encoded Status of phase and reason): named after the job, owned
// by it (its UID), so it goes when the job goes.
func JobStatusOf(tj *trainer.TrainJob, phase Phase, reason, raw string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": JobStatusGroupVersion.String(),
		"kind":       JobStatusKind,
		"metadata": map[string]any{
			"name": tj.Name, "namespace": tj.Namespace,
			"ownerReferences": []any{map[string]any{
				"apiVersion": trainer.GroupVersion.String(), "kind": trainer.TrainJobKind,
				"name": tj.Name, "uid": string(tj.UID), "controller": true,
			}},
		},
		"phase": string(phase), "reason": reason, "status": raw,
	}}
	return u
}

// OwnedBy reports whether s is the JobStatus of the TrainJob with uid: a
// job deleted and made again under its name has a new UID, and its old
// JobStatus (until the garbage collector takes it) is not its.
func (s *JobStatus) OwnedBy(uid types.UID) bool {
	if s == nil || uid == "" {
		return false
	}
	for _, o := range s.OwnerReferences {
		if o.UID == uid && o.Kind == trainer.TrainJobKind {
			return true
		}
	}
	return false
}

// JoinStatus puts s's status into m's StatusAnnotation, and its stacks
// into m's StacksAnnotation, when s is the job's own (OwnedBy) and holds
// them; m's annotations are copied first, so an object shared with a
// cache is never changed. It reports whether it joined.
func JoinStatus(m *metav1.ObjectMeta, s *JobStatus) bool {
	if s == nil || (s.Status == "" && s.Stacks == "") || !s.OwnedBy(m.UID) {
		return false
	}
	a := make(map[string]string, len(m.Annotations)+2)
	for k, v := range m.Annotations {
		a[k] = v
	}
	if s.Status != "" {
		a[StatusAnnotation] = s.Status
	}
	if s.Stacks != "" {
		a[StacksAnnotation] = s.Stacks
	}
	m.Annotations = a
	return true
}

// JobStatusStacksPatch is the merge patch that keeps raw (an encoded
// StackSnapshot) in a JobStatus's Stacks. A merge patch, not the
// diagnosis's apply of the status: that apply leaves alone a field it
// does not own, so the stacks stay through every later status write.
func JobStatusStacksPatch(raw string) ([]byte, error) {
	return json.Marshal(map[string]string{"stacks": raw})
}

// JobStatusIndex finds JobStatuses by namespace and name, for a list of
// TrainJobs to be joined to the JobStatuses of the same namespaces.
type JobStatusIndex map[types.NamespacedName]*JobStatus

// IndexJobStatuses indexes items (nil when there are none).
func IndexJobStatuses(items []JobStatus) JobStatusIndex {
	if len(items) == 0 {
		return nil
	}
	ix := make(JobStatusIndex, len(items))
	for i := range items {
		ix.Add(&items[i])
	}
	return ix
}

// IndexJobStatusPointers is IndexJobStatuses for the pointers a cache
// holds (nil when there are none).
func IndexJobStatusPointers(items []*JobStatus) JobStatusIndex {
	if len(items) == 0 {
		return nil
	}
	ix := make(JobStatusIndex, len(items))
	for _, s := range items {
		ix.Add(s)
	}
	return ix
}

// Add indexes s under its namespace and name: the job it belongs to.
func (ix JobStatusIndex) Add(s *JobStatus) {
	ix[types.NamespacedName{Namespace: s.Namespace, Name: s.Name}] = s
}

// For is the JobStatus indexed for the job m names (nil when there is
// none; that it is the job's own is JoinStatus's to check).
func (ix JobStatusIndex) For(m *metav1.ObjectMeta) *JobStatus {
	return ix[types.NamespacedName{Namespace: m.Namespace, Name: m.Name}]
}

// Join joins each job to its JobStatus (JoinStatus).
func (ix JobStatusIndex) Join(jobs []trainer.TrainJob) {
	if len(ix) == 0 {
		return
	}
	for i := range jobs {
		JoinStatus(&jobs[i].ObjectMeta, ix.For(&jobs[i].ObjectMeta))
	}
}

// JoinMeta joins one job's metadata to its JobStatus.
func (ix JobStatusIndex) JoinMeta(m *metav1.ObjectMeta) bool {
	if len(ix) == 0 {
		return false
	}
	return JoinStatus(m, ix.For(m))
}

// JobStatusesUnread reports an error of a JobStatus read that leaves
// every job with what its annotation says instead of failing the reader:
// a cluster whose mpijob predates JobStatus (no such resource), or a user
// whose role was made before it (forbidden). Any other error is the
// reader's.
func JobStatusesUnread(err error) bool {
	return err != nil && (meta.IsNoMatchError(err) || apierrors.IsNotFound(err) || apierrors.IsForbidden(err))
}
