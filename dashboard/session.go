package dashboard

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// SessionLifetime is how long a login lasts.
const SessionLifetime = 12 * time.Hour

// maxSessions bounds the sessions the dashboard keeps, and
// maxSessionsPerUser those of one user: a user's new login replaces that
// user's oldest session, never another user's, and once the dashboard
// holds maxSessions live ones a new login is refused (errFull) until some
// end. Evicting the session closest to its end let anyone with a valid
// token log others out by logging in 10,000 times.
const (
	maxSessions        = 10000
	maxSessionsPerUser = 16
)

// errFull is a login refused because every session slot is in use.
var errFull = errors.New("the dashboard holds as many sessions as it keeps; try again later, or ask its administrator")

// sessions map the opaque id in the browser's cookie to the user's token,
// which so never leaves the dashboard: a stolen cookie is worth nothing
// once its user logs out or the dashboard restarts, and the token cannot
// be read from the browser at all.
type sessions struct {
	mu sync.Mutex
	m  map[string]session
}

type session struct {
	user    string
	token   string
	expires time.Time
}

// start keeps user's token and returns the new session's id.
func (ss *sessions) start(user, token string, now time.Time) (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	id := base64.RawURLEncoding.EncodeToString(b)
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.m == nil {
		ss.m = map[string]session{}
	}
	// The user's own oldest session gives way to a new one.
	oldest, mine := "", 0
	for k, s := range ss.m {
		if !now.Before(s.expires) {
			delete(ss.m, k)
			continue
		}
		if s.user == user {
			mine++
			if oldest == "" || s.expires.Before(ss.m[oldest].expires) {
				oldest = k
			}
		}
	}
	if mine >= maxSessionsPerUser {
		delete(ss.m, oldest)
	}
	if len(ss.m) >= maxSessions {
		return "", errFull
	}
	ss.m[id] = session{user: user, token: token, expires: now.Add(SessionLifetime)}
	return id, nil
}

// token is the token of session id, if it is known and not over.
func (ss *sessions) token(id string, now time.Time) (string, bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s, ok := ss.m[id]
	if !ok || !now.Before(s.expires) {
		delete(ss.m, id)
		return "", false
	}
	return s.token, true
}

// end forgets session id (logout).
func (ss *sessions) end(id string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.m, id)
}

// CheckLocalLogin refuses to offer the kubeconfig's users (a login with no
// credential at all) on any address but a loopback one: only the
// developer's own machine may reach such a login page.
func CheckLocalLogin(listen string) error {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("--listen %q is not HOST:PORT: give, for example, 127.0.0.1:9090", listen)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("--offer-kubeconfig-users lets anyone who reaches the login page act as the kubeconfig's users, so it serves only on a loopback address: use --listen 127.0.0.1:PORT (not %q), or drop the flag and put an OAuth proxy in front", listen)
}
