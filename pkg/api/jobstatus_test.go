package api

import (
	"encoding/json"
	"maps"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestJoinStatus runs the join's shared vectors (testdata/join-status.json,
// which the SDK's join_status runs too): the job's own JobStatus wins, its
// stacks join beside its status, and another UID's, another owner kind's,
// an empty one and a job without a UID join nothing. The job's own
// annotation map (a cache's object) is never changed.
func TestJoinStatus(t *testing.T) {
	raw, err := os.ReadFile("testdata/join-status.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Vectors []struct {
			Name        string            `json:"name"`
			Job         metav1.ObjectMeta `json:"job"`
			JobStatus   *JobStatus        `json:"jobStatus"`
			Joined      bool              `json:"joined"`
			Annotations map[string]string `json:"annotations"`
		} `json:"vectors"`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Vectors) == 0 {
		t.Fatal("no vectors")
	}
	for _, v := range file.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			m := *v.Job.DeepCopy()
			shared := m.Annotations
			before := maps.Clone(shared)
			if got := JoinStatus(&m, v.JobStatus); got != v.Joined {
				t.Errorf("joined = %v, want %v", got, v.Joined)
			}
			if d := cmp.Diff(v.Annotations, m.Annotations, cmpopts.EquateEmpty()); d != "" {
				t.Errorf("annotations (-want +got):\n%s", d)
			}
			if d := cmp.Diff(before, shared); d != "" {
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
