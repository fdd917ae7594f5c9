// Command mpijob-manager runs mpijob's admission webhooks and controllers
// beside upstream Kubeflow Trainer V2: it admits MPI TrainJobs (validation,
// runtime policy, quota pre-flight, creator) and keeps their diagnosis.
package main

import (
	"context"
	"flag"
	"math"
	"os"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	mpiadmission "github.com/mpijob/mpijob/pkg/admission"
	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/diagnose"
	"github.com/mpijob/mpijob/pkg/metrics"
	"github.com/mpijob/mpijob/pkg/netpol"
	"github.com/mpijob/mpijob/pkg/perjob"
	"github.com/mpijob/mpijob/pkg/queue"
	"github.com/mpijob/mpijob/pkg/runtimes"
)

func main() {
	var (
		metricsAddr, probeAddr, webhookHost, certDir, leaderNS string
		metricsCertDir                                         string
		webhookPort, maxWorkers                                int
		leaderElect, metricsSecure                             bool
	)
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8443", "address of the metrics endpoint (HTTPS with authentication unless --metrics-secure=false); 0 disables it")
	flag.BoolVar(&metricsSecure, "metrics-secure", true, "serve metrics over HTTPS and require an authorized token")
	flag.StringVar(&metricsCertDir, "metrics-cert-dir", "", "folder with tls.crt and tls.key for the metrics endpoint (empty: a self-signed certificate made at start)")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	flag.StringVar(&webhookHost, "webhook-host", "", "address the webhook server binds")
	flag.IntVar(&webhookPort, "webhook-port", 9443, "port of the webhook server")
	flag.StringVar(&certDir, "webhook-cert-dir", "", "folder with tls.crt and tls.key for the webhook server")
	flag.BoolVar(&leaderElect, "leader-elect", false, "elect a leader so only one replica acts")
	flag.StringVar(&leaderNS, "leader-election-namespace", "", "namespace of the leader election Lease "+api.ManagerLeaseName+" (default: the pod's); clients read it to tell a stale status")
	flag.IntVar(&maxWorkers, "max-workers", 256, "most Workers (nodes) a TrainJob of any framework may ask for where its runtime's policy.mpijob.dev/max-workers says nothing; 0 lifts the cap")
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
	metricsOpts := metricsserver.Options{BindAddress: metricsAddr, SecureServing: metricsSecure, CertDir: metricsCertDir}
	if metricsSecure {
		metricsOpts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	// Only the pods of JobSets matter; caching every pod would cost memory
	// on big clusters for nothing.
	jobsetPods, err := labels.NewRequirement(jobsetv1alpha2.JobSetNameKey, selection.Exists, nil)
	if err != nil {
		log.Error(err, "failed to build the pod selector")
		os.Exit(1)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsOpts,
		HealthProbeBindAddress:  probeAddr,
		LeaderElection:          leaderElect,
		LeaderElectionID:        api.ManagerLeaseName,
		LeaderElectionNamespace: leaderNS,
		// A replica that stops hands the Lease over at once, so the other
		// one (or a restarted one) leads without waiting for it to expire.
		LeaderElectionReleaseOnCancel: true,
		WebhookServer:                 webhook.NewServer(webhook.Options{Host: webhookHost, Port: webhookPort, CertDir: certDir}),
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:  {Label: labels.NewSelector().Add(*jobsetPods)},
			&corev1.Node{}: {Transform: diagnose.CapacityNode},
		}},
		// Kueue's Workloads and LocalQueues are read as unstructured data
		// (mpijob depends on Kueue's API, not its Go module), from the cache.
		Client: client.Options{Cache: &client.CacheOptions{Unstructured: true}},
	})
	if err != nil {
		log.Error(err, "failed to create the manager")
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
	hooks := mgr.GetWebhookServer()
	hooks.Register(mpiadmission.MutatePath, admission.WithDefaulter(scheme, &mpiadmission.Defaulter{Runtimes: lookup}))
	hooks.Register(mpiadmission.ValidatePath, admission.WithValidator(scheme, &mpiadmission.Validator{
		Runtimes: lookup, Client: mgr.GetAPIReader(), MaxWorkers: int32(maxWorkers), Manager: self.Status.UserInfo.Username,
		Pods: mgr.GetClient(),
	}))
	hooks.Register(mpiadmission.ValidateClusterRuntimePath, admission.WithValidator(scheme, mpiadmission.ClusterRuntimeValidator{}))
	hooks.Register(mpiadmission.ValidateRuntimePath, admission.WithValidator(scheme, mpiadmission.RuntimeValidator{Client: mgr.GetAPIReader()}))
	log.Info("admission", "manager", self.Status.UserInfo.Username, "maxWorkers", maxWorkers)
	// Free capacity counts every bound pod of the cluster: a cache of its
	// own keeps them, stripped to their node, phase and resources.
	capacity, err := cache.New(cfg, cache.Options{
		Scheme: scheme, Mapper: mgr.GetRESTMapper(), HTTPClient: mgr.GetHTTPClient(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}: {Field: diagnose.CapacityPods, Transform: diagnose.CapacityPod},
		},
	})
	if err != nil {
		log.Error(err, "failed to create the capacity cache")
		os.Exit(1)
	}
	if err := mgr.Add(capacity); err != nil {
		log.Error(err, "failed to add the capacity cache")
		os.Exit(1)
	}
	if err := (&diagnose.Reconciler{
		Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Capacity: capacity, Logs: logs,
		Visibility: queue.Visibility{REST: logs.Discovery().RESTClient()},
		Recorder:   mgr.GetEventRecorder(api.FieldManager), Runtimes: lookup,
	}).SetupWithManager(mgr); err != nil {
		log.Error(err, "failed to set up the diagnosis controller")
		os.Exit(1)
	}

	if err := (&netpol.Reconciler{Client: mgr.GetClient(), Runtimes: lookup}).SetupWithManager(mgr); err != nil {
		log.Error(err, "failed to set up the NetworkPolicy controller")
		os.Exit(1)
	}

	if err := (&perjob.Reconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		log.Error(err, "failed to set up the per-job runtime controller")
		os.Exit(1)
	}

	// Every MPI job's phase and its pods' roles at each scrape, from the
	// cache (the leader only): the series dashboards and recording rules
	// join with the kubelets' container metrics.
	ctrlmetrics.Registry.MustRegister(metrics.JobsCollector{Reader: mgr.GetClient(), Elected: mgr.Elected()})

	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		log.Error(err, "failed to add the health check")
		os.Exit(1)
	}
	if err := mgr.AddReadyzCheck("readyz", mgr.GetWebhookServer().StartedChecker()); err != nil {
		log.Error(err, "failed to add the readiness check")
		os.Exit(1)
	}
	log.Info("starting mpijob-manager")
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "manager stopped")
		os.Exit(1)
	}
}
