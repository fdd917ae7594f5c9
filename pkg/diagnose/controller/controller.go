package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/diagnose"
	"github.com/mpijob/mpijob/pkg/jobpods"
	"github.com/mpijob/mpijob/pkg/launcherlog"
	"github.com/mpijob/mpijob/pkg/logs"
	"github.com/mpijob/mpijob/pkg/metrics"
	"github.com/mpijob/mpijob/pkg/placement"
	"github.com/mpijob/mpijob/pkg/progress"
	"github.com/mpijob/mpijob/pkg/queue"
	"github.com/mpijob/mpijob/pkg/runtimes"
	"github.com/mpijob/mpijob/pkg/stacks"
	"github.com/mpijob/mpijob/pkg/wake"
)

// Reconciler keeps the mpijob Status of every MPI TrainJob.
type Reconciler struct {
	Client client.Client
	// Reader reads what the cache does not hold (events, when a rule
	// needs them).
	Reader client.Reader
	// Capacity reads every pod from a cache (the manager's, whose
	// TrimPod keeps what free capacity counts); nil: read the pods that
	// CapacityPods selects with Reader.
	Capacity client.Reader
	// Visibility gives queue positions in Kueue's own order (nil:
	// computed from the cached Workloads).
	Visibility queue.PendingLister
	// Queues answers where queued jobs stand, from one shared read of
	// Kueue's Workloads per few seconds (nil: made from Reader).
	Queues *queue.Snapshots
	Logs   kubernetes.Interface
	// Observer reads Launchers' logs, shared with the progress controller
	// (nil: one of its own, over Logs).
	Observer *launcherlog.Observer
	// Stacks takes a running job's stacks (stacks.Collect as the manager);
	// nil: never.
	Stacks func(ctx context.Context, namespace string, pods []stacks.Pod) (stacks.Result, error)
	// Recorder emits the Events that are not a transition's (a job ended).
	Recorder events.EventRecorder
	// Instance is the Events' reporting instance (the manager's pod).
	Instance string
	Runtimes runtimes.RuntimeLookup
	// Now is the clock (tests set it).
	Now func() time.Time
	// BeforeFinished is called before a job's first status of a finished
	// phase is written (nil: nothing). The manager gives the progress
	// controller's Finish, so the job's last progress report is on the
	// TrainJob before the status that ends every watch. Its error is
	// logged and the status written anyway: a late report must not hold
	// back the phase.
	// It is given the job's newest Launcher as gathered (nil: none), so
	// it reads nothing the diagnosis has already read. It returns where
	// the program resumed from a checkpoint, if its log says so, for the
	// finished status.
	BeforeFinished func(ctx context.Context, tj *trainer.TrainJob, launcher *corev1.Pod) (*api.Resumed, error)
	// MaxRemembered bounds what the diagnosis remembers of jobs (10,000
	// when 0): beyond it the finished job written to longest ago is
	// forgotten, and starts again from its written status (the cache has
	// long caught up with it). Running jobs are never forgotten: the
	// cluster's capacity bounds them.
	MaxRemembered int

	// seen remembers, per TrainJob, the last Status diagnosed and the last
	// written: the cache lags behind our own writes, and diagnosing from an
	// older Status would forget what was seen (a Launcher that ran and was
	// deleted) or report a transition twice. Entries go when their TrainJob
	// is gone, and finished jobs' go first beyond MaxRemembered (a cluster
	// keeps finished TrainJobs for as long as nobody deletes them).
	mu         sync.Mutex
	queuesOnce sync.Once
	seen       map[types.NamespacedName]*diagnose.Memory
	// events shares reads of Events among jobs (EventReadTTL).
	events eventReads
}

// recall is what the manager remembers of tj, or a fresh memory (ok false).
func (r *Reconciler) recall(tj *trainer.TrainJob) (m diagnose.Memory, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if got, found := r.seen[client.ObjectKeyFromObject(tj)]; found && got.UID == tj.UID {
		return *got, true
	}
	return diagnose.Memory{UID: tj.UID, FirstSeen: r.now()}, false
}

func (r *Reconciler) store(tj *trainer.TrainJob, m diagnose.Memory) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = map[types.NamespacedName]*diagnose.Memory{}
	}
	key := client.ObjectKeyFromObject(tj)
	r.seen[key] = &m
	limit := r.MaxRemembered
	if limit <= 0 {
		limit = defaultMaxRemembered
	}
	if len(r.seen) > limit {
		r.forgetOldestFinishedLocked(key)
	}
}

