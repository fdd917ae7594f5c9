package localcluster

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/mpijob/mpijob/pkg/logstore"
)

// The log store: Grafana Loki (toolchain.LokiVersion, built from its Go module)
// on loopback, and the log collector, a host process that reads both real
// nodes' pod logs into it and serves the store to mpijob-manager on the
// pod network's bridge behind a bearer token (as OpenShift's LokiStack
// gateway does), so no tenant's pod can query it.
const (
	// lokiPort and lokiGRPCPort are Loki's, on 127.0.0.1.
	lokiPort     = 9462
	lokiGRPCPort = 9463
	// LogStorePort is the token-checking gateway on DNSAddress.
	LogStorePort = 9464
	// LogStoreSecret is the Secret in mpijob-system that tells
	// mpijob-manager the store's URL and token (config/manager reads it).
	LogStoreSecret = "mpijob-log-store"
	// DefaultLogRetention is how long the store keeps lines unless
	// MPIJOB_LOG_RETENTION says otherwise.
	DefaultLogRetention = 24 * time.Hour
	// logCollectorProcess is the host process `mpijob-dev log-collector`.
	logCollectorProcess = "log-collector"
)

// LokiURL is the store as this machine reaches it.
var LokiURL = fmt.Sprintf("http://127.0.0.1:%d", lokiPort)

// LogStoreURL is the store as mpijob-manager's pods reach it.
var LogStoreURL = fmt.Sprintf("http://%s:%d", DNSAddress, LogStorePort)

// LogRetention is the store's retention: MPIJOB_LOG_RETENTION (a Go
// duration of at least 24h), else DefaultLogRetention.
func LogRetention() (time.Duration, error) {
	v := strings.TrimSpace(os.Getenv("MPIJOB_LOG_RETENTION"))
	if v == "" {
		return DefaultLogRetention, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 24*time.Hour || d%time.Hour != 0 {
		return 0, fmt.Errorf("MPIJOB_LOG_RETENTION=%q: give whole hours of at least 24h, e.g. 72h", v)
	}
	return d, nil
}

// lokiConfig renders Loki's configuration: one process, files under dir,
// one tenant per namespace, lines kept for retention.
func lokiConfig(dir string, retention time.Duration) string {
	return fmt.Sprintf(`# Written by mpijob-dev: the local cluster's log store.
auth_enabled: true
server:
  http_listen_address: 127.0.0.1
  http_listen_port: %d
  grpc_listen_address: 127.0.0.1
  grpc_listen_port: %d
  grpc_server_max_recv_msg_size: 16777216
  grpc_server_max_send_msg_size: 16777216
  log_level: warn
common:
  instance_addr: 127.0.0.1
  path_prefix: %[3]s
  replication_factor: 1
  ring:
    kvstore:
      store: inmemory
  storage:
    filesystem:
      chunks_directory: %[3]s/chunks
      rules_directory: %[3]s/rules
schema_config:
  configs:
  - from: "2024-01-01"
    store: tsdb
    object_store: filesystem
    schema: v13
    index:
      prefix: index_
      period: 24h
limits_config:
  retention_period: %[4]dh
  allow_structured_metadata: true
  max_entries_limit_per_query: %[5]d
  reject_old_samples: false
  # Each namespace is a tenant, and these limits are each tenant's own: one
  # that logs without end is refused past them, never another tenant. The
  # collector reads at most 4 MiB of a tenant's files a second and stores
  # each line as OpenShift Logging's record (about 100 bytes more, and the
  # CRI prefix it drops is about 40), so it stays below.
  ingestion_rate_mb: 16
  ingestion_burst_size_mb: 32
  per_stream_rate_limit: 16MB
  per_stream_rate_limit_burst: 32MB
compactor:
  working_directory: %[3]s/compactor
  retention_enabled: true
  delete_request_store: filesystem
  compaction_interval: 10m
ingester:
  chunk_idle_period: 5m
  max_chunk_age: 1h
analytics:
  reporting_enabled: false
`, lokiPort, lokiGRPCPort, dir, int(retention.Hours()), logstore.PageSize)
}

// startLogStore starts Loki and the collector (with the token
// makeLogStoreToken wrote), and writes the Secret that points
// mpijob-manager at the store again (a reinstall in between removed it).
func (c *Cluster) startLogStore(ctx context.Context) error {
	retention, err := LogRetention()
	if err != nil {
		return err
	}
	dir := c.opts.path("loki")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	cfg := filepath.Join(dir, "loki.yaml")
	if err := os.WriteFile(cfg, []byte(lokiConfig(dir, retention)), 0o644); err != nil {
		return err
	}
	if err := c.startProcess("loki", c.opts.bin("loki"), []string{"-config.file=" + cfg}, nil); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "loki", 120*time.Second, func(ctx context.Context) bool {
		return httpOK(ctx, LokiURL+"/ready")
	}); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if err := c.startProcess(logCollectorProcess, self, []string{logCollectorProcess}, []string{"MPIJOB_CACHE_DIR=" + c.opts.CacheDir}); err != nil {
		return err
	}
	if err := c.waitFor(ctx, logCollectorProcess, 60*time.Second, func(ctx context.Context) bool {
		return httpOK(ctx, LogStoreURL+"/ready")
	}); err != nil {
		return err
	}
	return c.writeLogStoreSecret(ctx)
}

