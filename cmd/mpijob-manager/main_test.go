package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	mpiadmission "github.com/mpijob/mpijob/pkg/admission"
	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/certs"
	"github.com/mpijob/mpijob/pkg/queue"
	"github.com/mpijob/mpijob/pkg/runtimes"
)

func parse(t *testing.T, args ...string) (options, error) {
	t.Helper()
	fs := flag.NewFlagSet("mpijob-manager", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return parseFlags(fs, args)
}

func TestFlags(t *testing.T) {
	o, err := parse(t)
	if err != nil {
		t.Fatal(err)
	}
	if o.maxWorkers != 256 || !o.metricsSecure || !o.certManagement || o.webhookPort != 9443 || o.certSecret != certs.SecretName || o.leaderElect {
		t.Errorf("defaults %+v", o)
	}
	o, err = parse(t, "--leader-elect", "--max-workers=0", "--cert-management=false", "--zap-log-level=debug")
	if err != nil || !o.leaderElect || o.maxWorkers != 0 || o.certManagement {
		t.Errorf("parsed %+v, %v", o, err)
	}
	for _, bad := range []string{"-1", "3000000000"} {
		if _, err := parse(t, "--max-workers="+bad); err == nil || !strings.Contains(err.Error(), "--max-workers "+bad) || !strings.Contains(err.Error(), "0 (no cap)") {
			t.Errorf("--max-workers=%s: %v, want an error naming the flag, the value and the range", bad, err)
		}
	}
	if _, err := parse(t, "--max-wrokers=3"); err == nil {
		t.Error("a misspelt flag was taken")
	}
}

func TestManagerOptions(t *testing.T) {
	scheme, err := newScheme()
	if err != nil {
		t.Fatal(err)
	}
	o, _ := parse(t, "--leader-elect", "--leader-election-namespace=mpijob-system")
	opts := managerOptions(o, scheme, &certs.Lazy{}, &toolscache.ListWatch{}, &toolscache.ListWatch{})
	if !opts.LeaderElection || opts.LeaderElectionID != api.ManagerLeaseName || opts.LeaderElectionNamespace != "mpijob-system" || !opts.LeaderElectionReleaseOnCancel {
		t.Errorf("leader election %v %q %q", opts.LeaderElection, opts.LeaderElectionID, opts.LeaderElectionNamespace)
	}
	// A leader keeps trying to renew for 45 s, not client-go's 10 s: on a
	// busy API server both replicas lost their Lease in turn and stopped.
	if got := [3]time.Duration{ptr.Deref(opts.LeaseDuration, 0), ptr.Deref(opts.RenewDeadline, 0), ptr.Deref(opts.RetryPeriod, 0)}; got != [3]time.Duration{time.Minute, 45 * time.Second, 5 * time.Second} {
		t.Errorf("lease, renew deadline, retry period: %v", got)
	}
	if opts.Metrics.FilterProvider == nil || !opts.Metrics.SecureServing {
		t.Error("secure metrics without the token filter")
	}
	if opts.Cache.DefaultTransform == nil || len(opts.Cache.ByObject) != 4 || !opts.Client.Cache.Unstructured || opts.Cache.NewInformer == nil {
		t.Errorf("cache %+v: trimmed objects, JobSets and pods through their own watches, and unstructured reads from the cache", opts.Cache)
	}
	o, _ = parse(t, "--metrics-secure=false")
	if opts := managerOptions(o, scheme, &certs.Lazy{}, &toolscache.ListWatch{}, &toolscache.ListWatch{}); opts.Metrics.FilterProvider != nil {
		t.Error("--metrics-secure=false still filters")
	}
}

// wire sets everything up on a manager that is not started (nothing is
// read): the controllers, the health checks; the webhooks register on the
// server once the certificate is there.
func TestWire(t *testing.T) {
	scheme, err := newScheme()
	if err != nil {
		t.Fatal(err)
	}
	// The certificate is made once the manager runs: until then no
	// webhook is served (the manager is not started here).
	o, _ := parse(t, "--health-probe-bind-address=0")
	opts := managerOptions(o, scheme, &certs.Lazy{}, &toolscache.ListWatch{}, &toolscache.ListWatch{})
	opts.Metrics = metricsserver.Options{BindAddress: "0"}
	// No API server: the types' scopes from a fixed mapper.
	opts.MapperProvider = func(*rest.Config, *http.Client) (meta.RESTMapper, error) {
		m := meta.NewDefaultRESTMapper(nil)
		for gvk := range scheme.AllKnownTypes() {
			scope := meta.RESTScopeNamespace
			switch gvk.Kind {
			case "Node", "Namespace", "ClusterTrainingRuntime", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "ValidatingAdmissionPolicy":
				scope = meta.RESTScopeRoot
			}
			m.Add(gvk, scope)
		}
		return m, nil
	}
	mgr, err := ctrl.NewManager(&rest.Config{Host: "https://127.0.0.1:1"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	t.Setenv(logStoreURLEnv, "")
	counted := &countingManager{Manager: mgr}
	if err := wire(ctx, counted, o, kubefake.NewClientset(), "system:serviceaccount:mpijob-system:mpijob-manager", &certs.Lazy{}); err != nil {
		t.Fatalf("wire: %v", err)
	}
	// Asking for the webhook server adds it to what the manager starts;
	// started before the certificate is mounted, it stops the manager
	// (it did on a new cluster). Nothing asks before the certificate.
	if counted.webhookServer != 0 {
		t.Errorf("wire asked for the webhook server %d times before the certificate was there", counted.webhookServer)
	}
	// No index at the start: the pods' index comes with the lead
	// (leaderIndexes), or the replica that does not lead would watch
	// every pod of the cluster; a first index of the name is accepted.
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Pod{}, runtimes.PodsByJobSet, func(client.Object) []string { return nil }); err != nil {
		t.Errorf("a pod index by JobSet was set up on every replica: %v", err)
	}
	// Ready only once the certificate is there, and the webhook server
	// answers: not before the manager starts it.
	if err := mgr.GetWebhookServer().StartedChecker()(httptest.NewRequest(http.MethodGet, "/readyz", nil)); err == nil {
		t.Error("the webhook server answers before the manager started")
	}
}

func TestWebhooksRegister(t *testing.T) {
	scheme, mgr := bareManager(t)
	w := webhooks{scheme: scheme, mgr: mgr, client: mgr.GetClient(), live: mgr.GetAPIReader(), maxWorkers: 8, self: "me"}
	w.register()
	mux := mgr.GetWebhookServer().WebhookMux()
	for _, path := range []string{mpiadmission.MutatePath, mpiadmission.ValidatePath, mpiadmission.ValidateClusterRuntimePath, mpiadmission.ValidateRuntimePath, mpiadmission.ValidateWorkloadPath} {
		if _, pattern := mux.Handler(httptest.NewRequest(http.MethodPost, path, nil)); pattern != path {
			t.Errorf("%s is not served (pattern %q)", path, pattern)
		}
	}
}

// Every create of an MPI job reads its Namespace (the cap on active jobs),
// ResourceQuotas and TrainJobs from the cache, not the API server; the
// pods of an earlier job of its name from the API server, which every
// replica would otherwise cache whole for this one check.
func TestValidatorReadsTheCache(t *testing.T) {
	scheme, mgr := bareManager(t)
	w := webhooks{scheme: scheme, mgr: mgr, client: mgr.GetClient(), live: mgr.GetAPIReader(), self: "me"}
	v := w.validator()
	for name, r := range map[string]client.Reader{"ResourceQuotas": v.Client, "TrainJobs": v.Jobs, "the Namespace": v.Namespaces} {
		if r != client.Reader(w.client) {
			t.Errorf("%s are read from %T, want the manager's cache", name, r)
		}
	}
	if v.Pods != w.live {
		t.Errorf("an earlier job's pods are read from %T, want the API server", v.Pods)
	}
	// ... but from the cache where this replica leads: one that does not
	// (a manager not started has not been elected) reads the API server.
	if v.PodCache != client.Reader(w.client) || v.CachedPods == nil {
		t.Errorf("the leader's pod cache is %T (CachedPods set: %v), want the manager's cache", v.PodCache, v.CachedPods != nil)
	} else if v.CachedPods() {
		t.Error("a replica that does not lead reads the pods from its cache")
	}
}

func TestReady(t *testing.T) {
	certsReady := make(chan struct{})
	asked := 0
	answers := errors.New("connection refused")
	started := func() healthz.Checker { asked++; return func(*http.Request) error { return answers } }
	check := ready(certsReady, started)
	req := httptest.NewRequest(http.MethodGet, "/readyz", nil)
	if err := check(req); err == nil || !strings.Contains(err.Error(), "certificate") || asked != 0 {
		t.Errorf("before the certificate: %v (the webhook server asked for %d times)", err, asked)
	}
	close(certsReady)
	if err := check(req); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("the certificate there, the server not answering yet: %v, want its error", err)
	}
	answers = nil
	if err := check(req); err != nil {
		t.Errorf("the server answers: %v", err)
	}
	// Ready once answered: a server too busy to answer the probe in time
	// keeps its place in the Service.
	answers = errors.New("i/o timeout")
	asked = 0
	if err := check(req); err != nil || asked != 0 {
		t.Errorf("after the server answered once, a slow answer: %v (asked %d times), want ready without asking", err, asked)
	}
}

func TestAddLogAPI(t *testing.T) {
	_, mgr := bareManager(t)
	t.Setenv(logStoreURLEnv, "loki:3100")
	if err := addLogAPI(mgr, kubefake.NewClientset(), &certs.Lazy{}, nil, 8444); err == nil || !strings.Contains(err.Error(), "http://loki.logging.svc:3100") {
		t.Errorf("a URL without its scheme: %v, want an error with an example", err)
	}
	t.Setenv(logStoreURLEnv, "http://loki:3100")
	if err := addLogAPI(mgr, kubefake.NewClientset(), &certs.Lazy{}, nil, 8444); err != nil {
		t.Errorf("a store: %v", err)
	}
}

// run stops at once, saying why, when the API server refuses it: the
// manager's cache asks what kinds there are first.
func TestRunNeedsTheAPIServer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"forbidden","reason":"Forbidden","code":403}`, http.StatusForbidden)
	}))
	defer srv.Close()
	o, _ := parse(t, "--health-probe-bind-address=0", "--metrics-bind-address=0")
	err := run(context.Background(), &rest.Config{Host: srv.URL}, o)
	if err == nil || !strings.Contains(err.Error(), "failed to create the manager") || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("run against an API server that refuses: %v, want an error that passes on its answer", err)
	}
}

// bareManager is a manager of the manager's types for an API server that
// is not there: set up, never started.
func bareManager(t *testing.T) (*runtime.Scheme, ctrl.Manager) {
	t.Helper()
	scheme, err := newScheme()
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(&rest.Config{Host: "https://127.0.0.1:1"}, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	return scheme, mgr
}

// countingManager counts who asks for the webhook server.
type countingManager struct {
	ctrl.Manager
	webhookServer int
}

func (m *countingManager) GetWebhookServer() webhook.Server {
	m.webhookServer++
	return m.Manager.GetWebhookServer()
}

// fakeIndexer records the indexes asked for and refuses Workloads with
// workloadErr, as a cache does where Kueue's API is not served.
type fakeIndexer struct {
	workloadErr error
	got         []string
}

func (f *fakeIndexer) IndexField(_ context.Context, obj client.Object, field string, _ client.IndexerFunc) error {
	if _, ok := obj.(*unstructured.Unstructured); ok && f.workloadErr != nil {
		return f.workloadErr
	}
	f.got = append(f.got, fmt.Sprintf("%T %s", obj, field))
	return nil
}

func TestLeaderIndex(t *testing.T) {
	noKueue := &meta.NoKindMatchError{GroupKind: queue.WorkloadObject().GroupVersionKind().GroupKind(), SearchedVersions: []string{"v1beta2"}}
	jobs := []string{"*v1.Pod " + runtimes.PodsByJobSet, "*v1.PartialObjectMetadata " + runtimes.JobsByJobSet}
	for name, tc := range map[string]struct {
		workloadErr error
		want        []string
		wantErr     bool
	}{
		"kueue":                 {want: append(jobs, "*unstructured.Unstructured "+queue.WorkloadsByJob)},
		"no kueue":              {workloadErr: noKueue, want: jobs},
		"workloads cannot sync": {workloadErr: errors.New("informer already started"), want: jobs, wantErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			ix := &fakeIndexer{workloadErr: tc.workloadErr}
			err := leaderIndexes{ix: ix}.Start(context.Background())
			if (err != nil) != tc.wantErr {
				t.Errorf("leaderIndexes: %v, want an error %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, ix.got); diff != "" {
				t.Errorf("indexes (-want,+got):\n%s", diff)
			}
		})
	}
	// The manager runs a runnable only on the leader unless it says
	// otherwise (manager.LeaderElectionRunnable).
	if le, ok := any(leaderIndexes{}).(manager.LeaderElectionRunnable); ok && !le.NeedLeaderElection() {
		t.Error("leaderIndexes runs on every replica: the one that does not lead would watch every pod, Job and Workload")
	}
}
