package localcluster

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"

	"github.com/mpijob/mpijob/pkg/manifests"
)

// crdSources are the upstream CRDs, read from the module cache of the
// toolchain module that builds their controllers.
var crdSources = []struct{ tool, mod, dir string }{
	{"controllers", "sigs.k8s.io/jobset", "config/components/crd/bases"},
	{"controllers", "github.com/kubeflow/trainer/v2", "manifests/base/crds"},
	{"kueue", "sigs.k8s.io/kueue", "config/components/crd/bases"},
}

// webhookSources are upstream webhook configurations, re-pointed at the
// controllers that run as host processes.
var webhookSources = []struct {
	mod, file, prefix string
	port              int
	// keep, when set, selects the webhooks to install by their path.
	keep func(path string) bool
}{
	{"sigs.k8s.io/jobset", "config/components/webhook/manifests.yaml", "jobset-", jobsetWebhookPort, nil},
	{"github.com/kubeflow/trainer/v2", "manifests/base/webhook/manifests.yaml", "trainer-", trainerWebhookPort, nil},
	{"sigs.k8s.io/kueue", "config/components/webhook/manifests.yaml", "kueue-", kueueWebhookPort, kueueWebhook},
}

// kueueIntegrations are the job kinds Kueue manages in the local cluster:
// TrainJobs (with the queue-name label) and the JobSets under them. Other
// integrations stay off, so Kueue never sits in the way of pods,
// Deployments or plain Jobs.
var kueueIntegrations = []string{"trainer.kubeflow.org/trainjob", "jobset.x-k8s.io/jobset"}

// kueueWebhook keeps Kueue's webhooks for its own API and the enabled
// integrations; Kueue serves no others, and a webhook without a server
// would refuse every object it matches.
func kueueWebhook(path string) bool {
	for _, s := range []string{"-kueue-x-k8s-io-", "-trainer-kubeflow-org-", "-jobset-x-k8s-io-"} {
		if strings.Contains(path, s) {
			return true
		}
	}
	return false
}

