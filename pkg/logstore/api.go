package logstore

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/mpijob/mpijob/pkg/api"
)

// The aggregated API mpijob-manager serves when a log store is set.
const (
	Group    = "logs.mpijob.dev"
	Version  = "v1alpha1"
	Resource = "trainjobs/log"
	// APIServiceName is the APIService that registers it.
	APIServiceName = Version + "." + Group
	// SourceHeader says where the lines of an answer come from.
	SourceHeader = "X-Mpijob-Log-Source"
	// SourceStore is SourceHeader's value for the log store.
	SourceStore = "log store"
)

// Path is the API path of a job's stored log.
func Path(ns, job string) string {
	return fmt.Sprintf("/apis/%s/%s/namespaces/%s/trainjobs/%s/log", Group, Version, ns, job)
}

// RequestHeader is how the API server proves who a proxied request is
// from (the extension-apiserver-authentication ConfigMap in kube-system):
// its front-proxy client certificate, signed by CA and named in
// AllowedNames, and the user in the headers.
type RequestHeader struct {
	CA              *x509.CertPool
	AllowedNames    []string
	UsernameHeaders []string
	GroupHeaders    []string
	ExtraPrefixes   []string
}

// LoadRequestHeader reads the API server's front-proxy settings.
func LoadRequestHeader(ctx context.Context, cs kubernetes.Interface) (*RequestHeader, error) {
	cm, err := cs.CoreV1().ConfigMaps("kube-system").Get(ctx, "extension-apiserver-authentication", metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading kube-system/extension-apiserver-authentication (the API server's front-proxy settings): %w", err)
	}
	ca := cm.Data["requestheader-client-ca-file"]
	if ca == "" {
		return nil, errors.New("the API server has no front proxy (requestheader-client-ca-file is empty): start it with --requestheader-client-ca-file and --proxy-client-cert-file")
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(ca)) {
		return nil, errors.New("requestheader-client-ca-file holds no certificate")
	}
	rh := &RequestHeader{CA: pool}
	for key, into := range map[string]*[]string{
		"requestheader-allowed-names":        &rh.AllowedNames,
		"requestheader-username-headers":     &rh.UsernameHeaders,
		"requestheader-group-headers":        &rh.GroupHeaders,
		"requestheader-extra-headers-prefix": &rh.ExtraPrefixes,
	} {
		if v := cm.Data[key]; v != "" {
			if err := json.Unmarshal([]byte(v), into); err != nil {
				return nil, fmt.Errorf("%s: %w", key, err)
			}
		}
	}
	if len(rh.UsernameHeaders) == 0 {
		rh.UsernameHeaders = []string{"X-Remote-User"}
	}
	return rh, nil
}

// user is who the API server says sent a request.
type user struct {
	name   string
	groups []string
	extra  map[string]authorizationv1.ExtraValue
}

// authenticate trusts the user headers only on a connection whose client
// certificate is the API server's front proxy.
func (rh *RequestHeader) authenticate(r *http.Request) (user, error) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return user{}, errors.New("no client certificate: only the Kubernetes API server may call this API")
	}
	leaf := r.TLS.PeerCertificates[0]
	inter := x509.NewCertPool()
	for _, c := range r.TLS.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: rh.CA, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return user{}, fmt.Errorf("client certificate is not the API server's front proxy: %w", err)
	}
	if len(rh.AllowedNames) > 0 && !slices.Contains(rh.AllowedNames, leaf.Subject.CommonName) {
		return user{}, fmt.Errorf("client certificate %q is not an allowed front proxy", leaf.Subject.CommonName)
	}
	var u user
	for _, h := range rh.UsernameHeaders {
		if v := r.Header.Get(h); v != "" {
			u.name = v
			break
		}
	}
	if u.name == "" {
		return user{}, errors.New("no user in the request")
	}
	for _, h := range rh.GroupHeaders {
		u.groups = append(u.groups, r.Header.Values(h)...)
	}
	for _, p := range rh.ExtraPrefixes {
		for k, vs := range r.Header {
			if strings.HasPrefix(strings.ToLower(k), strings.ToLower(p)) {
				if u.extra == nil {
					u.extra = map[string]authorizationv1.ExtraValue{}
				}
				u.extra[strings.ToLower(k[len(p):])] = vs
			}
		}
	}
	return u, nil
}

