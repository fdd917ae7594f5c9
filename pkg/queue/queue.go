// Package queue reads what Kueue says about an MPI job: whether its
// Workload is admitted, Kueue's reason when it is not, and the job's
// position among the pending Workloads of its ClusterQueue.
//
// Kueue is optional: without its API the lookup reports no queue, and the
// job is scheduled by kube-scheduler alone. mpijob reads Kueue's objects as
// unstructured data so that it depends on Kueue's API, not its Go module.
package queue

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/suggest"
)

const (
	// NameLabel is the label with which a job asks Kueue for a LocalQueue.
	NameLabel = "kueue.x-k8s.io/queue-name"
	// PriorityLabel is the label with which a job names its Kueue
	// WorkloadPriorityClass: Kueue admits the jobs of a queue by it and may
	// preempt lower ones for it.
	PriorityLabel = "kueue.x-k8s.io/priority-class"
	// jobUIDLabel is set by Kueue on the Workload of a job.
	jobUIDLabel = "kueue.x-k8s.io/job-uid"
	// WorkloadsByJob is the manager's cache index of Kueue's Workloads by
	// the UID of the job each stands for (IndexByJob): a job's own
	// Workload is read at every diagnosis round, and a label selector
	// would look at every Workload of the namespace each time.
	WorkloadsByJob = "mpijob.dev/workload-job-uid"
)

// WorkloadObject is the object WorkloadsByJob is set on: a Workload as
// the manager's cache holds it (unstructured data).
func WorkloadObject() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(workloadKind.WithVersion(workloadList.Version))
	return u
}

// IndexByJob is WorkloadsByJob's index function: the UID of the job a
// Workload stands for (jobUID).
func IndexByJob(o client.Object) []string {
	if uid := jobUID(o); uid != "" {
		return []string{string(uid)}
	}
	return nil
}

// jobUID is the UID of the job a Workload stands for: its controller's
// (Kueue's owner reference), or else Kueue's label.
func jobUID(o metav1.Object) types.UID {
	if ref := metav1.GetControllerOfNoCopy(o); ref != nil {
		return ref.UID
	}
	return types.UID(o.GetLabels()[jobUIDLabel])
}

var (
	workloadList   = schema.GroupVersionKind{Group: "kueue.x-k8s.io", Version: "v1beta2", Kind: "WorkloadList"}
	localQueueList = schema.GroupVersionKind{Group: "kueue.x-k8s.io", Version: "v1beta2", Kind: "LocalQueueList"}
	// workloadKind is a Workload of any version (TrimWorkload).
	workloadKind = schema.GroupKind{Group: workloadList.Group, Kind: "Workload"}
)

// Workload is the part of a Kueue Workload that decides queue order.
type Workload struct {
	Namespace, Name string
	// Queue is the LocalQueue the Workload was submitted to.
	Queue string
	// OwnerUID is the UID of the job the Workload stands for.
	OwnerUID types.UID
	Priority int32
	// Created orders Workloads of equal priority (Kueue's default
	// BestEffortFIFO and StrictFIFO order by it, or by the time of the last
	// eviction, which Requeued carries when set).
	Created  time.Time
	Requeued time.Time
	// Admitted: Kueue reserved quota for the whole Workload.
	Admitted bool
	// Finished: the job ended.
	Finished bool
	// Message is Kueue's explanation while the Workload is not admitted.
	Message string
	// EvictedPodsReadyTimeout: Kueue evicted it because its pods were not
	// all Ready within waitForPodsReady's timeout; it queues again.
	EvictedPodsReadyTimeout bool
	// Inactive: spec.active is false; the job is suspended (by its user, or
	// by Kueue when it gave up on it) and does not queue.
	Inactive bool
	// Preempted: Kueue evicted it for another Workload (condition Evicted,
	// reason Preempted) and it has not been admitted again since.
	Preempted bool
	// Preemption is what Kueue's eviction said of the last preemption.
	Preemption Preemption
	// Preemptions counts the times Kueue preempted it
	// (status.schedulingStats.evictions with reason Preempted).
	Preemptions int32
}

