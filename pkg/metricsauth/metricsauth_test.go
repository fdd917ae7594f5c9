package metricsauth

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

// apiServer answers TokenReviews from tokens and SubjectAccessReviews from
// allowed (user → paths it may get), counting the calls.
type apiServer struct {
	tokens  map[string]authnv1.UserInfo
	allowed map[string][]string
	fail    bool
	calls   []string
	sars    []authzv1.SubjectAccessReviewSpec
}

func (a *apiServer) guard() *Guard {
	cs := fake.NewClientset()
	cs.PrependReactor("create", "tokenreviews", func(act clienttesting.Action) (bool, runtime.Object, error) {
		a.calls = append(a.calls, "TokenReview")
		if a.fail {
			return true, nil, errors.New("connection refused")
		}
		tr := act.(clienttesting.CreateAction).GetObject().(*authnv1.TokenReview)
		if u, ok := a.tokens[tr.Spec.Token]; ok {
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true, User: u}
		}
		return true, tr, nil
	})
	cs.PrependReactor("create", "subjectaccessreviews", func(act clienttesting.Action) (bool, runtime.Object, error) {
		a.calls = append(a.calls, "SubjectAccessReview")
		sar := act.(clienttesting.CreateAction).GetObject().(*authzv1.SubjectAccessReview)
		a.sars = append(a.sars, sar.Spec)
		for _, p := range a.allowed[sar.Spec.User] {
			if sar.Spec.NonResourceAttributes != nil && sar.Spec.NonResourceAttributes.Path == p && sar.Spec.NonResourceAttributes.Verb == "get" {
				sar.Status.Allowed = true
			}
		}
		return true, sar, nil
	})
	g := NewGuard(cs.AuthenticationV1(), cs.AuthorizationV1())
	g.Backoff = wait.Backoff{Steps: 1}
	return g
}

func serve(t *testing.T, g *Guard, method, path, auth string) (int, string) {
	t.Helper()
	h, err := g.Wrap(logr.Discard(), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "mpijob_jobs_created_total 1\n")
	}))
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(method, path, nil)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

func TestGuard(t *testing.T) {
	prom := authnv1.UserInfo{Username: "system:serviceaccount:monitoring:prometheus", UID: "u1",
		Groups: []string{"system:serviceaccounts", "system:authenticated"}, Extra: map[string]authnv1.ExtraValue{"k": {"v"}}}
	nobody := authnv1.UserInfo{Username: "system:serviceaccount:team-a:nobody", Groups: []string{"system:authenticated"}}
	tokens := map[string]authnv1.UserInfo{"prom-token": prom, "nobody-token": nobody}
	allowed := map[string][]string{prom.Username: {"/metrics"}}
	cases := map[string]struct {
		method, path, auth string
		fail               bool
		wantCode           int
		wantBody           string
		wantCalls          []string
	}{
		"no token":              {auth: "", wantCode: http.StatusUnauthorized, wantBody: "Unauthorized"},
		"not a bearer token":    {auth: "Basic cHJvbTpwdw==", wantCode: http.StatusUnauthorized},
		"an empty bearer token": {auth: "Bearer  ", wantCode: http.StatusUnauthorized},
		"a token the API server refuses": {auth: "Bearer forged", wantCode: http.StatusUnauthorized,
			wantCalls: []string{"TokenReview"}},
		"a user without the metrics reader's role": {auth: "Bearer nobody-token", wantCode: http.StatusForbidden,
			wantBody: "Authorization denied for user system:serviceaccount:team-a:nobody", wantCalls: []string{"TokenReview", "SubjectAccessReview"}},
		"the metrics reader": {auth: "Bearer prom-token", wantCode: http.StatusOK, wantBody: "mpijob_jobs_created_total 1",
			wantCalls: []string{"TokenReview", "SubjectAccessReview"}},
		"the scheme's case does not matter": {auth: "bearer prom-token", wantCode: http.StatusOK,
			wantCalls: []string{"TokenReview", "SubjectAccessReview"}},
		"the reader, on a path its role does not name": {path: "/debug/pprof/heap", auth: "Bearer prom-token", wantCode: http.StatusForbidden,
			wantCalls: []string{"TokenReview", "SubjectAccessReview"}},
		"the reader, with a verb its role does not name": {method: http.MethodPost, auth: "Bearer prom-token", wantCode: http.StatusForbidden,
			wantCalls: []string{"TokenReview", "SubjectAccessReview"}},
		"the API server cannot answer": {auth: "Bearer prom-token", fail: true, wantCode: http.StatusInternalServerError,
			wantBody: "Authentication failed", wantCalls: []string{"TokenReview"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			a := &apiServer{tokens: tokens, allowed: allowed, fail: tc.fail}
			method, path := tc.method, tc.path
			if method == "" {
				method = http.MethodGet
			}
			if path == "" {
				path = "/metrics"
			}
			code, body := serve(t, a.guard(), method, path, tc.auth)
			if code != tc.wantCode || !strings.Contains(body, tc.wantBody) {
				t.Errorf("%s %s: %d %q, want %d with %q", method, path, code, body, tc.wantCode, tc.wantBody)
			}
			if tc.wantCode != http.StatusOK && strings.Contains(body, "mpijob_jobs_created_total") {
				t.Errorf("a refused request got the metrics: %q", body)
			}
			if diff := cmp.Diff(tc.wantCalls, a.calls); diff != "" {
				t.Errorf("calls to the API server (-want +got):\n%s", diff)
			}
		})
	}
}

