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
func remembered(s api.Status, wrote time.Time) Known {
	w := s
	return Known{OnObject: s, HadOnObject: true, Remembered: true,
		Mem: Memory{FirstSeen: t0.Add(-time.Hour), Diagnosed: s, Written: &w, WroteAt: wrote}}
}

func running() Input {
	return Input{TrainJob: job(2).Obj(), JobSet: jobset(2), Now: t0,
		Launcher: pods(launcher().Running(true)), Workers: pods(worker("0").Running(true), worker("1").Running(true))}
}

func TestDecide(t *testing.T) {
	since := ptr.To(metav1.NewTime(t0.Add(-10 * time.Second)))
	startingFrom := api.Status{Phase: api.PhaseStarting, Launcher: api.LauncherNotCreated, WorkersTotal: 2, LastTransitionTime: since}
	cases := map[string]struct {
		tj    *trainer.TrainJob
		known Known
		in    Input
		want  planView
	}{
		"first sight of a new job: the Event at once, the status a second later": {
			known: Known{Mem: Memory{FirstSeen: t0}},
			in:    Input{TrainJob: job(2).Obj(), Now: t0},
			want: planView{Phase: api.PhasePending, Reason: ReasonJobSetNotCreated, Remember: true, Requeue: StatusCoalesce,
				Event: "Normal " + ReasonJobSetNotCreated},
		},
		"first sight a second on: written, looked at again while it waits": {
			known: Known{Mem: Memory{FirstSeen: t0.Add(-StatusCoalesce)}},
			in:    Input{TrainJob: job(2).Obj(), Now: t0},
			want: planView{Phase: api.PhasePending, Reason: ReasonJobSetNotCreated, Write: true, Remember: true, Requeue: WaitingRefresh,
				Event: "Normal " + ReasonJobSetNotCreated},
		},
		"a manager restarted finds its status on the object: no second Event": {
			known: Known{OnObject: api.Status{Phase: api.PhasePending, Reason: ReasonJobSetNotCreated, Launcher: api.LauncherNotCreated, WorkersTotal: 2,
				Message:  "Trainer has not created the job's pods yet.",
				NextStep: "Wait a few seconds; if this lasts, check that the Trainer controller runs and read `kubectl mpijob events`."},
				HadOnObject: true, Mem: Memory{FirstSeen: t0}},
			in: Input{TrainJob: job(2).Obj(), Now: t0},
			// Only its details (the pods' records) are new: they wait detailCoalesce.
			want: planView{Phase: api.PhasePending, Reason: ReasonJobSetNotCreated, Remember: true, Requeue: detailCoalesce},
		},
		"Starting → Running: the Event, the time placed for the metric, written": {
			known: remembered(startingFrom, t0.Add(-10*time.Second)),
			in:    running(),
			want: planView{Phase: api.PhaseRunning, Write: true, Remember: true, Requeue: RunningRefresh,
				Event: "Normal Running", Before: api.PhaseStarting, Placed: since.Time},
		},
		"Running → Running: nothing new, nothing written": {
			known: func() Known {
				p := Decide(job(2).Obj(), remembered(startingFrom, t0.Add(-10*time.Second)), running())
				return remembered(p.Status, t0.Add(-time.Second))
			}(),
			in:   running(),
			want: planView{Phase: api.PhaseRunning, Remember: true, Requeue: RunningRefresh},
		},
		"a status someone else wrote is put back": {
			known: func() Known {
				p := Decide(job(2).Obj(), remembered(startingFrom, t0.Add(-10*time.Second)), running())
				k := remembered(p.Status, t0.Add(-time.Minute))
				k.OnObject = api.Status{Phase: api.PhaseSucceeded}
				return k
			}(),
			in:   running(),
			want: planView{Phase: api.PhaseRunning, Write: true, Remember: true, Requeue: RunningRefresh},
		},
		"a failure is written at once, however soon after the last write": {
			tj:    job(2).Cond(trainer.TrainJobFailed, "Failed", "").Obj(),
			known: remembered(api.Status{Phase: api.PhaseRunning, LastTransitionTime: since}, t0),
			in: Input{TrainJob: job(2).Cond(trainer.TrainJobFailed, "Failed", "").Obj(), JobSet: jobset(2), Now: t0,
				Launcher: pods(launcher().Terminated("Error", 1)), Workers: pods(worker("0").Running(true), worker("1").Terminated("OOMKilled", 137))},
			want: planView{Phase: api.PhaseFailed, Reason: ReasonWorkerOOMKilled, Write: true, Remember: true,
				Event: "Warning " + ReasonWorkerOOMKilled, Before: api.PhaseRunning,
				Failed: []string{"launcher 0 Error (exit 1)", "worker 1 " + ReasonWorkerOOMKilled}},
		},
		"a failure explained by its exit code only is read again shortly": {
			tj:    job(2).Cond(trainer.TrainJobFailed, "Failed", "").Obj(),
			known: remembered(api.Status{Phase: api.PhaseRunning}, t0),
			in: Input{TrainJob: job(2).Cond(trainer.TrainJobFailed, "Failed", "").Obj(), JobSet: jobset(2), Now: t0,
				Launcher: pods(launcher().Terminated("Error", 3)), Workers: pods(worker("0").Running(true), worker("1").Running(true))},
			want: planView{Phase: api.PhaseFailed, Reason: ReasonLauncherFailed, Write: true, Remember: true, Requeue: regenericRetry,
				Event: "Warning " + ReasonLauncherFailed, Before: api.PhaseRunning,
				Failed: []string{"launcher 0 " + ReasonLauncherFailed}},
		},
		"past the gang timeout, not under Kueue: suspended to free the placed Workers": {
			known: remembered(api.Status{Phase: api.PhaseGangScheduling, Reason: ReasonUnschedulable, LastTransitionTime: ptr.To(metav1.NewTime(t0.Add(-2 * time.Minute)))}, t0.Add(-time.Minute)),
			in: Input{TrainJob: job(2).Obj(), JobSet: jobset(2), GangTimeout: time.Minute, Now: t0,
				Workers: pods(worker("0").Running(true), worker("1"))},
			want: planView{Phase: api.PhaseGangScheduling, Reason: ReasonGangSchedulingTimeout, Write: true, Remember: true, Suspend: true, Requeue: WaitingRefresh,
				Event: "Warning " + ReasonGangSchedulingTimeout, Before: api.PhaseGangScheduling},
		},
		"past the gang timeout under Kueue: left to Kueue's waitForPodsReady": {
			tj: func() *trainer.TrainJob {
				j := job(2).Obj()
				j.Labels = map[string]string{queue.NameLabel: "team-a"}
				return j
			}(),
			known: remembered(api.Status{Phase: api.PhaseGangScheduling, Reason: ReasonUnschedulable, LastTransitionTime: ptr.To(metav1.NewTime(t0.Add(-2 * time.Minute)))}, t0.Add(-time.Minute)),
			in: Input{TrainJob: job(2).Obj(), JobSet: jobset(2), GangTimeout: time.Minute, Now: t0,
				Workers: pods(worker("0").Running(true), worker("1"))},
			want: planView{Phase: api.PhaseGangScheduling, Reason: ReasonGangSchedulingTimeout, Write: true, Remember: true, Requeue: WaitingRefresh,
				Event: "Warning " + ReasonGangSchedulingTimeout, Before: api.PhaseGangScheduling},
		},
		"running with a progress timeout: looked at again when it would pass": {
			known: func() Known {
				p := Decide(job(2).Obj(), remembered(startingFrom, t0.Add(-10*time.Second)), running())
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
			if prev, ok := tc.known.Previous(); ok {
				tc.in.Previous = &prev
			}
			var got Plan
			leavesInput(t, "decide", tc.in, func() { got = Decide(tj, tc.known, tc.in) })
			if diff := cmp.Diff(tc.want, viewOf(got)); diff != "" {
				t.Errorf("decide (-want,+got):\n%s", diff)
			}
			// A transition is in the job's history and its Event is
			// vouched for by the status; no transition adds neither.
			prev, _ := tc.known.Previous()
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
	complete := job(2).Cond(trainer.TrainJobComplete, "Complete", "").Obj()
	failed := job(2).Cond(trainer.TrainJobFailed, "Failed", "").Obj()
	cases := map[string]struct {
		tj      *trainer.TrainJob
		known   Known
		now     time.Time
		settled bool
		write   bool
	}{
		"Succeeded as Trainer says: settled, nothing written": {
			tj: complete, known: remembered(succeeded, t0.Add(-time.Hour)), now: t0, settled: true,
		},
		"Succeeded as Trainer says, seen first on the object after a restart": {
			tj: complete, known: Known{OnObject: succeeded, HadOnObject: true}, now: t0, settled: true,
		},
		"Succeeded, but someone changed the status: put back": {
			tj: complete, known: func() Known {
				k := remembered(succeeded, t0.Add(-time.Hour))
				k.OnObject = api.Status{Phase: api.PhaseRunning}
				return k
			}(), now: t0, settled: true, write: true,
		},
		"Succeeded, but Trainer does not say Complete: diagnosed again": {
			tj: job(2).Obj(), known: remembered(succeeded, t0.Add(-time.Hour)), now: t0,
		},
		"a failure explained by its exit code alone, within the minute: diagnosed again": {
			tj: failed, known: remembered(genericFailure, t0.Add(-30*time.Second)), now: t0,
		},
		"a failure explained by its exit code alone, after the minute: settled": {
			tj: failed, known: remembered(genericFailure, t0.Add(-30*time.Second)), now: t0.Add(time.Minute), settled: true,
		},
		"never diagnosed: not settled": {
			tj: complete, known: Known{}, now: t0,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, ok := Settled(tc.tj, tc.known, tc.now)
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
	tj := job(2).Cond(trainer.TrainJobFailed, "JobSetFailed", "").Obj()
	in := Input{TrainJob: tj, JobSet: jobset(2), Now: t0,
		Launcher: pods(launcher().Terminated("Error", 1)),
		Workers:  pods(worker("0").Running(true), worker("1").Running(true)),
		LauncherLog: "[1,1]<stderr>:Traceback (most recent call last):\n" +
			"[1,1]<stderr>:  File \"/opt/train.py\", line 9, in <module>\n" +
			"[1,1]<stderr>:RuntimeError: DataLoader Worker 3 (pid 412) exited unexpectedly\n"}
	s := Decide(tj, Known{}, in).Status
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
			take := withStacks(&s, Input{Stacks: tc.snap}, Memory{StacksTried: tc.tried})
			if diff := cmp.Diff([]any{tc.take, tc.message}, []any{take, s.Message}); diff != "" {
				t.Errorf("take, message (-want +got):\n%s", diff)
			}
		})
	}
}

// Status writes wait until a second after the previous one (or after the
// job was first seen), five seconds when only details changed, except the
// end of a job and warnings.
func TestWriteDelay(t *testing.T) {
	starting := &api.Status{Phase: api.PhaseStarting, WorkersReady: 1}
	cases := map[string]struct {
		mem  Memory
		last *api.Status
		s    api.Status
		now  time.Time
		want time.Duration
	}{
		"a new job's Pending waits a second after it was first seen": {
			mem: Memory{FirstSeen: t0}, s: api.Status{Phase: api.PhasePending}, now: t0.Add(100 * time.Millisecond),
			want: 900 * time.Millisecond,
		},
		"Running a second after the job was first seen is written": {
			mem: Memory{FirstSeen: t0}, s: api.Status{Phase: api.PhaseRunning}, now: t0.Add(time.Second),
		},
		"a counter change soon after a write waits five seconds after it": {
			mem: Memory{FirstSeen: t0, WroteAt: t0.Add(5 * time.Second)}, last: starting, s: api.Status{Phase: api.PhaseStarting, WorkersReady: 3}, now: t0.Add(5*time.Second + 300*time.Millisecond),
			want: 4700 * time.Millisecond,
		},
		"a counter change five seconds after a write is written": {
			mem: Memory{FirstSeen: t0, WroteAt: t0}, last: starting, s: api.Status{Phase: api.PhaseStarting, WorkersReady: 3}, now: t0.Add(5 * time.Second),
		},
		"a step of the start (Starting → GangScheduling) waits five seconds after a write": {
			mem: Memory{FirstSeen: t0, WroteAt: t0}, last: starting, s: api.Status{Phase: api.PhaseGangScheduling, Reason: ReasonUnschedulable}, now: t0.Add(300 * time.Millisecond),
			want: 4700 * time.Millisecond,
		},
		"Running → Suspended waits a second only": {
			mem: Memory{FirstSeen: t0, WroteAt: t0}, last: &api.Status{Phase: api.PhaseRunning}, s: api.Status{Phase: api.PhaseSuspended, Reason: ReasonSuspended}, now: t0.Add(300 * time.Millisecond),
			want: 700 * time.Millisecond,
		},
		"a warning while Running (NoProgress) is written at once": {
			mem: Memory{FirstSeen: t0, WroteAt: t0}, last: &api.Status{Phase: api.PhaseRunning}, s: api.Status{Phase: api.PhaseRunning, Reason: ReasonNoProgress}, now: t0.Add(300 * time.Millisecond),
		},
		"Starting → Running a second after a write is written": {
			mem: Memory{FirstSeen: t0, WroteAt: t0}, last: starting, s: api.Status{Phase: api.PhaseRunning}, now: t0.Add(time.Second),
		},
		"Succeeded is written at once": {
			mem: Memory{FirstSeen: t0}, s: api.Status{Phase: api.PhaseSucceeded}, now: t0,
		},
		"Failed is written at once": {
			mem: Memory{FirstSeen: t0, WroteAt: t0}, s: api.Status{Phase: api.PhaseFailed, Reason: ReasonWorkerOOMKilled}, now: t0,
		},
		"an image pull failure is written at once": {
			mem: Memory{FirstSeen: t0}, s: api.Status{Phase: api.PhaseStarting, Reason: ReasonImagePullFailed}, now: t0,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := writeDelay(tc.mem, tc.last, tc.s, tc.now)
			if got < 0 {
				got = 0
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("writeDelay (-want,+got):\n%s", diff)
			}
		})
	}
}

// A job that can never finish (here a Worker whose image cannot be
// pulled) is ended once it has said so for its end-stuck-after; not
// before, not when the grace is off, not twice, and not a job that only
// waits for capacity.
func TestEndNeverFinishing(t *testing.T) {
	pulling := func() Input {
		return Input{TrainJob: job(2).Obj(), JobSet: jobset(2), Now: t0,
			Workers: pods(worker("0").Running(true), worker("1").Waiting("ImagePullBackOff", `Back-off pulling image "ghcr.io/x/nope:1"`))}
	}
	// What the manager diagnosed since `since` (the same reason).
	stuck := func(since time.Time) Known {
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
		known Known
		grace time.Duration
		want  want
	}{
		"stuck for longer than the grace: ended": {
			known: stuck(t0.Add(-11 * time.Minute)), grace: 10 * time.Minute,
			want: want{End: ReasonImagePullFailed, After: "10m0s", Requeue: WaitingRefresh},
		},
		"stuck for less: looked at again when the grace is up": {
			known: stuck(t0.Add(-9*time.Minute - 50*time.Second)), grace: 10 * time.Minute,
			want: want{Requeue: 11 * time.Second},
		},
		"the grace is off: never ended": {
			known: stuck(t0.Add(-time.Hour)), grace: 0,
			want: want{Requeue: WaitingRefresh},
		},
		"already ended: not again": {
			tj: func() *trainer.TrainJob {
				j := job(2).Obj()
				j.Annotations = map[string]string{api.EndedByAnnotation: `{"reason":"ImagePullFailed","after":"10m0s","at":null}`}
				return j
			}(),
			known: stuck(t0.Add(-time.Hour)), grace: 10 * time.Minute,
			want: want{Requeue: WaitingRefresh},
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
			p := Decide(tj, tc.known, in)
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
	waiting := Input{TrainJob: job(2).Obj(), JobSet: jobset(2), Now: t0, EndStuckAfter: time.Minute,
		Workers: pods(worker("0").Unschedulable("0/3 nodes are available: 3 Insufficient cpu."), worker("1").Unschedulable("0/3 nodes are available: 3 Insufficient cpu."))}
	s := Diagnose(waiting)
	s.History = []api.Transition{{Time: metav1.NewTime(t0.Add(-time.Hour)), Phase: s.Phase, Reason: s.Reason}}
	if p := Decide(waiting.TrainJob, remembered(s, t0.Add(-time.Hour)), waiting); p.End != nil {
		t.Errorf("a job waiting for capacity (%s) was ended: %+v", s.Reason, p.End)
	}
}

// A job that stays quiet gets its status written once: the looks that
// follow, a minute apart (RunningRefresh), write nothing while nothing else
// changes. Its message named how long it had been quiet, which rewrote the
// status at every look (a TrainJob update through Trainer's and Kueue's
// webhooks each minute), issue "At the control plane's pace".
func TestAQuietJobIsWrittenOnce(t *testing.T) {
	// The Launcher started at t0; the first look is 20 minutes later.
	last, look := t0.Add(time.Minute), t0.Add(20*time.Minute)
	silentRank := func() *trainer.TrainJob {
		tj := job(2).Obj()
		raw, _ := api.RankFailure{Rank: ptr.To(1), Error: "step 41", Lines: []string{"step 41"}, At: metav1.NewTime(last), Silent: true}.Encode()
		tj.Annotations = map[string]string{api.RankFailureAnnotation: raw}
		return tj
	}
	cases := map[string]struct {
		in     func(now time.Time) Input
		reason string
	}{
		"the Launcher quiet, with a last line": {reason: ReasonNoProgress, in: func(now time.Time) Input {
			in := running()
			in.Now, in.ProgressTimeout, in.LastOutput, in.LastLine = now, 5*time.Minute, &last, "step 41"
			return in
		}},
		"the Launcher quiet since it started": {reason: ReasonNoProgress, in: func(now time.Time) Input {
			in := running()
			in.Now, in.ProgressTimeout = now, 5*time.Minute
			return in
		}},
		"a silent rank": {reason: ReasonRankSilent, in: func(now time.Time) Input {
			in := running()
			in.TrainJob, in.SlotsPerWorker, in.Now, in.ProgressTimeout = silentRank(), 1, now, 5*time.Minute
			return in
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			first := Decide(tc.in(look).TrainJob, Known{Mem: Memory{FirstSeen: t0}}, tc.in(look))
			if first.Status.Reason != tc.reason || !first.Write {
				t.Fatalf("first look: %s/%s written %v, want %s written", first.Status.Phase, first.Status.Reason, first.Write, tc.reason)
			}
			k := remembered(first.Status, look)
			for _, after := range []time.Duration{RunningRefresh, 2 * RunningRefresh, 30 * RunningRefresh} {
				now := look.Add(after)
				p := Decide(tc.in(now).TrainJob, k, tc.in(now))
				if p.Write || p.Status.Reason != tc.reason {
					t.Errorf("%s later: %s written %v, want %s not written again; message now %q, was %q",
						after, p.Status.Reason, p.Write, tc.reason, p.Status.Message, first.Status.Message)
				}
			}
		})
	}
}

// The wait before each look at a job that waits for room with the same
// phase and reason doubles from WaitingRefresh to WaitingRefreshMax; a
// look a time rule brought forward is followed by WaitingRefresh.
func TestWaitingLook(t *testing.T) {
	cases := map[string]struct {
		last, want time.Duration
	}{
		"the first look":               {0, WaitingRefresh},
		"the second":                   {WaitingRefresh, 2 * WaitingRefresh},
		"the third":                    {2 * WaitingRefresh, WaitingRefreshMax},
		"waiting long":                 {WaitingRefreshMax, WaitingRefreshMax},
		"after a rule's early look":    {3 * time.Second, WaitingRefresh},
		"after a rule's look at 20 s":  {20 * time.Second, 40 * time.Second},
		"a wait longer than the limit": {5 * time.Minute, WaitingRefreshMax},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, waitingLook(tc.last)); d != "" {
				t.Errorf("waitingLook(%s) (-want +got):\n%s", tc.last, d)
			}
		})
	}
}

