package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestDNSNames(t *testing.T) {
	cases := map[string]struct {
		cfg  Config
		want []string
	}{
		"webhook and metrics Services": {
			cfg:  Config{Namespace: "mpijob-system", WebhookServiceName: WebhookServiceName, MetricsServiceName: MetricsServiceName},
			want: []string{"mpijob-webhook-service.mpijob-system.svc", "mpijob-metrics.mpijob-system.svc"},
		},
		"with the log store's API": {
			cfg:  Config{Namespace: "mpijob-system", WebhookServiceName: WebhookServiceName, MetricsServiceName: MetricsServiceName, LogsServiceName: LogsServiceName},
			want: []string{"mpijob-webhook-service.mpijob-system.svc", "mpijob-metrics.mpijob-system.svc", "mpijob-logs.mpijob-system.svc"},
		},
		"no metrics Service": {
			cfg:  Config{Namespace: "ops", WebhookServiceName: "hooks"},
			want: []string{"hooks.ops.svc"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.cfg.DNSNames()); diff != "" {
				t.Errorf("DNSNames (-want,+got):\n%s", diff)
			}
		})
	}
}

// Before the certificate is mounted the metrics endpoint refuses the
// handshake with a reason; a folder without the files is an error.
func TestLazyBeforeLoad(t *testing.T) {
	var l Lazy
	if _, err := l.GetCertificate(&tls.ClientHelloInfo{}); err == nil || !strings.Contains(err.Error(), "not mounted yet") {
		t.Errorf("GetCertificate before Load: err = %v, want 'not mounted yet'", err)
	}
	if err := l.Load(t.Context(), t.TempDir()); err == nil {
		t.Error("Load of an empty folder: no error")
	}
}

// Once the certificate is in the folder, Lazy serves it: the one the
// rotator wrote, valid for the Service names.
func TestLazyServesTheMountedCertificate(t *testing.T) {
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "mpijob-metrics.mpijob-system.svc"},
		DNSNames: []string{"mpijob-metrics.mpijob-system.svc"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	var l Lazy
	if err := l.Load(t.Context(), dir); err != nil {
		t.Fatalf("Load: %v", err)
	}
	got, err := l.GetCertificate(&tls.ClientHelloInfo{ServerName: "mpijob-metrics.mpijob-system.svc"})
	if err != nil {
		t.Fatalf("GetCertificate after Load: %v", err)
	}
	leaf, err := x509.ParseCertificate(got.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"mpijob-metrics.mpijob-system.svc"}, leaf.DNSNames); diff != "" {
		t.Errorf("served certificate's names (-want,+got):\n%s", diff)
	}
}

// Outside a pod the manager's namespace is the default one.
func TestNamespaceOutsideAPod(t *testing.T) {
	if _, err := os.Stat(serviceAccountNamespace); err == nil {
		t.Skip("runs in a pod")
	}
	if got := Namespace(); got != DefaultNamespace {
		t.Errorf("Namespace() = %q, want %q", got, DefaultNamespace)
	}
}

// Manage needs a Service to name in the certificate.
func TestManageWithoutServiceNames(t *testing.T) {
	if err := Manage(nil, Config{Namespace: "ops"}, make(chan struct{})); err == nil || !strings.Contains(err.Error(), "no webhook Service name") {
		t.Errorf("Manage without Service names: %v, want 'no webhook Service name'", err)
	}
}
