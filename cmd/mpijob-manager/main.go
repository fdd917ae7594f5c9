// Command mpijob-manager runs mpijob's admission webhooks and controllers
// beside upstream Kubeflow Trainer V2: it admits MPI TrainJobs (validation,
// runtime policy, quota pre-flight, creator) and keeps their diagnosis.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"math"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	mpiadmission "github.com/mpijob/mpijob/pkg/admission"
	"github.com/mpijob/mpijob/pkg/admission/scopecontroller"
	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/certs"
	"github.com/mpijob/mpijob/pkg/diagnose"
	diagnosecontroller "github.com/mpijob/mpijob/pkg/diagnose/controller"
	"github.com/mpijob/mpijob/pkg/launcherlog"
	"github.com/mpijob/mpijob/pkg/metrics"
	"github.com/mpijob/mpijob/pkg/metricsauth"
	"github.com/mpijob/mpijob/pkg/netpol"
	"github.com/mpijob/mpijob/pkg/perjob"
	"github.com/mpijob/mpijob/pkg/placement"
	progresscontroller "github.com/mpijob/mpijob/pkg/progress/controller"
	"github.com/mpijob/mpijob/pkg/queue"
	"github.com/mpijob/mpijob/pkg/registry"
	registrycontroller "github.com/mpijob/mpijob/pkg/registry/controller"
	"github.com/mpijob/mpijob/pkg/runtimes"
	"github.com/mpijob/mpijob/pkg/stacks"
)

// options are the manager's command line.
type options struct {
	metricsAddr, probeAddr, webhookHost, certDir, leaderNS string
	certSecret, webhookService, metricsService, pprofAddr  string
	modelRegistry, modelRegistryCA                         string
	webhookPort, maxWorkers, logAPIPort                    int
	leaderElect, metricsSecure, certManagement             bool
	zap                                                    zap.Options
}

// parseFlags reads the command line; a value out of range is an error
// naming the flag.
func parseFlags(fs *flag.FlagSet, args []string) (options, error) {
	var o options
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8443", "address of the metrics endpoint (HTTPS with authentication unless --metrics-secure=false); 0 disables it")
	fs.BoolVar(&o.metricsSecure, "metrics-secure", true, "serve metrics over HTTPS and require an authorized token")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	fs.StringVar(&o.webhookHost, "webhook-host", "", "address the webhook server binds")
	fs.IntVar(&o.webhookPort, "webhook-port", 9443, "port of the webhook server")
	fs.StringVar(&o.certDir, "webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs", "folder with tls.crt and tls.key (the Secret --webhook-cert-secret mounted) for the webhook server and the metrics endpoint")
	fs.BoolVar(&o.certManagement, "cert-management", true, "make and rotate the serving certificate in the Secret --webhook-cert-secret and write its CA into mpijob's webhook configurations (cert-controller); false when cert-manager or OpenShift's service CA provides both")
	fs.StringVar(&o.certSecret, "webhook-cert-secret", certs.SecretName, "Secret in the manager's namespace that holds the serving certificate")
	fs.StringVar(&o.webhookService, "webhook-service", certs.WebhookServiceName, "Service the API server calls the webhooks through (the certificate names it)")
	fs.StringVar(&o.metricsService, "metrics-service", certs.MetricsServiceName, "Service Prometheus scrapes the metrics through (the certificate names it too); empty for none")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "elect a leader so only one replica acts")
	fs.StringVar(&o.leaderNS, "leader-election-namespace", "", "namespace of the leader election Lease "+api.ManagerLeaseName+" (default: the pod's); clients read it to tell a stale status")
	fs.IntVar(&o.maxWorkers, "max-workers", 256, "most Workers (nodes) a TrainJob of any framework may ask for where its runtime's policy.mpijob.dev/max-workers says nothing; 0 lifts the cap")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "0", "address of Go's /debug/pprof profiles (e.g. 127.0.0.1:6060, to find where CPU and memory go); 0 disables it")
	fs.IntVar(&o.logAPIPort, "log-api-port", 8444, "port of the log store's read API (logs.mpijob.dev, an aggregated API), served when the environment sets "+logStoreURLEnv)
	fs.StringVar(&o.modelRegistry, "model-registry", os.Getenv(registry.Env), "the Model Registry's Service, NAMESPACE/NAME (its annotation "+registry.URLAnnotation+" or OpenShift AI's says where its REST API is), where jobs created with --register-model get their model registered when they succeed; default $"+registry.Env+"; empty: none (such jobs are refused)")
	fs.StringVar(&o.modelRegistryCA, "model-registry-ca", "", "PEM file of the CA that signed the model registry's certificate (default: the system's)")
	o.zap.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.modelRegistry != "" {
		if _, _, err := registry.SplitService("--model-registry", o.modelRegistry); err != nil {
			return o, err
		}
	}
	if o.maxWorkers < 0 || o.maxWorkers > math.MaxInt32 {
		return o, fmt.Errorf("--max-workers %d: give 0 (no cap) to 2147483647", o.maxWorkers)
	}
	return o, nil
}

