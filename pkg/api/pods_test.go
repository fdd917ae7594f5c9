package api

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFailedPods(t *testing.T) {
	records := []PodRecord{
		{Role: "launcher", Pod: "pi-launcher-0-0-a", Node: "n1", State: "Running"},
		{Role: "worker", Index: 0, Pod: "pi-node-0-0-b", Node: "n1", State: "Completed (exit 0)"},
		{Role: "worker", Index: 1, Pod: "pi-node-0-1-c", Node: "n2", State: "Error (exit 2)", Gone: true},
		{Role: "worker", Index: 2, Pod: "pi-node-0-2-d", Node: "n2", State: "Running"},
	}
	exited := FailedPod{Role: "worker", Index: 1, Pod: "pi-node-0-1-c", Node: "n2", Reason: "Error (exit 2)"}
	cases := map[string]struct {
		named  *PodRef
		reason string
		want   []FailedPod
	}{
		"a pod that exited badly is listed with its state": {
			want: []FailedPod{exited},
		},
		"the Worker the diagnosis is about gets its reason": {
			named: WorkerRef(2), reason: "RankKilled",
			want: []FailedPod{exited, {Role: "worker", Index: 2, Pod: "pi-node-0-2-d", Node: "n2", Reason: "RankKilled"}},
		},
		"a failed Worker the diagnosis is about is listed once, with its reason": {
			named: WorkerRef(1), reason: "RankFailed",
			want: []FailedPod{{Role: "worker", Index: 1, Pod: "pi-node-0-1-c", Node: "n2", Reason: "RankFailed"}},
		},
		"the Launcher": {
			named: LauncherRef(), reason: "LauncherFailed",
			want: []FailedPod{{Role: "launcher", Pod: "pi-launcher-0-0-a", Node: "n1", Reason: "LauncherFailed"}, exited},
		},
		"a Worker with no record, named by an Event": {
			named: WorkerRef(7), reason: "WorkerLost",
			want: []FailedPod{exited, {Role: "worker", Index: 7, Reason: "WorkerLost"}},
		},
		"a reason without a subject names no pod": {
			reason: "DeadlineExceeded", want: []FailedPod{exited},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, FailedPods(records, tc.named, tc.reason)); diff != "" {
				t.Errorf("FailedPods (-want,+got):\n%s", diff)
			}
		})
	}
}