// defaultMaxRemembered is MaxRemembered when it is not set.
const defaultMaxRemembered = 10000

// forgetOldestFinishedLocked forgets the finished job written to (or first
// seen) longest ago, other than keep.
func (r *Reconciler) forgetOldestFinishedLocked(keep types.NamespacedName) {
	var oldest types.NamespacedName
	var at time.Time
	for k, m := range r.seen {
		if k == keep || !m.Diagnosed.Phase.Finished() {
			continue
		}
		t := m.WroteAt
		if t.IsZero() {
			t = m.FirstSeen
		}
		if at.IsZero() || t.Before(at) {
			oldest, at = k, t
		}
	}
	if !at.IsZero() {
		delete(r.seen, oldest)
	}
}

func (r *Reconciler) forget(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.seen, key)
}

// IgnoredWrites are the TrainJob annotations whose changes do not wake
// the diagnosis (wake.TrainJobChanged): its status, and the progress it
// never reads. The stacks it keeps (in the JobStatus; on the TrainJob for
// a job an older manager wrote) do wake it: the next round adds what they
// say to the message (takeStacks).
var IgnoredWrites = []string{api.StatusAnnotation, progress.Annotation}

// SetupWithManager registers the controller: it watches TrainJobs, their
// JobSets and the JobSets' pods.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("diagnosis").
		// Jobs are diagnosed four at a time (one job's rounds never run
		// side by side): with one, 500 starting jobs' statuses trailed
		// their pods by half a minute (bench/scale).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		// Not its own status writes nor the progress annotation, which it
		// never reads: at a running job's pace they made most of its
		// wakes. The rank-failure annotation the progress controller
		// notes, and the stacks it keeps, do wake it.
		For(&trainer.TrainJob{}, builder.WithPredicates(wake.TrainJobChanged(IgnoredWrites...))).
		// A job's JobSet and pods change in bursts as it starts or ends
		// (about forty updates for 8 Workers): each burst makes one round
		// once it has settled for wake.Settle, not one round an update.
		// A pod that goes wakes it at once.
		Watches(&jobsetv1alpha2.JobSet{}, wake.Settling(handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &trainer.TrainJob{}), wake.Settle)).
		// Its own status writes to the JobStatus do not wake it; the
		// stacks it keeps there do, and so does a JobStatus deleted while
		// its job is there, which it writes again (wake.StacksOrGone).
		Watches(&api.JobStatus{}, handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &trainer.TrainJob{}), builder.WithPredicates(wake.StacksOrGone())).
		Watches(&corev1.Pod{}, wake.Settling(wake.ByJobSetName, wake.Settle)).
		Complete(r)
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	tj := &trainer.TrainJob{}
	if err := r.Client.Get(ctx, req.NamespacedName, tj); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if r.namespaceTerminating(ctx, tj.Namespace) {
		// The job goes with its namespace, and its JobSet and pods may go
		// first: a diagnosis now writes a status nobody reads ("Trainer
		// has not created the job's pods yet") through Trainer's and
		// Kueue's webhooks and controllers, for every job of the
		// namespace (seen: 94 of 500 jobs rewritten while bench/scale's
		// namespace was deleted).
		return ctrl.Result{}, nil
	}
	log := ctrl.LoggerFrom(ctx).WithValues("trainJob", klog.KObj(tj))
	ctx = ctrl.LoggerInto(ctx, log)
	return r.reconcile(ctx, tj)
}

// namespaceTerminating reports whether namespace is being deleted (read
// from the manager's cache; an unreadable one is taken as not).
func (r *Reconciler) namespaceTerminating(ctx context.Context, namespace string) bool {
	ns := &corev1.Namespace{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: namespace}, ns); err != nil {
		return false
	}
	return ns.DeletionTimestamp != nil || ns.Status.Phase == corev1.NamespaceTerminating
}