// newScheme is the types the manager reads and writes.
func newScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, trainer.AddToScheme, jobsetv1alpha2.AddToScheme, api.AddJobStatusToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	return scheme, nil
}

// The leader election's timing: how long a Lease holds, how long its
// holder keeps trying to renew it, and how often each replica tries.
const (
	LeaseDuration = 60 * time.Second
	RenewDeadline = 45 * time.Second
	RetryPeriod   = 5 * time.Second
)

// managerOptions are controller-runtime's options for o: metrics served
// with metricsCert (the webhook's certificate, once mounted), leader
// election on the Lease clients read, and a cache trimmed to what the
// manager reads, its JobSets and pods listed and watched through jobSets
// and pods.
func managerOptions(o options, scheme *runtime.Scheme, metricsCert *certs.Lazy, jobSets, pods toolscache.ListerWatcher) ctrl.Options {
	metricsOpts := metricsserver.Options{BindAddress: o.metricsAddr, SecureServing: o.metricsSecure,
		TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.GetCertificate = metricsCert.GetCertificate }}}
	if o.metricsSecure {
		// TokenReview, then SubjectAccessReview, as controller-runtime's
		// filters.WithAuthenticationAndAuthorization, without k8s.io/apiserver
		// (see pkg/metricsauth).
		metricsOpts.FilterProvider = metricsauth.Filter
	}
	return ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsOpts,
		HealthProbeBindAddress:  o.probeAddr,
		PprofBindAddress:        o.pprofAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        api.ManagerLeaseName,
		LeaderElectionNamespace: o.leaderNS,
		// A replica that stops hands the Lease over at once, so the other
		// one (or a restarted one) leads without waiting for it to expire.
		LeaderElectionReleaseOnCancel: true,
		// A leader that cannot renew its Lease in time stops (the
		// process ends, and its webhooks with it). With client-go's
		// defaults (15 s, renew within 10 s, each try cut at 5 s) a busy
		// API server made both replicas lose it in turn, minutes apart,
		// restarting each while the other was still starting: no ready
		// replica, so every MPI job was refused (make test-e2e on
		// 2026-11-30, load average above 100 on two cores). 45 s to renew,
		// as OpenShift's operators allow for an API server's restart; a
		// replica that stops on purpose still hands over at once.
		LeaseDuration: ptr.To(LeaseDuration),
		RenewDeadline: ptr.To(RenewDeadline),
		RetryPeriod:   ptr.To(RetryPeriod),
		WebhookServer: webhook.NewServer(webhook.Options{Host: o.webhookHost, Port: o.webhookPort, CertDir: o.certDir}),
		// No reader of the cache needs managedFields (writes are
		// server-side applies and patches): dropping them keeps about a
		// fifth less of every cached pod, TrainJob and JobSet in memory.
		// JobSets, their pods and Kueue's Workloads are trimmed further to
		// what the manager reads (diagnose.TrimJobSet, TrimJobSetPod,
		// queue.TrimWorkload): at 500 jobs × 8 Workers their pod templates,
		// environments and mounts were most of the manager's memory; what
		// their Workers repeat (containers, owner, tolerations, conditions)
		// is held once across pods. Every other pod keeps only its node, phase and
		// resources, which free capacity counts (diagnose.TrimPod): one
		// cache of all pods, where a second cache held every JobSet's pod
		// again. TrainJobs keep only the annotations the manager reads
		// (diagnose.TrimTrainJob): a tenant's own may be of any size.
		// JobSets are not even decoded whole: their informer reads
		// through a decoder that skips the pod templates and
		// managedFields (jobSetWatch), and pods' informer through one
		// that skips what TrimPod drops (podWatch).
		Cache: cache.Options{NewInformer: newInformer(jobSets, pods), DefaultTransform: stripAndTrimWorkloads, ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:            {Transform: diagnose.TrimPod},
			&corev1.Node{}:           {Transform: diagnose.CapacityNode},
			&jobsetv1alpha2.JobSet{}: {Transform: diagnose.TrimJobSet},
			&trainer.TrainJob{}:      {Transform: diagnose.TrimTrainJob},
		}},
		// Kueue's Workloads and LocalQueues are read as unstructured data
		// (mpijob depends on Kueue's API, not its Go module), from the cache.
		Client: client.Options{Cache: &client.CacheOptions{Unstructured: true}},
	}
}

