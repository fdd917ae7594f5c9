package diagnose

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mpijob/mpijob/pkg/api"
)

// A job that can never finish (here a Worker whose image cannot be
// pulled) is ended once it has said so for its end-stuck-after; not
// before, not when the grace is off, not twice, and not a job that only
// waits for capacity.
func TestEndNeverFinishing(t *testing.T) {
	pulling := func() Input {
		return Input{TrainJob: job(2).obj(), JobSet: jobset(2), Now: t0,
			Workers: pods(worker("0").running(true), worker("1").waiting("ImagePullBackOff", `Back-off pulling image "ghcr.io/x/nope:1"`))}
	}
	// What the manager diagnosed since `since` (the same reason).
	stuck := func(since time.Time) known {
		s := Diagnose(pulling())
		s.History = []api.Transition{{Time: metav1.NewTime(since), Phase: s.Phase, Reason: s.Reason}}
		return remembered(s, since)
	}
	type want struct {
		End     string // the ended record's reason, "" for none
		After   string
		Requeue time.Duration
	}
	cases := map[string]struct {
		tj    *trainer.TrainJob
		known known
		grace time.Duration
		want  want
	}{
		"stuck for longer than the grace: ended": {
			known: stuck(t0.Add(-11 * time.Minute)), grace: 10 * time.Minute,
			want: want{End: ReasonImagePullFailed, After: "10m0s", Requeue: waitingRefresh},
		},
		"stuck for less: looked at again when the grace is up": {
			known: stuck(t0.Add(-9*time.Minute - 50*time.Second)), grace: 10 * time.Minute,
			want: want{Requeue: 11 * time.Second},
		},
		"the grace is off: never ended": {
			known: stuck(t0.Add(-time.Hour)), grace: 0,
			want: want{Requeue: waitingRefresh},
		},
		"already ended: not again": {
			tj: func() *trainer.TrainJob {
				j := job(2).obj()
				j.Annotations = map[string]string{api.EndedByAnnotation: `{"reason":"ImagePullFailed","after":"10m0s","at":null}`}
				return j
			}(),
			known: stuck(t0.Add(-time.Hour)), grace: 10 * time.Minute,
			want: want{Requeue: waitingRefresh},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := pulling()
			in.EndStuckAfter = tc.grace
			tj := in.TrainJob
			if tc.tj != nil {
				tj, in.TrainJob = tc.tj, tc.tj
			}
			p := decide(tj, tc.known, in)
			got := want{Requeue: p.Requeue}
			if p.End != nil {
				got.End, got.After = p.End.Reason, p.End.After
				if !strings.Contains(p.End.Message, "cannot pull image") {
					t.Errorf("the ended record keeps the diagnosis %q, want its message", p.End.Message)
				}
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("plan (-want,+got):\n%s", d)
			}
		})
	}

	// A job that only waits for capacity may still start: never ended.
	waiting := Input{TrainJob: job(2).obj(), JobSet: jobset(2), Now: t0, EndStuckAfter: time.Minute,
		Workers: pods(worker("0").unschedulable("0/3 nodes are available: 3 Insufficient cpu."), worker("1").unschedulable("0/3 nodes are available: 3 Insufficient cpu."))}
	s := Diagnose(waiting)
	s.History = []api.Transition{{Time: metav1.NewTime(t0.Add(-time.Hour)), Phase: s.Phase, Reason: s.Reason}}
	if p := decide(waiting.TrainJob, remembered(s, t0.Add(-time.Hour)), waiting); p.End != nil {
		t.Errorf("a job waiting for capacity (%s) was ended: %+v", s.Reason, p.End)
	}
}

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
		"its pods stopping": {tj: job(2).obj(), phase: api.PhaseRunning, verb: "mpijob-manager is ending the job"},
		"Trainer marked it Failed": {tj: job(2).cond(trainer.TrainJobFailed, "JobSetFailed", "jobset failed: DeadlineExceeded").obj(),
			phase: api.PhaseFailed, verb: "mpijob-manager ended the job"},
	} {
		t.Run(name, func(t *testing.T) {
			tc.tj.Annotations = map[string]string{api.EndedByAnnotation: raw}
			in := Input{TrainJob: tc.tj, JobSet: jobset(2), Now: t0.Add(time.Minute),
				Launcher: pods(launcher().running(true)), Workers: pods(worker("0").running(true), worker("1").running(true))}
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
	in := Input{TrainJob: job(2).cond(trainer.TrainJobFailed, "JobSetFailed", "jobset failed: first failed job: gpukwok-launcher-0").obj(), JobSet: jobset(2), Now: t0,
		Launcher: pods(l), Workers: pods(worker("0").running(true), worker("1").running(true))}
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
