package diagnose

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/queue"
)

// planView is what a test compares of a Plan: everything but the status's
// prose (TestDiagnose covers that).
type planView struct {
	Phase    api.Phase
	Reason   string
	Write    bool
	Remember bool
	Suspend  bool
	Requeue  time.Duration
	// Event is "Type Reason" of the transition's Event ("" for none).
	Event string
	// Before is the phase before the transition ("" for the first).
	Before api.Phase
	Placed time.Time
	// Failed are the failed pods, "role index reason".
	Failed []string
}

func viewOf(p Plan) planView {
	v := planView{Phase: p.Status.Phase, Reason: p.Status.Reason, Write: p.Write, Remember: p.Remember, Suspend: p.Suspend, Requeue: p.Requeue}
	for _, f := range p.Status.Failed {
		v.Failed = append(v.Failed, fmt.Sprintf("%s %d %s", f.Role, f.Index, f.Reason))
	}
	if t := p.Transition; t != nil {
		v.Event = t.Event.Type + " " + t.Event.Reason
		if t.Before != nil {
			v.Before = t.Before.Phase
		}
		v.Placed = t.Placed
	}
	return v
}

// remembered is what the manager knows of a job it diagnosed before and
// whose status it last wrote at wrote (the same status is on the object).
func remembered(s api.Status, wrote time.Time) known {
	w := s
	return known{onObject: s, hadOnObject: true, remembered: true,
		mem: memory{firstSeen: t0.Add(-time.Hour), diagnosed: s, written: &w, wroteAt: wrote}}
}

func running() Input {
	return Input{TrainJob: job(2).obj(), JobSet: jobset(2), Now: t0,
		Launcher: pods(launcher().running(true)), Workers: pods(worker("0").running(true), worker("1").running(true))}
}

