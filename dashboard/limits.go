package dashboard

import (
	"fmt"
	"net/http"
	"sync"
)

// What one user may hold open at once. A log stream holds a connection to
// the API server per pod, an event stream a few watches: without a bound,
// one user's tabs (or a script) make the dashboard and the API server do
// unbounded work for everyone.
const (
	MaxLogStreamsPerUser   = 8
	MaxEventStreamsPerUser = 10
)

// streamLimits counts the streams each user has open, by kind.
type streamLimits struct {
	mu   sync.Mutex
	open map[string]int
}

// acquire takes one of most places of kind for user; release gives it
// back. ok is false when all are taken.
func (l *streamLimits) acquire(kind, user string, most int) (release func(), ok bool) {
	key := kind + "\x00" + user
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open == nil {
		l.open = map[string]int{}
	}
	if l.open[key] >= most {
		return nil, false
	}
	l.open[key]++
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.open[key]--; l.open[key] <= 0 {
			delete(l.open, key)
		}
	}, true
}

// limited serves h while the user holds one of most places of kind, and
// answers 429 naming the limit when they hold all of them.
func (s *Server) limited(kind string, most int, h handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, c *userClients) {
		release, ok := s.limits.acquire(kind, c.user, most)
		if !ok {
			w.Header().Set("Retry-After", "5")
			writeError(w, http.StatusTooManyRequests, fmt.Sprintf("%s has %d %s open, the most one user may: close some (other tabs of the dashboard) and try again", c.user, most, kind))
			return
		}
		defer release()
		h(w, r, c)
	}
}