func main() {
	o, err := parseFlags(flag.CommandLine, os.Args[1:])
	ctrl.SetLogger(newLogger(&o.zap))
	log := ctrl.Log.WithName("setup")
	if err != nil {
		log.Error(err, "bad command line")
		os.Exit(2)
	}
	if err := run(ctrl.SetupSignalHandler(), ctrl.GetConfigOrDie(), o); err != nil {
		log.Error(err, "mpijob-manager stopped")
		os.Exit(1)
	}
}

// run makes the manager for the API server cfg reaches, sets it up and
// runs it until ctx ends.
func run(ctx context.Context, cfg *rest.Config, o options) error {
	scheme, err := newScheme()
	if err != nil {
		return fmt.Errorf("failed to build the scheme: %w", err)
	}
	// The metrics endpoint serves the webhook's certificate (it names the
	// metrics Service too) once it is mounted.
	var metricsCert certs.Lazy
	jobSets, err := jobSetWatch(cfg, scheme)
	if err != nil {
		return fmt.Errorf("failed to make the JobSets' watch: %w", err)
	}
	pods, err := podWatch(cfg, scheme)
	if err != nil {
		return fmt.Errorf("failed to make the pods' watch: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, managerOptions(o, scheme, &metricsCert, jobSets, pods))
	if err != nil {
		return fmt.Errorf("failed to create the manager: %w", err)
	}
	logs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("failed to create a clientset: %w", err)
	}
	// Only the manager may write a job's status: admission learns who the
	// manager is from the API server itself.
	self, err := logs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("failed to learn which user the manager acts as (SelfSubjectReview): %w", err)
	}
	if err := wire(ctx, mgr, o, logs, self.Status.UserInfo.Username, &metricsCert); err != nil {
		return err
	}
	ctrl.Log.WithName("setup").Info("starting mpijob-manager")
	return mgr.Start(ctx)
}

// leaderIndexes is the runnable that sets up the cache's indexes, all of
// which only the controllers read: pods and Jobs by their JobSet and
// Kueue's Workloads by job where Kueue's API is served, once this replica
// leads (a runnable that says nothing of leader election runs only on
// the leader). An index set up at the start made the replica that does
// not lead watch every pod, Job and Workload of the cluster too (two of
// the API server's five Job watches were the manager's, one of them read
// by nothing; measured 2026-12-03). The check for an earlier job's pods
// reads the pods' index only on the leader, once its pod cache has
// synced (webhooks.podsCached); the other replica reads the API server
// (admission.EarlierPods).
// A controller that reads before its index is there reads by label
// instead (runtimes.ListJobSetPods, runtimes.JobSetPods, queue.Snapshots).
type leaderIndexes struct{ ix client.FieldIndexer }

