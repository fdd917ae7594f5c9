package logstore

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/mpijob/mpijob/pkg/api"
)

// issuer is a CA that signs client certificates: the API server's front
// proxy's, or anyone else's.
type issuer struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newIssuer(t *testing.T, name string) *issuer {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &issuer{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// client is a TLS client certificate named cn, signed by the issuer.
func (is *issuer) client(t *testing.T, cn string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		KeyUsage: x509.KeyUsageDigitalSignature, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, is.cert, &key.PublicKey, is.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// The read API over TLS as the API server calls it: a user's read is
// answered only through the front proxy's certificate, only when a
// SubjectAccessReview allows that user pods/log in the namespace, and
// only with the lines of that namespace's job.
func TestAPIReadsForAllowedUsersOnly(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 6, 0, 0, 0, time.UTC)
	loki := &fakeLoki{entries: map[string][]Entry{}}
	for i, tenant := range []string{"team-a", "team-b"} {
		labels := map[string]string{LabelNamespace: tenant, LabelJob: "pi", LabelRole: api.LauncherJob, LabelContainer: api.NodeContainer}
		loki.entries[tenant] = append(loki.entries[tenant],
			Entry{Time: t0, Line: tenant + " line 1", Labels: labels},
			Entry{Time: t0.Add(time.Duration(i+1) * time.Second), Line: tenant + " line 2", Labels: labels})
	}
	store := httptest.NewServer(loki)
	defer store.Close()

	proxyCA, otherCA := newIssuer(t, "front-proxy-ca"), newIssuer(t, "someone-else")
	pool := x509.NewCertPool()
	pool.AddCert(proxyCA.cert)
	kube := fake.NewClientset()
	var reviewed []authorizationv1.SubjectAccessReviewSpec
	kube.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		reviewed = append(reviewed, sar.Spec)
		ra := sar.Spec.ResourceAttributes
		sar.Status.Allowed = sar.Spec.User == "dev-a" && ra.Namespace == "team-a" && ra.Resource == "pods" && ra.Subresource == "log" && ra.Verb == "get"
		if !sar.Status.Allowed {
			sar.Status.Reason = "no RoleBinding allows it"
		}
		return true, sar, nil
	})
	a := &API{Store: &Client{URL: store.URL}, Kube: kube}
	a.Header.Store(&RequestHeader{CA: pool, AllowedNames: []string{"front-proxy-client"}, UsernameHeaders: []string{"X-Remote-User"}, GroupHeaders: []string{"X-Remote-Group"}})
	srv := httptest.NewUnstartedServer(a)
	srv.TLS = TLSConfig(nil)
	srv.TLS.GetCertificate = nil
	srv.StartTLS()
	defer srv.Close()

	get := func(t *testing.T, cert *tls.Certificate, user, path string) (int, string, http.Header) {
		t.Helper()
		tr := srv.Client().Transport.(*http.Transport).Clone()
		if cert != nil {
			tr.TLSClientConfig.Certificates = []tls.Certificate{*cert}
		}
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		if user != "" {
			req.Header.Set("X-Remote-User", user)
			req.Header.Add("X-Remote-Group", "system:authenticated")
		}
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}
	proxy, stranger, wrongName := proxyCA.client(t, "front-proxy-client"), otherCA.client(t, "front-proxy-client"), proxyCA.client(t, "kubelet")
	window := "?start=" + t0.Add(-time.Minute).Format(time.RFC3339) + "&end=" + t0.Add(time.Minute).Format(time.RFC3339)
	cases := map[string]struct {
		cert       *tls.Certificate
		user, path string
		code       int
		want       string // in the body
	}{
		"an allowed user reads the job's lines, in the kubelet's format": {
			cert: &proxy, user: "dev-a", path: Path("team-a", "pi") + window, code: http.StatusOK,
			want: t0.Format(time.RFC3339Nano) + " team-a line 1\n" + t0.Add(time.Second).Format(time.RFC3339Nano) + " team-a line 2\n",
		},
		"a user of another team is refused, told why": {
			cert: &proxy, user: "dev-b", path: Path("team-a", "pi") + window, code: http.StatusForbidden,
			want: `user \"dev-b\" cannot read the logs of pods in namespace \"team-a\", so not the stored log of job pi either: no RoleBinding allows it`,
		},
		"an allowed user of one namespace reads nothing of another": {
			cert: &proxy, user: "dev-a", path: Path("team-b", "pi") + window, code: http.StatusForbidden, want: "cannot read the logs of pods in namespace",
		},
		"a certificate of another CA is not the front proxy": {
			cert: &stranger, user: "dev-a", path: Path("team-a", "pi"), code: http.StatusUnauthorized, want: "is not the API server's front proxy",
		},
		"the front proxy's CA, but not its name": {
			cert: &wrongName, user: "dev-a", path: Path("team-a", "pi"), code: http.StatusUnauthorized, want: `client certificate \"kubelet\" is not an allowed front proxy`,
		},
		"no client certificate, whatever user the headers claim": {
			user: "dev-a", path: Path("team-a", "pi"), code: http.StatusUnauthorized, want: "only the Kubernetes API server may call this API",
		},
		"the front proxy without a user": {
			cert: &proxy, path: Path("team-a", "pi"), code: http.StatusUnauthorized, want: "no user in the request",
		},
		"a bad parameter names itself and the fix": {
			cert: &proxy, user: "dev-a", path: Path("team-a", "pi") + "?role=master", code: http.StatusBadRequest, want: `role \"master\": use launcher or worker`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			code, body, h := get(t, tc.cert, tc.user, tc.path)
			if code != tc.code || !strings.Contains(body, tc.want) {
				t.Errorf("GET %s as %q: %d %q, want %d with %q", tc.path, tc.user, code, body, tc.code, tc.want)
			}
			if code == http.StatusOK && h.Get(SourceHeader) != SourceStore {
				t.Errorf("%s: %q, want %q", SourceHeader, h.Get(SourceHeader), SourceStore)
			}
		})
	}
	for _, r := range reviewed {
		if len(r.Groups) == 0 || r.Groups[0] != "system:authenticated" {
			t.Errorf("the review of %s did not carry the user's groups: %+v", r.User, r.Groups)
		}
	}

	// Bound to the job's JobSet: no JobSet of the name now, no lines (an
	// earlier job of the name left them).
	a.JobSet = func(context.Context, string, string) (string, time.Time, bool, error) {
		return "", time.Time{}, false, nil
	}
	if code, body, _ := get(t, &proxy, "dev-a", Path("team-a", "pi")+window); code != http.StatusOK || body != "" {
		t.Errorf("a job with no JobSet now: %d %q, want 200 and no line", code, body)
	}
	// Not a GET: refused.
	tr := srv.Client().Transport.(*http.Transport).Clone()
	tr.TLSClientConfig.Certificates = []tls.Certificate{proxy}
	req, _ := http.NewRequest(http.MethodDelete, srv.URL+Path("team-a", "pi"), nil)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("DELETE: %d, want 405", resp.StatusCode)
	}
	// Before the front-proxy settings are read: unavailable, said so.
	a.Header.Store(nil)
	if code, body, _ := get(t, &proxy, "dev-a", Path("team-a", "pi")); code != http.StatusServiceUnavailable || !strings.Contains(body, "front-proxy settings") {
		t.Errorf("before the settings are read: %d %q", code, body)
	}
}