// reconcile is gather → decide → apply: gather reads what the job's
// diagnosis needs, decide (pure) turns it into a Plan, apply carries the
// Plan out.
func (r *Reconciler) reconcile(ctx context.Context, tj *trainer.TrainJob) (ctrl.Result, error) {
	k, ok, err := r.recallJob(ctx, tj)
	if err != nil || !ok {
		return ctrl.Result{}, err
	}
	now := r.now()
	if p, done := diagnose.Settled(tj, k, now); done {
		return r.apply(ctx, tj, k, now, p, nil)
	}
	in, err := r.gather(ctx, tj, k, now)
	if err != nil {
		return ctrl.Result{}, err
	}
	p := diagnose.Decide(tj, k, in)
	if diagnose.Generic(p.Status) {
		ctrl.LoggerFrom(ctx).V(1).Info("failure explained by the exit code only", "logBytes", len(in.LauncherLog), "logTail", logTail(in.LauncherLog))
	}
	return r.apply(ctx, tj, k, now, p, in.NewestLauncher())
}

// recallJob reads the job's runtime, the status on the object and what
// the manager remembers of it; ok is false for a job that is not an MPI
// job (nothing to do).
func (r *Reconciler) recallJob(ctx context.Context, tj *trainer.TrainJob) (k diagnose.Known, ok bool, err error) {
	spec, runtimeAnnotations, found, err := r.Runtimes.GetShared(ctx, tj)
	if err != nil || !found || !runtimes.IsMPI(spec) {
		return diagnose.Known{}, false, err
	}
	k = diagnose.Known{Spec: spec, RuntimeAnnotations: runtimeAnnotations}
	// The status written last: the job's JobStatus (from the cache), or,
	// for a job an older manager wrote, the TrainJob's annotation.
	js := &api.JobStatus{}
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(tj), js); err == nil {
		api.JoinStatus(&tj.ObjectMeta, js)
	} else if !apierrors.IsNotFound(err) {
		return diagnose.Known{}, false, fmt.Errorf("failed to read the JobStatus of %s/%s: %w", tj.Namespace, tj.Name, err)
	}
	k.OnObject, k.HadOnObject, err = api.ReadStatus(tj.Annotations)
	if err != nil {
		ctrl.LoggerFrom(ctx).V(2).Info("ignoring unreadable previous status", "err", err)
	}
	k.Mem, k.Remembered = r.recall(tj)
	return k, true, nil
}

