package diagnose

import (
	"strings"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mpijob/mpijob/pkg/api"
)

// The status of an ended job says what was done and why, while its pods
// stop and once Trainer has marked it Failed.
func TestEndedJobSaysWhy(t *testing.T) {
	e := api.Ended{Reason: ReasonRankFailedOthersWaiting, Message: "Rank 3 exited with code 1 while the other ranks wait for it.", After: "10m0s",
		Subject: api.WorkerRef(1), At: metav1.NewTime(t0)}
	raw, err := e.Encode()
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		tj    *trainer.TrainJob
		phase api.Phase
		verb  string
	}{
		"its pods stopping": {tj: job(2).Obj(), phase: api.PhaseRunning, verb: "mpijob-manager is ending the job"},
		"Trainer marked it Failed": {tj: job(2).Cond(trainer.TrainJobFailed, "JobSetFailed", "jobset failed: DeadlineExceeded").Obj(),
			phase: api.PhaseFailed, verb: "mpijob-manager ended the job"},
	} {
		t.Run(name, func(t *testing.T) {
			tc.tj.Annotations = map[string]string{api.EndedByAnnotation: raw}
			in := Input{TrainJob: tc.tj, JobSet: jobset(2), Now: t0.Add(time.Minute),
				Launcher: pods(launcher().Running(true)), Workers: pods(worker("0").Running(true), worker("1").Running(true))}
			s := Diagnose(in)
			if s.Phase != tc.phase || s.Reason != ReasonRankFailedOthersWaiting {
				t.Errorf("phase %s, reason %s; want %s, %s", s.Phase, s.Reason, tc.phase, ReasonRankFailedOthersWaiting)
			}
			for _, w := range []string{tc.verb, "grace period of 10m0s", "policy.mpijob.dev/end-stuck-after", "Rank 3 exited with code 1", "logs and diagnosis are kept"} {
				if !strings.Contains(s.Message, w) {
					t.Errorf("message %q lacks %q", s.Message, w)
				}
			}
			if !strings.Contains(s.NextStep, "kubectl mpijob logs hello --all") {
				t.Errorf("next step %q, want the logs of every rank", s.NextStep)
			}
			if s.Subject == nil || *s.Subject != *api.WorkerRef(1) {
				t.Errorf("subject %v, want Worker 1", s.Subject)
			}
		})
	}
}

// A Launcher whose wait for the Workers gave up (a Worker on a node that
// runs no container, such as a kwok node) fails before mpirun: the init
// container's termination message names the Worker, instead of "jobset
// failed".
func TestLauncherInitFailureIsNamed(t *testing.T) {
	l := launcher()
	l.Status.Phase = corev1.PodFailed
	l.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "wait-for-workers", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: 1, Reason: "Error", Message: "Worker gpukwok-node-0-1.gpukwok: sshd on port 2222 did not answer the Launcher within 120 s\n"}}}}
	l.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "node", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}}
	in := Input{TrainJob: job(2).Cond(trainer.TrainJobFailed, "JobSetFailed", "jobset failed: first failed job: gpukwok-launcher-0").Obj(), JobSet: jobset(2), Now: t0,
		Launcher: pods(l), Workers: pods(worker("0").Running(true), worker("1").Running(true))}
	s := Diagnose(in)
	if s.Phase != api.PhaseFailed || s.Reason != ReasonHostUnreachable {
		t.Fatalf("%s %s: %s; want Failed HostUnreachable", s.Phase, s.Reason, s.Message)
	}
	want := "The Launcher gave up before mpirun started: Worker 1 (gpukwok-node-0-1) did not answer on port 2222 within 120 s (the Launcher's wait-for-workers step), so the job failed."
	if s.Message != want {
		t.Errorf("message\n got %q\nwant %q", s.Message, want)
	}
	if !strings.Contains(s.NextStep, "kwok") || !strings.Contains(s.NextStep, "kubectl mpijob describe hello") {
		t.Errorf("next step %q", s.NextStep)
	}
	if s.Subject == nil || *s.Subject != *api.WorkerRef(1) {
		t.Errorf("subject %v, want Worker 1", s.Subject)
	}
}
