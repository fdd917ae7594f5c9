package logstore

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Available: a group the API server does not serve is absent at once; a
// store that answers 503 a few times (the aggregated API starting, or
// busy) is asked again and found.
func TestAvailable(t *testing.T) {
	defer func(d time.Duration) { availableRetry = d }(availableRetry)
	availableRetry = time.Millisecond
	reasons := map[int]string{http.StatusNotFound: "NotFound", http.StatusServiceUnavailable: "ServiceUnavailable"}
	cases := map[string]struct {
		failures int32
		code     int
		want     bool
		asked    int32
	}{
		"served":                         {want: true, asked: 1},
		"not served: no retry":           {failures: 100, code: http.StatusNotFound, want: false, asked: 1},
		"unavailable twice, then served": {failures: 2, code: http.StatusServiceUnavailable, want: true, asked: 3},
		"unavailable throughout":         {failures: 100, code: http.StatusServiceUnavailable, want: false, asked: 5},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var asked atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/apis/"+Group+"/"+Version {
					http.NotFound(w, r)
					return
				}
				if asked.Add(1) <= tc.failures {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(tc.code)
					_, _ = fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":%q,"code":%d}`, reasons[tc.code], tc.code)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"` + Group + "/" + Version + `","resources":[{"name":"trainjobs/log","namespaced":true,"kind":"TrainJobLog","verbs":["get"]}]}`))
			}))
			defer srv.Close()
			cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			r := NewReader(cs)
			if r == nil {
				t.Fatal("no reader over a real clientset")
			}
			if got := r.Available(context.Background()); got != tc.want {
				t.Errorf("Available = %v, want %v", got, tc.want)
			}
			if got := asked.Load(); got != tc.asked {
				t.Errorf("discovery asked %d times, want %d", got, tc.asked)
			}
		})
	}
}
