// Package certs gives mpijob-manager its serving certificate the way
// Trainer, JobSet and Kueue do: cert-controller's rotator keeps a CA and a
// certificate for the webhook Service in a Secret of the manager's
// namespace and writes the CA into mpijob's webhook configurations, so
// cert-manager is optional. The metrics endpoint serves the same
// certificate (it names the metrics Service too) once the kubelet has
// mounted it.
package certs

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
)

// Names of what the release manifests (config/manager, config/webhook)
// install; the flags of mpijob-manager default to them.
const (
	SecretName         = "mpijob-webhook-cert"
	WebhookServiceName = "mpijob-webhook-service"
	MetricsServiceName = "mpijob-metrics"
	// LogsServiceName is the Service of the log store's read API
	// (logs.mpijob.dev, an aggregated API), served when a store is set.
	LogsServiceName = "mpijob-logs"
	// LogsAPIServiceName is that API's APIService (config/logstore).
	LogsAPIServiceName    = "v1alpha1.logs.mpijob.dev"
	MutatingWebhookName   = "mpijob-mutating-webhook-configuration"
	ValidatingWebhookName = "mpijob-validating-webhook-configuration"
	DefaultNamespace      = "mpijob-system"
)

// serviceAccountNamespace is where a pod learns its namespace.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// Namespace is the namespace the manager runs in: the pod's, or
// DefaultNamespace outside a pod.
func Namespace() string {
	if b, err := os.ReadFile(serviceAccountNamespace); err == nil {
		if ns := strings.TrimSpace(string(b)); ns != "" {
			return ns
		}
	}
	return DefaultNamespace
}

// Config names the Secret, Services and webhook configurations.
type Config struct {
	Namespace          string
	SecretName         string
	WebhookServiceName string
	MetricsServiceName string
	// LogsServiceName, when set, is named by the certificate too, and
	// LogsAPIService gets the CA.
	LogsServiceName string
	LogsAPIService  string
	CertDir         string
}

// DNSNames are the names the serving certificate is valid for: the
// webhook Service (what the API server calls) and the metrics Service
// (what Prometheus checks), each as name.namespace.svc.
func (c Config) DNSNames() []string {
	var names []string
	for _, svc := range []string{c.WebhookServiceName, c.MetricsServiceName, c.LogsServiceName} {
		if svc != "" {
			names = append(names, fmt.Sprintf("%s.%s.svc", svc, c.Namespace))
		}
	}
	return names
}

// Manage adds cert-controller's rotator to mgr: it fills the Secret,
// injects the CA into mpijob's two webhook configurations and closes ready
// once the certificate is mounted in CertDir and the CA injected. Every
// replica runs it (the webhooks are served by all of them).
func Manage(mgr ctrl.Manager, cfg Config, ready chan struct{}) error {
	names := cfg.DNSNames()
	if len(names) == 0 {
		return errors.New("certs: no webhook Service name")
	}
	hooks := []rotator.WebhookInfo{
		{Type: rotator.Validating, Name: ValidatingWebhookName},
		{Type: rotator.Mutating, Name: MutatingWebhookName},
	}
	if cfg.LogsAPIService != "" {
		hooks = append(hooks, rotator.WebhookInfo{Type: rotator.APIService, Name: cfg.LogsAPIService})
	}
	return rotator.AddRotator(mgr, &rotator.CertRotator{
		SecretKey:             types.NamespacedName{Namespace: cfg.Namespace, Name: cfg.SecretName},
		CertDir:               cfg.CertDir,
		CAName:                "mpijob-ca",
		CAOrganization:        "mpijob",
		DNSName:               names[0],
		ExtraDNSNames:         names[1:],
		IsReady:               ready,
		Webhooks:              hooks,
		RequireLeaderElection: false,
		FieldOwner:            "mpijob-manager",
	})
}

// Lazy serves the certificate in a folder once it is there: the metrics
// server starts with the manager, before the rotator's certificate is
// mounted, so it answers TLS handshakes with an error until Load.
type Lazy struct {
	w atomic.Pointer[certwatcher.CertWatcher]
}

// Load starts watching dir/tls.crt and dir/tls.key (rotations included)
// and serves them from then on.
func (l *Lazy) Load(ctx context.Context, dir string) error {
	w, err := certwatcher.New(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	if err != nil {
		return err
	}
	go func() { _ = w.Start(ctx) }()
	l.w.Store(w)
	return nil
}

// GetCertificate is for tls.Config.
func (l *Lazy) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	w := l.w.Load()
	if w == nil {
		return nil, errors.New("the serving certificate is not mounted yet")
	}
	return w.GetCertificate(hello)
}
