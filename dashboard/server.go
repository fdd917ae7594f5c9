// Package dashboard is the mpijob dashboard's backend: a JSON and
// Server-Sent-Events API over the user's own Kubernetes credentials, and
// the embedded React front end (web/).
//
// Every Kubernetes call is made with the requesting user's token, taken
// from "Authorization: Bearer" (scripts, tests, an OAuth proxy's
// X-Forwarded-Access-Token) or from the session cookie the local login page
// sets, so RBAC, quotas and audit see the real person.
package dashboard

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/api"
)

//go:embed all:web/dist
var webFS embed.FS

// SessionCookie holds the opaque id of the session of a user who logged in
// on the login page (the token itself stays in the dashboard).
const SessionCookie = "mpijob_session"

var scheme = api.NewScheme()

// LoginUser is a user the login page offers (the local cluster's users).
type LoginUser struct {
	Name  string `json:"name"`
	Token string `json:"-"`
}

// Server serves the dashboard.
type Server struct {
	// Base is the API server's address and CA, without credentials.
	Base *rest.Config
	// Users are offered on the login page; empty behind a proxy, where
	// the proxy's forwarded token is used.
	Users []LoginUser
	// Namespaces lists candidate namespaces for users who may not list
	// namespaces themselves (names only); each is then checked with the
	// user's own SelfSubjectAccessReview. Nil: only what the user lists.
	Namespaces func(ctx context.Context) ([]string, error)
	// PrometheusURL is the Prometheus that scrapes the kubelets and
	// mpijob-manager, for the Metrics tab; empty: no metrics.
	PrometheusURL string
	// ScrapeInterval is how often that Prometheus scrapes (default 15 s).
	ScrapeInterval time.Duration
	// Log receives request errors.
	Log *slog.Logger
	// tests are the Test runtime runs.
	tests runtimeTests

	sessions sessions
	limits   streamLimits

	mu      sync.Mutex
	clients map[string]*userClients
	// refused remembers tokens the API server refused, so a flood of
	// bogus tokens costs one review each per refusedFor, not one per
	// request.
	refused map[[32]byte]time.Time
	caches  map[cacheKey]*jobCache
	janitor sync.Once
}

type userClients struct {
	client.WithWatch
	token   string
	cs      kubernetes.Interface
	cfg     *rest.Config // for exec (a PVC's artifacts)
	user    string
	groups  []string
	checked time.Time

	rtMu    sync.Mutex
	rtNames map[string]bool
	rtRead  time.Time
}

// Handler is the dashboard's HTTP handler: the API under /api/, the login
// under /login, and the front end everywhere else.
func (s *Server) Handler() http.Handler {
	if s.Log == nil {
		s.Log = slog.Default()
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/login-users", s.loginUsers)
	mux.HandleFunc("POST /api/login", s.login)
	mux.HandleFunc("POST /api/logout", s.logout)
	mux.HandleFunc("GET /api/whoami", s.authed(s.whoami))
	mux.HandleFunc("GET /api/namespaces", s.authed(s.namespaces))
	mux.HandleFunc("GET /api/manager", s.authed(s.manager))
	mux.HandleFunc("GET /api/runtimes", s.authed(s.listRuntimes))
	mux.HandleFunc("POST /api/runtimes", s.authed(s.createRuntime))
	mux.HandleFunc("POST /api/runtimes/{name}/test", s.authed(s.testRuntime))
	mux.HandleFunc("GET /api/runtime-tests/{id}", s.authed(s.runtimeTest))
	mux.HandleFunc("POST /api/jobs/{ns}", s.authed(s.createJob))
	mux.HandleFunc("POST /api/jobs/{ns}/quota-check", s.authed(s.quotaCheck))
	mux.HandleFunc("GET /api/jobs/{ns}/{name}/input", s.authed(s.jobInput))
	mux.HandleFunc("GET /api/jobs", s.authed(s.listJobs))
	mux.HandleFunc("GET /api/jobs/{ns}/{name}", s.authed(s.getJob))
	mux.HandleFunc("DELETE /api/jobs/{ns}/{name}", s.authed(s.deleteJob))
	mux.HandleFunc("POST /api/jobs/{ns}/{name}/suspend", s.authed(s.suspendJob(true)))
	mux.HandleFunc("POST /api/jobs/{ns}/{name}/resume", s.authed(s.suspendJob(false)))
	mux.HandleFunc("GET /api/jobs/{ns}/{name}/events", s.authed(s.jobEvents))
	mux.HandleFunc("GET /api/jobs/{ns}/{name}/logs", s.authed(s.limited("log streams", MaxLogStreamsPerUser, s.jobLogs)))
	mux.HandleFunc("GET /api/jobs/{ns}/{name}/metrics", s.authed(s.jobMetrics))
	mux.HandleFunc("GET /api/jobs/{ns}/{name}/progress", s.authed(s.jobProgress))
	mux.HandleFunc("GET /api/jobs/{ns}/{name}/artifacts", s.authed(s.jobArtifacts))
	mux.HandleFunc("GET /api/jobs/{ns}/{name}/artifacts/{file...}", s.authed(s.jobArtifact))
	mux.HandleFunc("GET /api/namespaces/{ns}/data-connections", s.authed(s.dataConnections))
	mux.HandleFunc("GET /api/stream", s.authed(s.limited("live-update streams", MaxEventStreamsPerUser, s.stream)))
	mux.HandleFunc("GET /api/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such API: "+r.Method+" "+r.URL.Path)
	})
	mux.Handle("/", s.static())
	return guard(mux)
}

