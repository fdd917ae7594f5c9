package wake

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// rounds runs a worker on controller-runtime's priority queue (the
// manager's) and counts the rounds it makes while send feeds h events,
// until wait has passed after send returns.
func rounds(t *testing.T, h handler.EventHandler, send func(handler.EventHandler, queue), wait time.Duration) int {
	t.Helper()
	q := priorityqueue.New[reconcile.Request]("settle-test")
	var n atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			item, shutdown := q.Get()
			if shutdown {
				return
			}
			n.Add(1)
			q.Done(item)
		}
	}()
	send(h, q)
	time.Sleep(wait)
	q.ShutDown()
	<-done
	return int(n.Load())
}

func jobPod(i int) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "j-node-0-" + strconv.Itoa(i%9),
		ResourceVersion: strconv.Itoa(i), Labels: map[string]string{"jobset.sigs.k8s.io/jobset-name": "j"}}}
}

// A starting job's pod updates, 20 of them 10 ms apart, make one round
// of the job once settled; unsettled, the worker took each as it came.
func TestSettlingMakesOneRoundOfAStartingJobsUpdates(t *testing.T) {
	const d = 2 * time.Second
	updates := func(h handler.EventHandler, q queue) {
		for i := range 20 {
			h.Update(context.Background(), event.UpdateEvent{ObjectOld: jobPod(i), ObjectNew: jobPod(i + 1)}, q)
			time.Sleep(10 * time.Millisecond)
		}
	}
	if got := rounds(t, ByJobSetName, updates, 300*time.Millisecond); got < 10 {
		t.Fatalf("unsettled, 20 updates 10 ms apart made %d rounds; the scenario needs a worker that takes each (want at least 10)", got)
	}
	if got := rounds(t, Settling(ByJobSetName, d), updates, d+500*time.Millisecond); got != 1 {
		t.Errorf("settled for %s, 20 updates 10 ms apart made %d rounds, want 1", d, got)
	}
}

// A pod that goes, and the pods of the cache's initial list, are enqueued
// at once: a round sees them before the settling time.
func TestSettlingPassesDeletesAndTheInitialList(t *testing.T) {
	const d = 10 * time.Second
	h := Settling(ByJobSetName, d)
	cases := map[string]func(handler.EventHandler, queue){
		"a delete": func(h handler.EventHandler, q queue) {
			h.Delete(context.Background(), event.DeleteEvent{Object: jobPod(1)}, q)
		},
		"a create of the initial list": func(h handler.EventHandler, q queue) {
			h.Create(context.Background(), event.CreateEvent{Object: jobPod(1), IsInInitialList: true}, q)
		},
		"a generic event": func(h handler.EventHandler, q queue) {
			h.Generic(context.Background(), event.GenericEvent{Object: jobPod(1)}, q)
		},
	}
	for name, send := range cases {
		t.Run(name, func(t *testing.T) {
			if got := rounds(t, h, send, time.Second); got != 1 {
				t.Errorf("%d rounds within 1 s of %s, want 1 (settling holds updates for %s, not this)", got, name, d)
			}
		})
	}
	// A new pod waits as updates do.
	create := func(h handler.EventHandler, q queue) {
		h.Create(context.Background(), event.CreateEvent{Object: jobPod(1)}, q)
	}
	if got := rounds(t, h, create, time.Second); got != 0 {
		t.Errorf("%d rounds within 1 s of a new pod, want 0 (it settles for %s)", got, d)
	}
}
