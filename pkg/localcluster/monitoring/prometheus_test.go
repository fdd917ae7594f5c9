package monitoring

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// The local Prometheus scrapes every real node's kubelet resource metrics
// (TLS checked against the cluster CA) and each manager pod it finds
// through the API (TLS checked against the manager's own CA and the
// metrics Service's name; native histograms and classic buckets), with the
// ServiceAccount token, the API server's admission webhook metrics, and
// loads the recording rules and the alerts.
func TestPrometheusConfig(t *testing.T) {
	b, err := PrometheusConfig(Targets{
		ManagerNamespace: "mpijob-system", ManagerApp: "mpijob-manager",
		Nodes: []string{"mpijob-node-1", "mpijob-node-2"}, ManagerCA: "/s/prometheus/mpijob-manager-ca.crt", Kubeconfig: "/s/prometheus.kubeconfig",
		CA: "/s/pki/ca.crt", TokenFile: "/s/prometheus/token", Rules: []string{"/repo/config/monitoring/recording-rules.yaml", "/repo/config/monitoring/alerts.yaml"},
		APIServer: "127.0.0.1:6443",
	})
	if err != nil {
		t.Fatal(err)
	}
	type static struct {
		Targets []string          `json:"targets"`
		Labels  map[string]string `json:"labels"`
	}
	type sd struct {
		Role           string              `json:"role"`
		KubeconfigFile string              `json:"kubeconfig_file"`
		Namespaces     map[string][]string `json:"namespaces"`
		Selectors      []map[string]string `json:"selectors"`
	}
	type relabel struct {
		SourceLabels []string `json:"source_labels"`
		Regex        string   `json:"regex,omitempty"`
		Action       string   `json:"action,omitempty"`
		TargetLabel  string   `json:"target_label,omitempty"`
	}
	type scrape struct {
		JobName        string            `json:"job_name"`
		Scheme         string            `json:"scheme"`
		MetricsPath    string            `json:"metrics_path"`
		Authorization  map[string]string `json:"authorization"`
		TLSConfig      map[string]string `json:"tls_config"`
		StaticConfigs  []static          `json:"static_configs"`
		KubernetesSD   []sd              `json:"kubernetes_sd_configs"`
		RelabelConfigs []relabel         `json:"relabel_configs"`
		MetricRelabel  []relabel         `json:"metric_relabel_configs"`
		NativeHist     bool              `json:"scrape_native_histograms"`
		ClassicToo     bool              `json:"always_scrape_classic_histograms"`
	}
	var got struct {
		Global        map[string]string `json:"global"`
		RuleFiles     []string          `json:"rule_files"`
		ScrapeConfigs []scrape          `json:"scrape_configs"`
	}
	if err := yaml.UnmarshalStrict(b, &got); err != nil {
		t.Fatalf("config does not decode: %v\n%s", err, b)
	}
	auth := map[string]string{"credentials_file": "/s/prometheus/token"}
	ca := map[string]string{"ca_file": "/s/pki/ca.crt"}
	want := []scrape{
		{JobName: "kube-apiserver", Scheme: "https", MetricsPath: "/metrics", Authorization: auth, TLSConfig: ca,
			StaticConfigs: []static{{Targets: []string{"127.0.0.1:6443"}}},
			MetricRelabel: []relabel{{SourceLabels: []string{"__name__"}, Regex: "apiserver_admission_webhook_(rejection_count|fail_open_count|request_total)", Action: "keep"}}},
		{JobName: "kubelet-resource", Scheme: "https", MetricsPath: "/metrics/resource", Authorization: auth, TLSConfig: ca, StaticConfigs: []static{
			{Targets: []string{"mpijob-node-1:10250"}, Labels: map[string]string{"node": "mpijob-node-1"}},
			{Targets: []string{"mpijob-node-2:10250"}, Labels: map[string]string{"node": "mpijob-node-2"}},
		}},
		{
			JobName: "mpijob-manager", Scheme: "https", MetricsPath: "/metrics", Authorization: auth,
			NativeHist: true, ClassicToo: true,
			TLSConfig: map[string]string{"ca_file": "/s/prometheus/mpijob-manager-ca.crt", "server_name": "mpijob-metrics.mpijob-system.svc"},
			KubernetesSD: []sd{{
				Role: "pod", KubeconfigFile: "/s/prometheus.kubeconfig", Namespaces: map[string][]string{"names": {"mpijob-system"}},
				Selectors: []map[string]string{{"role": "pod", "label": "app.kubernetes.io/name=mpijob-manager"}},
			}},
			RelabelConfigs: []relabel{
				{SourceLabels: []string{"__meta_kubernetes_pod_container_port_name"}, Regex: "metrics", Action: "keep"},
				{SourceLabels: []string{"__meta_kubernetes_pod_name"}, TargetLabel: "manager_pod"},
			},
		},
	}
	if d := cmp.Diff(want, got.ScrapeConfigs); d != "" {
		t.Errorf("scrape configs (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"/repo/config/monitoring/recording-rules.yaml", "/repo/config/monitoring/alerts.yaml"}, got.RuleFiles); d != "" {
		t.Errorf("rule files (-want +got):\n%s", d)
	}
	if got.Global["scrape_interval"] != "5s" {
		t.Errorf("scrape interval %q, want 5s", got.Global["scrape_interval"])
	}
}