// gather reads everything Diagnose looks at. Costly reads (Events, logs,
// free capacity) happen only when a rule needs them.
func (r *Reconciler) gather(ctx context.Context, tj *trainer.TrainJob, k diagnose.Known, now time.Time) (diagnose.Input, error) {
	log := ctrl.LoggerFrom(ctx)
	in := diagnose.Input{TrainJob: tj, Now: now}
	if st, err := api.ReadStackSnapshot(tj.Annotations); err == nil {
		in.Stacks = st
	}
	if shape, err := runtimes.ShapeOf(tj, k.Spec); err == nil {
		for _, c := range shape.WorkerPod.Containers {
			if c.Name == api.NodeContainer {
				in.WorkerImage = c.Image
			}
		}
		in.SlotsPerWorker, in.GPUsPerWorker = shape.SlotsPerWorker, runtimes.GPUsOf(&shape.WorkerPod)
		in.ShapeWorkers = shape.Workers
	}
	if prev, ok := k.Previous(); ok {
		in.Previous = &prev
	}
	js := &jobsetv1alpha2.JobSet{}
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(tj), js); err == nil {
		in.JobSet = js
	} else if !apierrors.IsNotFound(err) {
		return in, err
	}
	// The cache's own pods, not copies: decide only reads them (every
	// diagnosis test checks that Diagnose and decide leave their input as
	// it was: leavesInput in diagnoseBoth and TestDecide).
	pods, err := runtimes.ListJobSetPods(ctx, r.Client, tj.Namespace, tj.Name, client.UnsafeDisableDeepCopy)
	if err != nil {
		return in, err
	}
	// Only the JobSet's own pods: one with its labels that someone made
	// by hand is not the job's (runtimes.JobSetPods).
	owned, err := runtimes.JobSetPods(ctx, r.Client, in.JobSet, pods.Items)
	if err != nil {
		return in, err
	}
	// Launchers and Workers as every interface splits them (jobpods.Split).
	split := jobpods.Split(owned)
	in.Launcher, in.Workers = split.Launchers, split.Workers
	// Pods that do not appear (quota, admission) leave FailedCreate Events
	// on their Job. Look for them only once pods are overdue, so a job
	// that starts normally costs no Event reads.
	if in.NeedsFailedCreate() {
		in.Events = append(in.Events, r.jobEvents(ctx, tj, "FailedCreate", "Job")...)
	}
	// A pod that cannot pull its image may wait for the local cluster's
	// image builder, whose Events on the pod say so (read only while a
	// pull fails).
	if anyPullFailed(in) {
		evs := &corev1.EventList{}
		if err := r.Reader.List(ctx, evs, client.InNamespace(tj.Namespace), client.MatchingFieldsSelector{
			Selector: fields.OneTermEqualSelector("source", diagnose.BuilderComponent)}); err == nil {
			for _, e := range evs.Items {
				if api.IsJobObject(tj.Name, "Pod", e.InvolvedObject.Name) {
					in.Events = append(in.Events, e)
				}
			}
		}
	}
	// A placed Worker that does not start may have volumes the kubelet
	// cannot mount: its FailedMount Events say why.
	if in.NeedsFailedMount() {
		in.Events = append(in.Events, r.jobEvents(ctx, tj, "FailedMount", "Pod")...)
	}
	// A Worker that stopped while the Launcher runs is gone at once: the
	// kubelet's "Killing" Event still names its pod and node.
	if in.NeedsKilling() {
		in.Events = append(in.Events, r.jobEvents(ctx, tj, "Killing", "Pod")...)
	}
	// A failed job's pods may be gone (JobSet removes a failed job's
	// children): their Warning "Failed" Events still say why a container
	// did not start.
	if in.NeedsFailedEvents() {
		for _, e := range r.jobEvents(ctx, tj, "Failed", "Pod") {
			if strings.HasPrefix(e.InvolvedObject.Name, tj.Name+"-"+api.WorkerJob+"-") {
				in.Events = append(in.Events, e)
			}
		}
	}
	if p, errs := runtimes.ParsePolicy(k.RuntimeAnnotations); len(errs) == 0 {
		in.GangTimeout = p.GangTimeout
	}
	in.ProgressTimeout = runtimes.ProgressTimeoutOf(k.RuntimeAnnotations, tj.Annotations)
	in.EndStuckAfter = runtimes.EndStuckAfterOf(k.RuntimeAnnotations, tj.Annotations)
	// The Launcher's log, read once (ReadLauncherLog, Observe): a failed
	// job's MPI errors; and, for a running job with a progress timeout,
	// its last line and that line's time, which tell a job that makes no
	// progress.
	if failed, watch := in.NeedsLauncherLog(); failed || watch {
		if o, ok := r.observe(ctx, in.NewestLauncher(), in.ProgressTimeout, now, failed); ok {
			if failed {
				in.LauncherLog = o.Tail
			}
			if watch {
				in.LastOutput, in.LastLine = o.LastAt, o.LastLine
				in.SlowRank = diagnose.FindSlowRank(o.Steps, runtimes.SlowRankAfterOf(k.RuntimeAnnotations, tj.Annotations), now)
			}
		}
	}
	// A Launcher killed with SIGKILL that no container limit explains:
	// the kubelet records the node's own OOM kills on the Node.
	if in.NeedsNodeOOM() {
		// Only where the kubelet records a Node's Events (the default
		// namespace, which tenants cannot write): a tenant's Event about a
		// node in its own namespace is not the node's (nodeEventTrusted
		// checks again).
		if items, err := r.events.list(ctx, r.Reader, metav1.NamespaceDefault, "SystemOOM", now); err == nil {
			for _, e := range items {
				if e.InvolvedObject.Kind == "Node" {
					in.Events = append(in.Events, e)
				}
			}
		}
	}
	// Free capacity explains why the scheduler cannot place Workers (read
	// only after the scheduler said so), or what differs on a slow rank's
	// node.
	if in.NeedsCapacity() {
		in.Nodes, in.AllNodes = r.freeCapacity(ctx)
	}
	if q, err := r.queues().Lookup(ctx, tj.Namespace, tj.Labels, tj.UID); err != nil {
		log.V(1).Info("cannot read the job's queue", "err", err)
	} else if q != nil {
		in.Queue = &diagnose.Queue{Name: q.Queue, Admitted: q.Admitted, Position: q.Position, Pending: q.Pending, Message: strings.TrimSuffix(q.Message, "."),
			EvictedPodsReadyTimeout: q.EvictedPodsReadyTimeout, Workload: q.Workload, Inactive: q.Inactive,
			Preempted: q.Preempted, PreemptedWhy: q.Preemption.Why, Preemptions: q.Preemptions}
		if q.Preempted && q.Preemption.ByJobUID != "" {
			in.Queue.PreemptedBy = r.jobNamed(ctx, tj.Namespace, q.Preemption.ByJobUID)
		}
	}
	return in, nil
}