func TestDecide(t *testing.T) {
	since := ptr.To(metav1.NewTime(t0.Add(-10 * time.Second)))
	startingFrom := api.Status{Phase: api.PhaseStarting, Launcher: api.LauncherNotCreated, WorkersTotal: 2, LastTransitionTime: since}
	cases := map[string]struct {
		tj    *trainer.TrainJob
		known known
		in    Input
		want  planView
	}{
		"first sight of a new job: the Event at once, the status a second later": {
			known: known{mem: memory{firstSeen: t0}},
			in:    Input{TrainJob: job(2).obj(), Now: t0},
			want: planView{Phase: api.PhasePending, Reason: ReasonJobSetNotCreated, Remember: true, Requeue: statusCoalesce,
				Event: "Normal " + ReasonJobSetNotCreated},
		},
		"first sight a second on: written, looked at again while it waits": {
			known: known{mem: memory{firstSeen: t0.Add(-statusCoalesce)}},
			in:    Input{TrainJob: job(2).obj(), Now: t0},
			want: planView{Phase: api.PhasePending, Reason: ReasonJobSetNotCreated, Write: true, Remember: true, Requeue: waitingRefresh,
				Event: "Normal " + ReasonJobSetNotCreated},
		},
		"a manager restarted finds its status on the object: no second Event": {
			known: known{onObject: api.Status{Phase: api.PhasePending, Reason: ReasonJobSetNotCreated, Launcher: api.LauncherNotCreated, WorkersTotal: 2,
				Message:  "Trainer has not created the job's pods yet.",
				NextStep: "Wait a few seconds; if this lasts, check that the Trainer controller runs and read `kubectl mpijob events`."},
				hadOnObject: true, mem: memory{firstSeen: t0}},
			in: Input{TrainJob: job(2).obj(), Now: t0},
			// Only its details (the pods' records) are new: they wait detailCoalesce.
			want: planView{Phase: api.PhasePending, Reason: ReasonJobSetNotCreated, Remember: true, Requeue: detailCoalesce},
		},
		"Starting → Running: the Event, the time placed for the metric, written": {
			known: remembered(startingFrom, t0.Add(-10*time.Second)),
			in:    running(),
			want: planView{Phase: api.PhaseRunning, Write: true, Remember: true, Requeue: runningRefresh,
				Event: "Normal Running", Before: api.PhaseStarting, Placed: since.Time},
		},
		"Running → Running: nothing new, nothing written": {
			known: func() known {
				p := decide(job(2).obj(), remembered(startingFrom, t0.Add(-10*time.Second)), running())
				return remembered(p.Status, t0.Add(-time.Second))
			}(),
			in:   running(),
			want: planView{Phase: api.PhaseRunning, Remember: true, Requeue: runningRefresh},
		},
		"a status someone else wrote is put back": {
			known: func() known {
				p := decide(job(2).obj(), remembered(startingFrom, t0.Add(-10*time.Second)), running())
				k := remembered(p.Status, t0.Add(-time.Minute))
				k.onObject = api.Status{Phase: api.PhaseSucceeded}
				return k
			}(),
			in:   running(),
			want: planView{Phase: api.PhaseRunning, Write: true, Remember: true, Requeue: runningRefresh},
		},
		"a failure is written at once, however soon after the last write": {
			tj:    job(2).cond(trainer.TrainJobFailed, "Failed", "").obj(),
			known: remembered(api.Status{Phase: api.PhaseRunning, LastTransitionTime: since}, t0),
			in: Input{TrainJob: job(2).cond(trainer.TrainJobFailed, "Failed", "").obj(), JobSet: jobset(2), Now: t0,
				Launcher: pods(launcher().terminated("Error", 1)), Workers: pods(worker("0").running(true), worker("1").terminated("OOMKilled", 137))},
			want: planView{Phase: api.PhaseFailed, Reason: ReasonWorkerOOMKilled, Write: true, Remember: true,
				Event: "Warning " + ReasonWorkerOOMKilled, Before: api.PhaseRunning,
				Failed: []string{"launcher 0 Error (exit 1)", "worker 1 " + ReasonWorkerOOMKilled}},
		},
		"a failure explained by its exit code only is read again shortly": {
			tj:    job(2).cond(trainer.TrainJobFailed, "Failed", "").obj(),
			known: remembered(api.Status{Phase: api.PhaseRunning}, t0),
			in: Input{TrainJob: job(2).cond(trainer.TrainJobFailed, "Failed", "").obj(), JobSet: jobset(2), Now: t0,
				Launcher: pods(launcher().terminated("Error", 3)), Workers: pods(worker("0").running(true), worker("1").running(true))},
			want: planView{Phase: api.PhaseFailed, Reason: ReasonLauncherFailed, Write: true, Remember: true, Requeue: regenericRetry,
				Event: "Warning " + ReasonLauncherFailed, Before: api.PhaseRunning,
				Failed: []string{"launcher 0 " + ReasonLauncherFailed}},
		},
		"past the gang timeout, not under Kueue: suspended to free the placed Workers": {
			known: remembered(api.Status{Phase: api.PhaseGangScheduling, Reason: ReasonUnschedulable, LastTransitionTime: ptr.To(metav1.NewTime(t0.Add(-2 * time.Minute)))}, t0.Add(-time.Minute)),
			in: Input{TrainJob: job(2).obj(), JobSet: jobset(2), GangTimeout: time.Minute, Now: t0,
				Workers: pods(worker("0").running(true), worker("1"))},
			want: planView{Phase: api.PhaseGangScheduling, Reason: ReasonGangSchedulingTimeout, Write: true, Remember: true, Suspend: true, Requeue: waitingRefresh,
				Event: "Warning " + ReasonGangSchedulingTimeout, Before: api.PhaseGangScheduling},
		},
		"past the gang timeout under Kueue: left to Kueue's waitForPodsReady": {
			tj: func() *trainer.TrainJob {
				j := job(2).obj()
				j.Labels = map[string]string{queue.NameLabel: "team-a"}
				return j
			}(),
			known: remembered(api.Status{Phase: api.PhaseGangScheduling, Reason: ReasonUnschedulable, LastTransitionTime: ptr.To(metav1.NewTime(t0.Add(-2 * time.Minute)))}, t0.Add(-time.Minute)),
			in: Input{TrainJob: job(2).obj(), JobSet: jobset(2), GangTimeout: time.Minute, Now: t0,
				Workers: pods(worker("0").running(true), worker("1"))},
			want: planView{Phase: api.PhaseGangScheduling, Reason: ReasonGangSchedulingTimeout, Write: true, Remember: true, Requeue: waitingRefresh,
				Event: "Warning " + ReasonGangSchedulingTimeout, Before: api.PhaseGangScheduling},
		},
		"running with a progress timeout: looked at again when it would pass": {
			known: func() known {
				p := decide(job(2).obj(), remembered(startingFrom, t0.Add(-10*time.Second)), running())
				return remembered(p.Status, t0.Add(-time.Second))
			}(),
			in: func() Input {
				in := running()
				in.ProgressTimeout = 30 * time.Second
				in.LastOutput, in.LastLine = ptr.To(t0.Add(-20*time.Second)), "step 3"
				return in
			}(),
			want: planView{Phase: api.PhaseRunning, Remember: true, Requeue: 11 * time.Second},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tj := tc.tj
			if tj == nil {
				tj = tc.in.TrainJob
			}
			if prev, ok := tc.known.previous(); ok {
				tc.in.Previous = &prev
			}
			var got Plan
			leavesInput(t, "decide", tc.in, func() { got = decide(tj, tc.known, tc.in) })
			if diff := cmp.Diff(tc.want, viewOf(got)); diff != "" {
				t.Errorf("decide (-want,+got):\n%s", diff)
			}
			// A transition is in the job's history and its Event is
			// vouched for by the status; no transition adds neither.
			prev, _ := tc.known.previous()
			grew := len(got.Status.History) - len(prev.History)
			if got.Transition != nil {
				last := got.Status.History[len(got.Status.History)-1]
				if grew != 1 || last.Phase != got.Status.Phase || last.Reason != got.Status.Reason || !last.Time.Time.Equal(tc.in.Now) {
					t.Errorf("history after a transition = %+v, want one more entry for %s/%s at %s", got.Status.History, got.Status.Phase, got.Status.Reason, tc.in.Now)
				}
				ev := got.Transition.Event
				e := corev1.Event{Type: ev.Type, Reason: ev.Reason, Message: ev.Note, ReportingController: api.FieldManager, Source: corev1.EventSource{Component: api.FieldManager}}
				if !api.ClaimsManager(e) || api.ForgedEvent(e, got.Status) {
					t.Errorf("the transition's Event %+v is not vouched for by the status's digests", ev)
				}
			} else if grew != 0 || len(got.Status.EventDigests) != len(prev.EventDigests) {
				t.Errorf("no transition, yet history grew by %d and digests from %d to %d", grew, len(prev.EventDigests), len(got.Status.EventDigests))
			}
		})
	}
}

