// Package controller publishes a running MPI job's progress: the last
// progress report in the Launcher's log becomes the TrainJob annotation
// OpenShift AI's training views read (progress.Annotation). It lives apart
// from package progress so the CLI and the dashboard read progress without
// controller-runtime's flags.
package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/diagnose"
	"github.com/mpijob/mpijob/pkg/jobpods"
	"github.com/mpijob/mpijob/pkg/launcherlog"
	"github.com/mpijob/mpijob/pkg/progress"
	"github.com/mpijob/mpijob/pkg/runtimes"
	"github.com/mpijob/mpijob/pkg/wake"
)

// FieldManager owns the progress annotation: a field owner of its own, so
// applying it never touches the status annotation the diagnosis applies.
const FieldManager = "mpijob.dev/progress"

// RankFailureFieldManager owns the rank-failure annotation (an apply under
// FieldManager without the progress annotation would remove it).
const RankFailureFieldManager = "mpijob.dev/rank-failure"

// ResumedFieldManager owns the resumed annotation (api.ResumedAnnotation).
const ResumedFieldManager = "mpijob.dev/resumed"

// Interval is how often a running job's Launcher log is read for progress
// while it says something new.
const Interval = 10 * time.Second

// QuietInterval is the longest wait between reads of a Launcher whose log
// says nothing new: each such read doubles the wait from Interval up to
// it, and the first new line brings it back to Interval (one that cannot
// be read waits up to UnreadableInterval). A job that prints has its
// progress read every Interval; one that loads data or waits in a
// collective is read a quarter as often (log reads were the most frequent
// request the manager made per job at the bench's scale: issue "At the
// control plane's pace"). The diagnosis's own look at a running job's
// last line does not wait for it (diagnose.ObservationMaxAge).
const QuietInterval = 4 * Interval

// UnreadableInterval is the longest wait between reads of a Launcher whose
// log cannot be read: each failed read doubles the wait from Interval up
// to it, past QuietInterval, and the first good read brings it back. A
// node whose kubelet serves no log (a virtual kubelet, kwok's nodes) keeps
// refusing, and each refusal is a proxied request through the API server:
// 7.7 a job at 500 jobs × 8 (bench/scale). A log that comes back is read
// again within it, and the diagnosis's own look at a running job reads the
// Launcher every minute whatever this wait (diagnose.RunningRefresh).
const UnreadableInterval = 12 * Interval

// Reconciler publishes the progress a running MPI job's ranks print: it
// reads the last lines of the Launcher's log every Interval (gather), takes
// the last progress report (decide) and applies the annotation when it
// changed (apply). A job that prints none gets no annotation. From the same
// read it notes a rank that failed while the job runs on
// (api.RankFailureAnnotation, once it has run on for
// diagnose.RankFailureGrace), which the diagnosis names.
//
// It reads through the diagnosis's Observer (one read of a Launcher per
// round for both), but writes apart from the diagnosis, under its own
// field owner: progress changes every few seconds of training and is
// applied at once, where the diagnosis's status is written on a change
// of phase or reason, coalesced; one apply of both would rewrite the
// status (and wake every watcher of it) at progress's pace.
type Reconciler struct {
	Client   client.Client
	Logs     kubernetes.Interface
	Runtimes runtimes.RuntimeLookup
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// LauncherLog reads the last lines of the Launcher's log, with the
	// kubelet's timestamps (from Logs when nil; tests give their own).
	LauncherLog func(ctx context.Context, launcher *corev1.Pod) ([]byte, error)
	// Observer reads Launchers' logs, shared with the diagnosis, which
	// takes this controller's reads of a running Launcher (nil: one of
	// its own, reading with LauncherLog or Logs).
	Observer *launcherlog.Observer
	// FinishTimeout bounds Finish (FinishWithin when 0).
	FinishTimeout time.Duration

	mu sync.Mutex
	// finished are the jobs whose final progress is written, forgotten
	// when the job is gone (or after maxFinished of them, the oldest
	// first), so the map does not grow with every job the cluster ran.
	finished map[types.UID]types.NamespacedName
	order    []types.UID
	uids     map[types.NamespacedName]types.UID
	// resumed is what Finish's read found of a job's resume, for the
	// finished status it comes before (taken by Finish at once).
	resumed map[types.UID]api.Resumed
	// paces are the running jobs' waits between reads (Pace).
	paces map[types.NamespacedName]pace
}

