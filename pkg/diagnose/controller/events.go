package controller

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// EventReadTTL is how long one read of a namespace's Events of one reason
// serves every job diagnosed there. The rules that read Events (pods that
// do not appear, volumes that do not mount, a Worker the kubelet killed, a
// failed job's containers) are for jobs that wait or end, which the
// diagnosis looks at again every few seconds anyway: an Event a read just
// missed is seen at the next round. On a busy namespace it turns one LIST
// per job and round (8.4 per job at the bench's scale, the largest of the
// manager's reads) into one per namespace, reason and few seconds.
const EventReadTTL = 5 * time.Second

// maxEventReads bounds the reads kept: beyond it the stale ones go.
const maxEventReads = 1024

// eventReads shares reads of Events by namespace and reason among the
// diagnosis's workers. A read that fails is not kept: the next asks again.
type eventReads struct {
	mu    sync.Mutex
	reads map[eventKey]*eventRead
}

type eventKey struct{ namespace, reason string }

type eventRead struct {
	mu    sync.Mutex
	at    time.Time
	ok    bool
	items []corev1.Event
}

// list is the namespace's Events of reason, read through reader unless a
// read younger than EventReadTTL (by now) has them. The items are shared:
// callers only read them.
func (e *eventReads) list(ctx context.Context, reader client.Reader, namespace, reason string, now time.Time) ([]corev1.Event, error) {
	k := eventKey{namespace, reason}
	e.mu.Lock()
	if e.reads == nil {
		e.reads = map[eventKey]*eventRead{}
	}
	r, ok := e.reads[k]
	if !ok {
		if len(e.reads) >= maxEventReads {
			for key, old := range e.reads {
				if old.mu.TryLock() {
					if !old.ok || now.Sub(old.at) >= EventReadTTL {
						delete(e.reads, key)
					}
					old.mu.Unlock()
				}
			}
		}
		r = &eventRead{}
		e.reads[k] = r
	}
	e.mu.Unlock()
	// One read at a time per key: the workers that ask meanwhile take it.
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ok && now.Sub(r.at) < EventReadTTL && !now.Before(r.at) {
		return r.items, nil
	}
	evs := &corev1.EventList{}
	if err := reader.List(ctx, evs, client.InNamespace(namespace), client.MatchingFieldsSelector{
		Selector: fields.OneTermEqualSelector("reason", reason)}); err != nil {
		r.ok = false
		return nil, err
	}
	r.items, r.at, r.ok = evs.Items, now, true
	return r.items, nil
}
