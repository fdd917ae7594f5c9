// Command mpijob-manager runs mpijob's admission webhooks and controllers
// beside upstream Kubeflow Trainer V2: it admits MPI TrainJobs (validation,
// runtime policy, quota pre-flight, creator) and keeps their diagnosis.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"math"
	"net/http"
	"os"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
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
	"github.com/mpijob/mpijob/pkg/metrics"
	"github.com/mpijob/mpijob/pkg/metricsauth"
	"github.com/mpijob/mpijob/pkg/netpol"
	"github.com/mpijob/mpijob/pkg/perjob"
	"github.com/mpijob/mpijob/pkg/placement"
	progresscontroller "github.com/mpijob/mpijob/pkg/progress/controller"
	"github.com/mpijob/mpijob/pkg/queue"
	"github.com/mpijob/mpijob/pkg/runtimes"
)

func main() {
	var (
		metricsAddr, probeAddr, webhookHost, certDir, leaderNS string
		certSecret, webhookService, metricsService, pprofAddr  string
		webhookPort, maxWorkers, logAPIPort                    int
		leaderElect, metricsSecure, certManagement             bool
	)
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8443", "address of the metrics endpoint (HTTPS with authentication unless --metrics-secure=false); 0 disables it")
	flag.BoolVar(&metricsSecure, "metrics-secure", true, "serve metrics over HTTPS and require an authorized token")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	flag.StringVar(&webhookHost, "webhook-host", "", "address the webhook server binds")
	flag.IntVar(&webhookPort, "webhook-port", 9443, "port of the webhook server")
	flag.StringVar(&certDir, "webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs", "folder with tls.crt and tls.key (the Secret --webhook-cert-secret mounted) for the webhook server and the metrics endpoint")
	flag.BoolVar(&certManagement, "cert-management", true, "make and rotate the serving certificate in the Secret --webhook-cert-secret and write its CA into mpijob's webhook configurations (cert-controller); false when cert-manager or OpenShift's service CA provides both")
	flag.StringVar(&certSecret, "webhook-cert-secret", certs.SecretName, "Secret in the manager's namespace that holds the serving certificate")
	flag.StringVar(&webhookService, "webhook-service", certs.WebhookServiceName, "Service the API server calls the webhooks through (the certificate names it)")
	flag.StringVar(&metricsService, "metrics-service", certs.MetricsServiceName, "Service Prometheus scrapes the metrics through (the certificate names it too); empty for none")
	flag.BoolVar(&leaderElect, "leader-elect", false, "elect a leader so only one replica acts")
	flag.StringVar(&leaderNS, "leader-election-namespace", "", "namespace of the leader election Lease "+api.ManagerLeaseName+" (default: the pod's); clients read it to tell a stale status")
	flag.IntVar(&maxWorkers, "max-workers", 256, "most Workers (nodes) a TrainJob of any framework may ask for where its runtime's policy.mpijob.dev/max-workers says nothing; 0 lifts the cap")
	flag.StringVar(&pprofAddr, "pprof-bind-address", "0", "address of Go's /debug/pprof profiles (e.g. 127.0.0.1:6060, to find where CPU and memory go); 0 disables it")
	flag.IntVar(&logAPIPort, "log-api-port", 8444, "port of the log store's read API (logs.mpijob.dev, an aggregated API), served when the environment sets "+logStoreURLEnv)
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("setup")

	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, trainer.AddToScheme, jobsetv1alpha2.AddToScheme} {
		if err := add(scheme); err != nil {
			log.Error(err, "failed to build the scheme")
			os.Exit(1)
		}
	}
	cfg := ctrl.GetConfigOrDie()
	// The metrics endpoint serves the webhook's certificate (it names the
	// metrics Service too) once it is mounted.
	var metricsCert certs.Lazy
	metricsOpts := metricsserver.Options{BindAddress: metricsAddr, SecureServing: metricsSecure,
		TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.GetCertificate = metricsCert.GetCertificate }}}
	if metricsSecure {
		// TokenReview, then SubjectAccessReview, as controller-runtime's
		// filters.WithAuthenticationAndAuthorization, without k8s.io/apiserver
		// (see pkg/metricsauth).
		metricsOpts.FilterProvider = metricsauth.Filter
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsOpts,
		HealthProbeBindAddress:  probeAddr,
		PprofBindAddress:        pprofAddr,
		LeaderElection:          leaderElect,
		LeaderElectionID:        api.ManagerLeaseName,
		LeaderElectionNamespace: leaderNS,
		// A replica that stops hands the Lease over at once, so the other
		// one (or a restarted one) leads without waiting for it to expire.
		LeaderElectionReleaseOnCancel: true,
		WebhookServer:                 webhook.NewServer(webhook.Options{Host: webhookHost, Port: webhookPort, CertDir: certDir}),
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
		// again.
		Cache: cache.Options{DefaultTransform: stripAndTrimWorkloads, ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:            {Transform: diagnose.TrimPod},
			&corev1.Node{}:           {Transform: diagnose.CapacityNode},
			&jobsetv1alpha2.JobSet{}: {Transform: diagnose.TrimJobSet},
		}},
		// Kueue's Workloads and LocalQueues are read as unstructured data
		// (mpijob depends on Kueue's API, not its Go module), from the cache.
		Client: client.Options{Cache: &client.CacheOptions{Unstructured: true}},
	})
	if err != nil {
		log.Error(err, "failed to create the manager")
		os.Exit(1)
	}

	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &corev1.Pod{}, runtimes.PodsByJobSet, runtimes.IndexPodsByJobSet); err != nil {
		log.Error(err, "failed to index pods by JobSet")
		os.Exit(1)
	}

	logs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		log.Error(err, "failed to create a clientset")
		os.Exit(1)
	}
	// Only the manager may write a job's status: admission learns who the
	// manager is from the API server itself.
	self, err := logs.AuthenticationV1().SelfSubjectReviews().Create(context.Background(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		log.Error(err, "failed to learn which user the manager acts as (SelfSubjectReview)")
		os.Exit(1)
	}
	if maxWorkers < 0 || maxWorkers > math.MaxInt32 {
		log.Error(nil, "--max-workers must be between 0 and 2147483647", "value", maxWorkers)
		os.Exit(2)
	}

	lookup := runtimes.RuntimeLookup{Client: mgr.GetClient(), Live: mgr.GetAPIReader()}
	// The quota pre-flight reads ResourceQuotas from the cache: their
	// informer starts with the manager, not at the first create.
	if _, err := mgr.GetCache().GetInformer(context.Background(), &corev1.ResourceQuota{}); err != nil {
		log.Error(err, "failed to watch ResourceQuotas")
		os.Exit(1)
	}
	// The webhooks are served once the serving certificate is there: made
	// by cert-controller's rotator (every replica runs it), or, with
	// --cert-management=false, provided by cert-manager or the platform.
	certsReady := make(chan struct{})
	if certManagement {
		cc := certs.Config{
			Namespace: certs.Namespace(), SecretName: certSecret, WebhookServiceName: webhookService,
			MetricsServiceName: metricsService, LogsServiceName: certs.LogsServiceName, CertDir: certDir,
		}
		if os.Getenv(logStoreURLEnv) != "" {
			cc.LogsAPIService = certs.LogsAPIServiceName
		}
		if err := certs.Manage(mgr, cc, certsReady); err != nil {
			log.Error(err, "failed to set up certificate rotation")
			os.Exit(1)
		}
	} else {
		close(certsReady)
	}
	// The diagnosis and the placement said at a dry run share one read of
	// Kueue's queues.
	diag := &diagnose.Reconciler{
		Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Capacity: mgr.GetClient(), Logs: logs,
		Visibility: queue.Visibility{REST: logs.Discovery().RESTClient()},
		Recorder:   mgr.GetEventRecorder(api.FieldManager), Runtimes: lookup,
	}
	placer := &placement.Reader{Client: mgr.GetClient(), Queues: diag.QueueSnapshots(), Priorities: mgr.GetAPIReader()}
	ctx := ctrl.SetupSignalHandler()
	go func() {
		select {
		case <-certsReady:
		case <-ctx.Done():
			return
		}
		log.Info("serving certificate ready", "dir", certDir)
		if err := metricsCert.Load(ctx, certDir); err != nil {
			log.Error(err, "failed to load the serving certificate", "dir", certDir)
			os.Exit(1)
		}
		// Every webhook shares one budget of bytes in flight
		// (mpiadmission.Bounded): the port answers whoever reaches it, and
		// large reviews sent at once must not take the replica down.
		hooks := mgr.GetWebhookServer()
		register := func(path string, h http.Handler) {
			hooks.Register(path, mpiadmission.Bounded(h, mpiadmission.DefaultInFlightBytes))
		}
		register(mpiadmission.MutatePath, admission.WithDefaulter(scheme, &mpiadmission.Defaulter{Runtimes: lookup}))
		register(mpiadmission.ValidatePath, admission.WithValidator(scheme, &mpiadmission.Validator{
			Runtimes: lookup, Client: mgr.GetClient(), MaxWorkers: int32(maxWorkers), Manager: self.Status.UserInfo.Username,
			Pods: mgr.GetClient(), Priorities: mgr.GetAPIReader(), Placement: placer,
		}))
		register(mpiadmission.ValidateClusterRuntimePath, admission.WithValidator(scheme, mpiadmission.ClusterRuntimeValidator{}))
		register(mpiadmission.ValidateRuntimePath, admission.WithValidator(scheme, mpiadmission.RuntimeValidator{Client: mgr.GetAPIReader()}))
		register(mpiadmission.ValidateWorkloadPath, &admission.Webhook{Handler: mpiadmission.WorkloadActiveOnly{}})
	}()
	if err := addLogAPI(mgr, logs, &metricsCert, certsReady, logAPIPort); err != nil {
		log.Error(err, "failed to set up the log store's read API")
		os.Exit(1)
	}
	log.Info("admission", "manager", self.Status.UserInfo.Username, "maxWorkers", maxWorkers)
	if err := diag.SetupWithManager(mgr); err != nil {
		log.Error(err, "failed to set up the diagnosis controller")
		os.Exit(1)
	}

	// Training progress the ranks print, published where OpenShift AI's
	// training views read it.
	if err := (&progresscontroller.Reconciler{Client: mgr.GetClient(), Logs: logs, Runtimes: lookup}).SetupWithManager(mgr); err != nil {
		log.Error(err, "failed to set up the progress controller")
		os.Exit(1)
	}

	if err := (&netpol.Reconciler{Client: mgr.GetClient(), Runtimes: lookup}).SetupWithManager(mgr); err != nil {
		log.Error(err, "failed to set up the NetworkPolicy controller")
		os.Exit(1)
	}

	// Which TrainJobs are MPI jobs, kept current in the webhook
	// configurations' and the manager-down policy's match condition: no
	// other framework's TrainJob reaches mpijob's webhooks.
	if err := (&scopecontroller.Reconciler{Client: mgr.GetClient(), Mutating: certs.MutatingWebhookName, Validating: certs.ValidatingWebhookName}).SetupWithManager(mgr); err != nil {
		log.Error(err, "failed to set up the webhook scope controller")
		os.Exit(1)
	}

	if err := (&perjob.Reconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		log.Error(err, "failed to set up the per-job runtime controller")
		os.Exit(1)
	}

	// Every MPI job's phase and its pods' roles at each scrape, from the
	// cache (the leader only): the series dashboards and recording rules
	// join with the kubelets' container metrics.
	ctrlmetrics.Registry.MustRegister(metrics.JobsCollector{Cache: mgr.GetCache(), Elected: mgr.Elected()})

	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		log.Error(err, "failed to add the health check")
		os.Exit(1)
	}
	// Ready once the webhooks answer, so a rollout or a Service never sends
	// admission requests to a replica still waiting for its certificate.
	if err := mgr.AddReadyzCheck("readyz", func(req *http.Request) error {
		select {
		case <-certsReady:
			return mgr.GetWebhookServer().StartedChecker()(req)
		default:
			return errors.New("the serving certificate is not ready")
		}
	}); err != nil {
		log.Error(err, "failed to add the readiness check")
		os.Exit(1)
	}
	log.Info("starting mpijob-manager")
	if err := mgr.Start(ctx); err != nil {
		log.Error(err, "manager stopped")
		os.Exit(1)
	}
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
