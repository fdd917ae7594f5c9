package localcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/mpijob/mpijob/pkg/localcluster/images"
	"github.com/mpijob/mpijob/pkg/localcluster/toolchain"
)

// Fixed addresses of the local cluster. They are loopback-only, so nothing
// outside this machine can reach the cluster.
const (
	APIServerPort      = 6443
	etcdClientPort     = 23790
	etcdPeerPort       = 23800
	trainerWebhookPort = 9443
	jobsetWebhookPort  = 9444
	trainerHealthPort  = 9451
	// trainerStatusPort is Trainer's runtime status server (its
	// TrainJobStatus feature), on the host's address for the pods.
	trainerStatusPort = 9465
	jobsetHealthPort  = 9452
	kwokServerPort    = 10247
	// DashboardPort serves mpijob-dashboard on 127.0.0.1.
	DashboardPort    = 9090
	kueueWebhookPort = 9447
	kueueHealthPort  = 9454
	// kueueVisibilityPort serves Kueue's visibility API on the host's
	// address, where the API server's aggregation layer reaches it.
	kueueVisibilityPort  = 9455
	kubeRouterHealthPort = 9456
	kubeProxyHealthPort  = 9457
	kubeProxyMetricsPort = 9458
	// PrometheusPort serves the local cluster's Prometheus on 127.0.0.1.
	PrometheusPort = 9459
	// S3Port serves the object store on DNSAddress (the pod network's
	// bridge): pods and this machine reach it at the same address.
	S3Port = 9460
	// s3AdminPort is the object store's admin API (loopback only).
	s3AdminPort = 9461

	// bridgeName is the Linux bridge every real node's pods attach to.
	bridgeName = "mpijob0"
	// bridgeCIDR is the pod network; the bridge itself holds DNSAddress.
	bridgeCIDR = "10.244.0.0/16"
	// DNSAddress is where CoreDNS listens and what kubelets hand to pods.
	DNSAddress    = "10.244.0.1"
	serviceCIDR   = "10.96.0.0/16"
	clusterDomain = "cluster.local"
	pauseImage    = PauseImage
	hostsMarker   = "# mpijob-localcluster"
	fieldOwner    = "mpijob-dev"
	// frontProxyClient is the name the API server presents to extension
	// API servers (requestheader-allowed-names).
	frontProxyClient = "front-proxy-client"
	// kueueVisibilityService is the Service of Kueue's APIService.
	kueueVisibilityService = "visibility-server"
	// kwokNodeAnnotation marks the nodes kwok manages.
	kwokNodeAnnotation = "kwok.x-k8s.io/node"
	// GPUTaintKey taints the GPU nodes as real GPU clusters do: with the
	// API server's ExtendedResourceToleration plugin, pods that ask for
	// nvidia.com/gpu tolerate it, and CPU pods stay off those nodes.
	GPUTaintKey       = "nvidia.com/gpu"
	kwokNodeLabelType = "type"
)

// Options select what Up starts and where it keeps its files.
type Options struct {
	// RepoRoot is the mpijob repository (holds hack/toolchain, config/, images/).
	RepoRoot string
	// CacheDir keeps built binaries and images between runs.
	CacheDir string
	// StateDir keeps the running cluster's files: kubeconfigs, PKI, logs, data.
	StateDir string
	// RealNodes is the number of kubelet+containerd nodes (default 2).
	RealNodes int
	// KwokNodes is the number of fake GPU nodes managed by kwok (default 16).
	KwokNodes int
	// SkipImages skips building and importing the MPI images.
	SkipImages bool
	// PrebuildImages has the image builder build every on-demand image
	// that is not built yet once the cluster is up (make dev).
	PrebuildImages bool
	// APIServerProfiling serves kube-apiserver's /debug/pprof (to cluster
	// administrators): MPIJOB_APISERVER_PROFILING=1, for bench/scale's
	// -apiserver-profiles. Off by default, as on a production cluster.
	APIServerProfiling bool
}

// DefaultOptions finds the repository from dir (walking up to the go.mod of
// this project) and fills the defaults. MPIJOB_CACHE_DIR overrides the cache.
func DefaultOptions(dir string) (Options, error) {
	root, err := FindRepoRoot(dir)
	if err != nil {
		return Options{}, err
	}
	cache := os.Getenv("MPIJOB_CACHE_DIR")
	if cache == "" {
		cache = filepath.Join(root, ".cache")
	}
	return Options{
		RepoRoot:  root,
		CacheDir:  cache,
		StateDir:  filepath.Join(root, ".local"),
		RealNodes: 2,
		KwokNodes: 16,

		APIServerProfiling: os.Getenv("MPIJOB_APISERVER_PROFILING") == "1",
	}, nil
}

// FindRepoRoot walks up from dir to the directory holding hack/toolchain.
func FindRepoRoot(dir string) (string, error) {
	d, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "hack", "toolchain")); err == nil {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("no mpijob repository (a folder with hack/toolchain) at or above %s: run from the repository", dir)
		}
		d = parent
	}
}

// KubeconfigPath is the admin kubeconfig the cluster writes.
func (o Options) KubeconfigPath() string { return filepath.Join(o.StateDir, "kubeconfig") }

// AuditLogPath is the API server's audit log (JSON lines; policy in
// config/audit/policy.yaml).
func (o Options) AuditLogPath() string { return filepath.Join(o.logDir(), "audit.log") }

// DashboardURL is where the local cluster's dashboard answers.
var DashboardURL = fmt.Sprintf("http://127.0.0.1:%d", DashboardPort)

// PauseImage is the nodes' pause image: an image without sshd or a
// shell, which tests use as a Worker image that cannot serve SSH.
const PauseImage = images.PauseImage

// Kubectl is the kubectl built for the local cluster.
func (o Options) Kubectl() string { return o.bin("kubectl") }

// clientset is the running cluster's admin client (its kubeconfig), for
// the host processes that watch it.
func (o Options) clientset() (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", o.KubeconfigPath())
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

func (o Options) binDir() string         { return filepath.Join(o.CacheDir, "bin") }
func (o Options) bin(name string) string { return filepath.Join(o.binDir(), name) }
func (o Options) pkiDir() string         { return filepath.Join(o.StateDir, "pki") }
func (o Options) logDir() string         { return filepath.Join(o.StateDir, "logs") }
func (o Options) runDir() string         { return filepath.Join(o.StateDir, "run") }
func (o Options) path(p ...string) string {
	return filepath.Join(append([]string{o.StateDir}, p...)...)
}

// nodeName is the name of real node i (1-based).
func nodeName(i int) string { return fmt.Sprintf("mpijob-node-%d", i) }

// nodeAddress is the loopback address kubelet i serves on; /etc/hosts maps
// nodeName(i) to it so the apiserver reaches the kubelet by hostname.
func nodeAddress(i int) string { return fmt.Sprintf("127.0.0.%d", 10+i) }

// kwokNodeName is the name of fake node i (1-based).
func kwokNodeName(i int) string { return fmt.Sprintf("kwok-gpu-%02d", i) }

// BuildToolchain builds every pinned binary that is missing or whose pins
// changed, into CacheDir/bin (package toolchain).
func BuildToolchain(ctx context.Context, opts Options, p *Progress) error {
	return toolchain.Build(ctx, opts.RepoRoot, opts.binDir(), p)
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