func (c *Cluster) newClient() (client.Client, error) {
	if c.client != nil {
		return c.client, nil
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := trainer.AddToScheme(scheme); err != nil {
		return nil, err
	}
	cl, err := client.New(c.restCfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	c.client = cl
	return cl, nil
}

func (c *Cluster) installEngine(ctx context.Context) error {
	cl, err := c.newClient()
	if err != nil {
		return err
	}
	dirs := map[string]string{}
	for _, s := range crdSources {
		d, err := c.moduleDir(ctx, s.tool, s.mod)
		if err != nil {
			return err
		}
		dirs[s.mod] = d
	}
	for _, s := range crdSources {
		objs, err := manifests.ParseFiles(filepath.Join(dirs[s.mod], s.dir))
		if err != nil {
			return err
		}
		// The version each CRD comes from, as a Helm chart labels it:
		// kubectl mpijob doctor reads it.
		if _, v, ok := strings.Cut(filepath.Base(dirs[s.mod]), "@"); ok {
			for _, o := range objs {
				labels := o.GetLabels()
				if labels == nil {
					labels = map[string]string{}
				}
				labels["app.kubernetes.io/version"] = v
				o.SetLabels(labels)
			}
		}
		if err := manifests.Apply(ctx, cl, fieldOwner, objs); err != nil {
			return err
		}
		for _, o := range objs {
			if err := c.waitCRDEstablished(ctx, cl, o.GetName()); err != nil {
				return err
			}
		}
	}
	if err := c.startJobSet(); err != nil {
		return err
	}
	if err := c.startTrainer(); err != nil {
		return err
	}
	if err := c.startKueue(); err != nil {
		return err
	}
	if err := c.waitHealthy(ctx, "jobset", jobsetHealthPort); err != nil {
		return err
	}
	if err := c.waitHealthy(ctx, "trainer", trainerHealthPort); err != nil {
		return err
	}
	if err := c.waitHealthy(ctx, "kueue", kueueHealthPort); err != nil {
		return err
	}
	if err := c.installKueueVisibility(ctx, cl, dirs["sigs.k8s.io/kueue"]); err != nil {
		return err
	}
	if err := c.installTrainerStatusServer(ctx, cl); err != nil {
		return err
	}
	// What Trainer's own install creates (its namespace and public
	// ConfigMap), which config/default's roles refer to.
	objs, err := manifests.ParseFiles(filepath.Join(c.opts.RepoRoot, "config", "dev", "trainer-public.yaml"))
	if err != nil {
		return err
	}
	if err := manifests.Apply(ctx, cl, fieldOwner, objs); err != nil {
		return err
	}
	ca := c.pki.CAPEM
	for _, s := range webhookSources {
		objs, err := manifests.ParseFiles(filepath.Join(dirs[s.mod], s.file))
		if err != nil {
			return err
		}
		for _, o := range objs {
			if s.keep != nil {
				if err := filterWebhooks(o, s.keep); err != nil {
					return err
				}
			}
			if err := repointWebhooks(o, s.prefix, s.port, ca); err != nil {
				return err
			}
		}
		if err := manifests.Apply(ctx, cl, fieldOwner, objs); err != nil {
			return err
		}
	}
	return nil
}

// installKueueVisibility registers Kueue's visibility API with the
// aggregation layer: Kueue's own APIService and Service manifests, the
// APIService checked against the cluster's CA instead of Kueue's
// insecureSkipTLSVerify, and an EndpointSlice that points the Service at
// Kueue on the host. It waits until the API server reports the API
// Available.
func (c *Cluster) installKueueVisibility(ctx context.Context, cl client.Client, kueueDir string) error {
	objs, err := manifests.ParseFiles(
		filepath.Join(kueueDir, "config/components/visibility/apiservice_v1beta2.yaml"),
		filepath.Join(kueueDir, "config/components/visibility/service.yaml"))
	if err != nil {
		return err
	}
	for _, o := range objs {
		if o.GetKind() == "APIService" {
			unstructured.RemoveNestedField(o.Object, "spec", "insecureSkipTLSVerify")
			if err := unstructured.SetNestedField(o.Object, base64.StdEncoding.EncodeToString(c.pki.CAPEM), "spec", "caBundle"); err != nil {
				return err
			}
		}
	}
	ns := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "kueue-system"}}}
	slice := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
		"metadata": map[string]any{"name": kueueVisibilityService + "-host", "namespace": "kueue-system", "labels": map[string]any{
			"kubernetes.io/service-name": kueueVisibilityService, "endpointslice.kubernetes.io/managed-by": fieldOwner}},
		"addressType": "IPv4",
		"ports":       []any{map[string]any{"name": "https", "port": int64(kueueVisibilityPort), "protocol": "TCP"}},
		"endpoints":   []any{map[string]any{"addresses": []any{c.hostIP}, "conditions": map[string]any{"ready": true}}},
	}}
	if err := manifests.Apply(ctx, cl, fieldOwner, append([]*unstructured.Unstructured{ns, slice}, objs...)); err != nil {
		return err
	}
	err = c.waitFor(ctx, "kueue", 60*time.Second, func(ctx context.Context) bool {
		as := &unstructured.Unstructured{}
		as.SetAPIVersion("apiregistration.k8s.io/v1")
		as.SetKind("APIService")
		if err := cl.Get(ctx, client.ObjectKey{Name: "v1beta2.visibility.kueue.x-k8s.io"}, as); err != nil {
			return false
		}
		conds, _, _ := unstructured.NestedSlice(as.Object, "status", "conditions")
		for _, cond := range conds {
			if m, ok := cond.(map[string]any); ok && m["type"] == "Available" && m["status"] == "True" {
				return true
			}
		}
		return false
	})
	if err != nil {
		return fmt.Errorf("the APIService v1beta2.visibility.kueue.x-k8s.io (Kueue's visibility API) is not Available: %w", err)
	}
	return nil
}

// filterWebhooks drops the webhooks whose service path keep rejects.
func filterWebhooks(o *unstructured.Unstructured, keep func(path string) bool) error {
	hooks, _, err := unstructured.NestedSlice(o.Object, "webhooks")
	if err != nil {
		return err
	}
	var kept []any
	for _, h := range hooks {
		m, ok := h.(map[string]any)
		if !ok {
			continue
		}
		path, _, _ := unstructured.NestedString(m, "clientConfig", "service", "path")
		if keep(path) {
			kept = append(kept, m)
		}
	}
	return unstructured.SetNestedSlice(o.Object, kept, "webhooks")
}