// jobNamed is the name of the TrainJob with uid in namespace ns, "" when
// none there has it: the job Kueue preempted another for is named only to
// the tenants of its own namespace.
func (r *Reconciler) jobNamed(ctx context.Context, ns string, uid types.UID) string {
	l := &trainer.TrainJobList{}
	if err := r.Reader.List(ctx, l, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
		return ""
	}
	for i := range l.Items {
		if l.Items[i].UID == uid {
			return l.Items[i].Name
		}
	}
	return ""
}

// apply carries out p: it writes the status first, then remembers what was
// diagnosed and written, emits the transition's Event and metrics, and
// last suspends the job when p says so. A failed write changes nothing,
// so the next round sees the same transition again and reports it then.
// launcher is the job's newest Launcher as gathered (nil: none, or not
// gathered), for BeforeFinished.
func (r *Reconciler) apply(ctx context.Context, tj *trainer.TrainJob, k diagnose.Known, now time.Time, p diagnose.Plan, launcher *corev1.Pod) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	mem := k.Mem
	if p.Write {
		if was, _ := k.Written(); r.BeforeFinished != nil && p.Status.Phase.Finished() && !was.Phase.Finished() {
			res, err := r.BeforeFinished(ctx, tj, launcher)
			if err != nil {
				log.Info("could not publish the last progress report before the finished status", "err", err.Error())
			}
			if res != nil {
				p.Status.Resumed = res
			}
		}
		if err := r.write(ctx, tj, p.Status); err != nil {
			return ctrl.Result{}, err
		}
		s := p.Status
		mem.Written, mem.WroteAt = &s, now
	}
	if p.TakeStacks && r.Stacks != nil {
		mem.StacksTried = now
		r.takeStacks(ctx, tj, p.Status, now)
	}
	// Each transition's Event and metrics go out once the status that
	// records it is written (p.Emit); until then they are kept in memory.
	mem.Pending, mem.Look = p.Pending, p.Look
	if p.Remember {
		mem.Diagnosed = p.Status
		r.store(tj, mem)
	}
	for _, t := range p.Emit {
		if err := r.emit(ctx, tj, t, now); err != nil {
			log.Info("could not write a transition's Event", "reason", t.Event.Reason, "err", err.Error())
		}
		if !t.Recovered {
			metrics.Transition(tj.Namespace, api.RuntimeOf(tj.Labels, tj.Spec.RuntimeRef.Name), t.Before, t.Status, tj.CreationTimestamp.Time, t.Placed, t.At)
			log.V(1).Info("status", "phase", t.Status.Phase, "reason", t.Status.Reason)
		}
	}
	if p.Suspend {
		// The Workers that were placed hold their nodes while the rest
		// cannot be placed: suspending the job stops them.
		patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}},"spec":{"suspend":true}}`, api.SuspendedByAnnotation, api.SuspendedByGangTimeout))
		if err := r.Client.Patch(ctx, tj, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(api.FieldManager)); err != nil {
			return ctrl.Result{}, fmt.Errorf("failed to suspend %s/%s after its gang-scheduling timeout: %w", tj.Namespace, tj.Name, err)
		}
		log.Info("suspended after the gang-scheduling timeout", "message", p.Status.Message)
	}
	if p.End != nil {
		if err := r.end(ctx, tj, *p.End); err != nil {
			return ctrl.Result{}, err
		}
		// Look again soon: its pods stop and Trainer marks it Failed.
		return ctrl.Result{RequeueAfter: diagnose.WaitingRefresh}, nil
	}
	return ctrl.Result{RequeueAfter: p.Requeue}, nil
}

// emit writes a transition's Event, at once and named by the transition
// (diagnose.EventName): an Event that exists already (a manager before
// this one wrote it) is left as it is, so each transition has one.
func (r *Reconciler) emit(ctx context.Context, tj *trainer.TrainJob, t diagnose.Transition, now time.Time) error {
	ev := &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: t.Name, Namespace: tj.Namespace},
		EventTime:  metav1.NewMicroTime(now),
		Regarding: corev1.ObjectReference{APIVersion: trainer.GroupVersion.String(), Kind: "TrainJob", Namespace: tj.Namespace, Name: tj.Name,
			UID: tj.UID, ResourceVersion: tj.ResourceVersion},
		Type: t.Event.Type, Reason: t.Event.Reason, Note: t.Event.Note, Action: "Diagnose",
		ReportingController: api.FieldManager, ReportingInstance: r.Instance,
	}
	if ev.ReportingInstance == "" {
		ev.ReportingInstance = api.FieldManager
	}
	if err := r.Client.Create(ctx, ev); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// takeStacks takes a stuck job's stacks once and keeps what they say in
// its JobStatus (keepStacks), which brings the diagnosis back to add it to
// the message. A failure is kept too, so it is not tried again for the
// same finding; it changes nothing else.
func (r *Reconciler) takeStacks(ctx context.Context, tj *trainer.TrainJob, s api.Status, now time.Time) {
	log := ctrl.LoggerFrom(ctx)
	snap := api.StackSnapshot{At: metav1.NewTime(now), Reason: s.Reason}
	jp, err := jobpods.ListLive(ctx, r.Reader, tj)
	if err == nil {
		ctx, cancel := context.WithTimeout(ctx, stacksTimeout)
		var res stacks.Result
		res, err = r.Stacks(ctx, tj.Namespace, stacks.PodsOf(jp))
		cancel()
		snap.Contrast = res.Contrast
		for i, g := range res.Groups {
			if i == api.MaxStackGroups {
				break
			}
			snap.Groups = append(snap.Groups, g.Headline)
		}
	}
	if err != nil {
		snap.Error = err.Error()
		log.Info("could not take the stacks of a stuck job", "err", snap.Error)
	}
	raw, err := snap.Encode()
	if err != nil {
		return
	}
	if err := r.keepStacks(ctx, tj, raw); err != nil {
		log.Info("could not keep the stacks of a stuck job", "err", err.Error())
	}
}

// keepStacks keeps raw (an encoded StackSnapshot) in the job's JobStatus,
// beside the status it was taken for: a write there wakes neither Trainer
// nor Kueue, where the TrainJob's annotation passed their webhooks and
// woke their controllers. The JobStatus's change brings the diagnosis back
// (SetupWithManager: stacksChanged). A job whose status an older manager
// wrote on the TrainJob (no JobStatus yet) keeps them there, as that
// manager did.
func (r *Reconciler) keepStacks(ctx context.Context, tj *trainer.TrainJob, raw string) error {
	patch, err := api.JobStatusStacksPatch(raw)
	if err != nil {
		return err
	}
	js := &api.JobStatus{ObjectMeta: metav1.ObjectMeta{Namespace: tj.Namespace, Name: tj.Name}}
	err = r.Client.Patch(ctx, js, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(api.FieldManager))
	if !apierrors.IsNotFound(err) {
		return err
	}
	return r.annotate(ctx, tj, api.StacksAnnotation, raw)
}

// annotate sets one annotation of tj, key to raw, with a merge patch under
// the manager's field owner.
func (r *Reconciler) annotate(ctx context.Context, tj *trainer.TrainJob, key, raw string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: raw}}})
	if err != nil {
		return err
	}
	return r.Client.Patch(ctx, tj, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(api.FieldManager))
}

// stacksTimeout bounds taking a stuck job's stacks.
const stacksTimeout = 20 * time.Second

// end ends a job that can never finish: it records why on the TrainJob
// (EndedByAnnotation, which the diagnosis reads from then on), then gives
// each running Job of its JobSet a deadline that has passed. The Job
// controller stops their pods (their logs stay in the log store), JobSet
// fails the job by the runtimes' failure policy rule for DeadlineExceeded,
// and Trainer marks the TrainJob Failed.
func (r *Reconciler) end(ctx context.Context, tj *trainer.TrainJob, e api.Ended) error {
	raw, err := e.Encode()
	if err != nil {
		return err
	}
	if err := r.annotate(ctx, tj, api.EndedByAnnotation, raw); err != nil {
		return fmt.Errorf("failed to record why %s/%s is ended: %w", tj.Namespace, tj.Name, err)
	}
	jobs := &batchv1.JobList{}
	if err := r.Reader.List(ctx, jobs, client.InNamespace(tj.Namespace), client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: tj.Name}); err != nil {
		return fmt.Errorf("failed to list the Jobs of %s/%s to end it: %w", tj.Namespace, tj.Name, err)
	}
	js := &jobsetv1alpha2.JobSet{}
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(tj), js); err != nil {
		return client.IgnoreNotFound(err)
	}
	for i := range jobs.Items {
		j := &jobs.Items[i]
		if !metav1.IsControlledBy(j, js) || jobDone(j) {
			continue
		}
		if err := r.Client.Patch(ctx, j, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"activeDeadlineSeconds":1}}`)), client.FieldOwner(api.FieldManager)); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("failed to end Job %s/%s of %s: %w", j.Namespace, j.Name, tj.Name, err)
		}
	}
	if r.Recorder != nil {
		r.Recorder.Eventf(tj, nil, corev1.EventTypeWarning, "Ended", "End", "mpijob-manager ended the job: %s for longer than %s (%s). %s",
			e.Reason, e.After, runtimes.EndStuckAfterAnnotation, e.Message)
	}
	ctrl.LoggerFrom(ctx).Info("ended a job that could never finish", "reason", e.Reason, "after", e.After)
	return nil
}