// pace is where a running job's reads stand: what the last read said and
// the wait before the next.
type pace struct {
	uid  types.UID
	last string
	wait time.Duration
}

// Pace is the wait before the next read of a running job's Launcher,
// after a read that said seen (ok false: it could not be read) where the
// one before said last and was followed by wait (0: the first read). A
// read that says something new, or a finding that waits on the next read
// (a failed or silent rank), reads again after Interval; otherwise the
// wait doubles, up to QuietInterval for a log that says nothing new and
// UnreadableInterval for one that cannot be read.
func Pace(seen, last string, ok bool, finding bool, wait time.Duration) time.Duration {
	if finding || (ok && seen != last) || wait <= 0 {
		return Interval
	}
	if !ok {
		return min(2*wait, UnreadableInterval)
	}
	return min(2*wait, QuietInterval)
}

// sayOf is what a read says, for Pace: its last line and that line's time.
func sayOf(o diagnose.Observation) string {
	if o.LastAt == nil {
		return o.LastLine
	}
	return o.LastAt.UTC().Format(time.RFC3339Nano) + " " + o.LastLine
}

// paceOf records a read of tj's Launcher and returns the wait before the
// next.
func (r *Reconciler) paceOf(tj *trainer.TrainJob, o diagnose.Observation, ok bool) time.Duration {
	key := client.ObjectKeyFromObject(tj)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.paces == nil {
		r.paces = map[types.NamespacedName]pace{}
	}
	p := r.paces[key]
	if p.uid != tj.UID {
		p = pace{uid: tj.UID}
	}
	seen := p.last
	if ok {
		seen = sayOf(o)
	}
	p.wait = Pace(seen, p.last, ok, o.RankFailure != nil || o.Silent != nil, p.wait)
	p.last = seen
	r.paces[key] = p
	return p.wait
}

// maxFinished bounds the finished jobs remembered.
const maxFinished = 10000

// SetupWithManager registers the controller. It watches TrainJobs, and
// their Launcher pods as they are made, change phase or go
// (wake.LauncherMoved): a job whose Launcher is not running is read when
// its Launcher moves, not polled; a running one is polled at its Pace. Of
// a TrainJob's updates it wakes for those it acts on
// (wake.TrainJobChanged): its spec, Trainer's conditions and runtime
// status, a setting of the job's; not its own writes (progress, rank
// failure, resumed) nor the diagnosis's (status, stacks), which its poll
// of a running job covers, and which made most of its wakes (issue "At the
// control plane's pace"). The pods come from the cache the diagnosis
// watches them through: no watch of its own.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.finished, r.uids = map[types.UID]types.NamespacedName{}, map[types.NamespacedName]types.UID{}
	return ctrl.NewControllerManagedBy(mgr).Named("progress").
		For(&trainer.TrainJob{}, builder.WithPredicates(wake.TrainJobChanged(IgnoredWrites...))).
		Watches(&corev1.Pod{}, wake.ByJobSetName, builder.WithPredicates(wake.LauncherMoved())).
		Complete(r)
}

// IgnoredWrites are the TrainJob annotations whose changes do not wake
// this controller: its own, and the diagnosis's.
var IgnoredWrites = []string{progress.Annotation, api.RankFailureAnnotation, api.ResumedAnnotation, api.StatusAnnotation, api.StacksAnnotation}

