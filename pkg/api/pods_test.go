package api

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestFailedPods(t *testing.T) {
	records := []PodRecord{
		{Role: "launcher", Pod: "pi-launcher-0-0-a", Node: "n1", State: "Running"},
		{Role: "worker", Index: 0, Pod: "pi-node-0-0-b", Node: "n1", State: "Completed (exit 0)"},
		{Role: "worker", Index: 1, Pod: "pi-node-0-1-c", Node: "n2", State: "Error (exit 2)", Gone: true},
		{Role: "worker", Index: 2, Pod: "pi-node-0-2-d", Node: "n2", State: "Running"},
		// Records with an exit code are read by it, not by their words.
		{Role: "worker", Index: 3, Pod: "pi-node-0-3-e", State: "Killed", ExitCode: ptr.To[int32](137), Signal: 9},
		{Role: "worker", Index: 4, Pod: "pi-node-0-4-f", State: "Error (exit 3)", ExitCode: ptr.To[int32](0)},
	}
	exited := FailedPod{Role: "worker", Index: 1, Pod: "pi-node-0-1-c", Node: "n2", Reason: "Error (exit 2)"}
	killed := FailedPod{Role: "worker", Index: 3, Pod: "pi-node-0-3-e", Reason: "Killed", ExitCode: ptr.To[int32](137), Signal: 9}
	cases := map[string]struct {
		named  *PodRef
		reason string
		want   []FailedPod
	}{
		"a pod that exited badly is listed with its state": {
			want: []FailedPod{exited, killed},
		},
		"the Worker the diagnosis is about gets its reason": {
			named: WorkerRef(2), reason: "RankKilled",
			want: []FailedPod{exited, {Role: "worker", Index: 2, Pod: "pi-node-0-2-d", Node: "n2", Reason: "RankKilled"}, killed},
		},
		"a failed Worker the diagnosis is about is listed once, with its reason": {
			named: WorkerRef(1), reason: "RankFailed",
			want: []FailedPod{{Role: "worker", Index: 1, Pod: "pi-node-0-1-c", Node: "n2", Reason: "RankFailed"}, killed},
		},
		"the Launcher": {
			named: LauncherRef(), reason: "LauncherFailed",
			want: []FailedPod{{Role: "launcher", Pod: "pi-launcher-0-0-a", Node: "n1", Reason: "LauncherFailed"}, exited, killed},
		},
		"a Worker with no record, named by an Event": {
			named: WorkerRef(7), reason: "WorkerLost",
			want: []FailedPod{exited, killed, {Role: "worker", Index: 7, Reason: "WorkerLost"}},
		},
		"a reason without a subject names no pod": {
			reason: "DeadlineExceeded", want: []FailedPod{exited, killed},
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

func TestPodExit(t *testing.T) {
	term := func(code, signal int32) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: code, Signal: signal}}}}}}
	}
	cases := map[string]struct {
		pod        *corev1.Pod
		wantCode   *int32
		wantSignal int32
	}{
		"an exit":                   {pod: term(2, 0), wantCode: ptr.To[int32](2)},
		"a kill, 128 + the signal":  {pod: term(137, 0), wantCode: ptr.To[int32](137), wantSignal: 9},
		"the runtime's own signal":  {pod: term(1, 15), wantCode: ptr.To[int32](1), wantSignal: 15},
		"an exit code of 255":       {pod: term(255, 0), wantCode: ptr.To[int32](255)},
		"running":                   {pod: &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning}}},
		"evicted: the pod's reason": {pod: func() *corev1.Pod { p := term(137, 0); p.Status.Reason = "Evicted"; return p }()},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			code, signal := PodExit(tc.pod)
			if !cmp.Equal(tc.wantCode, code) || signal != tc.wantSignal {
				t.Errorf("PodExit = %v, %d; want %v, %d", ptr.Deref(code, -1), signal, ptr.Deref(tc.wantCode, -1), tc.wantSignal)
			}
		})
	}
}

func TestFailedPodEnded(t *testing.T) {
	cases := map[string]struct {
		f    FailedPod
		want string
	}{
		"no record":     {f: FailedPod{Reason: "WorkerLost"}, want: ""},
		"an exit":       {f: FailedPod{ExitCode: ptr.To[int32](2)}, want: "exit code 2"},
		"a kill":        {f: FailedPod{ExitCode: ptr.To[int32](137), Signal: 9}, want: "exit code 137, SIGKILL"},
		"a segfault":    {f: FailedPod{ExitCode: ptr.To[int32](139), Signal: 11}, want: "exit code 139, SIGSEGV"},
		"a rare signal": {f: FailedPod{ExitCode: ptr.To[int32](159), Signal: 31}, want: "exit code 159, signal 31"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.f.Ended(); got != tc.want {
				t.Errorf("Ended() = %q, want %q", got, tc.want)
			}
		})
	}
}
