package dashboard

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// debounce groups bursts of changes into one push.
const debounce = 250 * time.Millisecond

// stream pushes live snapshots as Server-Sent Events, watching with the
// user's own credentials:
//
//	/api/stream?namespace=NS            event "jobs": the job list, a JobPage
//	                                    (the filters, order and page of
//	                                    /api/jobs: ParseJobQuery)
//	/api/stream?namespace=NS&job=NAME   event "job": the job page's detail,
//	                                    event "events": its events,
//	                                    event "gone": the job was deleted,
//	                                    event "denied": the user may not see it
//
// A "problem" event says the API server cannot be watched; the stream
// retries on its own, and the browser reconnects if the stream ends. (Not
// "error": EventSource reserves that name for its own connection errors.)
func (s *Server) stream(w http.ResponseWriter, r *http.Request, c *userClients) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "streaming is not supported by this connection")
		return
	}
	ns, job := r.URL.Query().Get("namespace"), r.URL.Query().Get("job")
	if job != "" && ns == "" {
		writeError(w, http.StatusBadRequest, "job needs namespace: /api/stream?namespace=NS&job=NAME")
		return
	}
	q, err := ParseJobQuery(r.URL.Query())
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	ctx := r.Context()
	send := func(event string, v any) bool {
		b, err := json.Marshal(v)
		if err != nil {
			return false
		}
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b); err != nil {
			return false
		}
		flusher.Flush()
		return true
	}
	changes := make(chan struct{}, 1)
	notify := func() {
		select {
		case changes <- struct{}{}:
		default:
		}
	}
	watchers := []client.ObjectList{&trainer.TrainJobList{}}
	if job != "" {
		watchers = append(watchers, &corev1.PodList{}, &corev1.EventList{})
	}
	// Every namespace the user may see, one watch each, unless they may
	// watch all at once.
	nss := []string{ns}
	if ns == "" {
		if all, _ := c.can(ctx, "", "watch", "trainer.kubeflow.org", "trainjobs", ""); !all {
			list, err := s.namespacesOf(ctx, c)
			if err != nil {
				s.apiError(w, err)
				return
			}
			nss = nss[:0]
			for _, n := range list {
				nss = append(nss, n.Name)
			}
		}
	}
	errs := make(chan error, len(watchers)*len(nss)+1)
	// TrainJobs: the changes the user's cache takes in (what the pushes
	// read); a namespace without one gets a watch of its own.
	var follows []followed
	defer func() {
		for _, f := range follows {
			f.stop()
		}
	}()
	for _, n := range nss {
		for i, list := range watchers {
			if i == 0 {
				if f, ok, err := s.watchJobs(ctx, c, n, notify); err == nil && ok {
					follows = append(follows, f)
					continue
				}
			}
			go s.watchLoop(ctx, c, list.DeepCopyObject().(client.ObjectList), n, notify, errs)
		}
	}
	// denied: the user may not see the job, and was told so; the watches
	// of its pods and events then fail with Forbidden too, which is no
	// passing problem to report as "retrying".
	denied := false
	// The first push asks which namespaces the user may list; later ones
	// reuse that answer for up to the caches' recheck, as they do their access.
	pushed := false
	push := func() bool {
		if job == "" {
			maxAge := cmp.Or(s.recheck, cacheRecheck)
			if !pushed {
				maxAge = 0
			}
			pushed = true
			page, err := s.jobPage(ctx, c, ns, q, maxAge)
			if err != nil {
				return send("problem", map[string]any{"error": reason(err)})
			}
			return send("jobs", page)
		}
		d, err := s.detailOf(ctx, c, ns, job)
		if apierrors.IsNotFound(err) {
			return send("gone", map[string]any{"error": jobGone(ns, job)})
		}
		if apierrors.IsForbidden(err) {
			denied = true
			return send("denied", map[string]any{"error": fmt.Sprintf("You (%s) may not see MPI job %s in namespace %s: %s", c.user, job, ns, reason(err))})
		}
		if err != nil {
			return send("problem", map[string]any{"error": reason(err)})
		}
		if !send("job", d) {
			return false
		}
		evs, err := c.eventsWith(ctx, ns, job, d.Status)
		if err == nil {
			return send("events", map[string]any{"events": evs})
		}
		return true
	}
	if !push() {
		return
	}
	heartbeat := time.NewTicker(15 * time.Second)
	defer heartbeat.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case err := <-errs:
			if denied && apierrors.IsForbidden(err) {
				continue
			}
			if !send("problem", map[string]any{"error": "live updates paused: " + reason(err) + "; retrying"}) {
				return
			}
		case <-heartbeat.C:
			// The caches followed stay in use, and their user is asked
			// again (every 30 s) whether they may still list the jobs.
			// After a refusal the stream says so and goes on asking.
			for i, f := range follows {
				r, err := s.jobsCache(ctx, c, c.token, f.ns)
				if err != nil {
					if !send("problem", map[string]any{"error": "live updates paused: " + reason(err) + "; retrying"}) {
						return
					}
					continue
				}
				if r != f.cache {
					// A new cache (the old one was dropped): follow it, and
					// push what it holds.
					if nf, ok, err := s.watchJobs(ctx, c, f.ns, notify); err == nil && ok {
						f.stop()
						follows[i] = nf
						notify()
					}
				}
			}
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
			flusher.Flush()
		case <-changes:
			// Let a burst of changes settle, then push once.
			select {
			case <-ctx.Done():
				return
			case <-time.After(debounce):
			}
			select {
			case <-changes:
			default:
			}
			if !push() {
				return
			}
		}
	}
}

// watchLoop watches list's kind in ns as the user and calls notify on
// every change, re-watching (with back-off) when the watch ends or fails.
func (s *Server) watchLoop(ctx context.Context, c *userClients, list client.ObjectList, ns string, notify func(), errs chan<- error) {
	backoff := time.Second
	for ctx.Err() == nil {
		w, err := c.Watch(ctx, list, client.InNamespace(ns))
		if err != nil {
			select {
			case errs <- err:
			default:
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 30*time.Second)
			continue
		}
		backoff = time.Second
		notify()
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				break
			}
			notify()
		}
		w.Stop()
	}
}