// Finish publishes a finishing job's last progress report now. The
// diagnosis calls it before it first writes a finished phase, so the
// report lands before the status that says Succeeded or Failed: whoever
// stops watching at that status (kubectl mpijob watch, the SDK's watch,
// the dashboard) has already seen it. Without it a job that trains for
// less than Interval could finish before this controller ever read its
// Launcher, and the status could win the race with the final report.
//
// It takes at most FinishTimeout: the diagnosis waits for it, and a
// Launcher whose log cannot be served (a node with no kubelet) must not
// hold the job's status back for long.
//
// It reads the Launcher the diagnosis found (launcher, the job's newest;
// nil or not started: nothing to read) and writes what it says as a round
// of this controller would, but it is not this controller's Reconcile:
// the diagnosis has the job and its Launcher in hand, so nothing is
// gathered twice, and no controller runs another's reconcile outside its
// workqueue (issue "At the control plane's pace").
//
// It returns where the program resumed from a checkpoint, when the log
// says so (or an earlier round's read did): the finished status carries
// it, as the annotation written moments before is not yet in the
// status's copy of the job.
func (r *Reconciler) Finish(ctx context.Context, tj *trainer.TrainJob, launcher *corev1.Pod) (*api.Resumed, error) {
	within := r.FinishTimeout
	if within <= 0 {
		within = FinishWithin
	}
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	ended := meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobComplete) || meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobFailed)
	var err error
	if launcher != nil && launcher.Status.Phase != corev1.PodPending {
		now := r.now()
		// A read of this moment: the last lines are what is final.
		o, rerr := r.observer().Observe(ctx, launcher, 0, 0, now, false)
		if rerr != nil {
			ctrl.LoggerFrom(ctx).V(1).Info("cannot read the Launcher's log for the last progress", "pod", launcher.Name, "err", rerr.Error())
		} else {
			err = r.publish(ctx, tj, o, now)
		}
	}
	if ended && err == nil {
		r.markFinished(tj)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	res, ok := r.resumed[tj.UID]
	delete(r.resumed, tj.UID)
	if !ok {
		return nil, err
	}
	return &res, err
}

// publish applies what one read of a job's Launcher says of its progress
// and of where it resumed, each only when it changed.
func (r *Reconciler) publish(ctx context.Context, tj *trainer.TrainJob, o diagnose.Observation, now time.Time) error {
	complete := meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobComplete)
	if p := o.Progress; p != nil {
		if err := r.write(ctx, tj, progress.Status(*p, now, complete)); err != nil {
			return err
		}
	} else if s, ok := progress.FromTrainer(tj.Status.TrainerStatus); ok {
		// The job reports to Trainer's runtime status server instead (or
		// its last report scrolled out of the lines read; then Trainer's
		// field holds what mpijob wrote from it, and nothing changes): the
		// annotation, which OpenShift AI's dashboard and mpijob's job
		// lists read, says the same.
		if old, had := progress.Read(tj.Annotations); !had || !old.SameForTrainer(s) {
			if err := r.writeAnnotation(ctx, tj, s); err != nil {
				return err
			}
		}
	}
	if p := o.Resumed; p != nil {
		if err := r.writeResumed(ctx, tj, ResumedOf(*p)); err != nil {
			return err
		}
	}
	return nil
}