// repointWebhooks renames an upstream webhook configuration (both upstreams
// call theirs "mutating-webhook-configuration") and sends its calls to
// https://127.0.0.1:port, keeping each webhook's path. JobSet's pod webhooks
// only ever concern JobSet pods, so they get an objectSelector that keeps
// every other pod (and the cluster) safe from a stopped controller.
func repointWebhooks(o *unstructured.Unstructured, prefix string, port int, ca []byte) error {
	o.SetName(prefix + o.GetName())
	hooks, _, err := unstructured.NestedSlice(o.Object, "webhooks")
	if err != nil {
		return err
	}
	for i, h := range hooks {
		hm, ok := h.(map[string]any)
		if !ok {
			return fmt.Errorf("webhook %d of %s is not an object", i, o.GetName())
		}
		path, _, _ := unstructured.NestedString(hm, "clientConfig", "service", "path")
		hm["clientConfig"] = map[string]any{
			"url":      fmt.Sprintf("https://127.0.0.1:%d%s", port, path),
			"caBundle": base64.StdEncoding.EncodeToString(ca),
		}
		if prefix == "jobset-" && isPodWebhook(hm) {
			hm["objectSelector"] = map[string]any{"matchExpressions": []any{
				map[string]any{"key": "jobset.sigs.k8s.io/jobset-name", "operator": "Exists"},
			}}
		}
		hooks[i] = hm
	}
	return unstructured.SetNestedSlice(o.Object, hooks, "webhooks")
}

func isPodWebhook(h map[string]any) bool {
	rules, _, _ := unstructured.NestedSlice(h, "rules")
	for _, r := range rules {
		rm, _ := r.(map[string]any)
		res, _, _ := unstructured.NestedStringSlice(rm, "resources")
		for _, x := range res {
			if x == "pods" {
				return true
			}
		}
	}
	return false
}

func (c *Cluster) waitCRDEstablished(ctx context.Context, cl client.Client, name string) error {
	return c.waitFor(ctx, "", 60*time.Second, func(ctx context.Context) bool {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := cl.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			return false
		}
		for _, cond := range crd.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true
			}
		}
		return false
	})
}

func (c *Cluster) writeWebhookCerts(dir string) error {
	return c.writeCerts(dir, "webhooks")
}

// writeCerts copies the named certificate and key to dir/tls.{crt,key}.
func (c *Cluster) writeCerts(dir, name string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for src, dst := range map[string]string{"crt": "tls.crt", "key": "tls.key"} {
		b, err := os.ReadFile(c.pki.Path(name, src))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, dst), b, 0o600); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) startJobSet() error {
	certDir := c.opts.path("jobset-certs")
	if err := c.writeWebhookCerts(certDir); err != nil {
		return err
	}
	cfg := fmt.Sprintf(`apiVersion: config.jobset.x-k8s.io/v1alpha1
kind: Configuration
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
webhook:
  host: 127.0.0.1
  port: %d
  certDir: %s
health:
  healthProbeBindAddress: 127.0.0.1:%d
metrics:
  bindAddress: "0"
`, jobsetWebhookPort, certDir, jobsetHealthPort)
	path := c.opts.path("jobset-config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return err
	}
	args := []string{
		"--config=" + path, "--kubeconfig=" + c.componentKubeconfig("admin"),
		"--metrics-bind-address=0", fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", jobsetHealthPort),
	}
	return c.startProcess("jobset", c.opts.bin("jobset"), args, nil)
}