// static serves the embedded front end; unknown paths get index.html (the
// front end routes them).
func (s *Server) static() http.Handler {
	dist, err := fs.Sub(webFS, "web/dist/app")
	if err != nil {
		panic(err)
	}
	files := http.FileServer(http.FS(dist))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := strings.TrimPrefix(path.Clean(r.URL.Path), "/")
		if p != "" {
			if f, err := dist.Open(p); err == nil {
				_ = f.Close()
				if strings.HasPrefix(p, "assets/") {
					w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
				}
				files.ServeHTTP(w, r)
				return
			}
		}
		index, err := fs.ReadFile(dist, "index.html")
		if err != nil {
			http.Error(w, "the dashboard's front end is not built into this binary: run `make dashboard` (npm ci and vite build in dashboard/web), then rebuild", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		_, _ = w.Write(index)
	})
}

// tokenOf finds the user's token: a Bearer header, an OAuth proxy's
// forwarded token, or the token of the session the cookie names. expired
// is true for a cookie whose session is unknown or over.
func (s *Server) tokenOf(r *http.Request) (token string, expired bool) {
	if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") {
		return strings.TrimSpace(strings.TrimPrefix(h, "Bearer ")), false
	}
	if t := r.Header.Get("X-Forwarded-Access-Token"); t != "" {
		return t, false
	}
	if c, err := r.Cookie(SessionCookie); err == nil && c.Value != "" {
		t, ok := s.sessions.token(c.Value, time.Now())
		return t, !ok
	}
	return "", false
}

type handlerFunc func(w http.ResponseWriter, r *http.Request, c *userClients)

// authed resolves the user's clients and answers 401 when the token is
// missing, invalid or expired.
func (s *Server) authed(h handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		token, expired := s.tokenOf(r)
		if expired {
			writeError(w, http.StatusUnauthorized, "your session has expired or the token is not valid: log in again")
			return
		}
		if token == "" {
			writeError(w, http.StatusUnauthorized, "not logged in: log in, or send Authorization: Bearer <token>")
			return
		}
		c, err := s.clientsFor(r.Context(), token)
		if err != nil {
			if apierrors.IsUnauthorized(err) {
				writeError(w, http.StatusUnauthorized, "your session has expired or the token is not valid: log in again")
				return
			}
			s.apiError(w, err)
			return
		}
		h(w, r, c)
	}
}