func (l leaderIndexes) Start(ctx context.Context) error {
	if err := l.ix.IndexField(ctx, &corev1.Pod{}, runtimes.PodsByJobSet, runtimes.IndexByJobSet); err != nil {
		return fmt.Errorf("failed to index pods by JobSet: %w", err)
	}
	if err := l.ix.IndexField(ctx, runtimes.JobMetadata(), runtimes.JobsByJobSet, runtimes.IndexByJobSet); err != nil {
		return fmt.Errorf("failed to index Jobs by JobSet: %w", err)
	}
	// The diagnosis reads a job's own Kueue Workload at every round
	// (queue.Snapshots): by this index, not by a label selector that
	// looks at every Workload of the namespace. Without Kueue's API there
	// is nothing to index; the lookup then reads by label.
	if err := l.ix.IndexField(ctx, queue.WorkloadObject(), queue.WorkloadsByJob, queue.IndexByJob); err != nil {
		if !meta.IsNoMatchError(err) {
			return fmt.Errorf("failed to index Kueue's Workloads by job: %w", err)
		}
		ctrl.Log.WithName("setup").Info("Kueue's API is not served: its Workloads are not indexed", "err", err.Error())
	}
	return nil
}

// wire sets up on mgr everything mpijob-manager runs: the certificate,
// the webhooks (once it is there), the log store's read API, the
// controllers, the jobs' metrics and the health checks. self is the user
// the manager acts as (only it may write a job's status).
func wire(ctx context.Context, mgr ctrl.Manager, o options, logs kubernetes.Interface, self string, metricsCert *certs.Lazy) error {
	log := ctrl.Log.WithName("setup")
	if err := mgr.Add(leaderIndexes{ix: mgr.GetFieldIndexer()}); err != nil {
		return fmt.Errorf("failed to add the leader's indexes: %w", err)
	}
	lookup := runtimes.RuntimeLookup{Client: mgr.GetClient(), Live: mgr.GetAPIReader()}
	// The quota pre-flight reads ResourceQuotas from the cache: their
	// informer starts with the manager, not at the first create.
	if _, err := mgr.GetCache().GetInformer(ctx, &corev1.ResourceQuota{}); err != nil {
		return fmt.Errorf("failed to watch ResourceQuotas: %w", err)
	}
	// The webhooks are served once the serving certificate is there: made
	// by cert-controller's rotator (every replica runs it), or, with
	// --cert-management=false, provided by cert-manager or the platform.
	certsReady := make(chan struct{})
	if o.certManagement {
		cc := certs.Config{
			Namespace: certs.Namespace(), SecretName: o.certSecret, WebhookServiceName: o.webhookService,
			MetricsServiceName: o.metricsService, LogsServiceName: certs.LogsServiceName, CertDir: o.certDir,
		}
		if os.Getenv(logStoreURLEnv) != "" {
			cc.LogsAPIService = certs.LogsAPIServiceName
		}
		if err := certs.Manage(mgr, cc, certsReady); err != nil {
			return fmt.Errorf("failed to set up certificate rotation: %w", err)
		}
	} else {
		close(certsReady)
	}
	// One reader of Launchers' logs for the diagnosis and the progress
	// controller: a running Launcher's log is read once per round.
	observer := &launcherlog.Observer{Logs: logs}
	// The Events' reporting instance: this pod (its hostname).
	instance, _ := os.Hostname()
	prog := &progresscontroller.Reconciler{Client: mgr.GetClient(), Logs: logs, Observer: observer, Runtimes: lookup}
	diag := &diagnosecontroller.Reconciler{
		Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Capacity: mgr.GetClient(), Logs: logs, Observer: observer,
		Visibility: queue.Visibility{REST: logs.Discovery().RESTClient()},
		Recorder:   mgr.GetEventRecorder(api.FieldManager), Instance: instance, Runtimes: lookup,
		// The last progress report before the status that ends a watch.
		BeforeFinished: prog.Finish,
		// A stuck job's stacks, taken once per finding (pods/exec).
		Stacks: func(ctx context.Context, ns string, pods []stacks.Pod) (stacks.Result, error) {
			return stacks.Collect(ctx, mgr.GetConfig(), logs, ns, pods)
		},
	}
	// mgr.GetWebhookServer adds the webhook server to what the manager
	// starts, and a server started before its certificate is mounted
	// stops the manager: it is asked for only once the certificate is
	// there (the webhooks' registration, the readiness check). The
	// diagnosis and the placement said at a dry run share one read of
	// Kueue's queues.
	hooks := webhooks{scheme: mgr.GetScheme(), mgr: mgr, lookup: lookup, client: mgr.GetClient(), live: mgr.GetAPIReader(),
		maxWorkers: int32(o.maxWorkers), self: self, modelRegistry: o.modelRegistry,
		placer: &placement.Reader{Client: mgr.GetClient(), Queues: diag.QueueSnapshots(), Priorities: mgr.GetAPIReader()}}
	go func() {
		select {
		case <-certsReady:
		case <-ctx.Done():
			return
		}
		log.Info("serving certificate ready", "dir", o.certDir)
		if err := metricsCert.Load(ctx, o.certDir); err != nil {
			log.Error(err, "failed to load the serving certificate", "dir", o.certDir)
			os.Exit(1)
		}
		hooks.register()
	}()
	if err := addLogAPI(mgr, logs, metricsCert, certsReady, o.logAPIPort); err != nil {
		return fmt.Errorf("failed to set up the log store's read API: %w", err)
	}
	log.Info("admission", "manager", self, "maxWorkers", o.maxWorkers)
	for _, c := range []struct {
		what  string
		setup func(ctrl.Manager) error
	}{
		{"the diagnosis controller", diag.SetupWithManager},
		// Training progress the ranks print, published where OpenShift AI's
		// training views read it.
		{"the progress controller", prog.SetupWithManager},
		{"the NetworkPolicy controller", (&netpol.Reconciler{Client: mgr.GetClient(), Runtimes: lookup}).SetupWithManager},
		{"the shared NetworkPolicy controller", (&netpol.NamespaceReconciler{Client: mgr.GetClient(), Runtimes: lookup}).SetupWithManager},
		// Which TrainJobs are MPI jobs, kept current in the webhook
		// configurations' and the manager-down policy's match condition: no
		// other framework's TrainJob reaches mpijob's webhooks.
		{"the webhook scope controller", (&scopecontroller.Reconciler{Client: mgr.GetClient(), Mutating: certs.MutatingWebhookName, Validating: certs.ValidatingWebhookName}).SetupWithManager},
		{"the per-job runtime controller", (&perjob.Reconciler{Client: mgr.GetClient()}).SetupWithManager},
	} {
		if err := c.setup(mgr); err != nil {
			return fmt.Errorf("failed to set up %s: %w", c.what, err)
		}
	}
	if o.modelRegistry != "" {
		// Models of jobs created with --register-model, registered when
		// they succeed. The job's data connection is read directly: the
		// manager caches no Secret.
		direct, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme()})
		if err != nil {
			return fmt.Errorf("failed to create a client: %w", err)
		}
		reg := &registrycontroller.Reconciler{Client: mgr.GetClient(), Direct: direct, Config: mgr.GetConfig(),
			Service: o.modelRegistry, CA: o.modelRegistryCA, Recorder: mgr.GetEventRecorder(api.FieldManager)}
		if err := reg.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("failed to set up the model registration controller: %w", err)
		}
	}
	// Every MPI job's phase and its pods' roles at each scrape, from the
	// cache (the leader only): the series dashboards and recording rules
	// join with the kubelets' container metrics.
	if err := ctrlmetrics.Registry.Register(metrics.JobsCollector{Cache: mgr.GetCache(), Elected: mgr.Elected(), Statuses: &metrics.StatusMemo{}}); err != nil {
		return fmt.Errorf("failed to register the jobs' metrics: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("failed to add the health check: %w", err)
	}
	// Ready once the webhooks answer, so a rollout or a Service never sends
	// admission requests to a replica still waiting for its certificate.
	return mgr.AddReadyzCheck("readyz", ready(certsReady, func() healthz.Checker { return mgr.GetWebhookServer().StartedChecker() }))
}