// FinishWithin bounds Finish when FinishTimeout is not set; a read of a
// Launcher's last lines takes milliseconds on a real node.
const FinishWithin = 10 * time.Second

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	tj := &trainer.TrainJob{}
	if err := r.Client.Get(ctx, req.NamespacedName, tj); err != nil {
		if apierrors.IsNotFound(err) {
			r.forgetKey(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	r.mu.Lock()
	_, done := r.finished[tj.UID]
	r.mu.Unlock()
	if tj.DeletionTimestamp != nil {
		r.forget(tj.UID)
		return ctrl.Result{}, nil
	}
	if done {
		return ctrl.Result{}, nil
	}
	spec, runtimeAnnotations, found, err := r.Runtimes.GetShared(ctx, tj)
	if err != nil || !found || !runtimes.IsMPI(spec) {
		return ctrl.Result{}, err
	}
	// The runtime's progress check (the job's own setting wins) also
	// watches each rank: one that stops printing while the others print on.
	progressTimeout := runtimes.ProgressTimeoutOf(runtimeAnnotations, tj.Annotations)
	complete := meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobComplete)
	failed := meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobFailed)
	// Only read (the Launcher's name and phase): the cache's own pods.
	jp, err := jobpods.List(ctx, r.Client, tj, client.UnsafeDisableDeepCopy)
	launchers := jp.Launchers
	if err != nil {
		return ctrl.Result{}, err
	}
	// Only a Launcher the job's JobSet made: a pod with its labels that
	// someone made by hand must not write this job's progress or rank
	// failure (runtimes.JobSetPods).
	js := &jobsetv1alpha2.JobSet{}
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(tj), js); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		js = nil
	}
	if launchers, err = runtimes.JobSetPods(ctx, r.Client, js, launchers); err != nil {
		return ctrl.Result{}, err
	}
	var launcher *corev1.Pod
	if len(launchers) > 0 {
		launcher = &launchers[0] // the newest
	}
	if launcher == nil || launcher.Status.Phase == corev1.PodPending {
		if complete || failed {
			r.markFinished(tj)
		}
		// Nothing to read until the Launcher runs: its start wakes this
		// controller (wake.LauncherMoved), so a job that waits for room is
		// not read every Interval while it waits.
		return ctrl.Result{}, nil
	}
	// Gather: one read of the log, and what it says (diagnose.Observe, the
	// diagnosis's reading too). A read the diagnosis made moments ago
	// serves.
	now := r.now()
	o, err := r.observer().Observe(ctx, launcher, progressTimeout, Interval/2, now, false)
	if err != nil {
		ctrl.LoggerFrom(ctx).V(1).Info("cannot read the Launcher's log for progress", "pod", launcher.Name, "err", err.Error())
		if complete || failed {
			r.markFinished(tj)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{RequeueAfter: r.paceOf(tj, o, false)}, nil
	}
	// Decide and apply.
	if err := r.publish(ctx, tj, o, now); err != nil {
		return ctrl.Result{}, err
	}
	if complete || failed {
		r.markFinished(tj)
		return ctrl.Result{}, nil
	}
	old, _ := api.ReadRankFailure(tj.Annotations)
	switch note, drop := RankPlan(o, old, now); {
	case note != nil:
		if err := r.writeRankFailure(ctx, tj, note); err != nil {
			return ctrl.Result{}, err
		}
	case drop:
		if err := r.clearRankFailure(ctx, tj); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{RequeueAfter: r.paceOf(tj, o, true)}, nil
}

// RankPlan decides the rank-failure annotation of a running job from one
// read of its Launcher's log, given the one it has (old; nil: none): note
// is what to write (nil: nothing new), drop whether to remove it.
//
//   - A rank that failed while the job runs on, for RankFailureGrace
//     (its peers may yet fail the job themselves), is noted; it stays
//     noted.
//   - Else a silent rank is noted; a noted silent rank that printed since
//     is cleared: it was only slow. One whose lines scrolled out of the
//     lines read, with no new one, is still silent.
//
// Why an annotation, which the diagnosis reads back through the API
// server, and not a value in memory: the finding must outlive the read
// that made it. A failed rank's traceback scrolls out of the last
// LogTailLines lines while its peers print on (they wait in a collective
// and keep logging), and a manager restart or a new leader (two replicas)
// starts with no memory; the annotation keeps the finding, with its time,
// for the diagnosis whenever it next runs, and for the next leader.
func RankPlan(o diagnose.Observation, old *api.RankFailure, now time.Time) (note *api.RankFailure, drop bool) {
	if f := o.RankFailure; f != nil && now.Sub(f.At.Time) >= diagnose.RankFailureGrace {
		return f, false
	}
	if old != nil && !old.Silent {
		return nil, false
	}
	if f := o.Silent; f != nil {
		return f, false
	}
	return nil, old != nil && (old.Rank == nil || o.PrintedSince(*old.Rank, old.At.Time))
}

// clearRankFailure removes a silent rank's annotation once it prints
// again (applying no annotations under the same field owner drops it).
func (r *Reconciler) clearRankFailure(ctx context.Context, tj *trainer.TrainJob) error {
	u := api.AnnotationOf(tj, api.RankFailureAnnotation, "")
	u.SetAnnotations(nil)
	if err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(RankFailureFieldManager), client.ForceOwnership); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		}
		return fmt.Errorf("failed to clear the silent rank of %s/%s: %w", tj.Namespace, tj.Name, err)
	}
	return nil
}

