package wake

import (
	"context"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Settle is how long the diagnosis lets a job's pods and JobSet settle
// before its next round. A starting job of 8 Workers makes about forty
// pod and JobSet updates in a few seconds (each pod scheduled, its
// containers created, started, ready; the JobSet's counts after each):
// woken by each, the diagnosis made a round for each, most of them
// reading the same job a few milliseconds apart. Held for Settle, every
// update of that time makes one round. A status then trails the pods by
// up to Settle, where every status the diagnosis writes already waits on
// the pods' own pace (seconds to minutes).
const Settle = time.Second

// Settling wraps h so that what its updates enqueue waits d, and every
// other wake of the same key in that time joins it (the queue keeps one
// entry per key, ready at the earliest time asked). Creates wait too,
// but those of the cache's initial list, which h enqueues at once (at
// low priority, so a new manager's first rounds do not hold up fresh
// events). Deletes and generic events pass at once: a pod that goes (a
// Worker killed) is news the next round must not wait for. A wake that
// does not wait (the TrainJob's own events) takes the waiting entry with
// it.
func Settling(h handler.EventHandler, d time.Duration) handler.EventHandler {
	return settling{h: h, d: d}
}

type settling struct {
	h handler.EventHandler
	d time.Duration
}

type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]

func (s settling) Create(ctx context.Context, e event.CreateEvent, q queue) {
	if e.IsInInitialList {
		s.h.Create(ctx, e, q)
		return
	}
	s.h.Create(ctx, e, delayed{q, s.d})
}

func (s settling) Update(ctx context.Context, e event.UpdateEvent, q queue) {
	s.h.Update(ctx, e, delayed{q, s.d})
}

func (s settling) Delete(ctx context.Context, e event.DeleteEvent, q queue) {
	s.h.Delete(ctx, e, q)
}

func (s settling) Generic(ctx context.Context, e event.GenericEvent, q queue) {
	s.h.Generic(ctx, e, q)
}

// delayed is a queue whose Add waits d. It is not a priority queue, so
// controller-runtime's handlers call its Add (they call AddWithOpts only
// on one).
type delayed struct {
	queue
	d time.Duration
}

func (q delayed) Add(r reconcile.Request) { q.AddAfter(r, q.d) }