// Preemption is what Kueue says when it preempts a Workload: "Preempted to
// accommodate a workload (UID: ..., JobUID: ...) due to prioritization in
// the ClusterQueue; ...".
type Preemption struct {
	// ByJobUID is the UID of the job Kueue made room for ("" when unknown).
	ByJobUID types.UID
	// Why is Kueue's reason in words: "prioritization in the
	// ClusterQueue", "reclamation within the cohort", ...
	Why string
	// When is the time of the eviction.
	When time.Time
}

var preemptionMessage = regexp.MustCompile(`JobUID: ([^,)\s]+)\) due to ([^;]+)`)

// ParsePreemption reads Kueue's eviction message of a preemption.
func ParsePreemption(msg string) Preemption {
	var p Preemption
	if m := preemptionMessage.FindStringSubmatch(msg); m != nil {
		if m[1] != "UNKNOWN" {
			p.ByJobUID = types.UID(m[1])
		}
		if m[2] != "UNKNOWN" {
			p.Why = strings.TrimSpace(m[2])
		}
	}
	return p
}

// Pending reports whether the Workload waits for quota.
func (w Workload) Pending() bool { return !w.Admitted && !w.Finished && !w.Inactive }

func (w Workload) orderTime() time.Time {
	if !w.Requeued.IsZero() {
		return w.Requeued
	}
	return w.Created
}

// Position is the 1-based place of mine among the pending Workloads of its
// ClusterQueue (higher priority first, then older first); 0 when mine is
// not pending. clusterQueueOf maps "namespace/localqueue" to its
// ClusterQueue.
func Position(all []Workload, mine Workload, clusterQueueOf map[string]string) int32 {
	if !mine.Pending() {
		return 0
	}
	cq := clusterQueueOf[mine.Namespace+"/"+mine.Queue]
	var same []Workload
	for _, w := range all {
		if w.Pending() && clusterQueueOf[w.Namespace+"/"+w.Queue] == cq {
			same = append(same, w)
		}
	}
	sort.SliceStable(same, func(i, j int) bool { return before(same[i], same[j]) })
	for i, w := range same {
		if w.Namespace == mine.Namespace && w.Name == mine.Name {
			return int32(i + 1)
		}
	}
	return 0
}

// FromUnstructured reads a Kueue Workload.
func FromUnstructured(u *unstructured.Unstructured) Workload {
	w := Workload{Namespace: u.GetNamespace(), Name: u.GetName(), Created: u.GetCreationTimestamp().Time}
	w.Queue, _, _ = unstructured.NestedString(u.Object, "spec", "queueName")
	if active, found, _ := unstructured.NestedBool(u.Object, "spec", "active"); found && !active {
		w.Inactive = true
	}
	switch p, _, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "priority"); p := p.(type) {
	case int64:
		w.Priority = int32(p)
	case float64:
		w.Priority = int32(p)
	}
	w.OwnerUID = jobUID(u)
	evictions, _, _ := unstructured.NestedSlice(u.Object, "status", "schedulingStats", "evictions")
	for _, e := range evictions {
		if m, ok := e.(map[string]any); ok && m["reason"] == "Preempted" {
			switch n := m["count"].(type) {
			case int64:
				w.Preemptions += int32(n)
			case float64:
				w.Preemptions += int32(n)
			}
		}
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		typ, _ := m["type"].(string)
		status, _ := m["status"].(string)
		msg, _ := m["message"].(string)
		switch typ {
		case "QuotaReserved":
			if status == string(metav1.ConditionTrue) {
				w.Admitted = true
			} else {
				w.Message = msg
			}
		case "Finished":
			w.Finished = status == string(metav1.ConditionTrue)
		case "Evicted":
			if status == string(metav1.ConditionTrue) {
				switch reason, _ := m["reason"].(string); reason {
				case "PodsReadyTimeout":
					w.EvictedPodsReadyTimeout = true
				case "Preempted":
					w.Preempted = true
					w.Preemption = ParsePreemption(msg)
					if ts, ok := m["lastTransitionTime"].(string); ok {
						w.Preemption.When, _ = time.Parse(time.RFC3339, ts)
					}
				}
			}
			// An evicted Workload queues again from the time of eviction.
			if ts, ok := m["lastTransitionTime"].(string); ok {
				if t, err := time.Parse(time.RFC3339, ts); err == nil && t.After(w.Requeued) {
					w.Requeued = t
				}
			}
		}
	}
	return w
}

