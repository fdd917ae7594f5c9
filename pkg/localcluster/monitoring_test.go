package localcluster

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// The local Prometheus scrapes every real node's kubelet resource metrics
// and the manager, both over TLS checked against the cluster CA, with the
// ServiceAccount token, and loads the recording rules.
func TestPrometheusConfig(t *testing.T) {
	b, err := prometheusConfig(prometheusTargets{
		Nodes: []string{"mpijob-node-1", "mpijob-node-2"}, Manager: "127.0.0.1:9446",
		CA: "/s/pki/ca.crt", TokenFile: "/s/prometheus/token", Rules: "/repo/config/monitoring/recording-rules.yaml",
	})
	if err != nil {
		t.Fatal(err)
	}
	type static struct {
		Targets []string          `json:"targets"`
		Labels  map[string]string `json:"labels"`
	}
	type scrape struct {
		JobName       string            `json:"job_name"`
		Scheme        string            `json:"scheme"`
		MetricsPath   string            `json:"metrics_path"`
		Authorization map[string]string `json:"authorization"`
		TLSConfig     map[string]string `json:"tls_config"`
		StaticConfigs []static          `json:"static_configs"`
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
		{JobName: "kubelet-resource", Scheme: "https", MetricsPath: "/metrics/resource", Authorization: auth, TLSConfig: ca, StaticConfigs: []static{
			{Targets: []string{"mpijob-node-1:10250"}, Labels: map[string]string{"node": "mpijob-node-1"}},
			{Targets: []string{"mpijob-node-2:10250"}, Labels: map[string]string{"node": "mpijob-node-2"}},
		}},
		{JobName: "mpijob-manager", Scheme: "https", MetricsPath: "/metrics", Authorization: auth, TLSConfig: ca, StaticConfigs: []static{{Targets: []string{"127.0.0.1:9446"}}}},
	}
	if d := cmp.Diff(want, got.ScrapeConfigs); d != "" {
		t.Errorf("scrape configs (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"/repo/config/monitoring/recording-rules.yaml"}, got.RuleFiles); d != "" {
		t.Errorf("rule files (-want +got):\n%s", d)
	}
	if got.Global["scrape_interval"] != "5s" {
		t.Errorf("scrape interval %q, want 5s", got.Global["scrape_interval"])
	}
}
