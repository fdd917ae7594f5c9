package dashboard

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// One user's streams are bounded; another user is not affected, and a
// finished stream gives its place back.
func TestStreamsPerUserAreBounded(t *testing.T) {
	s := &Server{}
	hold, held := make(chan struct{}), sync.WaitGroup{}
	h := s.limited("log streams", 2, func(w http.ResponseWriter, _ *http.Request, _ *userClients) {
		held.Done()
		<-hold
		w.WriteHeader(http.StatusOK)
	})
	serve := func(user string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h(rec, httptest.NewRequest("GET", "/api/jobs/team-a/x/logs", nil), &userClients{user: user})
		return rec
	}
	var done sync.WaitGroup
	held.Add(3)
	for _, u := range []string{"dev-a", "dev-a", "dev-b"} {
		done.Add(1)
		go func() { defer done.Done(); serve(u) }()
	}
	held.Wait()
	rec := serve("dev-a")
	if rec.Code != http.StatusTooManyRequests || !strings.Contains(rec.Body.String(), "dev-a has 2 log streams open") {
		t.Errorf("a third stream for dev-a: %d %s, want 429 naming the limit", rec.Code, rec.Body)
	}
	close(hold)
	done.Wait()
	held.Add(1)
	if rec := serve("dev-a"); rec.Code != http.StatusOK {
		t.Errorf("after the streams ended: %d %s, want 200", rec.Code, rec.Body)
	}
	if len(s.limits.open) != 0 {
		t.Errorf("places still held after every stream ended: %v", s.limits.open)
	}
}