// makeLogStoreToken writes the token the log store's gateway takes from
// mpijob-manager, before the manager is installed (installRelease writes it
// into the manager's Secret) and before the store itself runs.
func (c *Cluster) makeLogStoreToken() error {
	dir := c.opts.path("loki")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	token, err := randomHex(32)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "gateway-token"), []byte(token), 0o600)
}

// writeLogStoreSecret writes the Secret that points mpijob-manager at the
// store (its namespace too, if it is not there yet: the manager's pods
// read the Secret when they start). An uninstall (kubectl delete -k
// config/default) removes it with the namespace; a reinstall writes it
// again. Nothing happens where the store was never started.
func (c *Cluster) writeLogStoreSecret(ctx context.Context) error {
	token, err := os.ReadFile(c.opts.path("loki", "gateway-token"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if c.clientset == nil {
		cs, err := kubernetes.NewForConfig(c.restCfg)
		if err != nil {
			return err
		}
		c.clientset = cs
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ManagerNamespace}}
	if _, err := c.clientset.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: LogStoreSecret, Namespace: ManagerNamespace},
		StringData: map[string]string{"url": LogStoreURL, "token": strings.TrimSpace(string(token))},
	}
	if _, err := c.clientset.CoreV1().Secrets(ManagerNamespace).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return err
		}
		if _, err := c.clientset.CoreV1().Secrets(ManagerNamespace).Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// ServeLogs is `mpijob-dev log-collector`: it reads every real node's pod