// jobDone reports a Job that has already finished.
func jobDone(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// write applies the job's JobStatus under the manager's field owner
// (pkg/api/jobstatus.go): a write that wakes neither Trainer nor Kueue,
// where one on the TrainJob passed their webhooks and woke their
// controllers.
func (r *Reconciler) write(ctx context.Context, tj *trainer.TrainJob, s api.Status) error {
	now := metav1.NewTime(r.now())
	s.ObservedTime = &now
	raw, err := s.Encode()
	if err != nil {
		return err
	}
	u := api.JobStatusOf(tj, s.Phase, s.Reason, raw)
	if err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(api.FieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("failed to write the status of %s/%s: %w", tj.Namespace, tj.Name, err)
	}
	return nil
}

// ObservationMaxAge is how old a read of a running Launcher's log the
// diagnosis takes for its last line (the progress controller reads one
// every 10 s): the progress timeout it is judged against is minutes.
const ObservationMaxAge = 20 * time.Second

// observe is what the Launcher's log says (the shared Observer: a running
// Launcher's last read when it is young enough, a failed job's lines
// read once). A failed job's lines (tail) are tried three times, half a
// second apart: a failed Launcher's log can lag its pod's end. A running
// Launcher's is tried once: a log that cannot be read (a pod on a node
// with no kubelet to serve it) must not hold a reconcile worker every
// round. ok is false when it could not be read.
func (r *Reconciler) observe(ctx context.Context, p *corev1.Pod, progressTimeout time.Duration, now time.Time, tail bool) (diagnose.Observation, bool) {
	if p == nil || (r.Logs == nil && r.Observer == nil) {
		return diagnose.Observation{}, false
	}
	r.mu.Lock()
	if r.Observer == nil {
		r.Observer = &launcherlog.Observer{Logs: r.Logs}
	}
	obs := r.Observer
	r.mu.Unlock()
	maxAge := ObservationMaxAge
	if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
		maxAge = launcherlog.KeepFor // its log no longer changes
	} else if tail {
		maxAge = 0 // a failed job's Launcher still running: its last lines
	}
	tries := 1
	if tail {
		tries = 3
	}
	for try := 0; try < tries; try++ {
		o, err := obs.Observe(ctx, p, progressTimeout, maxAge, now, tail)
		if err == nil {
			return o, true
		}
		log := ctrl.LoggerFrom(ctx)
		if !tail {
			log = log.V(1) // a running Launcher's: said again every round
		}
		log.Info("cannot read the Launcher's log", "pod", p.Name, "try", try+1, "err", err.Error())
		if try+1 == tries {
			break
		}
		select {
		case <-ctx.Done():
			return diagnose.Observation{}, false
		case <-time.After(500 * time.Millisecond):
		}
	}
	return diagnose.Observation{}, false
}

