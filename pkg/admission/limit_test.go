package admission

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Large requests wait for the budget instead of all being read at once,
// each is served once one before it ends, and an oversized one is refused
// before it is read.
func TestBounded(t *testing.T) {
	var inside, most atomic.Int64
	release := make(chan struct{})
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inside.Add(1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		if r.ContentLength > 1<<20 {
			<-release
		}
		inside.Add(-1)
		w.WriteHeader(http.StatusOK)
	})
	h := Bounded(slow, 2*MaxRequestBytes)
	big := func() *http.Request {
		return httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(make([]byte, 6<<20)))
	}
	var wg sync.WaitGroup
	codes := make([]int, 5)
	for i := range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, big())
			codes[i] = rec.Code
		}()
	}
	// Two get in (the budget holds two); most, below, says no third did.
	deadline := time.Now().Add(5 * time.Second)
	for inside.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := inside.Load(); got != 2 {
		t.Errorf("%d large requests read at once, want 2 (the budget holds two)", got)
	}
	close(release)
	wg.Wait()
	for i, c := range codes {
		if c != http.StatusOK {
			t.Errorf("request %d: %d", i, c)
		}
	}
	if most.Load() > 2 {
		t.Errorf("at most %d large requests were in at once, want 2", most.Load())
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(make([]byte, MaxRequestBytes+1))))
	if rec.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("an oversized request: %d, want 413", rec.Code)
	}
	// One that waits longer than its caller does gets a clear 503.
	entered, leave := make(chan struct{}), make(chan struct{})
	defer close(leave)
	blocked := Bounded(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { close(entered); <-leave }), MaxRequestBytes)
	go blocked.ServeHTTP(httptest.NewRecorder(), big())
	<-entered // the budget is taken
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	rec = httptest.NewRecorder()
	blocked.ServeHTTP(rec, big().WithContext(ctx))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("a request whose caller gave up while waiting: %d, want 503", rec.Code)
	}
}