func TestSettled(t *testing.T) {
	succeeded := api.Status{Phase: api.PhaseSucceeded, CompletionTime: ptr.To(metav1.NewTime(t0.Add(-time.Hour)))}
	genericFailure := api.Status{Phase: api.PhaseFailed, Reason: ReasonLauncherFailed, CompletionTime: ptr.To(metav1.NewTime(t0.Add(-30 * time.Second)))}
	complete := job(2).cond(trainer.TrainJobComplete, "Complete", "").obj()
	failed := job(2).cond(trainer.TrainJobFailed, "Failed", "").obj()
	cases := map[string]struct {
		tj      *trainer.TrainJob
		known   known
		now     time.Time
		settled bool
		write   bool
	}{
		"Succeeded as Trainer says: settled, nothing written": {
			tj: complete, known: remembered(succeeded, t0.Add(-time.Hour)), now: t0, settled: true,
		},
		"Succeeded as Trainer says, seen first on the object after a restart": {
			tj: complete, known: known{onObject: succeeded, hadOnObject: true}, now: t0, settled: true,
		},
		"Succeeded, but someone changed the status: put back": {
			tj: complete, known: func() known {
				k := remembered(succeeded, t0.Add(-time.Hour))
				k.onObject = api.Status{Phase: api.PhaseRunning}
				return k
			}(), now: t0, settled: true, write: true,
		},
		"Succeeded, but Trainer does not say Complete: diagnosed again": {
			tj: job(2).obj(), known: remembered(succeeded, t0.Add(-time.Hour)), now: t0,
		},
		"a failure explained by its exit code alone, within the minute: diagnosed again": {
			tj: failed, known: remembered(genericFailure, t0.Add(-30*time.Second)), now: t0,
		},
		"a failure explained by its exit code alone, after the minute: settled": {
			tj: failed, known: remembered(genericFailure, t0.Add(-30*time.Second)), now: t0.Add(time.Minute), settled: true,
		},
		"never diagnosed: not settled": {
			tj: complete, known: known{}, now: t0,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, ok := settled(tc.tj, tc.known, tc.now)
			if ok != tc.settled || p.Write != tc.write {
				t.Errorf("settled = %v (write %v), want %v (write %v)", ok, p.Write, tc.settled, tc.write)
			}
			if ok && (p.Remember || p.Transition != nil || p.Suspend || p.Requeue != 0) {
				t.Errorf("a settled job's plan only puts its status back, got %+v", p)
			}
		})
	}
}