func (c *Cluster) startTrainer() error {
	// Trainer has no certDir setting: it reads
	// $TMPDIR/k8s-webhook-server/serving-certs/tls.{crt,key}.
	tmp := c.opts.path("trainer-tmp")
	if err := c.writeWebhookCerts(filepath.Join(tmp, "k8s-webhook-server", "serving-certs")); err != nil {
		return err
	}
	cfg := fmt.Sprintf(`apiVersion: config.trainer.kubeflow.org/v1alpha1
kind: Configuration
health:
  healthProbeBindAddress: 127.0.0.1:%d
  readinessEndpointName: readyz
  livenessEndpointName: healthz
metrics:
  bindAddress: "0"
webhook:
  host: 127.0.0.1
  port: %d
leaderElection:
  leaderElect: false
certManagement:
  enable: false
# As Trainer's release manifests set them (manifests/base/manager/
# controller_manager_config.yaml): five TrainJobs reconciled at once. With
# one (the built-in default) every TrainJob update waits in one queue.
controller:
  groupKindConcurrency:
    TrainJob.trainer.kubeflow.org: 5
    TrainingRuntime.trainer.kubeflow.org: 1
    ClusterTrainingRuntime.trainer.kubeflow.org: 1
clientConnection:
  qps: 50
  burst: 100
# As upstream's CI runs Trainer (hack/e2e-setup-cluster.sh): training pods
# can report their progress to Trainer's runtime status server, which
# writes status.trainerStatus.
featureGates:
  TrainJobStatus: true
statusServer:
  port: %d
`, trainerHealthPort, trainerWebhookPort, trainerStatusPort)
	path := c.opts.path("trainer-config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return err
	}
	args := []string{"--config=" + path, "--kubeconfig=" + c.componentKubeconfig("admin")}
	bin, args, err := c.trainerInPod(c.opts.bin("trainer-controller-manager"), args)
	if err != nil {
		return err
	}
	return c.startProcess("trainer", bin, args, []string{"TMPDIR=" + tmp})
}

// trainerStatusHost is the name Trainer gives the training pods for its
// runtime status server: its webhook Service in its namespace.
const trainerStatusHost = "kubeflow-trainer-controller-manager.kubeflow-system.svc"

// serviceAccountDir is where a pod finds its service account's token.
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// trainerStatusCertDir is where Trainer v2.3's status server reads its
// serving certificate (a fixed path, pkg/util/cert: not under TMPDIR as
// its webhook's).
const trainerStatusCertDir = "/tmp/k8s-webhook-server/serving-certs"

// trainerInPod returns the command that runs Trainer on the host as it
// runs in its pod, for what its runtime status server reads from the
// pod's file system: in a mount namespace of its own, a service account
// token at serviceAccountDir (Trainer reads only the token's issuer, to
// discover the cluster's OIDC keys), its certificate at
// trainerStatusCertDir, and an /etc/hosts that resolves the issuer's host
// (kubernetes.default.svc) to the API server's Service address, as the
// cluster's DNS would. Nothing of this is seen outside Trainer's process:
// only the empty folders mounted on are left on the host.
func (c *Cluster) trainerInPod(bin string, args []string) (string, []string, error) {
	sa := c.opts.path("trainer-serviceaccount")
	if err := os.MkdirAll(sa, 0o755); err != nil {
		return "", nil, err
	}
	issuer := "https://kubernetes.default.svc." + clusterDomain
	claims, err := json.Marshal(map[string]string{"iss": issuer})
	if err != nil {
		return "", nil, err
	}
	token := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none"}`)) + "." + base64.RawURLEncoding.EncodeToString(claims) + ".unsigned"
	if err := os.WriteFile(filepath.Join(sa, "token"), []byte(token), 0o600); err != nil {
		return "", nil, err
	}
	certs := c.opts.path("trainer-status-certs")
	if err := c.writeCerts(certs, "trainer-status"); err != nil {
		return "", nil, err
	}
	hosts, err := os.ReadFile("/etc/hosts")
	if err != nil {
		return "", nil, err
	}
	hostsPath := c.opts.path("trainer-hosts")
	line := fmt.Sprintf("\n%s kubernetes.default.svc.%s\n", kubernetesServiceIP, clusterDomain)
	if err := os.WriteFile(hostsPath, append(hosts, line...), 0o644); err != nil {
		return "", nil, err
	}
	script := fmt.Sprintf(`set -e
mkdir -p %[1]s %[3]s
mount --bind %[2]s %[1]s
mount --bind %[4]s %[3]s
mount --bind %[5]s /etc/hosts
exec "$0" "$@"`, serviceAccountDir, sa, trainerStatusCertDir, certs, hostsPath)
	return "unshare", append([]string{"--mount", "--propagation", "private", "/bin/sh", "-c", script, bin}, args...), nil
}