// untilRule is the time to the next rule of the clock a waiting job's
// diagnosis follows, a second after it (times on objects are whole
// seconds); rules passed or not set count for nothing.
func TestUntilRule(t *testing.T) {
	since := func(d time.Duration) *metav1.Time { return ptr.To(metav1.NewTime(t0.Add(-d))) }
	madeAgo := func(d time.Duration) *trainer.TrainJob {
		j := job(2).Deadline(600).Obj()
		j.CreationTimestamp = metav1.NewTime(t0.Add(-d))
		return j
	}
	jobsetAgo := func(d time.Duration) Input {
		js := jobset(2)
		js.CreationTimestamp = metav1.NewTime(t0.Add(-d))
		return Input{TrainJob: job(2).Obj(), JobSet: js, Now: t0}
	}
	pending := func(d time.Duration) api.Status {
		return api.Status{Phase: api.PhasePending, Reason: ReasonUnschedulable, LastTransitionTime: since(d)}
	}
	cases := map[string]struct {
		in   Input
		s    api.Status
		want time.Duration
	}{
		"no rule":                 {Input{TrainJob: job(2).Obj(), Now: t0}, pending(time.Minute), 0},
		"the gang timeout ahead":  {Input{TrainJob: job(2).Obj(), Now: t0, GangTimeout: 5 * time.Minute}, pending(4 * time.Minute), 61 * time.Second},
		"the gang timeout passed": {Input{TrainJob: job(2).Obj(), Now: t0, GangTimeout: time.Minute}, pending(4 * time.Minute), 0},
		"no gang timeout when Queued": {Input{TrainJob: job(2).Obj(), Now: t0, GangTimeout: 5 * time.Minute},
			api.Status{Phase: api.PhaseQueued, Reason: ReasonQueued, LastTransitionTime: since(4 * time.Minute)}, 0},
		"pods not yet overdue": {jobsetAgo(time.Second), pending(time.Second), podCreationGrace},
		"pods overdue already": {jobsetAgo(time.Minute), pending(time.Minute), 0},
		"the deadline ahead":   {Input{TrainJob: madeAgo(9 * time.Minute), Now: t0}, pending(time.Minute), 61 * time.Second},
		"the deadline passed":  {Input{TrainJob: madeAgo(11 * time.Minute), Now: t0}, pending(time.Minute), 0},
		"the nearest of two":   {Input{TrainJob: madeAgo(9 * time.Minute), Now: t0, GangTimeout: time.Minute}, pending(50 * time.Second), 11 * time.Second},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, untilRule(tc.in, tc.s)); d != "" {
				t.Errorf("untilRule (-want +got):\n%s", d)
			}
		})
	}
}