// writeRankFailure applies the rank-failure annotation when it is new:
// when what it would write differs from what the job has. Compared as
// written, not decoded: a finding's time comes from the log's stamps with
// their nanoseconds, and the annotation keeps whole seconds, so a decoded
// finding never equals a fresh one and a silent rank was written again at
// every read of its Launcher (each write through Trainer's and Kueue's
// webhooks, and a wake of every TrainJob watcher).
func (r *Reconciler) writeRankFailure(ctx context.Context, tj *trainer.TrainJob, f *api.RankFailure) error {
	raw, err := f.Encode()
	if err != nil {
		return err
	}
	if tj.Annotations[api.RankFailureAnnotation] == raw {
		return nil
	}
	applied, err := r.applyAnnotation(ctx, tj, api.RankFailureAnnotation, raw, RankFailureFieldManager)
	if err != nil {
		return fmt.Errorf("failed to note the failed rank of %s/%s: %w", tj.Namespace, tj.Name, err)
	}
	if applied {
		ctrl.LoggerFrom(ctx).Info("a rank failed while the job runs on", "error", f.Error)
	}
	return nil
}

// applyAnnotation applies one annotation of the job under its own field
// owner; a job that is gone or changed meanwhile is left (applied false):
// the next round sees it again.
func (r *Reconciler) applyAnnotation(ctx context.Context, tj *trainer.TrainJob, key, value, owner string) (applied bool, err error) {
	u := api.AnnotationOf(tj, key, value)
	if err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(owner), client.ForceOwnership); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

// ResumedOf is what a report that says the program resumed notes on the job.
func ResumedOf(p progress.Point) api.Resumed {
	r := p.Resumed
	out := api.Resumed{Epoch: r.Epoch, Step: r.Step, AgeSeconds: r.AgeSeconds, From: r.From, At: metav1.NewTime(p.Time.Truncate(time.Second))}
	if p.TotalEpochs != nil {
		out.TotalEpochs = *p.TotalEpochs
	}
	return out
}

// writeResumed applies the resumed annotation when it is new: each
// attempt that resumes says so once, at its start.
func (r *Reconciler) writeResumed(ctx context.Context, tj *trainer.TrainJob, res api.Resumed) error {
	r.mu.Lock()
	if r.resumed == nil {
		r.resumed = map[types.UID]api.Resumed{}
	}
	r.resumed[tj.UID] = res
	r.mu.Unlock()
	raw, err := res.Encode()
	if err != nil {
		return err
	}
	// Compared as written, as writeRankFailure does.
	if tj.Annotations[api.ResumedAnnotation] == raw {
		return nil
	}
	applied, err := r.applyAnnotation(ctx, tj, api.ResumedAnnotation, raw, ResumedFieldManager)
	if err != nil {
		return fmt.Errorf("failed to note where %s/%s resumed: %w", tj.Namespace, tj.Name, err)
	}
	if applied {
		ctrl.LoggerFrom(ctx).Info("the program resumed from a checkpoint", "epoch", res.Epoch, "step", res.Step)
	}
	return nil
}

