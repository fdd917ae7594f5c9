// Package wake says what wakes mpijob-manager's controllers of a TrainJob:
// the predicates each one's watch takes, in one place. Every write to a
// TrainJob is an update event for every controller that watches TrainJobs,
// and a running job's are mostly mpijob's own (its status, its progress,
// a rank's failure): a controller that acts on none of them must not wake
// for them (issue "At the control plane's pace"). What a controller's
// children change in bursts (a starting job's pods and JobSet) wakes it
// once the burst has settled (Settling, settle.go), not once an update.
package wake

import (
	"context"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/mpijob/mpijob/pkg/api"
)

// TrainJobChanged passes a TrainJob's creates and deletes, and the updates
// that change more than the annotations ignored: its spec (generation),
// its status (Trainer's conditions and runtime status), its labels,
// finalizers or deletion, or another annotation. An ignored key that ends
// in "/" ignores every annotation of that prefix. A write that changes
// only the object's resourceVersion and managed fields passes nothing.
func TrainJobChanged(ignored ...string) predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*trainer.TrainJob)
		n, ok2 := e.ObjectNew.(*trainer.TrainJob)
		if !ok1 || !ok2 {
			return true
		}
		return Changed(o, n, ignored...)
	}}
}

// Changed is TrainJobChanged's decision for one update from o to n.
func Changed(o, n *trainer.TrainJob, ignored ...string) bool {
	if o.Generation != n.Generation || !o.DeletionTimestamp.Equal(n.DeletionTimestamp) ||
		!equality.Semantic.DeepEqual(o.Labels, n.Labels) || !equality.Semantic.DeepEqual(o.Finalizers, n.Finalizers) ||
		!equality.Semantic.DeepEqual(o.Status, n.Status) {
		return true
	}
	skip := func(k string) bool {
		for _, i := range ignored {
			if k == i || (strings.HasSuffix(i, "/") && strings.HasPrefix(k, i)) {
				return true
			}
		}
		return false
	}
	for k, v := range n.Annotations {
		if w, had := o.Annotations[k]; (!had || w != v) && !skip(k) {
			return true
		}
	}
	for k := range o.Annotations {
		if _, has := n.Annotations[k]; !has && !skip(k) {
			return true
		}
	}
	return false
}

// StacksOrGone passes the JobStatus updates that change its stacks (the
// snapshot the diagnosis took of a stuck job and adds to its message next
// round), and its deletion; nothing else: not its creates nor its status
// writes, which the diagnosis made itself. The manager never deletes a
// JobStatus: one deleted while its job is there (by an administrator, or a
// cleanup that lists them) is written again from what the diagnosis knows
// (diagnose.Known.Forged), where the job's reason, message and pod records
// would otherwise be gone until something else woke it: for a finished job,
// never. Once the job goes, its JobStatus follows it (the garbage collector)
// and the round that wakes finds no job.
func StacksOrGone() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(e event.DeleteEvent) bool { _, ok := e.Object.(*api.JobStatus); return ok },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, ok1 := e.ObjectOld.(*api.JobStatus)
			n, ok2 := e.ObjectNew.(*api.JobStatus)
			return ok1 && ok2 && o.Stacks != n.Stacks
		},
	}
}

// LauncherMoved passes what the progress controller waits on while a
// job's Launcher is not running: a Launcher pod made (not the cache's
// initial list, whose jobs the TrainJobs' own list enqueues), one whose
// phase changed (it started, or ended) and one that went (a restart makes
// the next). Nothing else of a pod: not a Worker, not a Launcher's other
// updates (its conditions, its containers' states within a phase). With
// it the progress controller reads nothing of a waiting job until its
// Launcher runs, where it polled every such job every 10 s: 15 of its 20
// rounds a job at 500 × 8, whose jobs wait minutes for room (issue "At
// the control plane's pace").
func LauncherMoved() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return !e.IsInInitialList && isLauncher(e.Object) },
		DeleteFunc:  func(e event.DeleteEvent) bool { return isLauncher(e.Object) },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, ok1 := e.ObjectOld.(*corev1.Pod)
			n, ok2 := e.ObjectNew.(*corev1.Pod)
			return ok1 && ok2 && isLauncher(n) && o.Status.Phase != n.Status.Phase
		},
	}
}

// isLauncher reports an MPI job's Launcher pod: of a JobSet, in its
// Launcher's replicated job.
func isLauncher(o client.Object) bool {
	l := o.GetLabels()
	_, of := l[jobsetv1alpha2.JobSetNameKey]
	return of && l[jobsetv1alpha2.ReplicatedJobNameKey] == api.LauncherJob
}

// ByJobSetName enqueues the TrainJob of a JobSet's pod, by the JobSet's
// name (Trainer names a job's JobSet after it); a pod of no JobSet
// enqueues nothing.
var ByJobSetName = handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
	name, ok := o.GetLabels()[jobsetv1alpha2.JobSetNameKey]
	if !ok {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
})