// ready is the readiness check: the serving certificate is there and the
// webhook server answers (started is asked for the server's check only
// then: see wire). Once the server has answered, the replica stays ready:
// the listener stays open until the process ends, and a replica whose
// check flips under load drops out of the Service just when admission
// needs it. Seen in CI: a burst of 100 creates held both replicas' CPU
// past the probe's timeout, both left the Service at once, and the
// mpijob-manager-running policy then refused half the burst as "not
// running". A replica that stops answering is still restarted by the
// liveness probe, and one that ends leaves the Service as it terminates.
func ready(certsReady <-chan struct{}, started func() healthz.Checker) healthz.Checker {
	var answered atomic.Bool
	return func(req *http.Request) error {
		if answered.Load() {
			return nil
		}
		select {
		case <-certsReady:
			if err := started()(req); err != nil {
				return err
			}
			answered.Store(true)
			return nil
		default:
			return errors.New("the serving certificate is not ready")
		}
	}
}

// webhooks are mpijob's admission webhooks and what they read.
type webhooks struct {
	scheme     *runtime.Scheme
	mgr        ctrl.Manager
	lookup     runtimes.RuntimeLookup
	client     client.Client
	live       client.Reader
	placer     *placement.Reader
	maxWorkers int32
	self       string
	// modelRegistry is --model-registry ("": none).
	modelRegistry string
}

