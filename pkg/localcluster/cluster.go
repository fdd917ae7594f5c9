package localcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/localcluster/pki"
	"github.com/mpijob/mpijob/pkg/localcluster/toolchain"
)

// Cluster is a local cluster being started or stopped.
type Cluster struct {
	opts     Options
	progress *Progress
	pki      *pki.PKI
	hostIP   string
	// mu guards pids: real nodes start concurrently.
	mu        sync.Mutex
	pids      map[string]int
	restCfg   *rest.Config
	clientset kubernetes.Interface
	client    client.Client
	// projectRefs and projectTars are the images of mpijob-manager and
	// mpijob-dashboard built from this checkout (BuildProjectImages).
	projectRefs map[string]string
	projectTars []string
	// deferred are the toolchain.Module.Soon parts whose binaries were
	// missing when Up began (their Dir): Up builds them at low priority
	// and Finish starts them. soon ends with the result of building them,
	// later with that of building what a first job does not need
	// (toolchain.Module.Later); Up starts both builds and Finish awaits
	// them.
	deferred map[string]bool
	soon     chan error
	later    chan error
}

// New returns a Cluster for opts that reports progress to out.
func New(opts Options, out io.Writer) *Cluster {
	return &Cluster{opts: opts, progress: NewProgress(out), pids: map[string]int{}}
}

// stateFile records a running cluster for Status and for recovery.
type stateFile struct {
	StartedAt  time.Time `json:"startedAt"`
	Kubeconfig string    `json:"kubeconfig"`
	Ready      bool      `json:"ready"`
	// OwnerPID is the mpijob-dev process that started the cluster.
	OwnerPID int `json:"ownerPID"`
	// CacheDir is the cache the cluster was started with (its nodes'
	// content stores live there), whatever a later shell names.
	CacheDir string `json:"cacheDir"`
	// Pending names the parts still being built or started after the
	// cluster came up (Finish); empty once everything runs.
	Pending []string `json:"pending,omitempty"`
}

// OwnedBy reports whether the running cluster was started by process pid. A
// foreground `make dev` whose cluster a later run replaced must not stop
// the newer one on Ctrl-C.
func OwnedBy(opts Options, pid int) bool {
	s, err := readState(opts)
	return err == nil && s.OwnerPID == pid
}

// readState reads the running cluster's record; it fails when there is
// none. A record that does not decode reads as empty (no owner, no cache).
func readState(opts Options) (stateFile, error) {
	var s stateFile
	b, err := os.ReadFile(filepath.Join(opts.StateDir, "state.json"))
	if err != nil {
		return s, err
	}
	if json.Unmarshal(b, &s) != nil {
		s = stateFile{}
	}
	return s, nil
}

// laterParts are what Finish always starts, in the words Status uses.
var laterParts = []string{"the log store (Loki)", "the S3 object store", "Prometheus"}

// soonParts are the toolchain.Module.Soon parts (their Dir) in Status's
// words, in the order Finish starts them.
var soonParts = []struct{ dir, words string }{
	{"kube-router", "NetworkPolicy enforcement (kube-router)"},
	{"kwok", "the fake GPU nodes (kwok)"},
}

// deferredParts are the Soon parts Finish starts on this run: those Up
// deferred (kwok only when fake nodes are asked for).
func (c *Cluster) deferredParts() []string {
	var out []string
	for _, sp := range soonParts {
		if c.deferred[sp.dir] && (sp.dir != "kwok" || c.opts.KwokNodes > 0) {
			out = append(out, sp.words)
		}
	}
	return out
}

// Following names what Finish has yet to start once Up returned.
func (c *Cluster) Following() []string { return append(c.deferredParts(), laterParts...) }

// staleModules are the toolchain modules (their Dir) whose binaries are
// missing or out of date: what this Up builds.
func (c *Cluster) staleModules() (map[string]bool, error) {
	stale := map[string]bool{}
	for _, m := range toolchain.Modules() {
		ok, _, err := m.UpToDate(c.opts.RepoRoot, c.opts.binDir())
		if err != nil {
			return nil, err
		}
		if !ok {
			stale[m.Dir] = true
		}
	}
	return stale, nil
}

