package diagnose

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/queue"
)

// How often a job is looked at again even when nothing it watches changed:
// a job that waits keeps its waiting message fresh, a running one is
// checked for progress.
const (
	WaitingRefresh = 15 * time.Second
	// WaitingRefreshMax is the longest wait between the looks at a job
	// that waits with the same phase and reason (waitingLook): each such
	// look doubles the wait from WaitingRefresh up to it, and a new
	// reason brings it back to WaitingRefresh. A job that waits minutes
	// for room was looked at every WaitingRefresh: the diagnosis's most
	// frequent rounds at 500 jobs × 8 (issue "At the control plane's
	// pace"). Every time rule still lands on time (untilRule).
	WaitingRefreshMax = time.Minute
	RunningRefresh    = time.Minute
	// regenericWindow is how long after a job failed a failure explained
	// only by its exit code is looked at again (the Launcher's log may not
	// have been readable yet on a busy node).
	regenericWindow = time.Minute
	// regenericRetry is how soon such a job is looked at again.
	regenericRetry = 5 * time.Second
)

// Plan is what one round of the diagnosis does to a job: decide makes it
// from what gather read, apply carries it out.
type Plan struct {
	// Status is the job's status as diagnosed now.
	Status api.Status
	// Write: write Status to the TrainJob now (else it waits for the next
	// round, or is already there).
	Write bool
	// Remember: keep Status as the last diagnosed (false for a finished
	// job, whose status is only ever put back).
	Remember bool
	// Transition is set when the phase or the reason changed this round:
	// the Event and the metrics it gets.
	Transition *Transition
	// Emit are the transitions whose Events and metrics go out now, after
	// the write of the status that records them (Write): those kept from
	// earlier rounds, then this round's. An Event goes out only once the
	// status that vouches for it (api.ForgedEvent) is on the job, so a
	// manager that restarts before a coalesced write diagnoses the
	// transition again and emits it once, not twice.
	Emit []Transition
	// Pending are the transitions still to emit, kept in Memory until the
	// write that records them (nil when Write).
	Pending []Transition
	// Suspend: the job is past its gang-scheduling timeout and holds
	// Workers that were placed; suspending it frees their nodes.
	Suspend bool
	// End: the job can never finish and has said so for longer than its
	// end-stuck-after: mpijob-manager records why (EndedByAnnotation) and
	// ends it (nil: not now).
	End *api.Ended
	// TakeStacks: the job's finding is a silent rank or no output, and
	// its ranks' stacks were not taken since it began: take them once
	// (api.StacksAnnotation), and the message says where the ranks wait.
	TakeStacks bool
	// Requeue is when to look again though nothing changed (0: only when
	// something the job watches changes).
	Requeue time.Duration
	// Look is the wait of this round's look at a waiting job
	// (waitingLook), kept in Memory for the next (0: not a waiting look).
	Look time.Duration
}

// Transition is a change of phase or reason.
type Transition struct {
	Event Event
	// Name is the Event's object name: the job's name and a digest of the
	// job, the transition it follows and the Event. Two managers that see
	// the same transition from the same written status name its Event
	// alike, so the second create is refused and it exists once.
	Name string
	// Recovered: a transition a manager wrote before it stopped, whose
	// Event its successor writes again in case it was lost (a create of
	// an Event that exists changes nothing); it gets no metrics.
	Recovered bool
	// Status is the job's status as diagnosed at the transition, and At
	// when it was diagnosed: its metrics are taken from them.
	Status api.Status
	At     time.Time
	// Before is the status before it (nil: the job's first).
	Before *api.Status
	// Placed is when the job began Starting, for the time-to-start metric.
	Placed time.Time
}

// Event is the Kubernetes Event a transition gets on the TrainJob.
type Event struct{ Type, Reason, Note string }

// EventName is the object name of the Event of the last transition in
// history: the job's name, then a digest of the job's UID, the time of
// the transition before it (whole seconds, as the status keeps it) and
// the Event. It is the same for every manager that diagnoses the same
// transition after the same written status.
func EventName(tj *trainer.TrainJob, history []api.Transition, ev Event) string {
	before := ""
	if n := len(history); n >= 2 {
		before = strconv.FormatInt(history[n-2].Time.Unix(), 10)
	}
	sum := sha256.Sum256([]byte(string(tj.UID) + "\x00" + before + "\x00" + ev.Type + "\x00" + ev.Reason + "\x00" + ev.Note))
	return tj.Name + "." + hex.EncodeToString(sum[:8])
}