// logs into Loki and serves Loki on the bridge to callers with the token.
func ServeLogs(ctx context.Context, opts Options, out io.Writer) error {
	token, err := os.ReadFile(opts.path("loki", "gateway-token"))
	if err != nil {
		return fmt.Errorf("the log store's token: %w", err)
	}
	cs, err := opts.clientset()
	if err != nil {
		return err
	}
	// Pods of JobSets only; each one seen is remembered by UID, after it
	// is gone too, while its node keeps its log folder (the lines it still
	// has to send). A pod's lines are its job's only when the pod's Job is
	// one the job's JobSet controls (logstore.Owned): labels and names are
	// anyone's to write in a namespace, the owners' UIDs are not. The Jobs
	// of JobSets are remembered by UID the same way.
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = jobsetv1alpha2.JobSetNameKey
	}))
	inf := factory.Core().V1().Pods().Informer()
	jobInf := factory.Batch().V1().Jobs().Informer()
	type seenPod struct {
		target logstore.Target
		jobUID string
	}
	var mu sync.Mutex
	known := map[string]seenPod{}
	type seenJob struct {
		owner logstore.JobOwner
		key   string // namespace/name, in the Jobs' informer
	}
	jobs := map[string]seenJob{}
	remember := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		t, mpi := logstore.FromPod(logstore.Target{Namespace: p.Namespace, Pod: p.Name, UID: string(p.UID)}, p)
		if mpi {
			_, jobUID := logstore.PodJob(p)
			mu.Lock()
			known[string(p.UID)] = seenPod{target: t, jobUID: jobUID}
			mu.Unlock()
		}
	}
	rememberJob := func(obj any) {
		j, ok := obj.(*batchv1.Job)
		if !ok {
			return
		}
		if owner, ok := logstore.JobOwnerOf(j); ok {
			mu.Lock()
			jobs[string(j.UID)] = seenJob{owner: owner, key: j.Namespace + "/" + j.Name}
			mu.Unlock()
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: remember, UpdateFunc: func(_, o any) { remember(o) }}); err != nil {
		return err
	}
	if _, err := jobInf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: rememberJob, UpdateFunc: func(_, o any) { rememberJob(o) }}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())

	dirs := map[string]string{}
	c := New(opts, io.Discard)
	for i := 1; i <= opts.RealNodes; i++ {
		n := c.realNode(i)
		dirs[filepath.Join(n.state, "pod-logs")] = n.name
	}
	col := &logstore.Collector{
		Dirs:      dirs,
		Store:     &logstore.Client{URL: LokiURL, HTTP: &http.Client{Timeout: time.Minute}},
		Positions: opts.path("loki", "positions.json"),
		Log:       out,
		// A pod not seen yet, or whose Job is not its JobSet's (yet: the
		// Job's event may come after the pod's), is left for a later pass;
		// never read by its name alone.
		Pod: func(ns, name, uid string) (logstore.Target, bool, bool) {
			mu.Lock()
			defer mu.Unlock()
			p, ok := known[uid]
			if !ok {
				return logstore.Target{}, false, true
			}
			j, ownerKnown := jobs[p.jobUID]
			t, mine := logstore.Owned(p.target, p.jobUID, j.owner, ownerKnown)
			return t, mine, true
		},
	}
	target, _ := url.Parse(LokiURL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	want := "Bearer " + strings.TrimSpace(string(token))
	srv := &http.Server{
		Addr:              fmt.Sprintf("%s:%d", DNSAddress, LogStorePort),
		ReadHeaderTimeout: 10 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/ready" {
				_, _ = w.Write([]byte("ready"))
				return
			}
			if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte(want)) != 1 {
				http.Error(w, "the log store takes mpijob-manager's token (Secret mpijob-system/"+LogStoreSecret+")", http.StatusUnauthorized)
				return
			}
			// Reads only: the collector writes on loopback.
			if r.Method != http.MethodGet || !strings.HasPrefix(r.URL.Path, "/loki/api/v1/") {
				http.Error(w, "only Loki's read API is served here", http.StatusForbidden)
				return
			}
			r.Header.Del("Authorization")
			proxy.ServeHTTP(w, r)
		}),
	}
	ln, err := listenUntilDone(ctx, srv)
	if err != nil {
		return err
	}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(out, "log-collector: gateway: %v\n", err)
		}
	}()
	fmt.Fprintf(out, "log-collector: reading %d nodes' pod logs into %s; the store's read API on %s\n", len(dirs), LokiURL, LogStoreURL)
	// Forget pods gone (no pod, no log folder), every ten minutes.
	go wait.UntilWithContext(ctx, func(context.Context) {
		mu.Lock()
		defer mu.Unlock()
		live := map[string]bool{}
		for uid, p := range known {
			t := p.target
			if _, exists, _ := inf.GetIndexer().GetByKey(t.Namespace + "/" + t.Pod); !exists && !podDirExists(dirs, t) {
				delete(known, uid)
			} else {
				live[p.jobUID] = true
			}
		}
		for uid, j := range jobs {
			if _, exists, _ := jobInf.GetIndexer().GetByKey(j.key); !exists && !live[uid] {
				delete(jobs, uid)
			}
		}
	}, 10*time.Minute)
	return col.Run(ctx)
}

// podDirExists reports whether a node still has the pod's log folder.
func podDirExists(dirs map[string]string, t logstore.Target) bool {
	for d := range dirs {
		if fileExists(filepath.Join(d, t.Namespace+"_"+t.Pod+"_"+t.UID)) {
			return true
		}
	}
	return false
}