// kubernetesServiceIP is the ClusterIP of the Service kubernetes (the
// first address of the Service range).
const kubernetesServiceIP = "10.96.0.1"

// installTrainerStatusServer makes Trainer's runtime status server
// reachable from pods as Trainer's own install does: the Secret Trainer
// copies the CA from into each job's namespace, and its Service, here an
// EndpointSlice to Trainer on the host.
func (c *Cluster) installTrainerStatusServer(ctx context.Context, cl client.Client) error {
	const ns = "kubeflow-system"
	name := strings.SplitN(trainerStatusHost, ".", 2)[0]
	objs := []*unstructured.Unstructured{
		{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}},
		{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
			"metadata":   map[string]any{"name": "kubeflow-trainer-webhook-cert", "namespace": ns},
			"stringData": map[string]any{"ca.crt": string(c.pki.CAPEM)}}},
		{Object: map[string]any{"apiVersion": "v1", "kind": "Service",
			"metadata": map[string]any{"name": name, "namespace": ns},
			"spec": map[string]any{"ports": []any{map[string]any{"name": "status", "port": int64(trainerStatusPort),
				"targetPort": int64(trainerStatusPort), "protocol": "TCP"}}}}},
		{Object: map[string]any{"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
			"metadata": map[string]any{"name": name + "-host", "namespace": ns, "labels": map[string]any{
				"kubernetes.io/service-name": name, "endpointslice.kubernetes.io/managed-by": fieldOwner}},
			"addressType": "IPv4",
			"ports":       []any{map[string]any{"name": "status", "port": int64(trainerStatusPort), "protocol": "TCP"}},
			"endpoints":   []any{map[string]any{"addresses": []any{c.hostIP}, "conditions": map[string]any{"ready": true}}}}},
	}
	return manifests.Apply(ctx, cl, fieldOwner, objs)
}

// kueueMetricsCertDir is where Kueue v0.19 insists on finding a metrics
// certificate (cmd/kueue/main.go), even with metrics off.
const kueueMetricsCertDir = "/etc/kueue/metrics/certs"

// kueueVisibilityCertDir is where Kueue v0.19's visibility API server
// reads its serving certificate when Kueue does not manage certificates
// (pkg/visibility/server.go: certDir); Down removes it.
const kueueVisibilityCertDir = "/visibility"

// startKueue runs Kueue with the TrainJob and JobSet integrations only.
// Jobs without the kueue.x-k8s.io/queue-name label are not Kueue's
// (manageJobsWithoutQueueName: false): they go straight to the scheduler.
func (c *Cluster) startKueue() error {
	certDir := c.opts.path("kueue-certs")
	if err := c.writeWebhookCerts(certDir); err != nil {
		return err
	}
	// Kueue reads its metrics certificate from a fixed path when it does
	// not manage certificates itself; Down removes it.
	if err := c.writeWebhookCerts(kueueMetricsCertDir); err != nil {
		return err
	}
	if err := c.writeCerts(kueueVisibilityCertDir, "kueue-visibility"); err != nil {
		return err
	}
	var frameworks strings.Builder
	for _, f := range kueueIntegrations {
		fmt.Fprintf(&frameworks, "  - %q\n", f)
	}
	cfg := fmt.Sprintf(`apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kueue-system
health:
  healthProbeBindAddress: 127.0.0.1:%d
metrics:
  bindAddress: "0"
webhook:
  host: 127.0.0.1
  port: %d
  certDir: %s
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
manageJobsWithoutQueueName: false
# A job Kueue admitted whose pods are not all Ready in time (Workers that
# cannot all be placed) is evicted and queued again, so what it holds is
# freed: the gang-scheduling timeout of Kueue-managed jobs.
waitForPodsReady:
  timeout: 10m
  blockAdmission: false
  requeuingStrategy:
    timestamp: Eviction
    backoffBaseSeconds: 60
# Kueue's visibility API (queue positions in Kueue's own order), reached
# through the API server's aggregation layer.
visibilityServer:
  bindAddress: %q
  bindPort: %d
# As Kueue's release manifests set them (config/components/manager/
# controller_manager_config.yaml).
controller:
  groupKindConcurrency:
    Job.batch: 5
    Pod: 5
    Workload.kueue.x-k8s.io: 10
    LocalQueue.kueue.x-k8s.io: 5
    Cohort.kueue.x-k8s.io: 1
    ClusterQueue.kueue.x-k8s.io: 5
    ResourceFlavor.kueue.x-k8s.io: 1
clientConnection:
  qps: 300
  burst: 500
# Tenants' pods get an ephemeral-storage limit by default (config/dev/
# tenants.yaml, LimitRange "defaults"), which no ClusterQueue covers:
# Kueue leaves the resource to the kubelet instead of refusing the jobs.
resources:
  excludeResourcePrefixes: ["ephemeral-storage"]
integrations:
  frameworks:
%s`, kueueHealthPort, kueueWebhookPort, certDir, c.hostIP, kueueVisibilityPort, frameworks.String())
	path := c.opts.path("kueue-config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return err
	}
	args := []string{
		"--config=" + path, "--kubeconfig=" + c.componentKubeconfig("admin"),
	}
	return c.startProcess("kueue", c.opts.bin("kueue"), args, nil)
}