// freeCapacity is every schedulable node's allocatable minus the requests
// of the pods bound to it, and every node as it is.
func (r *Reconciler) freeCapacity(ctx context.Context) ([]diagnose.NodeFree, []corev1.Node) {
	// Every pod of the cluster, for each pending job's round: only read,
	// so not copied; unbound and finished pods are skipped by
	// placement.Free. A failed read leaves the diagnosis without free
	// capacity (and without the nodes, when they could not be read).
	podReader, podOpts := r.Capacity, []client.ListOption{client.UnsafeDisableDeepCopy}
	if r.Capacity == nil {
		podReader, podOpts = r.Reader, []client.ListOption{client.MatchingFieldsSelector{Selector: diagnose.CapacityPods}}
	}
	nodes, free, _ := placement.ReadFree(ctx, r.Client, podReader, podOpts...)
	return free, nodes
}

// queueSnapshotTTL is how long one read of Kueue's Workloads serves every
// queued job's diagnosis.
const queueSnapshotTTL = 5 * time.Second

// QueueSnapshots is the shared read of Kueue's queues the diagnosis uses,
// made on first use: others that ask where jobs stand share it.
func (r *Reconciler) QueueSnapshots() *queue.Snapshots { return r.queues() }

func (r *Reconciler) queues() *queue.Snapshots {
	r.queuesOnce.Do(func() {
		if r.Queues == nil {
			// Workloads and LocalQueues come from the manager's cache.
			var vis queue.PendingLister
			if r.Visibility != nil {
				vis = countedVisibility{r.Visibility}
			}
			r.Queues = &queue.Snapshots{Reader: r.Client, TTL: queueSnapshotTTL, Visibility: vis,
				OnVisibilityError: func(err error) {
					ctrl.Log.WithName("queue").Info("Kueue's visibility API does not answer; queue positions are computed from the Workloads until it does", "err", err.Error())
				}}
		}
	})
	return r.Queues
}

