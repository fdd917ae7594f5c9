package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"

	"github.com/mpijob/mpijob/pkg/certs"
	"github.com/mpijob/mpijob/pkg/logstore"
)

// The log store mpijob-manager reads jobs' logs from (the Secret
// mpijob-log-store, optional, sets them): Loki's URL, or a gateway's in
// front of it, and the bearer token it takes.
const (
	logStoreURLEnv   = "MPIJOB_LOG_STORE_URL"
	logStoreTokenEnv = "MPIJOB_LOG_STORE_TOKEN"
	// logStoreTenantEnv is one tenant for every namespace (a LokiStack's
	// "application"); unset, each namespace is its own tenant.
	logStoreTenantEnv = "MPIJOB_LOG_STORE_TENANT"
	// logStoreCAEnv is the PEM of the CA that signed the store's
	// certificate (OpenShift's service CA for a LokiStack gateway).
	logStoreCAEnv = "MPIJOB_LOG_STORE_CA"
	// serviceAccountToken: the token "serviceaccount" sends the manager's
	// own ServiceAccount token, read at each request as the kubelet renews
	// it (a LokiStack gateway authorizes it by its RBAC).
	serviceAccountToken     = "serviceaccount"
	serviceAccountTokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"
)

// logAPI serves logs.mpijob.dev on every replica (not only the leader).
type logAPI struct {
	api   *logstore.API
	kube  kubernetes.Interface
	cert  *certs.Lazy
	ready <-chan struct{}
	port  int
}

func (l *logAPI) NeedLeaderElection() bool { return false }

// Start reads the API server's front-proxy settings (again every five
// minutes, as they rotate), waits for the serving certificate and serves.
func (l *logAPI) Start(ctx context.Context) error {
	log := ctrl.Log.WithName("log-api")
	for {
		rh, err := logstore.LoadRequestHeader(ctx, l.kube)
		if err == nil {
			l.api.Header.Store(rh)
			break
		}
		log.Error(err, "waiting for the API server's front-proxy settings")
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(10 * time.Second):
		}
	}
	go func() {
		t := time.NewTicker(5 * time.Minute)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if rh, err := logstore.LoadRequestHeader(ctx, l.kube); err == nil {
					l.api.Header.Store(rh)
				}
			}
		}
	}()
	select {
	case <-l.ready:
	case <-ctx.Done():
		return nil
	}
	srv := &http.Server{
		Handler:           l.api,
		TLSConfig:         logstore.TLSConfig(l.cert.GetCertificate),
		ReadHeaderTimeout: 10 * time.Second,
	}
	ln, err := net.Listen("tcp", fmt.Sprintf(":%d", l.port))
	if err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Info("serving the log store's read API", "port", l.port, "store", l.api.Store.URL)
	if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// addLogAPI adds the log store's read API when the environment names a
// store; without one, nothing is served and `kubectl mpijob logs` reads
// the pods only.
func addLogAPI(mgr ctrl.Manager, kube kubernetes.Interface, cert *certs.Lazy, ready <-chan struct{}, port int) error {
	url := strings.TrimSpace(os.Getenv(logStoreURLEnv))
	if url == "" {
		ctrl.Log.WithName("log-api").Info("no log store (" + logStoreURLEnv + " is unset): jobs' logs are read from their pods only")
		return nil
	}
	if !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") {
		return fmt.Errorf("%s=%q: give the store's URL, e.g. http://loki.logging.svc:3100", logStoreURLEnv, url)
	}
	store, err := logStoreClient(url, os.Getenv(logStoreTokenEnv), os.Getenv(logStoreTenantEnv), os.Getenv(logStoreCAEnv))
	if err != nil {
		return err
	}
	api := &logstore.API{Store: store, Kube: kube, JobSet: jobSetOf(mgr.GetClient())}
	return mgr.Add(&logAPI{api: api, kube: kube, cert: cert, ready: ready, port: port})
}

// logStoreClient is the store's client from the Secret mpijob-log-store's
// keys.
func logStoreClient(url, token, tenant, ca string) (*logstore.Client, error) {
	c := &logstore.Client{URL: url, Tenant: strings.TrimSpace(tenant)}
	switch token = strings.TrimSpace(token); token {
	case serviceAccountToken:
		c.TokenFile = serviceAccountTokenFile
	default:
		c.Token = token
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if ca = strings.TrimSpace(ca); ca != "" {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(ca)) {
			return nil, fmt.Errorf("%s (the Secret mpijob-log-store's key ca.crt): no PEM certificate in it; give the CA that signed the store's certificate", logStoreCAEnv)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	c.HTTP = &http.Client{Timeout: 2 * time.Minute, Transport: tr}
	return c, nil
}

// jobSetOf finds a job's JobSet in the manager's cache: a stored log is
// read for the job that exists now (logstore.API.JobSet). Trainer deletes
// the JobSet of a job stopped by its activeDeadlineSeconds (--timeout)
// while the TrainJob stays: its lines are then those stored since the
// TrainJob was made, by name (an earlier job of the name was deleted
// before this one was made, so its lines are older).
func jobSetOf(c client.Reader) func(ctx context.Context, ns, name string) (string, time.Time, bool, error) {
	return func(ctx context.Context, ns, name string) (string, time.Time, bool, error) {
		js := &jobsetv1alpha2.JobSet{}
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, js)
		if err == nil {
			return string(js.UID), js.CreationTimestamp.Time, true, nil
		}
		if !apierrors.IsNotFound(err) {
			return "", time.Time{}, false, err
		}
		tj := &trainer.TrainJob{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, tj); err != nil {
			if apierrors.IsNotFound(err) {
				return "", time.Time{}, false, nil
			}
			return "", time.Time{}, false, err
		}
		return "", tj.CreationTimestamp.Time, true, nil
	}
}
