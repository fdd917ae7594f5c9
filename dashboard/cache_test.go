package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/jobview"
)

// The job list through the per-user watch cache that production uses
// (jobsCache): the fake API server's TrainJobs are served over HTTP, list
// and watch (with the initial events a watch-list asks for, as client-go's
// reflector does by default), each request as the user its bearer token
// names and refused by their RBAC, so the cache is controller-runtime's
// own, fed as the API server feeds it.

// trainJobsPath is a TrainJob collection's path: all namespaces or one.
var trainJobsPath = regexp.MustCompile(`^/apis/trainer\.kubeflow\.org/v1alpha1(?:/namespaces/([^/]+))?/trainjobs$`)

// httpAPI counts the requests of the TrainJobs' HTTP API.
type httpAPI struct {
	mu      sync.Mutex
	lists   map[string]int // by user
	watches map[string]int // by user
}

func (h *httpAPI) count(m map[string]int, user string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	m[user]++
}

func (h *httpAPI) watchesOf(user string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.watches[user]
}

// serveTrainJobs starts the HTTP API of f's TrainJobs and makes the
// dashboard's caches use it.
func (f *fakeAPI) serveTrainJobs(t *testing.T) *httpAPI {
	t.Helper()
	h := &httpAPI{lists: map[string]int{}, watches: map[string]int{}}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m := trainJobsPath.FindStringSubmatch(r.URL.Path)
		if m == nil || r.Method != http.MethodGet {
			http.NotFound(w, r)
			return
		}
		ns := m[1]
		user, _ := strings.CutPrefix(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), "token-")
		verb := "list"
		if r.URL.Query().Get("watch") == "true" {
			verb = "watch"
		}
		if _, known := rbac[user]; !known {
			writeStatus(w, apierrors.NewUnauthorized("Unauthorized"))
			return
		}
		if !allowed(user, verb, "trainjobs", ns) {
			writeStatus(w, forbidden(user, verb, trainer.GroupVersion.Group, "trainjobs", "", ns))
			return
		}
		if verb == "list" {
			h.count(h.lists, user)
			list := &trainer.TrainJobList{}
			if err := f.store.List(r.Context(), list, client.InNamespace(ns)); err != nil {
				writeStatus(w, err)
				return
			}
			list.APIVersion, list.Kind = trainer.GroupVersion.String(), "TrainJobList"
			list.ResourceVersion = lastVersion(list.Items)
			for i := range list.Items {
				list.Items[i].APIVersion, list.Items[i].Kind = trainer.GroupVersion.String(), "TrainJob"
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(list)
			return
		}
		h.count(h.watches, user)
		f.serveWatch(w, r, ns)
	}))
	t.Cleanup(ts.Close)
	// Before the server closes: the caches' watches end with them.
	t.Cleanup(func() {
		f.server.mu.Lock()
		var keys []cacheKey
		for k := range f.server.caches {
			keys = append(keys, k)
		}
		f.server.mu.Unlock()
		for _, k := range keys {
			f.server.drop(k)
		}
	})
	f.server.Base = &rest.Config{Host: ts.URL}
	f.server.listDirect = false
	return h
}

// serveWatch streams ns's TrainJob events until the request ends: first,
// for a watch-list, every job there is and the bookmark that ends them.
func (f *fakeAPI) serveWatch(w http.ResponseWriter, r *http.Request, ns string) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	// Watch first, then list: a job made in between comes twice (an
	// update), never not at all.
	events, err := f.store.Watch(ctx, &trainer.TrainJobList{}, client.InNamespace(ns))
	if err != nil {
		writeStatus(w, err)
		return
	}
	defer events.Stop()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	send := func(typ watch.EventType, obj runtime.Object) bool {
		if tj, ok := obj.(*trainer.TrainJob); ok {
			tj.APIVersion, tj.Kind = trainer.GroupVersion.String(), "TrainJob"
		}
		if err := enc.Encode(metav1.WatchEvent{Type: string(typ), Object: runtime.RawExtension{Object: obj}}); err != nil {
			return false
		}
		w.(http.Flusher).Flush()
		return true
	}
	if r.URL.Query().Get("sendInitialEvents") == "true" {
		list := &trainer.TrainJobList{}
		if err := f.store.List(ctx, list, client.InNamespace(ns)); err != nil {
			return
		}
		for i := range list.Items {
			if !send(watch.Added, &list.Items[i]) {
				return
			}
		}
		end := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{ResourceVersion: lastVersion(list.Items),
			Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}
		if !send(watch.Bookmark, end) {
			return
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-events.ResultChan():
			if !ok || !send(ev.Type, ev.Object) {
				return
			}
		}
	}
}

// lastVersion is the newest resourceVersion of jobs ("1" for none).
func lastVersion(jobs []trainer.TrainJob) string {
	last := "1"
	for _, j := range jobs {
		if len(j.ResourceVersion) > len(last) || len(j.ResourceVersion) == len(last) && j.ResourceVersion > last {
			last = j.ResourceVersion
		}
	}
	return last
}