// anyPullFailed reports whether a container of the job's pods failed to
// pull its image. It runs at every round of the diagnosis and reads the
// pods in place (it copied every pod and container status into new
// lists, 2.3 % of the leader's allocations at 200 jobs;
// TestAnyPullFailedAllocatesNothing).
func anyPullFailed(in diagnose.Input) bool {
	for _, pods := range [][]corev1.Pod{in.Workers, in.Launcher} {
		for i := range pods {
			st := &pods[i].Status
			for _, statuses := range [][]corev1.ContainerStatus{st.InitContainerStatuses, st.ContainerStatuses} {
				for j := range statuses {
					if api.PullFailed(statuses[j]) {
						return true
					}
				}
			}
		}
	}
	return false
}

// jobEvents lists the job's Events of one reason about objects of one kind
// (read only when a rule needs them; a failed read gives none).
// One read per namespace, reason and EventReadTTL serves every job there.
func (r *Reconciler) jobEvents(ctx context.Context, tj *trainer.TrainJob, reason, kind string) []corev1.Event {
	items, err := r.events.list(ctx, r.Reader, tj.Namespace, reason, r.now())
	if err != nil {
		return nil
	}
	var out []corev1.Event
	for _, e := range items {
		if e.InvolvedObject.Kind == kind && api.IsJobObject(tj.Name, kind, e.InvolvedObject.Name) {
			out = append(out, e)
		}
	}
	return out
}

// countedVisibility counts requests to Kueue's visibility API by outcome
// (mpijob_kueue_visibility_requests_total).
type countedVisibility struct{ queue.PendingLister }

func (c countedVisibility) PendingInClusterQueue(ctx context.Context, cq string) ([]queue.Pending, error) {
	items, err := c.PendingLister.PendingInClusterQueue(ctx, cq)
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	metrics.KueueVisibilityRequests.WithLabelValues(outcome).Inc()
	return items, err
}

// logTail is the end of a Launcher's log as the manager's own log quotes
// it: redacted as the status's quotes are (logs.Quoted: the manager's log
// is read by people who may not read the job's), then its last 300 bytes.
func logTail(log string) string {
	tail, _ := logs.Quoted(log)
	if len(tail) > 300 {
		tail = tail[len(tail)-300:]
	}
	return tail
}
