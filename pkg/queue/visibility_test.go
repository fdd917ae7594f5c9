package queue

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// The client asks Kueue's path with limit and offset, reads every page,
// and passes errors on.
func TestVisibilityReadsEveryPage(t *testing.T) {
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.URL.Path+"?"+r.URL.RawQuery)
		if r.URL.Path != "/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/mpijob/pendingworkloads" {
			http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`, http.StatusNotFound)
			return
		}
		offset, _ := strconv.Atoi(r.URL.Query().Get("offset"))
		n := 0
		switch offset {
		case 0:
			n = visibilityPage // a full page: there may be more
		case visibilityPage:
			n = 2
		}
		// As Kueue v0.19 writes them (name and namespace in metadata).
		items := []map[string]any{}
		for i := 0; i < n; i++ {
			items = append(items, map[string]any{
				"metadata":       map[string]any{"name": "w" + strconv.Itoa(offset+i), "namespace": "team-a", "creationTimestamp": "2026-11-22T10:00:00Z"},
				"priority":       0,
				"localQueueName": "default", "positionInClusterQueue": offset + i, "positionInLocalQueue": offset + i,
			})
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"kind": "PendingWorkloadsSummary", "apiVersion": "visibility.kueue.x-k8s.io/v1beta2", "items": items})
	}))
	defer srv.Close()
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	v := Visibility{REST: cs.Discovery().RESTClient()}
	got, err := v.PendingInClusterQueue(context.Background(), "mpijob")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != visibilityPage+2 || got[visibilityPage+1] != (Pending{Namespace: "team-a", Name: "w1001", LocalQueueName: "default", PositionInClusterQueue: 1001, PositionInLocalQueue: 1001}) {
		t.Errorf("read %d Workloads, last %+v; want %d, the last w1001 at 1001", len(got), got[len(got)-1], visibilityPage+2)
	}
	want := []string{
		"/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/mpijob/pendingworkloads?limit=1000&offset=0",
		"/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/mpijob/pendingworkloads?limit=1000&offset=1000",
	}
	if diff := cmp.Diff(want, paths); diff != "" {
		t.Errorf("requests (-want,+got):\n%s", diff)
	}
	if _, err := v.PendingInClusterQueue(context.Background(), "nosuch"); err == nil {
		t.Error("a 404 gave no error")
	}
}
