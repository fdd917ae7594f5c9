package certs

import (
	"crypto/tls"
	"strings"
	"testing"

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