// clientsFor returns clients acting with token, checking the token with
// a SelfSubjectReview at most once a minute.
func (s *Server) clientsFor(ctx context.Context, token string) (*userClients, error) {
	s.mu.Lock()
	if s.clients == nil {
		s.clients = map[string]*userClients{}
	}
	c, ok := s.clients[token]
	sum := sha256.Sum256([]byte(token))
	refusedAt, refused := s.refused[sum]
	s.mu.Unlock()
	if ok && time.Since(c.checked) < time.Minute {
		return c, nil
	}
	if refused && time.Since(refusedAt) < refusedFor {
		return nil, errRefusedToken
	}
	cfg := rest.AnonymousClientConfig(s.Base)
	cfg.BearerToken = token
	cfg.QPS, cfg.Burst = 50, 100
	cl, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	rev, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		s.mu.Lock()
		delete(s.clients, token)
		if apierrors.IsUnauthorized(err) {
			if s.refused == nil || len(s.refused) >= refusedMax {
				s.refused = map[[32]byte]time.Time{}
			}
			s.refused[sum] = time.Now()
		}
		s.mu.Unlock()
		return nil, err
	}
	c = &userClients{WithWatch: cl, token: token, cs: cs, cfg: cfg, user: rev.Status.UserInfo.Username, groups: rev.Status.UserInfo.Groups, checked: time.Now()}
	s.mu.Lock()
	if len(s.clients) > 1000 {
		s.clients = map[string]*userClients{}
	}
	s.clients[token] = c
	s.mu.Unlock()
	return c, nil
}

// A refused token is answered from memory for refusedFor; at most
// refusedMax are remembered (the map starts again when full).
const (
	refusedFor = 10 * time.Second
	refusedMax = 4096
)

var errRefusedToken = apierrors.NewUnauthorized("the token was refused moments ago")

func (s *Server) loginUsers(w http.ResponseWriter, _ *http.Request) {
	out := []LoginUser{}
	out = append(out, s.Users...)
	writeJSON(w, http.StatusOK, map[string]any{"users": out, "proxy": len(s.Users) == 0})
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	var body struct {
		User  string `json:"user"`
		Token string `json:"token"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&body); err != nil {
		writeError(w, http.StatusBadRequest, "the login request is not JSON: send {\"user\": NAME} or {\"token\": TOKEN}")
		return
	}
	token := body.Token
	if token == "" {
		names := []string{}
		for _, u := range s.Users {
			names = append(names, u.Name)
			if u.Name == body.User {
				token = u.Token
			}
		}
		if token == "" {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("user %q: no such user here; choose one of %s, or paste a token", body.User, strings.Join(names, ", ")))
			return
		}
	}
	c, err := s.clientsFor(r.Context(), token)
	if err != nil {
		if apierrors.IsUnauthorized(err) {
			writeError(w, http.StatusUnauthorized, "the cluster does not accept this token: check it, or ask for a new one")
			return
		}
		s.apiError(w, err)
		return
	}
	id, err := s.sessions.start(token, time.Now())
	if err != nil {
		writeError(w, http.StatusInternalServerError, "cannot start a session: "+err.Error())
		return
	}
	// The cookie holds an opaque session id; the token stays here.
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: id, Path: "/", MaxAge: int(SessionLifetime.Seconds()),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: secureRequest(r)})
	writeJSON(w, http.StatusOK, map[string]any{"user": c.user})
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(SessionCookie); err == nil {
		s.sessions.end(c.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	writeJSON(w, http.StatusOK, map[string]any{})
}

func (s *Server) whoami(w http.ResponseWriter, _ *http.Request, c *userClients) {
	writeJSON(w, http.StatusOK, map[string]any{"user": c.user, "groups": c.groups})
}

// apiError answers with the API server's own status and message (403
// stays 403, naming the user and the verb), or 502 when it is unreachable.
func (s *Server) apiError(w http.ResponseWriter, err error) {
	var st apierrors.APIStatus
	if errors.As(err, &st) && st.Status().Code != 0 {
		writeError(w, int(st.Status().Code), st.Status().Message)
		return
	}
	s.Log.Error("kubernetes call failed", "err", err)
	writeError(w, http.StatusBadGateway, "the Kubernetes API server cannot be reached: "+err.Error())
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	if err := json.NewEncoder(w).Encode(v); err != nil {
		slog.Default().Debug("cannot write an answer", "err", err)
	}
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]any{"error": msg, "code": code})
}