// The review asks about the token's whole user (groups, UID, extra) and
// the request's path and verb, as the API server's authorizer would.
func TestGuardAsksAboutTheWholeUser(t *testing.T) {
	u := authnv1.UserInfo{Username: "alice", UID: "42", Groups: []string{"ops"}, Extra: map[string]authnv1.ExtraValue{"scopes": {"a", "b"}}}
	a := &apiServer{tokens: map[string]authnv1.UserInfo{"t": u}, allowed: map[string][]string{"alice": {"/metrics"}}}
	if code, _ := serve(t, a.guard(), http.MethodGet, "/metrics", "Bearer t"); code != http.StatusOK {
		t.Fatalf("code %d", code)
	}
	want := []authzv1.SubjectAccessReviewSpec{{User: "alice", UID: "42", Groups: []string{"ops"},
		Extra:                 map[string]authzv1.ExtraValue{"scopes": {"a", "b"}},
		NonResourceAttributes: &authzv1.NonResourceAttributes{Path: "/metrics", Verb: "get"}}}
	if diff := cmp.Diff(want, a.sars); diff != "" {
		t.Errorf("SubjectAccessReview (-want +got):\n%s", diff)
	}
}

// A scraper every few seconds costs the API server two reviews per TTL,
// not two per scrape; a refused token is remembered too, and a token is
// never taken for another's.
func TestGuardRemembersAnswers(t *testing.T) {
	a := &apiServer{
		tokens:  map[string]authnv1.UserInfo{"prom-token": {Username: "prom"}, "nobody-token": {Username: "nobody"}},
		allowed: map[string][]string{"prom": {"/metrics"}},
	}
	g := a.guard()
	var codes []int
	for _, auth := range []string{"Bearer prom-token", "Bearer prom-token", "Bearer forged", "Bearer forged", "Bearer nobody-token", "Bearer nobody-token", "Bearer prom-token"} {
		code, _ := serve(t, g, http.MethodGet, "/metrics", auth)
		codes = append(codes, code)
	}
	if diff := cmp.Diff([]int{200, 200, 401, 401, 403, 403, 200}, codes); diff != "" {
		t.Errorf("codes (-want +got):\n%s", diff)
	}
	want := []string{"TokenReview", "SubjectAccessReview", "TokenReview", "TokenReview", "SubjectAccessReview"}
	if diff := cmp.Diff(want, a.calls); diff != "" {
		t.Errorf("calls to the API server (-want +got):\n%s", diff)
	}
}