// State is what the diagnosis needs to know about a job's queue.
type State struct {
	// Queue is "namespace/localqueue"; ClusterQueue is empty when the
	// LocalQueue does not exist.
	Queue, ClusterQueue string
	Admitted            bool
	Position            int32
	Pending             int32
	// PositionFromKueue: Position is Kueue's own (its visibility API),
	// not computed by mpijob.
	PositionFromKueue bool
	Message           string
	// EvictedPodsReadyTimeout: Kueue stopped the job's pods because they
	// were not all Ready in time (waitForPodsReady) and requeued it.
	EvictedPodsReadyTimeout bool
	// Workload is the name of the job's Workload; Inactive says its
	// spec.active is false (the job is suspended through Kueue).
	Workload string
	Inactive bool
	// Preempted: Kueue evicted the job for another and has not admitted
	// it again yet; Preemption says for what, Preemptions how often.
	Preempted   bool
	Preemption  Preemption
	Preemptions int32
}

// of fills in what st says of the job's own Workload w.
func (st *State) of(w Workload) {
	st.Admitted, st.Message, st.EvictedPodsReadyTimeout = w.Admitted, w.Message, w.EvictedPodsReadyTimeout
	st.Workload, st.Inactive = w.Name, w.Inactive
	st.Preempted, st.Preemption, st.Preemptions = w.Preempted, w.Preemption, w.Preemptions
}