// waitHealthy waits for a controller's /readyz.
func (c *Cluster) waitHealthy(ctx context.Context, name string, port int) error {
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12}}}
	return c.waitFor(ctx, name, 90*time.Second, func(context.Context) bool {
		resp, err := hc.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", port))
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// installProject installs mpijob as a user does (config/default: roles,
// runtimes, the mpijob-manager and mpijob-dashboard Deployments with the
// images built from this checkout, webhooks through their Service), then
// the development users, namespaces and quotas (config/dev), and starts
// the development dashboard on the host.
func (c *Cluster) installProject(ctx context.Context) error {
	if err := c.importProjectImages(ctx, c.projectTars, c.projectRefs); err != nil {
		return err
	}
	if err := c.installRelease(ctx, c.projectRefs); err != nil {
		return err
	}
	cl, err := c.newClient()
	if err != nil {
		return err
	}
	objs, err := manifests.ParseFiles(filepath.Join(c.opts.RepoRoot, "config", "dev"))
	if err != nil {
		return err
	}
	if err := manifests.Apply(ctx, cl, fieldOwner, objs); err != nil {
		return err
	}
	return c.startDashboard(ctx)
}

// startDashboard builds mpijob-dashboard from this checkout (with the
// front end `make dashboard` built into dashboard/static/app) and starts
// it on DashboardURL. Its login page offers the kubeconfig's users; it
// acts with each user's own token. Namespace names for users who may not
// list namespaces come from the admin context (names only; each is then
// checked with the user's own access review).
func (c *Cluster) startDashboard(ctx context.Context) error {
	bin := c.opts.bin("mpijob-dashboard")
	cmd := staticGoBuild(ctx, c.opts.RepoRoot, bin, "./cmd/mpijob-dashboard", "")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("failed to build mpijob-dashboard: %w\n%s", err, out)
	}
	args := []string{
		"--kubeconfig=" + c.opts.KubeconfigPath(), "--offer-kubeconfig-users", "--namespaces-context=admin",
		fmt.Sprintf("--listen=127.0.0.1:%d", DashboardPort),
		"--prometheus-url=" + PrometheusURL, "--prometheus-scrape-interval=" + ScrapeInterval.String(),
	}
	if err := c.startProcess("mpijob-dashboard", bin, args, nil); err != nil {
		return err
	}
	hc := &http.Client{Timeout: time.Second}
	return c.waitFor(ctx, "mpijob-dashboard", 30*time.Second, func(context.Context) bool {
		resp, err := hc.Get(DashboardURL + "/api/healthz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// serviceAccountKubeconfig writes a kubeconfig that authenticates as a
// ServiceAccount with a token from the TokenRequest API (valid one day).
func (c *Cluster) serviceAccountKubeconfig(ctx context.Context, ns, name string) (string, error) {
	tr, err := c.clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("failed to get a token for ServiceAccount %s/%s: %w", ns, name, err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: server(), CertificateAuthority: c.pki.Path("ca", "crt")}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: "local", AuthInfo: name, Namespace: ns}
	cfg.CurrentContext = name
	path := c.componentKubeconfig(name)
	return path, clientcmd.WriteToFile(*cfg, path)
}