// RecoverWindow is how recent a written transition must be for a manager
// that takes over to write its Event again: one its predecessor wrote the
// status of, then stopped before the Event went out. When both replicas
// die, the next leader waits for the old lease to expire and its pod to
// start: minutes, not seconds.
const RecoverWindow = 5 * time.Minute

// recoverLast is the Event of the written status's last transition, to be
// written again by a manager that has just taken the job over, when that
// transition is recent and the written status vouches for exactly that
// Event (it was diagnosed with the status now on the job).
func recoverLast(tj *trainer.TrainJob, k Known, now time.Time) *Transition {
	w := k.OnObject
	n := len(w.History)
	if !k.HadOnObject || n == 0 || now.Sub(w.History[n-1].Time.Time) > RecoverWindow {
		return nil
	}
	last := w.History[n-1]
	if last.Phase != w.Phase || last.Reason != w.Reason {
		return nil
	}
	ev := eventOf(w)
	if !slices.Contains(w.EventDigests, api.EventDigest(string(tj.UID), ev.Type, ev.Reason, ev.Note)) {
		return nil
	}
	return &Transition{Event: ev, Name: EventName(tj, w.History, ev), Status: w, At: last.Time.Time, Recovered: true}
}

// Memory is what the diagnosis controller remembers of a job between
// rounds: the cache lags behind its own writes, and diagnosing from an
// older status would forget what was seen or report a transition twice.
type Memory struct {
	UID       types.UID
	FirstSeen time.Time
	Diagnosed api.Status
	Written   *api.Status // nil: nothing written since the manager started
	WroteAt   time.Time
	// StacksTried is when the ranks' stacks were last taken (or tried).
	StacksTried time.Time
	// Pending are transitions diagnosed but not yet written: their Events
	// go out with the write that records them (Plan.Emit).
	Pending []Transition
	// Look is the wait of the last look at the job while it waited
	// (Plan.Look).
	Look time.Duration
}

// Known is what the manager knows of a job before it reads the job's
// children: its runtime, the status on the object and its own memory.
type Known struct {
	Spec               *trainer.TrainingRuntimeSpec
	RuntimeAnnotations map[string]string
	OnObject           api.Status
	HadOnObject        bool
	Mem                Memory
	Remembered         bool
}

// Previous is the status last diagnosed: remembered, else the one on the
// object (the cache lags behind our own writes).
func (k Known) Previous() (api.Status, bool) {
	if k.Remembered {
		return k.Mem.Diagnosed, true
	}
	return k.OnObject, k.HadOnObject
}

// Written is the status last written: remembered since the manager
// started, else the one on the object.
func (k Known) Written() (api.Status, bool) {
	if k.Remembered && k.Mem.Written != nil {
		return *k.Mem.Written, true
	}
	return k.OnObject, k.HadOnObject
}

// Forged reports a status on the object that differs from what the
// manager last wrote. Only the manager writes it (admission refuses
// everyone else); one that differs is put back.
func (k Known) Forged() bool {
	return k.Remembered && k.Mem.Written != nil && (!k.HadOnObject || changed(k.OnObject, *k.Mem.Written))
}

// Settled reports a job that finished as Trainer says: nothing a child does
// changes it, so its children are not read. The plan only puts a forged
// status back. A failure explained only generically is looked at again
// for regenericWindow.
func Settled(tj *trainer.TrainJob, k Known, now time.Time) (Plan, bool) {
	written, ok := k.Written()
	if _, hadPrev := k.Previous(); !hadPrev || !ok || !finishedAsTrainerSays(written, tj) || !registrationShown(tj, written) {
		return Plan{}, false
	}
	if Generic(written) && written.CompletionTime != nil && now.Sub(written.CompletionTime.Time) <= regenericWindow {
		return Plan{}, false
	}
	return Plan{Status: written, Write: k.Forged()}, true
}