// API serves logs.mpijob.dev/v1alpha1: GET
// /apis/logs.mpijob.dev/v1alpha1/namespaces/NS/trainjobs/NAME/log
// answers the job's stored lines, "TIME TEXT" per line in time order as
// the kubelet's timestamped logs are, for a user who may read the pods'
// logs of NS.
type API struct {
	Store *Client
	// Header is the API server's front-proxy settings (RequestHeader).
	Header atomic.Pointer[RequestHeader]
	Kube   kubernetes.Interface
	// Retention is how long the store keeps lines (said in errors).
	Retention time.Duration
	// JobSet finds the JobSet of job name in ns now (its UID and when it
	// was made; found false when there is none: the read is then empty).
	// A read is bound to it: the lines of its pods, from its creation on,
	// so an earlier job of the same name, or a namespace's earlier tenant,
	// is never shown. Nil reads by name alone.
	JobSet func(ctx context.Context, ns, name string) (uid string, created time.Time, found bool, err error)
}

var logPath = regexp.MustCompile(`^/apis/` + regexp.QuoteMeta(Group) + `/` + Version + `/namespaces/([a-z0-9-]{1,63})/trainjobs/([a-z0-9.-]{1,253})/log$`)

// ServeHTTP answers discovery and the log reads.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/healthz", "/readyz", "/livez":
		_, _ = w.Write([]byte("ok"))
		return
	case "/apis/" + Group:
		writeJSON(w, metav1.APIGroup{
			TypeMeta:         metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"},
			Name:             Group,
			Versions:         []metav1.GroupVersionForDiscovery{{GroupVersion: Group + "/" + Version, Version: Version}},
			PreferredVersion: metav1.GroupVersionForDiscovery{GroupVersion: Group + "/" + Version, Version: Version},
		})
		return
	case "/apis/" + Group + "/" + Version:
		writeJSON(w, metav1.APIResourceList{
			TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
			GroupVersion: Group + "/" + Version,
			APIResources: []metav1.APIResource{{Name: Resource, Namespaced: true, Kind: "TrainJobLog", Verbs: metav1.Verbs{"get"}}},
		})
		return
	}
	m := logPath.FindStringSubmatch(r.URL.Path)
	if m == nil {
		status(w, http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("the path %q is not served here; the log of a job is %s", r.URL.Path, Path("NAMESPACE", "NAME")))
		return
	}
	if r.Method != http.MethodGet {
		status(w, http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed, "only GET")
		return
	}
	ns, job := m[1], m[2]
	rh := a.Header.Load()
	if rh == nil {
		status(w, http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, "mpijob-manager has not read the API server's front-proxy settings yet")
		return
	}
	u, err := rh.authenticate(r)
	if err != nil {
		status(w, http.StatusUnauthorized, metav1.StatusReasonUnauthorized, err.Error())
		return
	}
	if ok, why, err := a.allowed(r.Context(), u, ns); err != nil {
		status(w, http.StatusInternalServerError, metav1.StatusReasonInternalError, "authorizing the read: "+err.Error())
		return
	} else if !ok {
		msg := fmt.Sprintf("user %q cannot read the logs of pods in namespace %q, so not the stored log of job %s either", u.name, ns, job)
		if why != "" {
			msg += ": " + why
		}
		status(w, http.StatusForbidden, metav1.StatusReasonForbidden, msg)
		return
	}
	sel, start, end, err := ParseQuery(ns, job, r.URL.Query(), time.Now())
	if err != nil {
		status(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, err.Error())
		return
	}
	if a.JobSet != nil {
		uid, created, found, err := a.JobSet(r.Context(), ns, job)
		if err != nil {
			status(w, http.StatusInternalServerError, metav1.StatusReasonInternalError, "reading the job: "+err.Error())
			return
		}
		sel.JobSetUID = uid
		if start.Before(created) {
			start = created
		}
		// No job of the name has pods now (none exists, or it has not
		// started), or the time asked for ends before its JobSet began:
		// nothing is stored for it, whatever an earlier job of the name
		// left. The answer is empty.
		if !found || !start.Before(end) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set(SourceHeader, SourceStore)
			return
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set(SourceHeader, SourceStore)
	w.Header().Set("Cache-Control", "no-store")
	bw := bufio.NewWriterSize(w, 64<<10)
	flusher, _ := w.(http.Flusher)
	n := 0
	err = a.Store.Range(r.Context(), ns, sel.LogQL(), start, end, func(e Entry) error {
		if _, err := fmt.Fprintf(bw, "%s %s\n", e.Time.Format(time.RFC3339Nano), e.Line); err != nil {
			return err
		}
		n++
		if n%PageSize == 0 {
			if err := bw.Flush(); err != nil {
				return err
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
		return nil
	})
	if err != nil && n == 0 {
		status(w, http.StatusBadGateway, metav1.StatusReasonServiceUnavailable, err.Error())
		return
	}
	if err != nil {
		fmt.Fprintf(bw, "%s [mpijob] the log store stopped answering after %d lines: %v\n", time.Now().UTC().Format(time.RFC3339Nano), n, err)
	}
	_ = bw.Flush()
}

// ParseQuery reads a log read's parameters: role (launcher, worker or
// node), index (a Worker's), init (true: every container, init
// containers and sidecars too), sinceSeconds, start and end (RFC 3339,
// end exclusive).
func ParseQuery(ns, job string, q map[string][]string, now time.Time) (Selector, time.Time, time.Time, error) {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	sel := Selector{Namespace: ns, Job: job, Index: -1}
	switch r := get("role"); r {
	case "":
	case api.LauncherJob:
		sel.Role = api.LauncherJob
	case "worker", api.WorkerJob:
		sel.Role = api.WorkerJob
	default:
		return sel, time.Time{}, time.Time{}, fmt.Errorf("role %q: use launcher or worker", r)
	}
	if v := get("index"); v != "" {
		i, err := strconv.Atoi(v)
		if err != nil || i < 0 {
			return sel, time.Time{}, time.Time{}, fmt.Errorf("index %q: use a Worker index, 0 or more", v)
		}
		if sel.Role != api.WorkerJob {
			return sel, time.Time{}, time.Time{}, fmt.Errorf("index %q: give it with role=worker", v)
		}
		sel.Index = i
	}
	sel.Init = get("init") == "true"
	// The store keeps at most a few weeks; a read with no start looks back
	// 30 days.
	start, end := now.Add(-30*24*time.Hour), now.Add(time.Minute)
	if v := get("sinceSeconds"); v != "" {
		s, err := strconv.ParseInt(v, 10, 64)
		if err != nil || s <= 0 {
			return sel, start, end, fmt.Errorf("sinceSeconds %q: use a positive number of seconds", v)
		}
		start = now.Add(-time.Duration(s) * time.Second)
	}
	for k, into := range map[string]*time.Time{"start": &start, "end": &end} {
		if v := get(k); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return sel, start, end, fmt.Errorf("%s %q: use an RFC 3339 time, e.g. 2026-11-24T06:00:00Z", k, v)
			}
			*into = t
		}
	}
	if !start.Before(end) {
		return sel, start, end, fmt.Errorf("start %s is not before end %s", start.Format(time.RFC3339Nano), end.Format(time.RFC3339Nano))
	}
	return sel, start, end, nil
}

// allowed asks the API server whether u may get pods/log in ns.
func (a *API) allowed(ctx context.Context, u user, ns string) (bool, string, error) {
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: u.name, Groups: u.groups, Extra: u.extra,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "get", Resource: "pods", Subresource: "log"},
	}}
	got, err := a.Kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return false, "", err
	}
	return got.Status.Allowed, got.Status.Reason, nil
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(v); err != nil {
		return // the caller hung up
	}
}

func status(w http.ResponseWriter, code int, reason metav1.StatusReason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	if err := json.NewEncoder(w).Encode(metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Message: msg, Reason: reason, Code: int32(code),
	}); err != nil {
		return // the caller hung up
	}
}

// TLSConfig asks for the front proxy's client certificate (verified in
// authenticate, against the CA read at that time) and serves getCert.
func TLSConfig(getCert func(*tls.ClientHelloInfo) (*tls.Certificate, error)) *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: getCert,
		ClientAuth:     tls.RequestClientCert,
	}
}