// Lookup returns the queue state of the job with the given labels and UID,
// or nil when the job names no queue or Kueue is not installed.
func Lookup(ctx context.Context, r client.Reader, namespace string, labels map[string]string, uid types.UID) (*State, error) {
	name := labels[NameLabel]
	if name == "" {
		return nil, nil
	}
	st := &State{Queue: namespace + "/" + name}
	wls, err := listWorkloads(ctx, r, client.InNamespace(namespace), client.MatchingLabels{jobUIDLabel: string(uid)})
	if meta.IsNoMatchError(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	cqOf, err := clusterQueues(ctx, r)
	if err != nil {
		return nil, err
	}
	st.ClusterQueue = cqOf[st.Queue]
	if len(wls) == 0 {
		if st.ClusterQueue == "" {
			st.Message = "LocalQueue " + st.Queue + " does not exist"
		}
		return st, nil
	}
	mine := wls[0]
	st.of(mine)
	if !mine.Pending() {
		return st, nil
	}
	all, err := listWorkloads(ctx, r)
	if err != nil {
		return nil, err
	}
	st.Position = Position(all, mine, cqOf)
	for _, w := range all {
		if w.Pending() && cqOf[w.Namespace+"/"+w.Queue] == st.ClusterQueue {
			st.Pending++
		}
	}
	return st, nil
}

func listWorkloads(ctx context.Context, r client.Reader, opts ...client.ListOption) ([]Workload, error) {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(workloadList)
	// FromUnstructured only reads: a cache need not copy every Workload.
	if err := r.List(ctx, l, append(opts, client.UnsafeDisableDeepCopy)...); err != nil {
		return nil, err
	}
	out := make([]Workload, 0, len(l.Items))
	for i := range l.Items {
		out = append(out, FromUnstructured(&l.Items[i]))
	}
	return out, nil
}

// clusterQueues maps every LocalQueue ("namespace/name") to its ClusterQueue.
func clusterQueues(ctx context.Context, r client.Reader) (map[string]string, error) {
	lqs := &unstructured.UnstructuredList{}
	lqs.SetGroupVersionKind(localQueueList)
	if err := r.List(ctx, lqs); err != nil {
		return nil, err
	}
	cqOf := map[string]string{}
	for _, lq := range lqs.Items {
		cq, _, _ := unstructured.NestedString(lq.Object, "spec", "clusterQueue")
		cqOf[lq.GetNamespace()+"/"+lq.GetName()] = cq
	}
	return cqOf, nil
}

// ErrNoWorkload says Kueue has not made the job's Workload (yet).
var ErrNoWorkload = errors.New("the job's Kueue Workload does not exist yet: try again in a few seconds")

// SetActive suspends (active false) or resumes (true) the Kueue-managed
// job with uid the way Kueue honours, through its Workload's spec.active,
// with c's credentials (the user's: mpijob-edit grants the patch, and
// mpijob's admission lets people change that field only). It returns the
// Workload's name.
func SetActive(ctx context.Context, c client.Client, namespace string, uid types.UID, active bool) (string, error) {
	wls, err := listWorkloads(ctx, c, client.InNamespace(namespace), client.MatchingLabels{jobUIDLabel: string(uid)})
	if err != nil {
		return "", err
	}
	if len(wls) == 0 {
		return "", ErrNoWorkload
	}
	wl := &unstructured.Unstructured{}
	wl.SetGroupVersionKind(workloadList.GroupVersion().WithKind("Workload"))
	wl.SetNamespace(namespace)
	wl.SetName(wls[0].Name)
	patch := fmt.Sprintf(`{"spec":{"active":%t}}`, active)
	return wl.GetName(), c.Patch(ctx, wl, client.RawPatch(types.MergePatchType, []byte(patch)))
}

// TrimWorkload is a cache transform for Kueue Workloads read as
// unstructured data: it keeps what FromUnstructured and the queue's order
// read, and drops each pod set's pod template, Kueue's admission and its
// resource requests, most of a Workload's size (an unstructured pod
// template costs tens of kilobytes a job in the manager's cache). Other
// objects pass through.
func TrimWorkload(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || u.GroupVersionKind().GroupKind() != workloadKind {
		return obj, nil
	}
	unstructured.RemoveNestedField(u.Object, "spec", "podSets")
	unstructured.RemoveNestedField(u.Object, "status", "admission")
	unstructured.RemoveNestedField(u.Object, "status", "resourceRequests")
	return u, nil
}

var priorityClassList = schema.GroupVersionKind{Group: "kueue.x-k8s.io", Version: "v1beta2", Kind: "WorkloadPriorityClassList"}

// ErrNoKueue says that the cluster serves no Kueue API.
var ErrNoKueue = errors.New("this cluster runs no Kueue")

// PriorityClasses lists Kueue's WorkloadPriorityClasses by name, with
// their values; ErrNoKueue when Kueue's API is not served.
func PriorityClasses(ctx context.Context, r client.Reader) (map[string]int64, error) {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(priorityClassList)
	if err := r.List(ctx, l); err != nil {
		if meta.IsNoMatchError(err) {
			return nil, ErrNoKueue
		}
		return nil, err
	}
	out := map[string]int64{}
	for _, pc := range l.Items {
		v, _, _ := unstructured.NestedInt64(pc.Object, "value")
		out[pc.GetName()] = v
	}
	return out, nil
}

// PriorityProblem says what is wrong with a job's priority class name
// given the classes the cluster has ("" when it is one of them).
func PriorityProblem(name string, classes map[string]int64) string {
	if _, ok := classes[name]; ok {
		return ""
	}
	if len(classes) == 0 {
		return "this cluster has no WorkloadPriorityClass: leave the priority out, or ask an administrator to create one (kubectl get workloadpriorityclasses)"
	}
	names := make([]string, 0, len(classes))
	for n := range classes {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		return classes[names[i]] > classes[names[j]] || classes[names[i]] == classes[names[j]] && names[i] < names[j]
	})
	list := ""
	for i, n := range names {
		if i > 0 {
			list += ", "
		}
		list += fmt.Sprintf("%s (%d)", n, classes[n])
	}
	if near := suggest.Closest(name, names); near != "" {
		return fmt.Sprintf("is no WorkloadPriorityClass of this cluster; did you mean %q? The classes are %s", near, list)
	}
	return "is no WorkloadPriorityClass of this cluster: use one of " + list
}
