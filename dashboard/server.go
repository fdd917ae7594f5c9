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
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/api"
)

//go:embed all:static
var webFS embed.FS

// SessionCookie holds the opaque id of the session of a user who logged in
// on the login page (the token itself stays in the dashboard).
const SessionCookie = "mpijob_session"

// scheme is mpijob's, with CRDs for the doctor's checks (pkg/doctor).
var scheme = func() *runtime.Scheme {
	s := api.NewScheme()
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	return s
}()

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
	// namespaces themselves (their names and whether they are being
	// deleted are used); each is then checked with the user's own
	// SelfSubjectAccessReview. Nil: only what the user lists.
	Namespaces func(ctx context.Context) ([]corev1.Namespace, error)
	// PrometheusURL is the Prometheus that scrapes the kubelets and
	// mpijob-manager, for the Metrics tab; empty: no metrics.
	PrometheusURL string
	// ScrapeInterval is how often that Prometheus scrapes (default 15 s).
	ScrapeInterval time.Duration
	// ModelRegistry is the model registry's Service, NAMESPACE/SERVICE,
	// whose annotation says where its REST API is (empty:
	// $MPIJOB_MODEL_REGISTRY, else the local cluster's). Users register
	// there with their own token; they cannot name another.
	ModelRegistry string
	// Log receives request errors.
	Log *slog.Logger
	// tests are the Test runtime runs.
	tests runtimeTests
	// dial, when set, gives the clients that act with a token instead of
	// clients of Base: the handlers' tests give clients of a fake API
	// server that enforces their users' RBAC.
	dial func(token string) (client.WithWatch, kubernetes.Interface)
	// collectStacks, when set, takes the Stacks tab's stacks instead of
	// exec in the pods (the handlers' tests).
	collectStacks collectStacks
	// listDirect reads job lists from the user's clients on each request
	// instead of from their watch cache (jobsCache): handlers' tests whose
	// fake API server serves no watch over HTTP.
	listDirect bool
	// recheck is how often a cache's user is asked again whether they
	// may still list its jobs (default cacheRecheck).
	recheck time.Duration

	sessions sessions
	limits   streamLimits

	mu      sync.Mutex
	clients map[string]*userClients
	// refused remembers tokens the API server refused, so a flood of
	// bogus tokens costs one review each per refusedFor, not one per
	// request.
	refused map[[32]byte]time.Time
	caches  map[cacheKey]*jobCache
	// listed is, by token, the namespaces each user may list jobs in
	// (listable).
	listed  map[string]listed
	janitor sync.Once
	// rows are the list's rows by job (rows.go).
	rows rows
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
	mux.HandleFunc("GET /api/doctor", s.authed(s.doctor))
	mux.HandleFunc("GET /api/usage", s.authed(s.usage))
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
	mux.HandleFunc("POST /api/jobs/{ns}/{name}/stacks", s.authed(s.jobStacks))
	mux.HandleFunc("GET /api/jobs/{ns}/{name}/artifacts", s.authed(s.jobArtifacts))
	mux.HandleFunc("GET /api/jobs/{ns}/{name}/artifacts/{file...}", s.authed(s.jobArtifact))
	mux.HandleFunc("POST /api/jobs/{ns}/{name}/register", s.authed(s.registerModel))
	mux.HandleFunc("GET /api/namespaces/{ns}/data-connections", s.authed(s.dataConnections))
	mux.HandleFunc("GET /api/stream", s.authed(s.limited("live-update streams", MaxEventStreamsPerUser, s.stream)))
	mux.HandleFunc("GET /api/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such API: "+r.Method+" "+r.URL.Path)
	})
	mux.Handle("/", s.static())
	return guard(s.loopbackOnly(mux))
}

// loopbackOnly refuses, on a dashboard whose login page offers users with
// no credential (the local cluster's), any request addressed to a host
// name other than a loopback one: a page on another site whose name
// resolves to 127.0.0.1 (DNS rebinding) is then same-origin to the
// browser, but names its own host in every request.
func (s *Server) loopbackOnly(h http.Handler) http.Handler {
	if len(s.Users) == 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !LoopbackHost(r.Host) {
			writeError(w, http.StatusMisdirectedRequest, fmt.Sprintf("this dashboard offers its users without a credential, so it answers only to a loopback address, not to host %q (a site whose name points at this machine cannot reach it): open http://127.0.0.1 or http://localhost with its port", r.Host))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// LoopbackHost reports whether a request's Host (with or without a port)
// is localhost or a loopback address.
func LoopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// static serves the embedded front end; unknown paths get index.html (the
// front end routes them).
func (s *Server) static() http.Handler {
	dist, err := fs.Sub(webFS, "static/app")
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