// writeStatus answers err as the API server does: a Status of its code.
func writeStatus(w http.ResponseWriter, err error) {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		st = apierrors.NewInternalError(err)
	}
	s := st.Status()
	s.APIVersion, s.Kind = "v1", "Status"
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(s.Code))
	_ = json.NewEncoder(w).Encode(&s) //nolint:errchkjson // the client sees a cut answer
}

// listNames are the names of the jobs the dashboard lists to user in
// team-a.
func listNames(t *testing.T, f *fakeAPI, user string) (int, []string) {
	t.Helper()
	a := f.do(user, "GET", "/api/jobs?namespace=team-a", "")
	if a.code != http.StatusOK {
		return a.code, nil
	}
	var page struct{ Jobs []jobview.Job }
	a.json(t, &page)
	var names []string
	for _, j := range page.Jobs {
		names = append(names, j.Name)
	}
	return a.code, names
}

func TestJobListThroughTheUsersWatchCache(t *testing.T) {
	f := newFakeAPI(t, mpiJob("team-a", "first", nil)...)
	h := f.serveTrainJobs(t)
	if code, names := listNames(t, f, "dev-a"); code != http.StatusOK || strings.Join(names, ",") != "first" {
		t.Fatalf("dev-a's list of team-a: %d %v, want first", code, names)
	}
	if n := h.watchesOf("dev-a"); n != 1 {
		t.Errorf("dev-a's first list started %d watches, want 1", n)
	}
	h.mu.Lock()
	lists := h.lists["dev-a"]
	h.mu.Unlock()
	if lists != 0 {
		// client-go's reflector streams the first list in the watch
		// (WatchListClient), as it does against a real API server.
		t.Errorf("the cache listed %d times, want the watch-list's initial events alone", lists)
	}
	// A job made later reaches the list through the watch, with no new
	// list or watch of the API server.
	late := mpiJob("team-a", "later", nil)[0]
	if err := f.store.Create(context.Background(), late); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		_, names := listNames(t, f, "dev-a")
		return strings.Join(names, ",") == "first,later", nil
	}); err != nil {
		_, names := listNames(t, f, "dev-a")
		t.Fatalf("the job made later is not listed through the watch: %v", names)
	}
	if n := h.watchesOf("dev-a"); n != 1 {
		t.Errorf("dev-a's lists started %d watches, want the one cache's 1", n)
	}
	// Another user gets a cache of their own, made with their own token.
	if code, names := listNames(t, f, "viewer-a"); code != http.StatusOK || len(names) != 2 {
		t.Errorf("viewer-a's list of team-a: %d %v, want both jobs", code, names)
	}
	if n := h.watchesOf("viewer-a"); n != 1 {
		t.Errorf("viewer-a's list started %d watches of their own, want 1", n)
	}
	f.server.mu.Lock()
	caches := len(f.server.caches)
	f.server.mu.Unlock()
	if caches != 2 {
		t.Errorf("%d caches, want one per user and namespace (2)", caches)
	}
}

func TestJobListCacheIsNotMadeForAUserWhoMayNotList(t *testing.T) {
	f := newFakeAPI(t, mpiJob("team-b", "theirs", nil)...)
	h := f.serveTrainJobs(t)
	a := f.do("viewer-a", "GET", "/api/jobs?namespace=team-b", "")
	if a.code != http.StatusForbidden || !strings.Contains(a.body, `cannot list resource \"trainjobs\"`) {
		t.Errorf("viewer-a's list of team-b: %d %s, want 403 in the API server's words", a.code, a.body)
	}
	if n := h.watchesOf("viewer-a"); n != 0 {
		t.Errorf("a refused user started %d watches, want none", n)
	}
	if strings.Contains(a.body, "theirs") {
		t.Errorf("the refusal shows team-b's job: %s", a.body)
	}
}

func TestJobListCacheStopsServingAUserWhoLostAccess(t *testing.T) {
	f := newFakeAPI(t, mpiJob("team-a", "first", nil)...)
	f.serveTrainJobs(t)
	// Asked again on every request after the first.
	f.server.recheck = time.Nanosecond
	rbac["dev-c"] = []grant{{ns: "team-a", verbs: "get,list,watch", resources: "trainjobs"}, {verbs: "get,list,watch", resources: "clustertrainingruntimes"}}
	t.Cleanup(func() { delete(rbac, "dev-c") })
	if code, names := listNames(t, f, "dev-c"); code != http.StatusOK || len(names) != 1 {
		t.Fatalf("dev-c's list of team-a: %d %v, want the job", code, names)
	}
	// An administrator takes the role binding away: the cache the user
	// made serves them no more once their access is asked again.
	delete(rbac, "dev-c")
	rbac["dev-c"] = []grant{{ns: "team-b", verbs: "get,list,watch", resources: "trainjobs"}}
	a := f.do("dev-c", "GET", "/api/jobs?namespace=team-a", "")
	if a.code != http.StatusForbidden || !strings.Contains(a.body, "may no longer list TrainJobs") || strings.Contains(a.body, "first") {
		t.Errorf("dev-c's list after losing access: %d %s, want 403 and no job", a.code, a.body)
	}
	f.server.mu.Lock()
	_, kept := f.server.caches[cacheKey{token("dev-c"), "team-a"}]
	f.server.mu.Unlock()
	if kept {
		t.Error("the cache of a user who lost access is kept")
	}
}
