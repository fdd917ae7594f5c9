package localcluster

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/certs"
	"github.com/mpijob/mpijob/pkg/localcluster/monitoring"
	"github.com/mpijob/mpijob/pkg/manifests"
)

// PrometheusURL is the local cluster's Prometheus (loopback only).
var PrometheusURL = fmt.Sprintf("http://127.0.0.1:%d", PrometheusPort)

// ScrapeInterval is how often the local Prometheus scrapes (package
// monitoring).
const ScrapeInterval = monitoring.ScrapeInterval

// startPrometheus starts the metrics store: Prometheus, built from its Go
// module, scraping every real node's kubelet (/metrics/resource: CPU and
// memory per container) and each mpijob-manager pod (found through the
// API, as a Prometheus in the cluster finds them), as the ServiceAccount of
// config/monitoring with that folder's recording rules.
func (c *Cluster) startPrometheus(ctx context.Context) error {
	cl, err := c.newClient()
	if err != nil {
		return err
	}
	objs, err := manifests.ParseFiles(filepath.Join(c.opts.RepoRoot, "config", "monitoring", "rbac.yaml"))
	if err != nil {
		return err
	}
	if err := manifests.Apply(ctx, cl, fieldOwner, objs); err != nil {
		return err
	}
	dir := c.opts.path("prometheus")
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return err
	}
	tr, err := c.clientset.CoreV1().ServiceAccounts("mpijob-monitoring").CreateToken(ctx, "prometheus", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](7 * 24 * 3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("failed to get a token for Prometheus (ServiceAccount mpijob-monitoring/prometheus): %w", err)
	}
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte(tr.Status.Token), 0o600); err != nil {
		return err
	}
	cfgPath, err := c.writePrometheusConfig(ctx)
	if err != nil {
		return err
	}
	args := []string{
		"--config.file=" + cfgPath,
		"--storage.tsdb.path=" + filepath.Join(dir, "data"),
		"--storage.tsdb.retention.time=2d",
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", PrometheusPort),
		"--log.level=warn",
		// POST /-/reload re-reads the configuration and the rule files
		// (make dev-reload does, after a change of config/monitoring).
		"--web.enable-lifecycle",
	}
	if err := c.startProcess("prometheus", c.opts.bin("prometheus"), args, nil); err != nil {
		return err
	}
	return c.waitFor(ctx, "prometheus", 60*time.Second, func(ctx context.Context) bool {
		return httpOK(ctx, PrometheusURL+"/-/ready")
	})
}

// prometheusRules are the rule files the local Prometheus evaluates, as
// the release ships them.
var prometheusRules = []string{"recording-rules.yaml", "alerts.yaml"}

// writePrometheusConfig renders the local Prometheus's configuration
// (config/monitoring's rules, the manager's CA of now) and returns its path.
func (c *Cluster) writePrometheusConfig(ctx context.Context) (string, error) {
	dir := c.opts.path("prometheus")
	var nodes []string
	for i := 1; i <= c.opts.RealNodes; i++ {
		nodes = append(nodes, nodeName(i))
	}
	// The manager's certificate comes from its own CA (its rotator's, in
	// the Secret the pods mount); the pods are found through the API.
	managerCA, err := c.writeManagerCA(ctx)
	if err != nil {
		return "", err
	}
	kubeconfig, err := c.serviceAccountKubeconfig(ctx, "mpijob-monitoring", "prometheus")
	if err != nil {
		return "", err
	}
	var rules []string
	for _, f := range prometheusRules {
		rules = append(rules, filepath.Join(c.opts.RepoRoot, "config", "monitoring", f))
	}
	cfg, err := monitoring.PrometheusConfig(monitoring.Targets{
		Nodes: nodes, ManagerCA: managerCA, Kubeconfig: kubeconfig,
		ManagerNamespace: ManagerNamespace, ManagerApp: ManagerDeployment,
		CA: c.pki.Path("ca", "crt"), TokenFile: filepath.Join(dir, "token"),
		APIServer: fmt.Sprintf("127.0.0.1:%d", APIServerPort),
		Rules:     rules,
	})
	if err != nil {
		return "", err
	}
	cfgPath := filepath.Join(dir, "prometheus.yml")
	return cfgPath, os.WriteFile(cfgPath, cfg, 0o644)
}

// reloadPrometheus writes the manager's CA again (a reinstall makes a new
// one) and has Prometheus re-read its configuration and rule files. A
// Prometheus that does not reload (one started before
// --web.enable-lifecycle) is only warned of: it keeps its rules until the
// cluster restarts, as it keeps its scrape jobs.
func (c *Cluster) reloadPrometheus(ctx context.Context) error {
	if _, err := c.writeManagerCA(ctx); err != nil {
		return err
	}
	if err := postReload(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "warning: %v\n", err)
	}
	return nil
}

func postReload(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, PrometheusURL+"/-/reload", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("failed to reload Prometheus: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("the local Prometheus did not reload its configuration (%s): %s; restart the cluster (make dev-down dev) if it predates --web.enable-lifecycle", resp.Status, strings.TrimSpace(string(b)))
	}
	return nil
}

// writeManagerCA copies the CA of mpijob-manager's certificate (from the
// Secret its rotator keeps) to where Prometheus reads it; Reload writes it
// again, as a reinstall makes a new CA (Prometheus re-reads the file).
func (c *Cluster) writeManagerCA(ctx context.Context) (string, error) {
	cl, err := c.newClient()
	if err != nil {
		return "", err
	}
	sec := &corev1.Secret{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ManagerNamespace, Name: certs.SecretName}, sec); err != nil {
		return "", fmt.Errorf("failed to read mpijob-manager's CA (Secret %s/%s): %w", ManagerNamespace, certs.SecretName, err)
	}
	path := filepath.Join(c.opts.path("prometheus"), "mpijob-manager-ca.crt")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	return path, os.WriteFile(path, sec.Data["ca.crt"], 0o644)
}
