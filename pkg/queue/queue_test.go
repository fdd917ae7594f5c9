package queue

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func TestPosition(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	wl := func(ns, name, q string, prio int32, ageMin int, admitted bool) Workload {
		return Workload{Namespace: ns, Name: name, Queue: q, Priority: prio, Created: t0.Add(time.Duration(ageMin) * time.Minute), Admitted: admitted}
	}
	cqOf := map[string]string{"team-a/default": "gpu", "team-b/default": "gpu", "team-c/default": "other"}
	all := []Workload{
		wl("team-a", "running", "default", 0, 0, true),
		wl("team-a", "first", "default", 0, 1, false),
		wl("team-b", "second", "default", 0, 2, false),
		wl("team-c", "elsewhere", "default", 0, 0, false),
		wl("team-b", "urgent", "default", 100, 5, false),
		wl("team-a", "done", "default", 0, 0, false),
	}
	all[5].Finished = true
	cases := map[string]struct {
		mine Workload
		want int32
	}{
		"higher priority goes first":        {mine: all[4], want: 1},
		"older of equal priority next":      {mine: all[1], want: 2},
		"other namespaces share the queue":  {mine: all[2], want: 3},
		"another ClusterQueue counts apart": {mine: all[3], want: 1},
		"admitted jobs have no position":    {mine: all[0], want: 0},
		"finished jobs have no position":    {mine: all[5], want: 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Position(all, tc.mine, cqOf); got != tc.want {
				t.Errorf("Position(%s) = %d, want %d", tc.mine.Name, got, tc.want)
			}
		})
	}
}

func TestEvictedWorkloadQueuesFromEviction(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	cqOf := map[string]string{"ns/q": "cq"}
	evicted := Workload{Namespace: "ns", Name: "evicted", Queue: "q", Created: t0, Requeued: t0.Add(time.Hour)}
	younger := Workload{Namespace: "ns", Name: "younger", Queue: "q", Created: t0.Add(time.Minute)}
	if got := Position([]Workload{evicted, younger}, evicted, cqOf); got != 2 {
		t.Errorf("evicted Workload position = %d, want 2 (behind one created before its eviction)", got)
	}
}

func TestFromUnstructured(t *testing.T) {
	const doc = `
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata:
  name: trainjob-big-1a2b3
  namespace: team-a
  creationTimestamp: "2026-11-22T10:00:00Z"
  labels:
    kueue.x-k8s.io/job-uid: "1234"
  ownerReferences:
  - apiVersion: trainer.kubeflow.org/v1alpha1
    kind: TrainJob
    name: big
    uid: "1234"
    controller: true
spec:
  queueName: default
  priority: 10
  podSets:
  - name: node
    count: 8
    template:
      spec:
        containers:
        - name: node
          image: ghcr.io/mpijob/openmpi:4.1
          env:
          - name: OMPI_MCA_orte_keep_fqdn_hostnames
            value: "true"
status:
  resourceRequests:
  - name: node
    resources:
      nvidia.com/gpu: "8"
  conditions:
  - type: QuotaReserved
    status: "False"
    reason: Pending
    message: "couldn't assign flavors to pod set node: insufficient unused quota for nvidia.com/gpu in flavor default-flavor, 8 more needed"
    lastTransitionTime: "2026-11-22T10:00:01Z"
`
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	want := Workload{
		Namespace: "team-a", Name: "trainjob-big-1a2b3", Queue: "default", OwnerUID: "1234", Priority: 10,
		Created: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC),
		Message: "couldn't assign flavors to pod set node: insufficient unused quota for nvidia.com/gpu in flavor default-flavor, 8 more needed",
	}
	got := FromUnstructured(u)
	got.Created = got.Created.UTC()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("FromUnstructured (-want,+got):\n%s", diff)
	}
	if !got.Pending() {
		t.Error("a Workload without reserved quota must be pending")
	}

	// The manager's cache keeps Workloads trimmed: they read the same.
	tr, err := TrimWorkload(u.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	tu := tr.(*unstructured.Unstructured)
	again := FromUnstructured(tu)
	again.Created = again.Created.UTC()
	if diff := cmp.Diff(want, again); diff != "" {
		t.Errorf("FromUnstructured of the trimmed Workload (-want,+got):\n%s", diff)
	}
	for _, f := range [][]string{{"spec", "podSets"}, {"status", "resourceRequests"}} {
		if _, found, _ := unstructured.NestedFieldNoCopy(tu.Object, f...); found {
			t.Errorf("the trim kept %v", f)
		}
	}
	lq := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
		"spec": map[string]any{"podSets": "not a Workload's"}}}
	if o, _ := TrimWorkload(lq); o.(*unstructured.Unstructured).Object["spec"] == nil || len(lq.Object["spec"].(map[string]any)) != 1 {
		t.Error("the trim changed a LocalQueue")
	}
}