// observer is the shared Observer, or one of this controller's own.
func (r *Reconciler) observer() *launcherlog.Observer {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.Observer == nil {
		r.Observer = &launcherlog.Observer{Logs: r.Logs}
		if r.LauncherLog != nil {
			read := r.LauncherLog
			r.Observer.Read = func(ctx context.Context, p *corev1.Pod) (string, error) {
				b, err := read(ctx, p)
				return string(b), err
			}
		}
	}
	return r.Observer
}

func (r *Reconciler) markFinished(tj *trainer.TrainJob) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.finished == nil {
		r.finished, r.uids = map[types.UID]types.NamespacedName{}, map[types.NamespacedName]types.UID{}
	}
	if _, ok := r.finished[tj.UID]; ok {
		return
	}
	key := client.ObjectKeyFromObject(tj)
	delete(r.paces, key)
	r.finished[tj.UID], r.uids[key] = key, tj.UID
	r.order = append(r.order, tj.UID)
	for len(r.order) > maxFinished {
		r.forgetLocked(r.order[0])
	}
}

// forget drops a job that is being deleted from the finished ones.
func (r *Reconciler) forget(uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forgetLocked(uid)
}

func (r *Reconciler) forgetLocked(uid types.UID) {
	key, ok := r.finished[uid]
	if !ok {
		return
	}
	delete(r.finished, uid)
	if r.uids[key] == uid {
		delete(r.uids, key)
	}
	r.order = slices.DeleteFunc(r.order, func(u types.UID) bool { return u == uid })
}

// forgetKey drops a job that is gone, by its name.
func (r *Reconciler) forgetKey(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.paces, key)
	if uid, ok := r.uids[key]; ok {
		r.forgetLocked(uid)
	}
}

// remembered is how many finished jobs the controller remembers.
func (r *Reconciler) remembered() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.finished)
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// write applies the annotation when its content (all but the time)
// changed, and Trainer's status.trainerStatus when it does not say the
// same (progress/trainer.go: the two agree).
func (r *Reconciler) write(ctx context.Context, tj *trainer.TrainJob, s progress.TrainerStatus) error {
	if err := r.writeAnnotation(ctx, tj, s); err != nil {
		return err
	}
	return r.writeTrainerStatus(ctx, tj, s)
}

func (r *Reconciler) writeAnnotation(ctx context.Context, tj *trainer.TrainJob, s progress.TrainerStatus) error {
	if old, ok := progress.Read(tj.Annotations); ok {
		old.LastUpdatedTime, s.LastUpdatedTime = "", ""
		if same(old, s) {
			return nil
		}
		s.LastUpdatedTime = r.now().UTC().Format(time.RFC3339)
	}
	raw, err := json.Marshal(s)
	if err != nil {
		return err
	}
	u := api.AnnotationOf(tj, progress.Annotation, string(raw))
	if err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		}
		return fmt.Errorf("failed to write the progress of %s/%s: %w", tj.Namespace, tj.Name, err)
	}
	return nil
}

// writeTrainerStatus applies the report to status.trainerStatus, the
// field of Trainer's own progress (its TrainJobStatus feature), unless it
// says the same already but for the time.
func (r *Reconciler) writeTrainerStatus(ctx context.Context, tj *trainer.TrainJob, s progress.TrainerStatus) error {
	want := s.ToTrainer(r.now())
	if progress.TrainerSame(tj.Status.TrainerStatus, want) {
		return nil
	}
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(want)
	if err != nil {
		return err
	}
	u := api.ApplyObjectOf(tj)
	if err := unstructured.SetNestedMap(u.Object, raw, "status", "trainerStatus"); err != nil {
		return err
	}
	if err := r.Client.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		}
		return fmt.Errorf("failed to write Trainer's progress (status.trainerStatus) of %s/%s: %w", tj.Namespace, tj.Name, err)
	}
	return nil
}

func same(a, b progress.TrainerStatus) bool {
	return equality.Semantic.DeepEqual(a, b)
}