func TestEventOf(t *testing.T) {
	long := make([]byte, 1200)
	for i := range long {
		long[i] = 'x'
	}
	cases := map[string]struct {
		s    api.Status
		want Event
	}{
		"a phase without a reason is the Event's reason": {
			s:    api.Status{Phase: api.PhaseRunning, Message: "All 2 Workers are running."},
			want: Event{Type: corev1.EventTypeNormal, Reason: "Running", Note: "All 2 Workers are running."},
		},
		"a warning names its reason and next step": {
			s:    api.Status{Phase: api.PhaseStarting, Reason: ReasonImagePullFailed, Message: "Cannot pull.", NextStep: "Check the image."},
			want: Event{Type: corev1.EventTypeWarning, Reason: ReasonImagePullFailed, Note: "Cannot pull. Next step: Check the image."},
		},
		"a long message is cut at 1000 bytes": {
			s:    api.Status{Phase: api.PhaseFailed, Reason: ReasonLauncherFailed, Message: string(long)},
			want: Event{Type: corev1.EventTypeWarning, Reason: ReasonLauncherFailed, Note: string(long[:1000])},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, eventOf(tc.s)); diff != "" {
				t.Errorf("eventOf (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestChangedIgnoresTheClock(t *testing.T) {
	a := api.Status{Phase: api.PhaseRunning, LastTransitionTime: ptr.To(metav1.NewTime(t0)), ObservedTime: ptr.To(metav1.NewTime(t0))}
	b := api.Status{Phase: api.PhaseRunning, LastTransitionTime: ptr.To(metav1.NewTime(t0.Add(time.Hour)))}
	if changed(a, b) {
		t.Errorf("changed(%+v, %+v) = true, want false: only the times differ", a, b)
	}
	b.WorkersReady = 1
	if !changed(a, b) {
		t.Errorf("changed = false for a different WorkersReady, want true")
	}
}

// The failed pod is the one the rule found, not one read back from the
// message: a program whose own error names "Worker 3" (its data loader's)
// failed on rank 1, which ran on Worker 0 (two slots per Worker); rewording the message cannot
// change which pod every interface lists as failed.
func TestFailedPodIsTheFindingsSubject(t *testing.T) {
	tj := job(2).cond(trainer.TrainJobFailed, "JobSetFailed", "").obj()
	in := Input{TrainJob: tj, JobSet: jobset(2), Now: t0,
		Launcher: pods(launcher().terminated("Error", 1)),
		Workers:  pods(worker("0").running(true), worker("1").running(true)),
		LauncherLog: "[1,1]<stderr>:Traceback (most recent call last):\n" +
			"[1,1]<stderr>:  File \"/opt/train.py\", line 9, in <module>\n" +
			"[1,1]<stderr>:RuntimeError: DataLoader Worker 3 (pid 412) exited unexpectedly\n"}
	s := decide(tj, known{}, in).Status
	if s.Reason != ReasonProgramError || !strings.Contains(s.Message, "Worker 3") {
		t.Fatalf("want a ProgramError whose message quotes the program's Worker 3: %s: %s", s.Reason, s.Message)
	}
	var named []api.FailedPod
	for _, f := range s.Failed {
		if f.Reason == ReasonProgramError {
			named = append(named, f)
		}
	}
	want := []api.FailedPod{{Role: "worker", Index: 0, Pod: "hello-node-0-0", Reason: ReasonProgramError}}
	if diff := cmp.Diff(want, named, cmpopts.IgnoreFields(api.FailedPod{}, "Node")); diff != "" {
		t.Errorf("the failed pod with the diagnosis's reason (-want,+got):\n%s\nmessage: %s", diff, s.Message)
	}
}

// A silent rank or a job with no output gets its stacks taken once per
// finding; the message then says where the ranks wait. A snapshot of an
// earlier finding, or one that failed, adds nothing.
func TestWithStacks(t *testing.T) {
	began := t0.Add(-time.Minute + 400*time.Millisecond)
	silent := api.Status{Phase: api.PhaseRunning, Reason: ReasonRankSilent, Message: "Rank 1 (Worker 1) has printed nothing for 5m.",
		History: []api.Transition{{Time: metav1.NewTime(t0.Add(-time.Hour)), Phase: api.PhaseRunning}, {Time: metav1.NewTime(began), Phase: api.PhaseRunning, Reason: ReasonRankSilent}}}
	snap := func(at time.Time, reason, errText string) *api.StackSnapshot {
		return &api.StackSnapshot{At: metav1.NewTime(at), Reason: reason, Contrast: "rank 1 waits in comm.recv while rank 0 waits in comm.Allreduce", Error: errText}
	}
	cases := map[string]struct {
		status  api.Status
		snap    *api.StackSnapshot
		tried   time.Time
		take    bool
		message string
	}{
		"a silent rank, no stacks yet":   {status: silent, take: true, message: silent.Message},
		"tried for this finding already": {status: silent, tried: began, message: silent.Message},
		"taken in the same second":       {status: silent, snap: snap(began.Truncate(time.Second), ReasonRankSilent, ""), message: silent.Message + " Stacks at 03:59:00 UTC: rank 1 waits in comm.recv while rank 0 waits in comm.Allreduce."},
		"tried for an earlier finding":   {status: silent, tried: began.Add(-time.Second), take: true, message: silent.Message},
		"taken for this finding": {status: silent, snap: snap(began.Add(1600*time.Millisecond), ReasonRankSilent, ""),
			message: silent.Message + " Stacks at 03:59:02 UTC: rank 1 waits in comm.recv while rank 0 waits in comm.Allreduce."},
		"taken for another finding":  {status: silent, snap: snap(began.Add(2*time.Second), ReasonNoProgress, ""), take: true, message: silent.Message},
		"taken before this finding":  {status: silent, snap: snap(began.Add(-time.Second), ReasonRankSilent, ""), take: true, message: silent.Message},
		"taking them failed":         {status: silent, snap: snap(began.Add(2*time.Second), ReasonRankSilent, "pods/exec forbidden"), message: silent.Message},
		"a job that runs well":       {status: api.Status{Phase: api.PhaseRunning, Message: "Running."}, message: "Running."},
		"a failed job's silent rank": {status: api.Status{Phase: api.PhaseFailed, Reason: ReasonRankSilent, Message: "m"}, message: "m"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := tc.status
			take := withStacks(&s, Input{Stacks: tc.snap}, memory{stacksTried: tc.tried})
			if diff := cmp.Diff([]any{tc.take, tc.message}, []any{take, s.Message}); diff != "" {
				t.Errorf("take, message (-want +got):\n%s", diff)
			}
		})
	}
}
