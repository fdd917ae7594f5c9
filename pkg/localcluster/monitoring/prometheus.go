// Package monitoring is the local cluster's Prometheus configuration: what
// it scrapes (the kubelets' resource metrics, the mpijob-manager pods) and
// how often.
package monitoring

import (
	"time"

	"sigs.k8s.io/yaml"

	"github.com/mpijob/mpijob/pkg/certs"
)

// ScrapeInterval is how often the local Prometheus scrapes: short, so a
// job of a minute has a dozen points.
const ScrapeInterval = 5 * time.Second

// Targets is what the local Prometheus scrapes and with what.
type Targets struct {
	// Nodes are the real nodes' names (their kubelets serve on :10250
	// with a certificate for that name).
	Nodes []string
	// ManagerCA verifies mpijob-manager's certificate (its own CA);
	// Kubeconfig is how Prometheus finds the manager pods.
	ManagerCA, Kubeconfig string
	// CA verifies the kubelets; TokenFile authenticates.
	CA, TokenFile string
	// Rules are the rule files (recording rules and alerts).
	Rules []string
	// APIServer is the API server's host:port: its admission webhook
	// metrics say when mpijob's webhooks fail.
	APIServer string
	// ManagerNamespace and ManagerApp find the mpijob-manager pods (label
	// app.kubernetes.io/name=ManagerApp).
	ManagerNamespace, ManagerApp string
}

// PrometheusConfig renders the local Prometheus's configuration.
func PrometheusConfig(t Targets) ([]byte, error) {
	type static struct {
		Targets []string          `json:"targets"`
		Labels  map[string]string `json:"labels,omitempty"`
	}
	auth := map[string]any{"credentials_file": t.TokenFile}
	tlsCfg := map[string]any{"ca_file": t.CA}
	var kubelets []static
	for _, n := range t.Nodes {
		kubelets = append(kubelets, static{Targets: []string{n + ":10250"}, Labels: map[string]string{"node": n}})
	}
	interval := ScrapeInterval.String()
	cfg := map[string]any{
		"global":     map[string]any{"scrape_interval": interval, "evaluation_interval": interval},
		"rule_files": t.Rules,
		"scrape_configs": []map[string]any{
			{
				"job_name": "kube-apiserver", "scheme": "https", "metrics_path": "/metrics",
				"authorization": auth, "tls_config": tlsCfg,
				"static_configs": []static{{Targets: []string{t.APIServer}}},
				// Only what the alerts read: the API server has thousands of series.
				"metric_relabel_configs": []map[string]any{
					{"source_labels": []string{"__name__"}, "regex": "apiserver_admission_webhook_(rejection_count|fail_open_count|request_total)", "action": "keep"},
				},
			},
			{
				"job_name": "kubelet-resource", "scheme": "https", "metrics_path": "/metrics/resource",
				"authorization": auth, "tls_config": tlsCfg, "static_configs": kubelets,
			},
			// Every replica of the Deployment, by pod IP and the port named
			// metrics; the certificate names the metrics Service. Native
			// histograms too: controller-runtime's webhook latency has
			// buckets a decade apart (1, 10, 100 ms) and a native one about
			// 10 % apart, which can tell a p99 from 20 ms (bench/scale);
			// the classic buckets stay for queries that read them.
			{
				"job_name": "mpijob-manager", "scheme": "https", "metrics_path": "/metrics",
				"scrape_native_histograms": true, "always_scrape_classic_histograms": true,
				"authorization": auth,
				"tls_config":    map[string]any{"ca_file": t.ManagerCA, "server_name": certs.MetricsServiceName + "." + t.ManagerNamespace + ".svc"},
				"kubernetes_sd_configs": []map[string]any{{
					"role": "pod", "kubeconfig_file": t.Kubeconfig,
					"namespaces": map[string]any{"names": []string{t.ManagerNamespace}},
					"selectors":  []map[string]any{{"role": "pod", "label": "app.kubernetes.io/name=" + t.ManagerApp}},
				}},
				"relabel_configs": []map[string]any{
					{"source_labels": []string{"__meta_kubernetes_pod_container_port_name"}, "regex": "metrics", "action": "keep"},
					{"source_labels": []string{"__meta_kubernetes_pod_name"}, "target_label": "manager_pod"},
				},
			},
		},
	}
	return yaml.Marshal(cfg)
}
