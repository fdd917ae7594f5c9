package dashboard

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func TestSessions(t *testing.T) {
	var ss sessions
	now := t0
	id, err := ss.start("dev-a", "token-a", now)
	if err != nil {
		t.Fatal(err)
	}
	if id == "token-a" || len(id) < 40 {
		t.Fatalf("session id %q is not opaque", id)
	}
	if got, ok := ss.token(id, now.Add(time.Hour)); !ok || got != "token-a" {
		t.Errorf("token(id) = %q, %v; want token-a", got, ok)
	}
	if _, ok := ss.token("token-a", now); ok {
		t.Error("the token itself opened a session")
	}
	if _, ok := ss.token(id, now.Add(SessionLifetime)); ok {
		t.Error("a session outlived its lifetime")
	}
	id2, _ := ss.start("dev-b", "token-b", now)
	ss.end(id2)
	if _, ok := ss.token(id2, now); ok {
		t.Error("a session outlived its logout")
	}
	// A flood of one user's logins replaces only that user's sessions:
	// another user's stays.
	victim, _ := ss.start("dev-b", "token-b", now)
	for i := range maxSessions + 3 {
		if _, err := ss.start("dev-a", "t", now.Add(time.Duration(i)*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := ss.token(victim, now.Add(time.Minute)); !ok {
		t.Error("another user's logins ended dev-b's session")
	}
	if n := len(ss.m); n > maxSessionsPerUser+1 {
		t.Errorf("%d sessions kept after one user's flood, want at most %d of that user's and dev-b's", n, maxSessionsPerUser)
	}
	// Full: a new login is refused, none is evicted.
	var full sessions
	for i := range maxSessions {
		if _, err := full.start(fmt.Sprintf("u%d", i), "t", now); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := full.start("late", "t", now); !errors.Is(err, errFull) {
		t.Errorf("a login past maxSessions: %v, want errFull", err)
	}
	if n := len(full.m); n != maxSessions {
		t.Errorf("%d sessions after a refused login, want %d", n, maxSessions)
	}
	// Expired sessions make room.
	if _, err := full.start("late", "t", now.Add(SessionLifetime)); err != nil {
		t.Errorf("a login once the others expired: %v", err)
	}
}

// The login answers with an opaque session cookie; the token never
// reaches the browser, and the cookie works until logout.
func TestLoginCookieHoldsNoToken(t *testing.T) {
	const token = "sha256~a-real-looking-token"
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("Authorization") != "Bearer "+token {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Unauthorized","code":401}`))
			return
		}
		_, _ = w.Write([]byte(`{"kind":"SelfSubjectReview","apiVersion":"authentication.k8s.io/v1","status":{"userInfo":{"username":"dev-a","groups":["system:authenticated"]}}}`))
	}))
	defer api.Close()
	s := &Server{Base: &rest.Config{Host: api.URL}, Users: []LoginUser{{Name: "dev-a", Token: token}}}
	h := s.Handler()
	send := func(method, path, body, cookie string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, "http://localhost"+path, strings.NewReader(body))
		req.Header.Set("Origin", "http://localhost")
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if cookie != "" {
			req.AddCookie(&http.Cookie{Name: SessionCookie, Value: cookie})
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	rec := send("POST", "/api/login", `{"user":"dev-a"}`, "")
	if rec.Code != 200 {
		t.Fatalf("login: %d %s", rec.Code, rec.Body)
	}
	var id string
	for _, c := range rec.Result().Cookies() {
		if c.Name == SessionCookie {
			id = c.Value
			if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode {
				t.Errorf("cookie %+v is not HttpOnly and SameSite=Strict", c)
			}
		}
	}
	if id == "" || strings.Contains(rec.Header().Get("Set-Cookie"), token) || strings.Contains(rec.Body.String(), token) {
		t.Fatalf("the login's answer carries the token: %v %s", rec.Header(), rec.Body)
	}
	if rec := send("GET", "/api/whoami", "", id); rec.Code != 200 || !strings.Contains(rec.Body.String(), "dev-a") {
		t.Errorf("whoami with the session: %d %s", rec.Code, rec.Body)
	}
	if rec := send("GET", "/api/whoami", "", token); rec.Code != 401 {
		t.Errorf("the raw token as a cookie: %d, want 401", rec.Code)
	}
	if rec := send("POST", "/api/logout", "", id); rec.Code != 200 {
		t.Errorf("logout: %d %s", rec.Code, rec.Body)
	}
	if rec := send("GET", "/api/whoami", "", id); rec.Code != 401 || !strings.Contains(rec.Body.String(), "log in again") {
		t.Errorf("whoami after logout: %d %s, want 401 asking to log in again", rec.Code, rec.Body)
	}
}

func TestCheckLocalLogin(t *testing.T) {
	for listen, ok := range map[string]bool{
		"127.0.0.1:9090": true,
		"localhost:9090": true,
		"[::1]:9090":     true,
		"0.0.0.0:9090":   false,
		":9090":          false,
		"10.0.0.5:9090":  false,
		"127.0.0.1":      false,
	} {
		t.Run(listen, func(t *testing.T) {
			err := CheckLocalLogin(listen)
			if (err == nil) != ok {
				t.Errorf("CheckLocalLogin(%q) = %v, want ok %v", listen, err, ok)
			}
			if err != nil && !strings.Contains(err.Error(), "--listen") {
				t.Errorf("the error does not name the flag to change: %v", err)
			}
		})
	}
}