// Decide diagnoses the job from what gather read and says what to do:
// what to write and when, the transition's Event and metrics, whether to
// suspend, when to look again. It reads nothing and writes nothing.
func Decide(tj *trainer.TrainJob, k Known, in Input) Plan {
	prev, hadPrev := k.Previous()
	written, hadWritten := k.Written()
	s := Diagnose(in)
	s.Runtime = api.RuntimeOf(tj.Labels, tj.Spec.RuntimeRef.Name)
	if hadPrev {
		s.EventDigests, s.History = prev.EventDigests, prev.History
	}
	// The pods as seen now, and those gone since as last seen: what the
	// job's post-mortem shows once JobSet removed them.
	if hadPrev {
		s.Pods = api.RecordPods(prev.Pods, in.Launcher, in.Workers)
	} else {
		s.Pods = api.RecordPods(nil, in.Launcher, in.Workers)
	}
	// Which pods failed, structured, so no interface reads the message.
	var named *api.PodRef
	if s.Phase == api.PhaseFailed || Warning(s) {
		named = s.Subject
	}
	s.Failed = api.FailedPods(s.Pods, named, s.Reason)
	p := Plan{Remember: true, Suspend: releaseOnTimeout(tj, s)}
	if !hadPrev || prev.Phase != s.Phase || prev.Reason != s.Reason {
		s.History = api.WithTransition(s.History, api.Transition{Time: metav1.NewTime(in.Now), Phase: s.Phase, Reason: s.Reason, Message: s.Message})
		// Every transition gets its Event and metrics, even one that lasts
		// less than the wait before the next status write: they go out
		// with that write (Emit). The status vouches for the Event
		// (api.ForgedEvent).
		ev := eventOf(s)
		s.EventDigests = api.WithEventDigest(s.EventDigests, api.EventDigest(string(tj.UID), ev.Type, ev.Reason, ev.Note))
		t := &Transition{Event: ev, At: in.Now, Name: EventName(tj, s.History, ev)}
		if hadPrev {
			before := prev
			t.Before = &before
			if prev.Phase == api.PhaseStarting && prev.LastTransitionTime != nil {
				t.Placed = prev.LastTransitionTime.Time
			}
		}
		p.Transition = t
	}
	p.TakeStacks = withStacks(&s, in, k.Mem)
	p.Status = s
	if p.Transition != nil {
		p.Transition.Status = s
	}
	if !hadWritten || changed(written, s) || k.Forged() {
		// A forged status is put back as soon as a phase change would be.
		var last *api.Status
		if hadWritten && !k.Forged() {
			last = &written
		}
		if wait := writeDelay(k.Mem, last, s, in.Now); wait > 0 {
			p.Requeue = wait
		} else {
			p.Write = true
		}
	}
	// The transitions kept from earlier rounds, and this one's, go out
	// with the write that records them.
	var todo []Transition
	if k.Remembered {
		todo = append(todo, k.Mem.Pending...)
	}
	if p.Transition != nil {
		todo = append(todo, *p.Transition)
	}
	if p.Write {
		p.Emit = todo
	} else {
		p.Pending = todo
	}
	if !k.Remembered {
		if t := recoverLast(tj, k, in.Now); t != nil {
			p.Emit = append([]Transition{*t}, p.Emit...)
		}
	}
	if p.Requeue == 0 {
		var last time.Duration
		if k.Remembered && p.Transition == nil {
			last = k.Mem.Look
		}
		p.Requeue, p.Look = nextLook(in, s, last)
	}
	if _, ended := tj.Annotations[api.EndedByAnnotation]; !ended {
		end, wait := ToEnd(s, in.EndStuckAfter, in.Now)
		p.End = end
		if wait > 0 && (p.Requeue == 0 || wait < p.Requeue) {
			p.Requeue = wait
		}
	}
	return p
}

// stacksFor are the findings whose message says where the ranks wait: a
// rank silent while the others print, and a job that prints nothing.
var stacksFor = map[string]bool{ReasonRankSilent: true, ReasonNoProgress: true}

// since is when s's finding began: its transition in s.History.
func since(s api.Status) time.Time {
	for i := len(s.History) - 1; i >= 0; i-- {
		if t := s.History[i]; t.Phase == s.Phase && t.Reason == s.Reason {
			return t.Time.Time
		}
	}
	return time.Time{}
}

// withStacks adds to a stuck job's message where its ranks wait, from the
// stacks taken since its finding began; it reports whether they are still
// to be taken (once per finding: mem says when they were tried).
func withStacks(s *api.Status, in Input, mem Memory) bool {
	if s.Phase != api.PhaseRunning || !stacksFor[s.Reason] {
		return false
	}
	// Times on the object are whole seconds.
	from := since(*s).Truncate(time.Second)
	if st := in.Stacks; st != nil && st.Reason == s.Reason && !st.At.Time.Before(from) {
		if st.Error == "" {
			s.Message += " " + stacksSentence(*st)
		}
		return false
	}
	return mem.StacksTried.IsZero() || mem.StacksTried.Before(from)
}

