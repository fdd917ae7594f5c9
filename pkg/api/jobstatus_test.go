package api

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestJoinStatus(t *testing.T) {
	owner := func(uid string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind, Name: "pi", UID: types.UID(uid)}}
	}
	old := map[string]string{StatusAnnotation: `{"phase":"Pending"}`, CreatorAnnotation: "dev-a"}
	for name, tc := range map[string]struct {
		uid    string
		status *JobStatus
		want   map[string]string
		joined bool
	}{
		"the job's own JobStatus wins over its annotation": {uid: "u1",
			status: &JobStatus{ObjectMeta: metav1.ObjectMeta{OwnerReferences: owner("u1")}, Status: `{"phase":"Running"}`},
			want:   map[string]string{StatusAnnotation: `{"phase":"Running"}`, CreatorAnnotation: "dev-a"}, joined: true},
		"a JobStatus of an earlier job of the name (another UID) is not its": {uid: "u2",
			status: &JobStatus{ObjectMeta: metav1.ObjectMeta{OwnerReferences: owner("u1")}, Status: `{"phase":"Failed"}`},
			want:   old},
		"a JobStatus owned by something else than a TrainJob": {uid: "u1",
			status: &JobStatus{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{{Kind: "ConfigMap", UID: "u1"}}}, Status: `{"phase":"Failed"}`},
			want:   old},
		"its stacks join beside its status": {uid: "u1",
			status: &JobStatus{ObjectMeta: metav1.ObjectMeta{OwnerReferences: owner("u1")}, Status: `{"phase":"Running"}`, Stacks: `{"reason":"NoProgress"}`},
			want:   map[string]string{StatusAnnotation: `{"phase":"Running"}`, StacksAnnotation: `{"reason":"NoProgress"}`, CreatorAnnotation: "dev-a"}, joined: true},
		"another job's stacks do not join": {uid: "u2",
			status: &JobStatus{ObjectMeta: metav1.ObjectMeta{OwnerReferences: owner("u1")}, Status: `{"phase":"Running"}`, Stacks: `{"reason":"NoProgress"}`},
			want:   old},
		"an empty JobStatus": {uid: "u1",
			status: &JobStatus{ObjectMeta: metav1.ObjectMeta{OwnerReferences: owner("u1")}},
			want:   old},
		"none: the annotation an older manager wrote": {uid: "u1", want: old},
		"a job without a UID joins nothing": {
			status: &JobStatus{ObjectMeta: metav1.ObjectMeta{OwnerReferences: owner("")}, Status: `{"phase":"Failed"}`},
			want:   old},
	} {
		t.Run(name, func(t *testing.T) {
			shared := map[string]string{}
			for k, v := range old {
				shared[k] = v
			}
			m := metav1.ObjectMeta{Name: "pi", UID: types.UID(tc.uid), Annotations: shared}
			if got := JoinStatus(&m, tc.status); got != tc.joined {
				t.Errorf("joined = %v, want %v", got, tc.joined)
			}
			if d := cmp.Diff(tc.want, m.Annotations); d != "" {
				t.Errorf("annotations (-want +got):\n%s", d)
			}
			if d := cmp.Diff(old, shared); d != "" {
				t.Errorf("the job's own annotation map changed (a cache's object): %s", d)
			}
		})
	}
}

// JobStatusOf is the apply object of the job's JobStatus: named after it,
// in its namespace, owned by its UID, with the status as written.
func TestJobStatusOf(t *testing.T) {
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "pi", Namespace: "team-a", UID: "u1"}}
	u := JobStatusOf(tj, PhaseRunning, "Running", `{"phase":"Running"}`)
	want := map[string]any{
		"apiVersion": "mpijob.dev/v1alpha1", "kind": "JobStatus",
		"metadata": map[string]any{"name": "pi", "namespace": "team-a", "ownerReferences": []any{map[string]any{
			"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "name": "pi", "uid": "u1", "controller": true}}},
		"phase": "Running", "reason": "Running", "status": `{"phase":"Running"}`,
	}
	if d := cmp.Diff(want, u.Object); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	ix := IndexJobStatuses([]JobStatus{{ObjectMeta: metav1.ObjectMeta{Name: "pi", Namespace: "team-a", OwnerReferences: []metav1.OwnerReference{{Kind: trainer.TrainJobKind, UID: "u1"}}}, Status: `{"phase":"Running"}`}})
	jobs := []trainer.TrainJob{*tj, {ObjectMeta: metav1.ObjectMeta{Name: "pi", Namespace: "team-b", UID: "u1"}}}
	ix.Join(jobs)
	if jobs[0].Annotations[StatusAnnotation] != `{"phase":"Running"}` || jobs[1].Annotations[StatusAnnotation] != "" {
		t.Errorf("joined by namespace and name: %v, %v", jobs[0].Annotations, jobs[1].Annotations)
	}
}

// TestIndexJobStatuses: a list's values and a cache's pointers index the
// same way, by namespace and name, and For finds a job's own entry only.
func TestIndexJobStatuses(t *testing.T) {
	mk := func(ns, name, status string) JobStatus {
		return JobStatus{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Status: status}
	}
	cases := map[string]struct {
		items []JobStatus
		job   metav1.ObjectMeta
		want  string // the found JobStatus's status; "" for none
	}{
		"none: a nil index finds nothing": {job: metav1.ObjectMeta{Name: "pi", Namespace: "team-a"}},
		"the job's own":                   {items: []JobStatus{mk("team-a", "pi", "a"), mk("team-b", "pi", "b")}, job: metav1.ObjectMeta{Name: "pi", Namespace: "team-b"}, want: "b"},
		"another namespace's only":        {items: []JobStatus{mk("team-a", "pi", "a")}, job: metav1.ObjectMeta{Name: "pi", Namespace: "team-b"}},
		"another name's only":             {items: []JobStatus{mk("team-a", "pi", "a")}, job: metav1.ObjectMeta{Name: "pi2", Namespace: "team-a"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var ptrs []*JobStatus
			for i := range tc.items {
				ptrs = append(ptrs, &tc.items[i])
			}
			for how, ix := range map[string]JobStatusIndex{"values": IndexJobStatuses(tc.items), "pointers": IndexJobStatusPointers(ptrs)} {
				got := ""
				if s := ix.For(&tc.job); s != nil {
					got = s.Status
				}
				if d := cmp.Diff(tc.want, got); d != "" {
					t.Errorf("%s (-want +got):\n%s", how, d)
				}
				if len(ix) != len(tc.items) {
					t.Errorf("%s: %d indexed, want %d", how, len(ix), len(tc.items))
				}
			}
		})
	}
}
