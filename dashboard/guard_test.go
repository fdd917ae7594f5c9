package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
)

func TestGuard(t *testing.T) {
	const host = "127.0.0.1:8443"
	cases := map[string]struct {
		method, contentType, body string
		headers                   map[string]string
		want                      int
	}{
		"a page load needs no origin": {method: "GET", want: 200},
		"a same-origin JSON create (the front end)": {method: "POST", contentType: "application/json", body: "{}",
			headers: map[string]string{"Origin": "http://" + host}, want: 200},
		"a same-origin suspend with no body":         {method: "POST", headers: map[string]string{"Origin": "http://" + host}, want: 200},
		"a page on another port of the same host":    {method: "POST", headers: map[string]string{"Origin": "http://127.0.0.1:9999"}, want: 403},
		"another site deletes":                       {method: "DELETE", headers: map[string]string{"Origin": "https://evil.example"}, want: 403},
		"no Origin and no Referer with the cookie":   {method: "POST", headers: map[string]string{"Cookie": SessionCookie + "=t"}, want: 403},
		"an opaque origin falls back to the Referer": {method: "POST", headers: map[string]string{"Origin": "null", "Referer": "http://" + host + "/jobs"}, want: 200},
		"an opaque origin from another site":         {method: "POST", headers: map[string]string{"Origin": "null", "Referer": "http://evil.example/"}, want: 403},
		"the referer of another site":                {method: "POST", headers: map[string]string{"Referer": "http://evil.example/" + host}, want: 403},
		"JSON sent as text/plain":                    {method: "POST", contentType: "text/plain", body: `{"name":"x"}`, headers: map[string]string{"Origin": "http://" + host}, want: 415},
		"a form post":                                {method: "POST", contentType: "application/x-www-form-urlencoded", body: "a=b", headers: map[string]string{"Origin": "http://" + host}, want: 415},
		"a body with no content type":                {method: "POST", body: "{}", headers: map[string]string{"Origin": "http://" + host}, want: 415},
		"JSON with a charset":                        {method: "POST", contentType: "application/json; charset=utf-8", body: "{}", headers: map[string]string{"Origin": "http://" + host}, want: 200},
		"a script with its own token needs no origin": {method: "POST", contentType: "application/json", body: "{}",
			headers: map[string]string{"Authorization": "Bearer abc"}, want: 200},
		"a script's token does not excuse text/plain": {method: "POST", contentType: "text/plain", body: "{}",
			headers: map[string]string{"Authorization": "Bearer abc"}, want: 415},
		"an OAuth proxy's forwarded token is no excuse": {method: "POST", headers: map[string]string{"X-Forwarded-Access-Token": "abc", "Origin": "https://evil.example"}, want: 403},
		"the host a proxy forwarded":                    {method: "POST", headers: map[string]string{"Origin": "https://mpijob.apps.example.com", "X-Forwarded-Host": "mpijob.apps.example.com"}, want: 200},
	}
	h := guard(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(200) }))
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, "http://"+host+"/api/jobs/team-a", strings.NewReader(tc.body))
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			for k, v := range tc.headers {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Errorf("status %d, want %d: %s", rec.Code, tc.want, rec.Body)
			}
			if diff := cmp.Diff(ContentSecurityPolicy, rec.Header().Get("Content-Security-Policy")); diff != "" {
				t.Errorf("Content-Security-Policy (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestContentSecurityPolicyForbidsInlineScript(t *testing.T) {
	for _, d := range strings.Split(ContentSecurityPolicy, ";") {
		if f := strings.Fields(d); len(f) > 0 && f[0] == "script-src" && strings.Contains(d, "unsafe-inline") {
			t.Errorf("script-src allows inline script: %q", d)
		}
	}
	if !strings.Contains(ContentSecurityPolicy, "frame-ancestors 'none'") {
		t.Error("the policy lets other sites frame the dashboard")
	}
}

func TestSessionCookieIsSecureBehindTLS(t *testing.T) {
	for name, tc := range map[string]struct {
		proto string
		want  bool
	}{
		"plain http on the developer's machine": {want: false},
		"behind a TLS-terminating proxy":        {proto: "https", want: true},
	} {
		t.Run(name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "http://x/api/login", nil)
			if tc.proto != "" {
				r.Header.Set("X-Forwarded-Proto", tc.proto)
			}
			if got := secureRequest(r); got != tc.want {
				t.Errorf("secureRequest = %v, want %v", got, tc.want)
			}
		})
	}
}

// A flood of bogus tokens costs the API server one review per token per
// refusedFor, not one per request.
func TestRefusedTokensAreRemembered(t *testing.T) {
	var reviews atomic.Int32
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/selfsubjectreviews") {
			reviews.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Unauthorized","code":401}`))
	}))
	defer api.Close()
	s := &Server{Base: &rest.Config{Host: api.URL}}
	for range 5 {
		if _, err := s.clientsFor(context.Background(), "bogus"); !apierrors.IsUnauthorized(err) {
			t.Fatalf("err = %v, want Unauthorized", err)
		}
	}
	if _, err := s.clientsFor(context.Background(), "another"); !apierrors.IsUnauthorized(err) {
		t.Fatalf("err = %v, want Unauthorized", err)
	}
	if got := reviews.Load(); got != 2 {
		t.Errorf("%d reviews for 2 tokens tried 6 times, want 2", got)
	}
	// The memory is bounded: it starts again when full.
	for i := range refusedMax + 5 {
		_, _ = s.clientsFor(context.Background(), fmt.Sprint("flood-", i))
	}
	s.mu.Lock()
	n := len(s.refused)
	s.mu.Unlock()
	if n > refusedMax {
		t.Errorf("%d refused tokens remembered, want at most %d", n, refusedMax)
	}
}

// A dashboard that offers its users without a credential answers only to
// loopback names: a DNS-rebound name (same origin to the browser) is
// refused before any handler, login included.
func TestLoopbackOnlyWithALoginPage(t *testing.T) {
	s := &Server{Users: []LoginUser{{Name: "dev-a", Token: "t"}}}
	h := s.Handler()
	for host, want := range map[string]int{
		"127.0.0.1:9090": http.StatusOK, "localhost:9090": http.StatusOK, "[::1]:9090": http.StatusOK, "LOCALHOST": http.StatusOK,
		"evil.example:9090": http.StatusMisdirectedRequest, "127.0.0.1.evil.example": http.StatusMisdirectedRequest, "10.0.0.5:9090": http.StatusMisdirectedRequest,
	} {
		r := httptest.NewRequest(http.MethodGet, "/api/healthz", nil)
		r.Host = host
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != want {
			t.Errorf("Host %s: %d, want %d (%s)", host, w.Code, want, w.Body.String())
		}
	}
	r := httptest.NewRequest(http.MethodPost, "/api/login", strings.NewReader(`{"user":"dev-a"}`))
	r.Host, r.Header["Origin"], r.Header["Content-Type"] = "evil.example:9090", []string{"http://evil.example:9090"}, []string{"application/json"}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusMisdirectedRequest || !strings.Contains(w.Body.String(), "answers only to a loopback address") {
		t.Errorf("a rebound login: %d %s", w.Code, w.Body.String())
	}
	// Behind a proxy (no login page) the host is the proxy's business.
	r = httptest.NewRequest(http.MethodGet, "/api/healthz", nil)
	r.Host = "mpijob.apps.example.com"
	w = httptest.NewRecorder()
	(&Server{}).Handler().ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Errorf("behind a proxy: %d", w.Code)
	}
}
