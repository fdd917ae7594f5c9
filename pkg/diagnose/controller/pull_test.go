package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/mpijob/mpijob/pkg/diagnose"
)

func pullPod(init, main string) corev1.Pod {
	st := func(reason string) []corev1.ContainerStatus {
		if reason == "" {
			return []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
		}
		return []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}}}
	}
	return corev1.Pod{Status: corev1.PodStatus{InitContainerStatuses: st(init), ContainerStatuses: st(main)}}
}

func TestAnyPullFailed(t *testing.T) {
	ok := pullPod("", "")
	cases := map[string]struct {
		in   diagnose.Input
		want bool
	}{
		"no pods":                           {},
		"every container runs":              {in: diagnose.Input{Workers: []corev1.Pod{ok, ok}, Launcher: []corev1.Pod{ok}}},
		"a Worker's image":                  {in: diagnose.Input{Workers: []corev1.Pod{ok, pullPod("", "ImagePullBackOff")}, Launcher: []corev1.Pod{ok}}, want: true},
		"a Worker's init container's image": {in: diagnose.Input{Workers: []corev1.Pod{pullPod("ErrImagePull", "")}}, want: true},
		"the Launcher's image":              {in: diagnose.Input{Workers: []corev1.Pod{ok}, Launcher: []corev1.Pod{pullPod("", "InvalidImageName")}}, want: true},
		"waiting for another reason":        {in: diagnose.Input{Workers: []corev1.Pod{pullPod("", "ContainerCreating")}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := anyPullFailed(tc.in); got != tc.want {
				t.Errorf("anyPullFailed = %t, want %t", got, tc.want)
			}
		})
	}
}

// TestAnyPullFailedAllocatesNothing: the check runs at every round of the
// diagnosis and reads the job's pods in place; it copied every pod and
// container status into new lists (20 allocations for a Launcher and 8
// Workers).
func TestAnyPullFailedAllocatesNothing(t *testing.T) {
	in := diagnose.Input{Launcher: []corev1.Pod{pullPod("", "")}}
	for range 8 {
		in.Workers = append(in.Workers, pullPod("", ""))
	}
	if allocs := testing.AllocsPerRun(100, func() { anyPullFailed(in) }); allocs != 0 {
		t.Errorf("anyPullFailed made %.0f allocations, want 0", allocs)
	}
}