// register serves every webhook. They share one budget of bytes in
// flight (mpiadmission.Bounded): the port answers whoever reaches it, and
// large reviews sent at once must not take the replica down.
func (w webhooks) register() {
	server := w.mgr.GetWebhookServer()
	reg := func(path string, h http.Handler) {
		server.Register(path, mpiadmission.Bounded(h, mpiadmission.DefaultInFlightBytes))
	}
	reg(mpiadmission.MutatePath, admission.WithDefaulter(w.scheme, &mpiadmission.Defaulter{Runtimes: w.lookup, Copier: &mpiadmission.RuntimeCopier{Client: w.client, Live: w.live, Cache: w.client}}))
	reg(mpiadmission.ValidatePath, admission.WithValidator(w.scheme, w.validator()))
	reg(mpiadmission.ValidateClusterRuntimePath, admission.WithValidator(w.scheme, mpiadmission.ClusterRuntimeValidator{}))
	reg(mpiadmission.ValidateRuntimePath, admission.WithValidator(w.scheme, mpiadmission.RuntimeValidator{Client: w.live}))
	reg(mpiadmission.ValidateWorkloadPath, &admission.Webhook{Handler: mpiadmission.WorkloadActiveOnly{}})
}

// validator is the TrainJob validator and what it reads: the manager's
// cache for whatever a create of every MPI job reads (ResourceQuotas,
// TrainJobs, the Namespace's cap on active jobs), the pods of an earlier
// job from the leader's pod cache or, on the other replica, their metadata
// from the API server's watch cache (no replica watches every pod for one
// check), and the API server for what a few jobs name (a
// WorkloadPriorityClass, a ServiceAccount).
func (w webhooks) validator() *mpiadmission.Validator {
	return &mpiadmission.Validator{
		Runtimes: w.lookup, Client: w.client, MaxWorkers: w.maxWorkers, Manager: w.self,
		Jobs: w.client, Pods: w.live, PodCache: w.client, CachedPods: w.podsCached, Priorities: w.live, Placement: w.placer, Namespaces: w.client,
		ServiceAccounts: &mpiadmission.ServiceAccountCheck{Live: w.live, Reviews: w.client}, Reviews: w.client,
		Registration: &mpiadmission.RegistrationCheck{Service: w.modelRegistry, Reviews: w.client, Manager: w.self},
	}
}

// podsCached says whether this replica's cache has every pod now: it
// leads (its controllers keep that cache) and the cache has synced. It
// never starts a pod cache: on a replica that does not lead, it says no
// before it asks the cache.
func (w webhooks) podsCached() bool {
	select {
	case <-w.mgr.Elected():
	default:
		return false
	}
	inf, err := w.mgr.GetCache().GetInformer(context.Background(), &corev1.Pod{}, cache.BlockUntilSynced(false))
	return err == nil && inf.HasSynced()
}

// stripManagedFields is controller-runtime's transform, made once (the
// cache calls the default transform for every object it stores).
var stripManagedFields = cache.TransformStripManagedFields()

// stripAndTrimWorkloads is the cache's default transform: no reader needs
// managedFields (writes are server-side applies and patches), and Kueue's
// Workloads, read as unstructured data, keep only what queue.Lookup reads.
func stripAndTrimWorkloads(obj any) (any, error) {
	obj, err := stripManagedFields(obj)
	if err != nil {
		return nil, err
	}
	return queue.TrimWorkload(obj)
}