// Up builds what is missing and starts the cluster a first job needs: the
// control plane, the nodes, the engine and mpijob. What a first job does
// not need (the log, object and metrics stores) builds beside it at low CPU
// priority; Finish starts it. A cluster left over from an earlier run
// (running or crashed) is torn down first, so Up always ends with a fresh,
// known state.
func (c *Cluster) Up(ctx context.Context) error {
	p := c.progress
	if err := c.preflightOrRecover(ctx); err != nil {
		return err
	}
	if err := installPackages(ctx, p); err != nil {
		return err
	}
	stale, err := c.staleModules()
	if err != nil {
		return err
	}
	c.freeDiskForNodes(p, len(stale) > 0)
	// A first run builds the Soon parts after what a first job needs.
	c.deferred = map[string]bool{}
	for _, m := range toolchain.Modules() {
		if m.Soon && stale[m.Dir] {
			c.deferred[m.Dir] = true
		}
	}
	c.soon, c.later = make(chan error, 1), make(chan error, 1)
	go func() {
		// The deferred Soon parts first: Finish starts them first.
		err := toolchain.BuildPicked(ctx, c.opts.RepoRoot, c.opts.binDir(), p, func(m toolchain.Module) bool { return c.deferred[m.Dir] }, true)
		c.soon <- err
		if err != nil {
			c.later <- err
			return
		}
		c.later <- toolchain.BuildPicked(ctx, c.opts.RepoRoot, c.opts.binDir(), p, func(m toolchain.Module) bool { return m.Later }, true)
	}()
	// The Go toolchain (CPU) and the MPI images (debootstrap and wheels:
	// mostly downloads and disk) build side by side on a first run.
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		return toolchain.BuildPicked(gctx, c.opts.RepoRoot, c.opts.binDir(), p, func(m toolchain.Module) bool { return !m.Later && !c.deferred[m.Dir] }, false)
	})
	if !c.opts.SkipImages {
		g.Go(func() error { return BuildImages(gctx, c.opts, p) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	refs, tars, err := BuildProjectImages(ctx, c.opts, p)
	if err != nil {
		return err
	}
	c.projectRefs, c.projectTars = refs, tars
	ip, err := hostIP()
	if err != nil {
		return err
	}
	c.hostIP = ip

	done := p.Step("starting the control plane (etcd %s, Kubernetes %s)", toolchain.EtcdVersion, toolchain.KubernetesVersion)
	for _, d := range []string{c.opts.StateDir, c.opts.logDir(), c.opts.runDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := c.makePKI(); err != nil {
		return err
	}
	if err := c.startEtcd(ctx); err != nil {
		return err
	}
	if err := c.startAPIServer(ctx); err != nil {
		return err
	}
	if err := c.startControllerManager(); err != nil {
		return err
	}
	if err := c.startScheduler(); err != nil {
		return err
	}
	done()

	if c.deferred["kube-router"] {
		done = p.Step("starting %d real nodes (kubelet + containerd), cluster DNS and kube-proxy (NetworkPolicy enforcement follows once kube-router is built)", c.opts.RealNodes)
	} else {
		done = p.Step("starting %d real nodes (kubelet + containerd), cluster DNS, kube-proxy and NetworkPolicy enforcement (kube-router)", c.opts.RealNodes)
	}
	if err := c.startNodes(ctx); err != nil {
		return err
	}
	if err := c.startDNS(ctx); err != nil {
		return err
	}
	if err := c.startKubeProxy(ctx); err != nil {
		return err
	}
	if !c.deferred["kube-router"] {
		if err := c.startNetworkPolicy(ctx); err != nil {
			return err
		}
	}
	done()

	if c.opts.KwokNodes > 0 && !c.deferred["kwok"] {
		done = p.Step("starting kwok with %d fake GPU nodes", c.opts.KwokNodes)
		if err := c.startKwok(ctx); err != nil {
			return err
		}
		done()
	}

	done = p.Step("installing JobSet %s, Kubeflow Trainer %s and Kueue %s", toolchain.JobSetVersion, toolchain.TrainerVersion, toolchain.KueueVersion)
	if err := c.installEngine(ctx); err != nil {
		return err
	}
	done()

	// The manager reads the log store's address and token when it starts;
	// until the store runs (Finish), reading stored logs says it cannot be
	// reached.
	if err := c.makeLogStoreToken(); err != nil {
		return err
	}
	done = p.Step("installing mpijob (config/default: mpijob-manager ×2 with its webhooks, mpijob-dashboard, runtimes, roles), then users, namespaces and quotas")
	if err := c.installProject(ctx); err != nil {
		return err
	}
	done()

	if err := c.waitNodesReady(ctx); err != nil {
		return fmt.Errorf("real nodes did not become Ready: %w", err)
	}
	if err := c.writeState(c.Following()); err != nil {
		return err
	}
	if c.opts.SkipImages {
		return nil
	}
	// The other MPI flavours' images are built when a pod first asks for
	// one (or by `make images`), not here.
	return c.startImageBuilder()
}

// Finish waits for what Up left building and starts it: on a first run
// NetworkPolicy enforcement and the fake GPU nodes (as soon as they are
// built), then the log store (its collector reads the pod logs written so
// far from their start), the S3 object store with each tenant's data
// connection and shared claim, and Prometheus. The cluster is fully up
// when it returns.
func (c *Cluster) Finish(ctx context.Context) error {
	p := c.progress
	if parts := c.deferredParts(); len(parts) > 0 {
		if err := c.await(ctx, c.soon, parts); err != nil {
			return err
		}
		if c.deferred["kube-router"] {
			done := p.Step("starting NetworkPolicy enforcement (kube-router)")
			if err := c.startNetworkPolicy(ctx); err != nil {
				return err
			}
			done()
		}
		if c.opts.KwokNodes > 0 && c.deferred["kwok"] {
			done := p.Step("starting kwok with %d fake GPU nodes", c.opts.KwokNodes)
			if err := c.startKwok(ctx); err != nil {
				return err
			}
			done()
		}
		if err := c.writeState(laterParts); err != nil {
			return err
		}
	}
	// The tenants' shared claims need none of the later builds: they are
	// there as soon as jobs can run (docs/training.md's --pvc shared-data).
	done := p.Step("creating the ReadWriteMany claim %s in each tenant namespace", SharedClaim)
	if err := c.startSharedVolumes(ctx); err != nil {
		return err
	}
	done()
	if err := c.await(ctx, c.later, laterParts); err != nil {
		return err
	}

	done = p.Step("starting the log store (Grafana Loki %s, built from its Go module) and its collector of the nodes' pod logs", toolchain.LokiVersion)
	if err := c.startLogStore(ctx); err != nil {
		return err
	}
	done()

	done = p.Step("starting the S3 object store (versitygw %s) on %s: a bucket, an account and the data connection %s per tenant namespace, the digits dataset in each bucket", toolchain.VersityGWVersion, S3Endpoint, DataConnectionName)
	if err := c.startS3(ctx); err != nil {
		return err
	}
	done()

	done = p.Step("starting Prometheus %s (scraping the kubelets and mpijob-manager) on %s", toolchain.PrometheusVersion, PrometheusURL)
	if err := c.startPrometheus(ctx); err != nil {
		return err
	}
	done()

	done = p.Step("starting the model registry (Kubeflow Model Registry %s, built from its Go module, on PostgreSQL) on %s: the Service %s/%s", toolchain.ModelRegistryVersion, RegistryURL, RegistryNamespace, RegistryService)
	if err := c.startModelRegistry(ctx); err != nil {
		return err
	}
	done()
	return c.writeState(nil)
}

// await waits for one of Up's low-priority builds (ch) of parts, saying so.
func (c *Cluster) await(ctx context.Context, ch chan error, parts []string) error {
	if ch == nil {
		return nil
	}
	done := c.progress.Step("waiting for the builds a first job does not need (%s)", strings.Join(parts, ", "))
	select {
	case err := <-ch:
		if err != nil {
			return err
		}
	case <-ctx.Done():
		return ctx.Err()
	}
	done()
	return nil
}

// minFreeForNodes is the free disk below which Up starts the nodes with
// empty image stores: a store keeps what containerd unpacked on earlier
// runs, and under disk pressure the kubelet deletes images, the pause
// image included, so pods stop starting. The kubelets evict at 1 % free
// (evictionHard in the node config), and a whole make test-e2e wrote
// about 0.5 GiB (2026-11-30); at 12 GiB a machine left with 12-13 GiB
// beside its full stores imported every image again at every other
// start (10 min of CI's time).
const minFreeForNodes = 8 << 30

// freeDiskForNodes removes the nodes' image stores (kept between runs so
// a warm start imports nothing) when the disk is short of minFreeForNodes;
// the images are imported again from the image cache.
func (c *Cluster) freeDiskForNodes(p *Progress, buildsToolchain bool) {
	dir := filepath.Join(c.opts.CacheDir, "nodes")
	if _, err := os.Stat(dir); err != nil {
		return
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(c.opts.CacheDir, &st); err != nil {
		return
	}
	free := st.Bavail * uint64(st.Bsize)
	need := uint64(minFreeForNodes)
	if buildsToolchain {
		need += firstBuildDisk
	}
	if free >= need {
		return
	}
	done := p.Step("freeing disk (%.1f GiB free, under %d GiB): the nodes' image stores go, their images are imported again", float64(free)/(1<<30), need>>30)
	_ = os.RemoveAll(dir)
	if err := syscall.Statfs(c.opts.CacheDir, &st); err == nil {
		p.Infof("%.1f GiB free now", float64(st.Bavail*uint64(st.Bsize))/(1<<30))
	}
	done()
}

// firstBuildDisk is about what building the toolchain from empty caches
// writes while the nodes' stores fill: Go's module and build caches (5.8
// and 10 GiB after a first `make dev` on 2026-11-26) and the OpenMPI
// image's root file system and tars (about 5 GiB, removed after).
const firstBuildDisk = 20 << 30

func (c *Cluster) startNodes(ctx context.Context) error {
	if err := fixHybridCgroups(); err != nil {
		return err
	}
	if err := ensureBridge(); err != nil {
		return err
	}
	if err := ensureBridgeNetfilter(); err != nil {
		return err
	}
	var hosts []string
	for i := 1; i <= c.opts.RealNodes; i++ {
		hosts = append(hosts, fmt.Sprintf("%s %s", nodeAddress(i), nodeName(i)))
	}
	if err := setHostsLines(hosts); err != nil {
		return fmt.Errorf("failed to add node names to /etc/hosts: %w", err)
	}
	// Nodes start side by side: a cold start spends most of its time
	// importing images into each node's containerd.
	errs := make(chan error, c.opts.RealNodes)
	for i := 1; i <= c.opts.RealNodes; i++ {
		n := c.realNode(i)
		go func() { errs <- c.startNode(ctx, n) }()
	}
	var first error
	for i := 1; i <= c.opts.RealNodes; i++ {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (c *Cluster) startNode(ctx context.Context, n realNode) error {
	if err := c.startContainerd(ctx, n); err != nil {
		return err
	}
	if !c.opts.SkipImages {
		if err := c.importImages(ctx, n); err != nil {
			return err
		}
	}
	return c.startKubelet(n)
}

// preflightOrRecover tears down whatever an earlier run left behind, then
// checks the machine.
func (c *Cluster) preflightOrRecover(ctx context.Context) error {
	if os.Geteuid() != 0 {
		return ErrNotRoot
	}
	if leftovers(c.opts) {
		done := c.progress.Step("stopping a local cluster left by an earlier run")
		if err := Down(ctx, c.opts, io.Discard); err != nil {
			return err
		}
		done()
	}
	return c.preflight()
}

func leftovers(opts Options) bool {
	if entries, _ := os.ReadDir(opts.runDir()); len(entries) > 0 {
		return true
	}
	if _, err := os.Stat("/run/mpijob"); err == nil {
		return true
	}
	if b, err := os.ReadFile("/etc/hosts"); err == nil && strings.Contains(string(b), hostsMarker) {
		return true
	}
	return false
}

func (c *Cluster) writeState(pending []string) error {
	started := time.Now()
	if s, err := readState(c.opts); err == nil && s.OwnerPID == os.Getpid() {
		started = s.StartedAt
	}
	b, err := json.MarshalIndent(stateFile{StartedAt: started, Kubeconfig: c.opts.KubeconfigPath(), Ready: true, OwnerPID: os.Getpid(), CacheDir: c.opts.CacheDir, Pending: pending}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(c.opts.path("state.json"), b, 0o644)
}

// apiReady reports whether the apiserver answers /readyz; it also builds the
// clients on first success.
func (c *Cluster) apiReady(ctx context.Context) bool {
	if c.clientset == nil {
		cfg, err := clientcmd.BuildConfigFromFlags("", c.componentKubeconfig("admin"))
		if err != nil {
			return false
		}
		cfg.QPS, cfg.Burst = 100, 200
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return false
		}
		c.restCfg, c.clientset = cfg, cs
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	body, err := c.clientset.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	return err == nil && strings.TrimSpace(string(body)) == "ok"
}

// Down stops every process of the local cluster and removes its mounts,
// network links, cgroups and /etc/hosts lines. It is safe to run at any time,
// also after a crash or when nothing runs.
func Down(ctx context.Context, opts Options, out io.Writer) error {
	if os.Geteuid() != 0 {
		return ErrNotRoot
	}
	stopped := stopAll(opts.runDir())
	if len(stopped) > 0 {
		fmt.Fprintf(out, "stopped: %s\n", strings.Join(stopped, ", "))
	}
	// Containers and shims live in the nodes' cgroups, not in pid files.
	for i := 1; i <= 8; i++ {
		removeCgroupTree(nodeName(i))
	}
	killStrays(opts)
	n := unmountUnder(opts.StateDir, "/run/mpijob", filepath.Join(opts.CacheDir, "nodes"))
	if n > 0 {
		fmt.Fprintf(out, "unmounted %d mounts\n", n)
	}
	for i := 1; i <= 8; i++ {
		removeCgroupTree(nodeName(i))
	}
	cleanupNetwork(opts)
	deleteBridge()
	if err := setHostsLines(nil); err != nil {
		return fmt.Errorf("failed to remove node names from /etc/hosts: %w", err)
	}
	_ = os.RemoveAll("/run/mpijob")
	_ = os.RemoveAll(kueueMetricsCertDir)
	// Only what Up wrote there, and the folder when it is then empty.
	_ = os.Remove(filepath.Join(kueueVisibilityCertDir, "tls.crt"))
	_ = os.Remove(filepath.Join(kueueVisibilityCertDir, "tls.key"))
	_ = os.Remove(kueueVisibilityCertDir)
	// The folders Trainer's mount namespace mounted on (trainerInPod),
	// when empty, and their parents up to the first that is not.
	for _, d := range []string{serviceAccountDir, trainerStatusCertDir} {
		for ; d != "/" && os.Remove(d) == nil; d = filepath.Dir(d) {
		}
	}
	// Its parents too, when nothing else lives there.
	_ = os.Remove(filepath.Dir(kueueMetricsCertDir))
	_ = os.Remove(filepath.Dir(filepath.Dir(kueueMetricsCertDir)))
	for _, d := range []string{"nodes", "etcd", "run", "trainer-tmp", "s3", "volumes"} {
		if err := os.RemoveAll(filepath.Join(opts.StateDir, d)); err != nil {
			return fmt.Errorf("failed to remove %s: %w", filepath.Join(opts.StateDir, d), err)
		}
	}
	_ = os.Remove(filepath.Join(opts.StateDir, "state.json"))
	fmt.Fprintln(out, "local cluster is down")
	return nil
}

// killStrays kills containerd shims and other processes whose command line
// names this cluster's folders but that no pid file recorded.
func killStrays(opts Options) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		cmd := strings.ReplaceAll(string(b), "\x00", " ")
		if strings.Contains(cmd, "/run/mpijob/") || strings.Contains(cmd, opts.StateDir+"/") || strings.Contains(cmd, opts.binDir()+"/") {
			_ = killPid(pid)
		}
	}
}

// Status says whether the local cluster runs and answers.
func Status(ctx context.Context, opts Options) (bool, string) {
	s, err := readState(opts)
	if err != nil {
		return false, "the local cluster is not running: start it with `make dev`"
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", opts.KubeconfigPath())
	if err != nil {
		return false, fmt.Sprintf("the local cluster's kubeconfig is unreadable: %v", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return false, err.Error()
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if _, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
		return false, fmt.Sprintf("the local cluster started at %s does not answer (%v): run `make dev-down` then `make dev`", s.StartedAt.Format(time.RFC3339), err)
	}
	msg := fmt.Sprintf("the local cluster runs since %s; kubeconfig: %s", s.StartedAt.Format(time.RFC3339), s.Kubeconfig)
	if len(s.Pending) > 0 {
		msg += fmt.Sprintf("\nstill being built or started by mpijob-dev up (pid %d): %s", s.OwnerPID, strings.Join(s.Pending, ", "))
	}
	return true, msg
}

// WaitFinished waits until the `mpijob-dev up` that started the cluster has
// started everything (no part pending), saying every minute what it waits
// for. It fails when that process ended first or timeout passes.
func WaitFinished(ctx context.Context, opts Options, out io.Writer, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	last := time.Time{}
	for {
		s, err := readState(opts)
		if err != nil {
			return fmt.Errorf("the local cluster is not running: start it with `make dev`")
		}
		if len(s.Pending) == 0 {
			return nil
		}
		if !processAlive(s.OwnerPID) {
			return fmt.Errorf("mpijob-dev up (pid %d) ended before it started %s: run `make dev-down`, then `make dev`", s.OwnerPID, strings.Join(s.Pending, ", "))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %s the local cluster still waits for %s (mpijob-dev up, pid %d)", timeout, strings.Join(s.Pending, ", "), s.OwnerPID)
		}
		if time.Since(last) >= time.Minute {
			fmt.Fprintf(out, "waiting for mpijob-dev up (pid %d) to start %s ...\n", s.OwnerPID, strings.Join(s.Pending, ", "))
			last = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}