// A Workload whose spec.active is false is suspended through Kueue: not
// pending (Kueue does not queue it), and the job's State says so.
func TestInactiveWorkload(t *testing.T) {
	const doc = `
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata:
  name: trainjob-paused-1a2b3
  namespace: team-a
  labels:
    kueue.x-k8s.io/job-uid: "5678"
spec:
  active: false
  queueName: default
`
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	w := FromUnstructured(u)
	if !w.Inactive || w.Pending() {
		t.Errorf("inactive %v, pending %v; want an inactive Workload that does not wait for quota", w.Inactive, w.Pending())
	}
	u.Object["spec"].(map[string]any)["active"] = true
	if w := FromUnstructured(u); w.Inactive || !w.Pending() {
		t.Errorf("active: true read as inactive %v, pending %v", w.Inactive, w.Pending())
	}
}

func TestPriorityProblem(t *testing.T) {
	classes := map[string]int64{"low": 10, "high": 1000, "medium": 100}
	cases := map[string]struct {
		name    string
		classes map[string]int64
		want    string
	}{
		"a class of the cluster": {name: "high", classes: classes, want: ""},
		"a typo names the closest and lists the classes, highest first": {name: "hgh", classes: classes,
			want: `is no WorkloadPriorityClass of this cluster; did you mean "high"? The classes are high (1000), medium (100), low (10)`},
		"nothing close: the classes, highest first": {name: "urgent", classes: classes,
			want: "is no WorkloadPriorityClass of this cluster: use one of high (1000), medium (100), low (10)"},
		"none at all": {name: "high", classes: map[string]int64{},
			want: "this cluster has no WorkloadPriorityClass: leave the priority out, or ask an administrator to create one (kubectl get workloadpriorityclasses)"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, PriorityProblem(tc.name, tc.classes)); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}

func TestPreemptedWorkload(t *testing.T) {
	const doc = `
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata:
  name: trainjob-low-1a2b3
  namespace: team-a
  creationTimestamp: "2026-11-22T10:00:00Z"
  labels:
    kueue.x-k8s.io/job-uid: "1234"
spec:
  queueName: default
status:
  schedulingStats:
    evictions:
    - reason: Preempted
      underlyingCause: InClusterQueue
      count: 2
    - reason: PodsReadyTimeout
      underlyingCause: ""
      count: 1
  conditions:
  - type: QuotaReserved
    status: "True"
    reason: QuotaReserved
    lastTransitionTime: "2026-11-22T10:00:01Z"
  - type: Evicted
    status: "True"
    reason: Preempted
    message: "Preempted to accommodate a workload (UID: wl-9, JobUID: 5678) due to prioritization in the ClusterQueue; preemptor path: /team-a; preemptee path: /team-a"
    lastTransitionTime: "2026-11-22T10:05:00Z"
`
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	w := FromUnstructured(u)
	want := Preemption{ByJobUID: "5678", Why: "prioritization in the ClusterQueue", When: time.Date(2026, 11, 22, 10, 5, 0, 0, time.UTC)}
	if !w.Preempted || w.Preemptions != 2 || w.Preemption != want {
		t.Errorf("got preempted %v, %d preemptions, %+v; want true, 2, %+v", w.Preempted, w.Preemptions, w.Preemption, want)
	}
	if w.Pending() {
		t.Errorf("a Workload still holding its quota while evicted is not pending")
	}
	// Kueue resets Evicted when it admits the Workload again: not preempted now, counted still.
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	conds[1].(map[string]any)["status"] = "False"
	if err := unstructured.SetNestedSlice(u.Object, conds, "status", "conditions"); err != nil {
		t.Fatal(err)
	}
	if w := FromUnstructured(u); w.Preempted || w.Preemptions != 2 {
		t.Errorf("admitted again: preempted %v, %d preemptions; want false, 2", w.Preempted, w.Preemptions)
	}
	if got := ParsePreemption("Preempted to accommodate a workload (UID: UNKNOWN, JobUID: UNKNOWN) due to UNKNOWN; preemptor path: UNKNOWN"); got != (Preemption{}) {
		t.Errorf("unknowns: %+v, want nothing", got)
	}
}