// stacksSentence is a snapshot in the message's words: "Their stacks at
// 10:42:07 UTC: rank 7 waits in comm.recv while ranks 0-6 wait in
// comm.Allreduce (kubectl mpijob stacks NAME shows them now)."
func stacksSentence(st api.StackSnapshot) string {
	what := st.Contrast
	if what == "" && len(st.Groups) > 0 {
		what = st.Groups[0]
	}
	if what == "" {
		return ""
	}
	return fmt.Sprintf("Stacks at %s: %s.", st.At.UTC().Format("15:04:05 MST"), what)
}

// nextLook is when to look at a job again though nothing it watches
// changed (0: never), and for a job that waits for room that wait again
// as look, for Memory, given the last such look's (last; 0: none, or the
// job's phase or reason changed since).
func nextLook(in Input, s api.Status, last time.Duration) (next, look time.Duration) {
	switch {
	case Generic(s) && s.CompletionTime != nil && in.Now.Sub(s.CompletionTime.Time) < regenericWindow:
		// Read the Launcher's log again shortly.
		return regenericRetry, 0
	case s.Phase.Finished():
		return 0, 0
	case s.Phase == api.PhaseRunning && in.ProgressTimeout > 0 && s.Reason == "":
		// Look again when the timeout would pass without new output.
		next := RunningRefresh
		if since := QuietSince(in, s); since != nil {
			next = min(RunningRefresh, max(time.Second, in.ProgressTimeout-in.Now.Sub(*since)+time.Second))
		}
		return next, 0
	case s.Phase == api.PhaseRunning:
		return RunningRefresh, 0
	case waitsForRoom(s):
		next = waitingLook(last)
		if until := untilRule(in, s); until > 0 && until < next {
			next = until
		}
		return next, next
	default:
		return WaitingRefresh, 0
	}
}

// waitsForRoom are the statuses of a job that waits for the queue or the
// scheduler to find it room (Queued, Pending, GangScheduling): nothing of
// theirs changes on a clock but the time rules untilRule knows. A
// Starting job's findings (an image being built, sshd's grace) do, and
// keep WaitingRefresh.
func waitsForRoom(s api.Status) bool {
	switch s.Phase {
	case api.PhaseQueued, api.PhasePending, api.PhaseGangScheduling:
		return true
	}
	return false
}

// waitingLook is the wait before the next look at a job that waits for
// room, after a look that waited last with the same phase and reason (0:
// the first, or a new phase or reason): WaitingRefresh, then doubling up
// to WaitingRefreshMax (a look a time rule brought forward, shorter than
// WaitingRefresh, is followed by WaitingRefresh). What the looks pick up
// that nothing watched wakes the diagnosis for (Events, such as a quota's
// refusal; the queue's positions; free capacity as other jobs come and
// go) is then at most WaitingRefreshMax old; a change of the job's own
// pods, JobSet or TrainJob still wakes it at once.
func waitingLook(last time.Duration) time.Duration {
	if last <= 0 {
		return WaitingRefresh
	}
	return max(WaitingRefresh, min(2*last, WaitingRefreshMax))
}

// untilRule is the time until the next rule of the clock could change a
// waiting job's diagnosis (0: none ahead): the gang-scheduling timeout,
// the grace before pods not made are overdue, and the job's deadline.
// Times on objects are whole seconds: a look a second after each.
func untilRule(in Input, s api.Status) time.Duration {
	var next time.Duration
	at := func(t time.Time) {
		if d := t.Sub(in.Now) + time.Second; d > 0 && (next == 0 || d < next) {
			next = d
		}
	}
	if in.GangTimeout > 0 && s.LastTransitionTime != nil && (s.Phase == api.PhasePending || s.Phase == api.PhaseGangScheduling) {
		at(gangTimeoutAt(s.LastTransitionTime.Time, in.GangTimeout))
	}
	if in.JobSet != nil {
		at(podsDueAt(in.JobSet.CreationTimestamp.Time))
	}
	if tj := in.TrainJob; tj != nil && tj.Spec.ActiveDeadlineSeconds > 0 {
		at(deadlineAt(tj))
	}
	return next
}

