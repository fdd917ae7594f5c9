package runtimetest

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mpijob/mpijob/pkg/api"
)

func testPod(name string, statuses ...corev1.ContainerStatus) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.PodStatus{ContainerStatuses: statuses}}
}

var (
	readyNode   = corev1.ContainerStatus{Name: "node", Image: "img", ImageID: "sha", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	runningNode = corev1.ContainerStatus{Name: "node", Image: "img", ImageID: "sha", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	// A Worker stopped by JobSet once the Launcher finished.
	stoppedNode = corev1.ContainerStatus{Name: "node", Image: "img", ImageID: "sha", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 143}}}
	creating    = corev1.ContainerStatus{Name: "node", Image: "img", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}
	backOff     = corev1.ContainerStatus{Name: "node", Image: "registry.invalid/x:1", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image"}}}
)

// The checks of `runtimes test` are judged on everything the pods showed
// while the job ran, not on the last look (when JobSet may already have
// stopped the Workers).
func TestChecks(t *testing.T) {
	type look struct{ launcher, workers []corev1.Pod }
	cases := map[string]struct {
		looks []look
		phase api.Phase
		want  []Check
	}{
		"Workers seen Ready, stopped after success": {
			looks: []look{
				{workers: []corev1.Pod{testPod("w-0", creating), testPod("w-1", creating)}},
				{workers: []corev1.Pod{testPod("w-0", readyNode), testPod("w-1", readyNode)}},
				{launcher: []corev1.Pod{testPod("l", runningNode)}, workers: []corev1.Pod{testPod("w-0", stoppedNode), testPod("w-1", stoppedNode)}},
			},
			phase: api.PhaseSucceeded,
			want: []Check{
				{"image pull", Pass, "3 pods started their images"},
				{"SSH key mount", Pass, "2 Workers' sshd accepted connections with the job's key"},
			},
		},
		"success too quick to see Ready": {
			looks: []look{{launcher: []corev1.Pod{testPod("l", stoppedNode)}, workers: []corev1.Pod{testPod("w-0", stoppedNode), testPod("w-1", stoppedNode)}}},
			phase: api.PhaseSucceeded,
			want: []Check{
				{"image pull", Pass, "3 pods started their images"},
				{"SSH key mount", Pass, "the Launcher's mpirun logged in to every Worker with the job's key"},
			},
		},
		"image cannot be pulled": {
			looks: []look{{workers: []corev1.Pod{testPod("w-0", backOff), testPod("w-1", creating)}}},
			phase: api.PhasePending,
			want: []Check{
				{"image pull", Fail, "pod w-0: ImagePullBackOff: Back-off pulling image"},
				{"SSH key mount", Fail, "0 of 2 Workers' sshd came up with the job's key"},
			},
		},
		"a pull that failed, then worked once the image was imported": {
			looks: []look{
				{workers: []corev1.Pod{testPod("w-0", backOff), testPod("w-1", creating)}},
				{workers: []corev1.Pod{testPod("w-0", readyNode), testPod("w-1", readyNode)}},
				{launcher: []corev1.Pod{testPod("l", runningNode)}, workers: []corev1.Pod{testPod("w-0", stoppedNode), testPod("w-1", stoppedNode)}},
			},
			phase: api.PhaseSucceeded,
			want: []Check{
				{"image pull", Pass, "3 pods started their images"},
				{"SSH key mount", Pass, "2 Workers' sshd accepted connections with the job's key"},
			},
		},
		"one Worker never Ready": {
			looks: []look{{workers: []corev1.Pod{testPod("w-0", readyNode), testPod("w-1", runningNode)}}},
			phase: api.PhaseFailed,
			want: []Check{
				{"image pull", Pass, "2 pods started their images"},
				{"SSH key mount", Fail, "1 of 2 Workers' sshd came up with the job's key"},
			},
		},
		"a pod still creating at the end": {
			looks: []look{{workers: []corev1.Pod{testPod("w-0", readyNode), testPod("w-1", creating)}}},
			phase: api.PhaseStarting,
			want: []Check{
				{"image pull", Fail, "pod w-1 never started img"},
				{"SSH key mount", Fail, "1 of 2 Workers' sshd came up with the job's key"},
			},
		},
		"no pod at all": {
			phase: api.PhasePending,
			want: []Check{
				{"image pull", Fail, "no pod was created"},
				{"SSH key mount", Fail, "0 of 2 Workers' sshd came up with the job's key"},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var o observed
			for _, l := range tc.looks {
				o.record(l.launcher, l.workers)
			}
			got := []Check{o.imageCheck(), o.sshCheck(2, tc.phase)}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("checks (-want,+got):\n%s", diff)
			}
		})
	}
}
