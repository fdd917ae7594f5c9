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
		named           bool
		reason, message string
		want            []FailedPod
	}{
		"a pod that exited badly is listed with its state": {
			named: false, reason: "", message: "All 3 Workers are running.", want: []FailedPod{exited},
		},
		"the Worker the diagnosis names gets its reason": {
			named: true, reason: "RankKilled", message: "Rank 5 on Worker 2 (pi-node-0-2) was killed by signal 9.",
			want: []FailedPod{exited, {Role: "worker", Index: 2, Pod: "pi-node-0-2-d", Node: "n2", Reason: "RankKilled"}},
		},
		"a Worker named by its pod's name alone": {
			named: true, reason: "SSHConnectionRefused", message: "sshd did not answer on pi-node-0-2-d.pi:2222.",
			want: []FailedPod{exited, {Role: "worker", Index: 2, Pod: "pi-node-0-2-d", Node: "n2", Reason: "SSHConnectionRefused"}},
		},
		"the Launcher": {
			named: true, reason: "LauncherFailed", message: "The Launcher exited with code 3.",
			want: []FailedPod{{Role: "launcher", Pod: "pi-launcher-0-0-a", Node: "n1", Reason: "LauncherFailed"}, exited},
		},
		"a Worker with no record, named by an Event": {
			named: true, reason: "WorkerLost", message: "Worker 7 (pod pi-node-0-7-z) was deleted while the Launcher ran.",
			want: []FailedPod{exited, {Role: "worker", Index: 7, Reason: "WorkerLost"}},
		},
		"a message that names a Worker is not read when nothing is wrong": {
			named: false, reason: "", message: "Waiting for Worker 2 to be scheduled.", want: []FailedPod{exited},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, FailedPods(records, tc.named, tc.reason, tc.message)); diff != "" {
				t.Errorf("FailedPods (-want,+got):\n%s", diff)
			}
		})
	}
}