// A job that waits for room is looked at less often the longer it waits
// with the same reason: over 10 minutes 12 looks, where one every
// WaitingRefresh made 40. Its gang-scheduling timeout is still found a
// second after it passes, and a new reason brings the looks back to
// WaitingRefresh.
func TestWaitingLooksBackOff(t *testing.T) {
	waiting := func(now time.Time, prev *api.Status, gang time.Duration, placed bool) Input {
		ws := pods(worker("0"), worker("1"))
		if placed {
			ws = pods(worker("0").Running(true), worker("1"))
		}
		return Input{TrainJob: job(2).Obj(), JobSet: jobset(2), Now: now, Previous: prev, GangTimeout: gang, Workers: ws}
	}
	// run makes the rounds the job's requeues ask for until end, changing
	// what the job waits with at change (zero: never); it returns each
	// round's wait and the reason the last round found.
	run := func(gang time.Duration, change, end time.Duration) ([]time.Duration, string) {
		now := t0
		var k Known
		var prev *api.Status
		var waits []time.Duration
		var reason string
		for now.Sub(t0) < end {
			p := Decide(job(2).Obj(), k, waiting(now, prev, gang, change > 0 && now.Sub(t0) >= change))
			reason = p.Status.Reason
			if p.Requeue == 0 {
				t.Fatalf("at %s a waiting job (%s %s) is not looked at again", now.Sub(t0), p.Status.Phase, p.Status.Reason)
			}
			s := p.Status
			k = remembered(s, now)
			k.Mem.Look = p.Look
			prev = &s
			waits = append(waits, p.Requeue)
			now = now.Add(p.Requeue)
		}
		return waits, reason
	}
	waits, _ := run(0, 0, 10*time.Minute)
	// 15 s, 30 s, then a minute.
	want := []time.Duration{WaitingRefresh, 2 * WaitingRefresh}
	for len(want) < 12 {
		want = append(want, WaitingRefreshMax)
	}
	if d := cmp.Diff(want, waits); d != "" {
		t.Errorf("looks at a job waiting 10 minutes (-want +got):\n%s", d)
	}

	// A gang timeout of 100 s: found a second after it passes.
	waits, reason := run(100*time.Second, 0, 102*time.Second)
	var at time.Duration
	for _, w := range waits[:len(waits)-1] {
		at += w
	}
	if reason != ReasonGangSchedulingTimeout || at > 102*time.Second {
		t.Errorf("the gang timeout of 100 s was found at %s with reason %q (waits %v), want %s within 102 s", at, reason, waits, ReasonGangSchedulingTimeout)
	}

	// A Worker placed at 3 minutes: GangScheduling, a new phase, is
	// looked at WaitingRefresh after its first look.
	waits, _ = run(0, 3*time.Minute, 4*time.Minute)
	var sum time.Duration
	i := 0
	for ; sum < 3*time.Minute; i++ {
		sum += waits[i]
	}
	if i >= len(waits) || waits[i-1] != WaitingRefreshMax || waits[i] != WaitingRefresh {
		t.Errorf("the waits before and after the job's reason changed at %s were %v, want WaitingRefreshMax, then WaitingRefresh again", sum, waits[i-1:])
	}
}