// The front-proxy settings are read from kube-system's
// extension-apiserver-authentication, with a clear error when the API
// server has no front proxy.
func TestLoadRequestHeader(t *testing.T) {
	ca := newIssuer(t, "front-proxy-ca")
	cm := func(data map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "extension-apiserver-authentication"}, Data: data}
	}
	cases := map[string]struct {
		objs    []runtime.Object
		want    string // in the error; "" when none
		user    []string
		allowed []string
	}{
		"the API server's settings": {
			objs: []runtime.Object{cm(map[string]string{"requestheader-client-ca-file": string(ca.pem),
				"requestheader-allowed-names": `["front-proxy-client"]`, "requestheader-username-headers": `["X-Remote-User"]`})},
			user: []string{"X-Remote-User"}, allowed: []string{"front-proxy-client"},
		},
		"no username headers: the default": {
			objs: []runtime.Object{cm(map[string]string{"requestheader-client-ca-file": string(ca.pem)})},
			user: []string{"X-Remote-User"},
		},
		"no front proxy":            {objs: []runtime.Object{cm(map[string]string{})}, want: "the API server has no front proxy"},
		"not a certificate":         {objs: []runtime.Object{cm(map[string]string{"requestheader-client-ca-file": "junk"})}, want: "holds no certificate"},
		"a setting that is no list": {objs: []runtime.Object{cm(map[string]string{"requestheader-client-ca-file": string(ca.pem), "requestheader-allowed-names": "front-proxy-client"})}, want: "requestheader-allowed-names"},
		"no ConfigMap":              {want: "reading kube-system/extension-apiserver-authentication"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rh, err := LoadRequestHeader(context.Background(), fake.NewClientset(tc.objs...))
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("err = %v, want %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(rh.UsernameHeaders, ",") != strings.Join(tc.user, ",") || strings.Join(rh.AllowedNames, ",") != strings.Join(tc.allowed, ",") {
				t.Errorf("user headers %v, allowed names %v; want %v, %v", rh.UsernameHeaders, rh.AllowedNames, tc.user, tc.allowed)
			}
		})
	}
}