// StatusCoalesce is the shortest time between two status writes of a job,
// and between the manager first seeing a job and its first write, unless
// the news is urgent. A job that starts normally passes through Pending,
// Starting and Running within a second or two while the control plane is
// busiest creating its pods; each write of the status is a TrainJob update
// that Trainer's webhooks and controller process too. Transitions still get
// their Event with the write that records them; the annotation catches up within StatusCoalesce.
const StatusCoalesce = time.Second

// detailCoalesce is the shortest time between two writes that change only
// a status's details (Workers ready, the pods' states) within one phase
// and reason, or move between the phases of a start (startingUp). Under a
// burst each job's Workers come up one by one over tens of seconds;
// writing each step within a second made five to nine TrainJob updates per
// job (the API server's audit log during bench/scale), which the API
// server, Trainer's and Kueue's webhooks and controllers all process.
// Running and other phases still go out within StatusCoalesce.
const detailCoalesce = 5 * time.Second

// writeDelay is how long to wait before writing s (0: write now), given
// the status last written (nil: none yet).
func writeDelay(mem Memory, last *api.Status, s api.Status, now time.Time) time.Duration {
	if urgent(s) {
		return 0
	}
	since := mem.WroteAt
	if since.IsZero() {
		since = mem.FirstSeen
	}
	gap := StatusCoalesce
	if last != nil && (last.Phase == s.Phase && last.Reason == s.Reason || startingUp(last.Phase) && startingUp(s.Phase)) {
		gap = detailCoalesce
	}
	return gap - now.Sub(since)
}

// startingUp phases are the steps of a normal start (Pending,
// GangScheduling, Starting): under load a job passes through six of them
// (JobSetNotCreated, Unschedulable, GangScheduling, WorkersNotReady,
// LauncherNotStarted) a second or more apart. Between them the status is
// written every detailCoalesce; Running and every other phase go out
// within StatusCoalesce, and each transition's Event with its write.
func startingUp(p api.Phase) bool {
	return p == api.PhasePending || p == api.PhaseGangScheduling || p == api.PhaseStarting
}

// urgent statuses are written at once: the end of a job and anything that
// asks for a person's attention.
func urgent(s api.Status) bool {
	return s.Phase.Finished() || s.Phase == api.PhaseFailed || Warning(s)
}

// finishedAsTrainerSays reports whether s is a final phase that agrees
// with Trainer's own condition: Succeeded with Complete, Failed with
// Failed. A final status Trainer does not back is diagnosed again.
func finishedAsTrainerSays(s api.Status, tj *trainer.TrainJob) bool {
	switch s.Phase {
	case api.PhaseSucceeded:
		return JobComplete(tj)
	case api.PhaseFailed:
		return JobFailed(tj)
	}
	return false
}

// changed ignores LastTransitionTime, which only moves with the phase.
func changed(a, b api.Status) bool {
	a.LastTransitionTime, b.LastTransitionTime = nil, nil
	a.ObservedTime, b.ObservedTime = nil, nil
	ea, _ := a.Encode()
	eb, _ := b.Encode()
	return ea != eb
}

// eventOf is the Event a status change gets: its type, reason and text.
func eventOf(s api.Status) Event {
	e := Event{Type: corev1.EventTypeNormal, Reason: string(s.Phase), Note: s.Message}
	if Warning(s) {
		e.Type = corev1.EventTypeWarning
	}
	if s.Reason != "" {
		e.Reason = s.Reason
	}
	if s.NextStep != "" {
		e.Note += " Next step: " + s.NextStep
	}
	if len(e.Note) > 1000 {
		e.Note = e.Note[:1000]
	}
	return e
}

// Generic reports a failure explained only by its exit code.
func Generic(s api.Status) bool {
	return s.Phase == api.PhaseFailed && (s.Reason == ReasonLauncherFailed || s.Reason == ReasonFailed)
}

// releaseOnTimeout reports a job past its gang-scheduling timeout that
// holds placed Workers and is not managed by Kueue: it is suspended.
func releaseOnTimeout(tj *trainer.TrainJob, s api.Status) bool {
	if s.Reason != ReasonGangSchedulingTimeout || s.Phase != api.PhaseGangScheduling || tj.Labels[queue.NameLabel] != "" {
		return false
	}
	return tj.Spec.Suspend == nil || !*tj.Spec.Suspend
}
