//go:build e2e

// Command scale measures the running local cluster at scale twice in one
// run, on one cluster: bare (Trainer, JobSet and Kueue; mpijob's webhooks
// and manager removed) and full (the release install), and prints both
// and the ratio full / bare:
//
//  1. -jobs MPI jobs of -workers Workers on the kwok GPU nodes, created
//     from -creators clients: create start → every pod placed (bound to a
//     node) → every pod Running, and, in full, → every job's status
//     Running (mpijob-manager's diagnosis);
//  2. a burst: -burst jobs of -workers Workers from -burst-clients clients:
//     first create → every pod placed → every pod Running;
//  3. -suspended suspended creates from -suspended-clients clients: the
//     time for all and each create's latency;
//  4. each admission webhook's latency as the API server measured it
//     (apiserver_admission_webhook_admission_duration_seconds, by webhook
//     name) over 2 and 3, p50 and p99 interpolated in its buckets;
//  5. in full, mpijob's own admission handlers' time over 2 and 3
//     (controller-runtime's controller_runtime_webhook_latency_seconds,
//     a native histogram, read from the local Prometheus): the API
//     server's figure in 4 less the call's transport and its queueing;
//  6. mpijob-manager's RSS and CPU time (both replicas) over 1, per job,
//     and its rounds per job by controller (controller-runtime's
//     controller_runtime_reconcile_total, from the local Prometheus).
//
// The order of the modes is -order (full,bare by default); the cluster is
// left in full. -netpol-scope namespace gives the full mode's namespaces one
// NetworkPolicy for all their MPI jobs (mpijob.dev/network-policy-scope)
// instead of one per job, to measure what the policies cost. Each mode's
// namespaces are deleted, and gone, before the next scenario starts;
// -keep leaves the full mode's scale scenario running, for bench/dashboard
// to time the lists of its jobs (-namespace).
//
//	go run -tags e2e ./bench/scale [-jobs 500] [-workers 8] [-burst 50] [-suspended 500] [-netpol-scope job] [-wait 30m] [-keep]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/mpijob/mpijob/bench/internal/local"
	"github.com/mpijob/mpijob/bench/internal/stack"
	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/localcluster"
	"github.com/mpijob/mpijob/test/framework"
)

var (
	jobs             = flag.Int("jobs", 500, "MPI jobs of the scale scenario (0: skip it)")
	workers          = flag.Int("workers", 8, "Workers per job")
	creators         = flag.Int("creators", 10, "concurrent clients that create the scale scenario's jobs")
	burst            = flag.Int("burst", 50, "jobs of the burst (0: skip it)")
	burstClients     = flag.Int("burst-clients", 10, "concurrent clients of the burst")
	suspended        = flag.Int("suspended", 500, "suspended creates (0: skip them)")
	suspendedClients = flag.Int("suspended-clients", 20, "concurrent clients of the suspended creates")
	order            = flag.String("order", "full,bare", "the modes in the order they run")
	keep             = flag.Bool("keep", false, "leave the full mode's scale scenario running, its namespace and jobs kept (with -order full): time the lists at that size with `go run ./bench/dashboard -namespace NS`, then delete the namespace")
	waitFor          = flag.Duration("wait", 30*time.Minute, "how long a scenario may take to have every pod Running (and, in full, every job's status Running)")
	apiProfiles      = flag.String("apiserver-profiles", "", "a folder for CPU profiles of kube-apiserver over each mode's scale scenario (<mode>-NN.pprof, 30 s each; the local cluster started with MPIJOB_APISERVER_PROFILING=1); merge a mode's with `go tool pprof -proto DIR/bare-*.pprof > bare.pb.gz`, then `go tool pprof -top -cum -diff_base bare.pb.gz DIR/full-*.pprof` (docs/development.md, Scale)")
	netpolScope      = flag.String("netpol-scope", "job", "NetworkPolicy scope of the full mode's namespaces (mpijob.dev/network-policy-scope): job (a policy per job) or namespace (one for all its MPI jobs)")
)

func main() {
	flag.Parse()
	// The API server's warnings (a deprecated field in the restored
	// objects) are not the bench's to print; without a logger
	// controller-runtime prints a stack trace for the first one.
	ctrllog.SetLogger(logr.Discard())
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

type bench struct {
	cl  client.Client
	cs  kubernetes.Interface
	dyn dynamic.Interface
	cfg *rest.Config
}

// pods is a scenario's pod timeline.
type pods struct {
	created, placed, running, status time.Duration
}

// creates is the suspended creates' outcome.
type creates struct {
	total    time.Duration
	latency  []time.Duration
	failures int
	first    error
	// cpu is each program's CPU time while the creates ran, calls the API
	// server's requests then, by verb and resource, and watches what its
	// watches sent, by resource: where a create's time goes on a machine
	// that does nothing else.
	cpu     map[string]time.Duration
	calls   map[string]float64
	watches map[string]local.Watched
}

// usage is mpijob-manager's use over the scale scenario.
type usage struct {
	cpu        time.Duration
	rss, peak  int64
	replicas   int
	measurable bool
}

type result struct {
	scale, burst pods
	susp         creates
	hooks        map[string]*hist
	// handlers is mpijob's own time per admission request, by webhook
	// path (full only).
	handlers map[string]handlerTime
	manager  usage
	// cpu is each program's CPU time over the scale scenario.
	cpu map[string]time.Duration
	// calls are the API server's requests over the scale scenario, by
	// verb and resource (apiserver_request_total).
	calls map[string]float64
	// watches are what the API server's watches sent over the scale
	// scenario, by resource.
	watches map[string]local.Watched
	// rounds are mpijob-manager's reconciles over the scale scenario, by
	// controller (full only).
	rounds map[string]float64
}

func run() error {
	if *netpolScope != "job" && *netpolScope != "namespace" {
		return fmt.Errorf("-netpol-scope %q: want job (a NetworkPolicy per job) or namespace (one per namespace)", *netpolScope)
	}
	if *keep && *order != "full" {
		return fmt.Errorf("-keep with -order %q: the scenario is kept only with -order full (the bare mode removes mpijob, whose jobs the lists show)", *order)
	}
	modes := strings.Split(*order, ",")
	for _, m := range modes {
		if m != "full" && m != "bare" {
			return fmt.Errorf("-order %q: want full and bare separated by a comma, e.g. full,bare", *order)
		}
	}
	// Ctrl-C stops the run and still restores mpijob.
	ctx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	opts, err := local.Cluster(ctx)
	if err != nil {
		return err
	}
	cfg, err := local.Config(opts, "", 1000, 2000)
	if err != nil {
		return err
	}
	cl, err := client.New(cfg, client.Options{Scheme: framework.Scheme})
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	b := &bench{cl: cl, cs: cs, cfg: cfg, dyn: dyn}
	results := map[string]*result{}
	var saved *stack.Saved
	bare := false
	defer func() {
		if bare {
			fmt.Fprintln(os.Stderr, "restoring mpijob's webhooks and manager")
			if err := b.full(context.Background(), saved); err != nil {
				fmt.Fprintln(os.Stderr, "restoring mpijob:", err, "(run `make dev-down` and `make dev`)")
			}
		}
	}()
	for _, m := range modes {
		switch {
		case m == "bare" && !bare:
			fmt.Fprintln(os.Stderr, "bare: removing mpijob's webhooks and manager")
			if saved, err = stack.Bare(ctx, cl, false); err != nil {
				return err
			}
			bare = true
		case m == "full" && bare:
			fmt.Fprintln(os.Stderr, "full: restoring mpijob's webhooks and manager")
			if err := b.full(ctx, saved); err != nil {
				return err
			}
			bare = false
		}
		r, err := b.mode(ctx, m)
		if err != nil {
			return fmt.Errorf("%s: %w", m, err)
		}
		results[m] = r
	}
	return report(results)
}

func (b *bench) full(ctx context.Context, saved *stack.Saved) error {
	ns, done, err := local.Namespace(ctx, b.cl, "scale-probe")
	if err != nil {
		return err
	}
	defer done()
	return saved.Restore(ctx, b.cl, ns, func(ns, name string) *trainer.TrainJob { return b.job(ns, name, 2, false) })
}

func (b *bench) job(ns, name string, workers int, suspend bool) *trainer.TrainJob {
	w := framework.MakeTrainJob(name, ns, "mpi-openmpi").NumNodes(int32(workers)).OnKwokNodes().HoldOnKwok()
	if suspend {
		w = w.Suspend()
	}
	return w.Obj()
}

func (b *bench) mode(ctx context.Context, mode string) (*result, error) {
	r := &result{}
	var err error
	if *jobs > 0 {
		fmt.Fprintf(os.Stderr, "%s: %d jobs × %d Workers from %d clients\n", mode, *jobs, *workers, *creators)
		pids, err := b.managerPIDs(ctx)
		if err != nil {
			return nil, err
		}
		before := b.use(pids)
		cluster, err := b.read(ctx)
		if err != nil {
			return nil, err
		}
		stopProfiles := func() (int, error) { return 0, nil }
		if *apiProfiles != "" {
			if stopProfiles, err = local.ProfileAPIServer(ctx, b.cs, *apiProfiles, mode); err != nil {
				return nil, err
			}
		}
		var done func()
		scaleStart := time.Now()
		if r.scale, done, err = b.start(ctx, mode, "scale", *jobs, *creators); err != nil {
			return nil, err
		}
		if n, err := stopProfiles(); err != nil {
			return nil, fmt.Errorf("profiling kube-apiserver: %w", err)
		} else if *apiProfiles != "" {
			fmt.Fprintf(os.Stderr, "%s: %d CPU profiles of kube-apiserver in %s\n", mode, n, *apiProfiles)
		}
		if *keep {
			// The lists are timed at this size by bench/dashboard; the
			// namespace stays.
			done = func() {}
		}
		// Measured once every job runs, before its namespace goes.
		after := b.use(pids)
		r.manager = usage{cpu: after.cpu - before.cpu, rss: after.rss, peak: after.peak, replicas: len(pids), measurable: len(pids) > 0}
		if r.cpu, r.calls, r.watches, err = b.since(ctx, cluster); err != nil {
			return nil, err
		}
		if mode == "full" {
			if r.rounds, err = reconcileRounds(ctx, scaleStart); err != nil {
				return nil, err
			}
		}
		done()
	}
	before, err := b.webhookHists(ctx)
	if err != nil {
		return nil, err
	}
	hooksStart := time.Now()
	if *burst > 0 {
		fmt.Fprintf(os.Stderr, "%s: burst of %d jobs × %d Workers from %d clients\n", mode, *burst, *workers, *burstClients)
		var done func()
		if r.burst, done, err = b.start(ctx, mode, "burst", *burst, *burstClients); err != nil {
			return nil, err
		}
		done()
	}
	if *suspended > 0 {
		fmt.Fprintf(os.Stderr, "%s: %d suspended creates from %d clients\n", mode, *suspended, *suspendedClients)
		if r.susp, err = b.suspendedCreates(ctx); err != nil {
			return nil, err
		}
	}
	after, err := b.webhookHists(ctx)
	if err != nil {
		return nil, err
	}
	r.hooks = map[string]*hist{}
	for name, h := range after {
		r.hooks[name] = h.minus(before[name])
	}
	if mode == "full" && (*burst > 0 || *suspended > 0) {
		if r.handlers, err = handlerTimes(ctx, hooksStart); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// handlerTime is mpijob-manager's own time on one webhook's requests.
type handlerTime struct {
	calls, p50, p99 float64
}

// handlerTimes reads from the local Prometheus how long mpijob-manager's
// admission handlers took per request since start, by webhook path, both
// replicas together: controller-runtime's
// controller_runtime_webhook_latency_seconds, a native histogram (buckets
// about 10 % apart; the classic ones are a decade apart). It waits two
// scrapes first, so the last requests are in.
func handlerTimes(ctx context.Context, start time.Time) (map[string]handlerTime, error) {
	pc, err := promapi.NewClient(promapi.Config{Address: localcluster.PrometheusURL})
	if err != nil {
		return nil, err
	}
	prom := promv1.NewAPI(pc)
	select {
	case <-time.After(2 * localcluster.ScrapeInterval):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	window := time.Since(start) + localcluster.ScrapeInterval
	inc := fmt.Sprintf(`sum by (webhook) (increase(controller_runtime_webhook_latency_seconds[%ds]))`, int(window.Seconds())+1)
	out := map[string]handlerTime{}
	for _, q := range []struct {
		expr string
		set  func(*handlerTime, float64)
	}{
		{"histogram_count(" + inc + ")", func(h *handlerTime, v float64) { h.calls = v }},
		{"histogram_quantile(0.5, " + inc + ")", func(h *handlerTime, v float64) { h.p50 = v }},
		{"histogram_quantile(0.99, " + inc + ")", func(h *handlerTime, v float64) { h.p99 = v }},
	} {
		v, _, err := prom.Query(ctx, q.expr, time.Now())
		if err != nil {
			return nil, fmt.Errorf("prometheus query %s: %w", q.expr, err)
		}
		vec, ok := v.(model.Vector)
		if !ok {
			return nil, fmt.Errorf("prometheus query %s: a %s, not a vector", q.expr, v.Type())
		}
		for _, smp := range vec {
			w := string(smp.Metric["webhook"])
			h := out[w]
			q.set(&h, float64(smp.Value))
			out[w] = h
		}
	}
	return out, nil
}

// reconcileRounds reads from the local Prometheus how many rounds each of
// mpijob-manager's controllers made since start, both replicas together
// (controller-runtime's controller_runtime_reconcile_total, every
// result). It waits two scrapes first, so the last rounds are in.
func reconcileRounds(ctx context.Context, start time.Time) (map[string]float64, error) {
	pc, err := promapi.NewClient(promapi.Config{Address: localcluster.PrometheusURL})
	if err != nil {
		return nil, err
	}
	prom := promv1.NewAPI(pc)
	select {
	case <-time.After(2 * localcluster.ScrapeInterval):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	window := time.Since(start) + localcluster.ScrapeInterval
	expr := fmt.Sprintf(`sum by (controller) (increase(controller_runtime_reconcile_total[%ds]))`, int(window.Seconds())+1)
	v, _, err := prom.Query(ctx, expr, time.Now())
	if err != nil {
		return nil, fmt.Errorf("prometheus query %s: %w", expr, err)
	}
	vec, ok := v.(model.Vector)
	if !ok {
		return nil, fmt.Errorf("prometheus query %s: a %s, not a vector", expr, v.Type())
	}
	out := map[string]float64{}
	for _, smp := range vec {
		out[string(smp.Metric["controller"])] = float64(smp.Value)
	}
	return out, nil
}

// start creates n jobs from clients concurrent clients and follows their
// pods (and, in full, their statuses) until all run.
func (b *bench) start(ctx context.Context, mode, prefix string, n, clients int) (p pods, done func(), err error) {
	ns, done, err := local.Namespace(ctx, b.cl, "scale-"+prefix)
	if err != nil {
		return p, nil, err
	}
	fmt.Fprintf(os.Stderr, "  namespace %s\n", ns)
	defer func() {
		if err != nil {
			done()
		}
	}()
	if mode == "full" && *netpolScope != "job" {
		nso := &corev1.Namespace{}
		if err = b.cl.Get(ctx, client.ObjectKey{Name: ns}, nso); err != nil {
			return p, nil, err
		}
		nso.Annotations = map[string]string{api.NetworkPolicyScopeAnnotation: *netpolScope}
		if err = b.cl.Update(ctx, nso); err != nil {
			return p, nil, err
		}
	}
	want := n * (*workers + 1)
	tl := newTimeline(want)
	f := informers.NewSharedInformerFactoryWithOptions(b.cs, 0, informers.WithNamespace(ns))
	inf := f.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { tl.see(o) },
		UpdateFunc: func(_, o any) { tl.see(o) },
	}); err != nil {
		return p, nil, err
	}
	stop := make(chan struct{})
	defer close(stop)
	// Statuses come from a watch too: listing 500 jobs with their statuses
	// every second cost the API server as much as a share of what it
	// measures (an earlier version of this bench did).
	st := &statuses{running: map[string]bool{}}
	if mode == "full" {
		df := dynamicinformer.NewFilteredDynamicSharedInformerFactory(b.dyn, 0, ns, nil)
		// mpijob-manager writes each job's status in its JobStatus.
		ti := df.ForResource(api.JobStatusResource).Informer()
		if _, err := ti.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { st.see(o) },
			UpdateFunc: func(_, o any) { st.see(o) },
		}); err != nil {
			return p, nil, err
		}
		df.Start(stop)
		df.WaitForCacheSync(stop)
	}
	f.Start(stop)
	f.WaitForCacheSync(stop)

	start := time.Now()
	tl.start(start)
	_, fails, first := b.fanOut(ctx, n, clients, func(i int) *trainer.TrainJob {
		return b.job(ns, fmt.Sprintf("%s-%d", prefix, i), *workers, false)
	})
	if fails > 0 {
		return p, nil, fmt.Errorf("%d of %d creates failed, first: %w", fails, n, first)
	}
	p.created = time.Since(start)
	last := time.Now()
	err = wait.PollUntilContextTimeout(ctx, time.Second, *waitFor, true, func(ctx context.Context) (bool, error) {
		placed, running := tl.counts()
		statuses := -1
		if mode == "full" {
			statuses = st.count()
			if statuses == n && p.status == 0 {
				p.status = time.Since(start)
			}
		}
		if time.Since(last) > 15*time.Second {
			last = time.Now()
			msg := fmt.Sprintf("  %s: %d/%d pods placed, %d Running", time.Since(start).Round(time.Second), placed, want, running)
			if statuses >= 0 {
				msg += fmt.Sprintf(", %d/%d jobs' status Running", statuses, n)
			}
			fmt.Fprintln(os.Stderr, msg)
		}
		return running == want && (mode != "full" || p.status > 0), nil
	})
	p.placed, p.running = tl.times()
	if err != nil {
		placed, running := tl.counts()
		return p, nil, fmt.Errorf("%s: after %s %d/%d pods placed, %d Running: %w", prefix, time.Since(start).Round(time.Second), placed, want, running, err)
	}
	return p, done, nil
}

// fanOut creates n jobs from clients goroutines and returns each create's
// latency.
func (b *bench) fanOut(ctx context.Context, n, clients int, job func(i int) *trainer.TrainJob) ([]time.Duration, int, error) {
	lat := make([]time.Duration, n)
	errs := make([]error, n)
	next := make(chan int)
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				t := time.Now()
				errs[i] = b.cl.Create(ctx, job(i))
				lat[i] = time.Since(t)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	fails := 0
	var first error
	for _, err := range errs {
		if err != nil {
			if first == nil {
				first = err
			}
			fails++
		}
	}
	return lat, fails, first
}

func (b *bench) suspendedCreates(ctx context.Context) (creates, error) {
	var c creates
	ns, done, err := local.Namespace(ctx, b.cl, "scale-suspended")
	if err != nil {
		return c, err
	}
	defer done()
	cluster, err := b.read(ctx)
	if err != nil {
		return c, err
	}
	start := time.Now()
	c.latency, c.failures, c.first = b.fanOut(ctx, *suspended, *suspendedClients, func(i int) *trainer.TrainJob {
		return b.job(ns, fmt.Sprintf("held-%d", i), *workers, true)
	})
	c.total = time.Since(start)
	if c.cpu, c.calls, c.watches, err = b.since(ctx, cluster); err != nil {
		return c, err
	}
	sort.Slice(c.latency, func(i, j int) bool { return c.latency[i] < c.latency[j] })
	if c.failures > 0 {
		return c, fmt.Errorf("%d of %d suspended creates failed, first: %w", c.failures, *suspended, c.first)
	}
	return c, nil
}

// statuses counts the jobs whose status (mpijob-manager's, in their
// JobStatuses) says Running.
type statuses struct {
	mu      sync.Mutex
	running map[string]bool
}

func (s *statuses) see(o any) {
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return
	}
	raw, _, _ := unstructured.NestedString(u.Object, "status")
	st, found, _ := api.ReadStatus(map[string]string{api.StatusAnnotation: raw})
	s.mu.Lock()
	defer s.mu.Unlock()
	if found && st.Phase == api.PhaseRunning {
		s.running[u.GetName()] = true
	}
}

func (s *statuses) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.running)
}

// timeline records when the last of want pods was placed and Running.
type timeline struct {
	mu                sync.Mutex
	want              int
	t0                time.Time
	placed, running   map[string]bool
	tPlaced, tRunning time.Duration
}

func newTimeline(want int) *timeline {
	return &timeline{want: want, placed: map[string]bool{}, running: map[string]bool{}}
}

func (t *timeline) start(at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.t0 = at
}

func (t *timeline) see(o any) {
	p, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if p.Spec.NodeName != "" && !t.placed[p.Name] {
		t.placed[p.Name] = true
		if len(t.placed) == t.want {
			t.tPlaced = time.Since(t.t0)
		}
	}
	if p.Status.Phase == corev1.PodRunning && !t.running[p.Name] {
		t.running[p.Name] = true
		if len(t.running) == t.want {
			t.tRunning = time.Since(t.t0)
		}
	}
}

func (t *timeline) counts() (placed, running int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.placed), len(t.running)
}

func (t *timeline) times() (placed, running time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.tPlaced, t.tRunning
}

// managerPIDs are the processes, on this machine, of mpijob-manager's
// pods; none in bare.
func (b *bench) managerPIDs(ctx context.Context) ([]int, error) {
	l, err := b.cs.CoreV1().Pods(localcluster.ManagerNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, p := range l.Items {
		if !strings.HasPrefix(p.Name, localcluster.ManagerDeployment+"-") || p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
			continue
		}
		pid, err := localcluster.ManagerPID(p.Name)
		if err != nil {
			return nil, fmt.Errorf("pod %s: %w", p.Name, err)
		}
		pids = append(pids, pid)
	}
	return pids, nil
}

// use sums the processes' CPU time and takes the largest RSS and peak.
func (b *bench) use(pids []int) usage {
	var u usage
	for _, pid := range pids {
		cpu, rss, peak, err := localcluster.ProcessUse(pid)
		if err != nil {
			continue
		}
		u.cpu += cpu
		u.rss = max(u.rss, rss)
		u.peak = max(u.peak, peak)
	}
	return u
}

// hist is one webhook's latency histogram (cumulative buckets).
type hist struct {
	bounds []float64
	counts []float64
	total  float64
}

func (h *hist) minus(o *hist) *hist {
	if o == nil {
		return h
	}
	d := &hist{bounds: h.bounds, counts: make([]float64, len(h.counts)), total: h.total - o.total}
	for i := range h.counts {
		if i < len(o.counts) {
			d.counts[i] = h.counts[i] - o.counts[i]
		}
	}
	return d
}

// quantile interpolates linearly within the bucket that holds q, as
// Prometheus's histogram_quantile does; above the last finite bound it
// returns +Inf.
func (h *hist) quantile(q float64) float64 {
	if h.total == 0 {
		return math.NaN()
	}
	rank := q * h.total
	lo, below := 0.0, 0.0
	for i, c := range h.counts {
		if c >= rank {
			if c == below {
				return h.bounds[i]
			}
			return lo + (h.bounds[i]-lo)*(rank-below)/(c-below)
		}
		lo, below = h.bounds[i], c
	}
	return math.Inf(1)
}

// bucket is the smallest bound under which a q share of the calls fell.
func (h *hist) bucket(q float64) float64 {
	for i, c := range h.counts {
		if c >= q*h.total {
			return h.bounds[i]
		}
	}
	return math.Inf(1)
}

// webhookHists reads the API server's admission-webhook latency by webhook
// name (admit and validate summed).
func (b *bench) webhookHists(ctx context.Context) (map[string]*hist, error) {
	fams, err := local.APIMetrics(ctx, b.cs)
	if err != nil {
		return nil, err
	}
	out := map[string]*hist{}
	fam := fams["apiserver_admission_webhook_admission_duration_seconds"]
	if fam == nil {
		return out, nil
	}
	for _, m := range fam.GetMetric() {
		name := local.Label(m, "name")
		h := out[name]
		hg := m.GetHistogram()
		if h == nil {
			h = &hist{}
			for _, bk := range hg.GetBucket() {
				h.bounds = append(h.bounds, bk.GetUpperBound())
			}
			h.counts = make([]float64, len(h.bounds))
			out[name] = h
		}
		for i, bk := range hg.GetBucket() {
			if i < len(h.counts) {
				h.counts[i] += float64(bk.GetCumulativeCount())
			}
		}
		h.total += float64(hg.GetSampleCount())
	}
	return out, nil
}

func secs(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1fs", d.Seconds())
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%.1fms", float64(d.Microseconds())/1000)
}

func ratio(full, bare time.Duration) string {
	if full == 0 || bare == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", float64(full)/float64(bare))
}

func report(rs map[string]*result) error {
	full, bare := rs["full"], rs["bare"]
	if full == nil {
		full = &result{}
	}
	if bare == nil {
		bare = &result{}
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	row := func(what string, f, b time.Duration, target string) {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t\n", what, secs(b), secs(f), ratio(f, b), target)
	}
	fmt.Fprintf(w, "scenario\tbare\tfull\tfull/bare\ttarget\t\n")
	if *jobs > 0 {
		s := fmt.Sprintf("%d jobs × %d Workers (%d pods), %d clients", *jobs, *workers, *jobs*(*workers+1), *creators)
		row(s+": creates done", full.scale.created, bare.scale.created, "")
		row(s+": every pod placed", full.scale.placed, bare.scale.placed, "≤ 1.25 (goal 1.10)")
		row(s+": every pod Running", full.scale.running, bare.scale.running, "≤ 1.25 (goal 1.10)")
		row(s+": every job's status Running", full.scale.status, 0, "≤ 2m")
	}
	if *burst > 0 {
		s := fmt.Sprintf("burst %d × %d (%d pods), %d clients", *burst, *workers, *burst*(*workers+1), *burstClients)
		row(s+": creates done", full.burst.created, bare.burst.created, "")
		row(s+": every pod placed", full.burst.placed, bare.burst.placed, "≤ 1.25 (goal 1.10)")
		row(s+": every pod Running", full.burst.running, bare.burst.running, "≤ 1.25 (goal 1.10)")
	}
	if *suspended > 0 {
		s := fmt.Sprintf("%d suspended creates, %d clients", *suspended, *suspendedClients)
		row(s+": all done", full.susp.total, bare.susp.total, "≤ 1.25 (goal 1.10)")
		fmt.Fprintf(w, "%s: create p50\t%s\t%s\t%s\t\t\n", s, ms(local.Percentile(bare.susp.latency, 50)), ms(local.Percentile(full.susp.latency, 50)), ratio(local.Percentile(full.susp.latency, 50), local.Percentile(bare.susp.latency, 50)))
		fmt.Fprintf(w, "%s: create p99\t%s\t%s\t%s\t\t\n", s, ms(local.Percentile(bare.susp.latency, 99)), ms(local.Percentile(full.susp.latency, 99)), ratio(local.Percentile(full.susp.latency, 99), local.Percentile(bare.susp.latency, 99)))
	}
	if err := w.Flush(); err != nil {
		return err
	}

	fmt.Println()
	w = tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "admission webhook (API server's histogram, burst + suspended creates)\tmode\tcalls\tp50\tp99\tbucket of p99\ttarget\t\n")
	for _, mode := range []string{"bare", "full"} {
		r := rs[mode]
		if r == nil {
			continue
		}
		names := make([]string, 0, len(r.hooks))
		for n, h := range r.hooks {
			if h.total > 0 {
				names = append(names, n)
			}
		}
		sort.Strings(names)
		for _, n := range names {
			h := r.hooks[n]
			target := ""
			if strings.Contains(n, "mpijob") {
				target = "p99 ≤ 50ms"
			}
			fmt.Fprintf(w, "%s\t%s\t%.0f\t%.1fms\t%.1fms\t≤ %gms\t%s\t\n", n, mode, h.total, 1000*h.quantile(0.5), 1000*h.quantile(0.99), 1000*h.bucket(0.99), target)
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if len(full.handlers) > 0 {
		fmt.Println()
		w = tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(w, "mpijob-manager's own time per admission request (native histogram, burst + suspended creates)\tcalls\tp50\tp99\ttarget\t\n")
		paths := make([]string, 0, len(full.handlers))
		for p := range full.handlers {
			paths = append(paths, p)
		}
		sort.Strings(paths)
		for _, p := range paths {
			h := full.handlers[p]
			if h.calls < 0.5 {
				continue
			}
			fmt.Fprintf(w, "%s\t%.0f\t%.2fms\t%.2fms\tp99 ≤ 20ms\t\n", p, h.calls, 1000*h.p50, 1000*h.p99)
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	if *jobs > 0 && (len(full.cpu) > 0 || len(bare.cpu) > 0) {
		if err := printCPU(fmt.Sprintf("CPU time over the %d-job scenario, by program (where the time goes)", *jobs), bare.cpu, full.cpu, func(w io.Writer) {
			if a := bare.cpu["kube-apiserver"]; a > 0 {
				fmt.Fprintf(w, "kube-apiserver's added CPU, of the bare run's (target ≤ 50%%)\t\t\t%.0f%%\t\n", 100*(full.cpu["kube-apiserver"]-a).Seconds()/a.Seconds())
			}
			fmt.Fprintf(w, "machine's CPU over the scenario (cores × time to every pod Running)\t%.1fs\t%.1fs\t\t\n",
				float64(runtime.NumCPU())*bare.scale.running.Seconds(), float64(runtime.NumCPU())*full.scale.running.Seconds())
		}); err != nil {
			return err
		}
	}
	if *jobs > 0 && (len(full.calls) > 0 || len(bare.calls) > 0) {
		if err := printCalls(fmt.Sprintf("API requests per job over the %d-job scenario, by verb and resource (apiserver_request_total)", *jobs), bare.calls, full.calls, float64(*jobs)); err != nil {
			return err
		}
	}
	if *jobs > 0 && (len(full.watches) > 0 || len(bare.watches) > 0) {
		if err := printWatches(fmt.Sprintf("watch events sent per job over the %d-job scenario, by resource (apiserver_watch_events_*)", *jobs), bare.watches, full.watches, float64(*jobs)); err != nil {
			return err
		}
	}
	if *suspended > 0 && (len(full.susp.cpu) > 0 || len(bare.susp.cpu) > 0) {
		if err := printCPU(fmt.Sprintf("CPU time while the %d suspended creates ran, by program", *suspended), bare.susp.cpu, full.susp.cpu, func(w io.Writer) {
			fmt.Fprintf(w, "machine's CPU while they ran (cores × time)\t%.1fs\t%.1fs\t\t\n",
				float64(runtime.NumCPU())*bare.susp.total.Seconds(), float64(runtime.NumCPU())*full.susp.total.Seconds())
		}); err != nil {
			return err
		}
		if err := printCalls(fmt.Sprintf("API requests per suspended create while the %d ran, by verb and resource", *suspended), bare.susp.calls, full.susp.calls, float64(*suspended)); err != nil {
			return err
		}
		if err := printWatches(fmt.Sprintf("watch events sent per suspended create while the %d ran, by resource", *suspended), bare.susp.watches, full.susp.watches, float64(*suspended)); err != nil {
			return err
		}
	}
	if full.manager.measurable && *jobs > 0 {
		fmt.Println()
		w = tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
		m := full.manager
		fmt.Fprintf(w, "mpijob-manager over the %d-job scenario (%d replicas)\tvalue\ttarget\t\n", *jobs, m.replicas)
		fmt.Fprintf(w, "CPU time, all replicas\t%.1fs\t\t\n", m.cpu.Seconds())
		fmt.Fprintf(w, "CPU time per job\t%.1fms\t≤ 40ms\t\n", float64(m.cpu.Microseconds())/1000/float64(*jobs))
		fmt.Fprintf(w, "RSS at the end, largest replica\t%d MiB\t≤ 100 MiB\t\n", m.rss>>20)
		fmt.Fprintf(w, "peak RSS (VmHWM), largest replica\t%d MiB\t\t\n", m.peak>>20)
		fmt.Fprintf(w, "RSS per job\t%.0f KiB\t\t\n", float64(m.rss>>10)/float64(*jobs))
		if err := w.Flush(); err != nil {
			return err
		}
	}
	if len(full.rounds) > 0 && *jobs > 0 {
		fmt.Println()
		w = tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(w, "mpijob-manager's rounds per job over the %d-job scenario, by controller (controller_runtime_reconcile_total)	rounds per job	\n", *jobs)
		names := make([]string, 0, len(full.rounds))
		var all float64
		for k, v := range full.rounds {
			names = append(names, k)
			all += v
		}
		sort.Slice(names, func(i, j int) bool { return full.rounds[names[i]] > full.rounds[names[j]] })
		for _, k := range names {
			if full.rounds[k] >= 0.05*float64(*jobs) {
				fmt.Fprintf(w, "%s\t%.1f\t\n", k, full.rounds[k]/float64(*jobs))
			}
		}
		fmt.Fprintf(w, "all controllers\t%.1f\t\n", all/float64(*jobs))
		if err := w.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// reading is the cluster's counters at one moment: each process's CPU
// time, the API server's requests and what its watches sent.
type reading struct {
	procs   map[string]local.ProcTime
	calls   map[string]float64
	watches map[string]local.Watched
}

func (b *bench) read(ctx context.Context) (reading, error) {
	r := reading{procs: local.ProcessCPU()}
	var err error
	if r.calls, err = local.APIRequests(ctx, b.cs); err != nil {
		return r, err
	}
	r.watches, err = local.APIWatches(ctx, b.cs)
	return r, err
}

// since is what the cluster did after then: each program's CPU time, the
// API server's requests by verb and resource, and what its watches sent
// by resource.
func (b *bench) since(ctx context.Context, then reading) (map[string]time.Duration, map[string]float64, map[string]local.Watched, error) {
	now, err := b.read(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	return local.CPUSince(now.procs, then.procs), callsSince(now.calls, then.calls), watchesSince(now.watches, then.watches), nil
}

// callsSince is the API server's requests between two readings of
// apiserver_request_total, by verb and resource.
func callsSince(now, then map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range now {
		if d := v - then[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// watchesSince is what the API server's watches sent between two
// readings, by resource.
func watchesSince(now, then map[string]local.Watched) map[string]local.Watched {
	out := map[string]local.Watched{}
	for k, v := range now {
		if d := (local.Watched{Events: v.Events - then[k].Events, Bytes: v.Bytes - then[k].Bytes}); d.Events > 0 {
			out[k] = d
		}
	}
	return out
}

// printCPU prints each program's CPU time, bare against full, the 14
// largest first, then all programs, then what more adds.
func printCPU(title string, bare, full map[string]time.Duration, more func(io.Writer)) error {
	fmt.Println()
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "%s\tbare\tfull\tdifference\t\n", title)
	var names []string
	var tb, tf time.Duration
	for k := range full {
		names = append(names, k)
		tf += full[k]
	}
	for k := range bare {
		tb += bare[k]
		if _, ok := full[k]; !ok {
			names = append(names, k)
		}
	}
	sort.Slice(names, func(i, j int) bool {
		if a, b := full[names[i]]+bare[names[i]], full[names[j]]+bare[names[j]]; a != b {
			return a > b
		}
		return names[i] < names[j]
	})
	for i, k := range names {
		if i == 14 {
			break
		}
		fmt.Fprintf(w, "%s\t%.1fs\t%.1fs\t%+.1fs\t\n", k, bare[k].Seconds(), full[k].Seconds(), (full[k] - bare[k]).Seconds())
	}
	fmt.Fprintf(w, "all programs\t%.1fs\t%.1fs\t%+.1fs\t\n", tb.Seconds(), tf.Seconds(), (tf - tb).Seconds())
	more(w)
	return w.Flush()
}

// printCalls prints the API server's requests per unit (a job, a create),
// by verb and resource, bare against full, the largest differences first
// (what mpijob adds), the 20 largest of those made at least once in twenty
// units, then all of them.
func printCalls(title string, bare, full map[string]float64, n float64) error {
	fmt.Println()
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "%s\tbare\tfull\tdifference\t\n", title)
	var keys []string
	var tb, tf float64
	for k, v := range full {
		keys = append(keys, k)
		tf += v
	}
	for k, v := range bare {
		tb += v
		if _, ok := full[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		di, dj := full[keys[i]]-bare[keys[i]], full[keys[j]]-bare[keys[j]]
		if di != dj {
			return di > dj
		}
		return keys[i] < keys[j]
	})
	shown := 0
	for _, k := range keys {
		if shown == 20 {
			break
		}
		// A request neither mode made once in twenty units says nothing.
		if bare[k]/n < 0.05 && full[k]/n < 0.05 {
			continue
		}
		shown++
		fmt.Fprintf(w, "%s\t%.1f\t%.1f\t%+.1f\t\n", k, bare[k]/n, full[k]/n, (full[k]-bare[k])/n)
	}
	fmt.Fprintf(w, "all requests\t%.1f\t%.1f\t%+.1f\t\n", tb/n, tf/n, (tf-tb)/n)
	return w.Flush()
}

// printWatches prints what the API server's watches sent per unit (a job,
// a create), by resource, bare against full, the most bytes added
// first: an event is encoded and sent once for each watcher whose
// selector it matches, so a watch the full install adds costs the API
// server at the pace of the resource's changes.
func printWatches(title string, bare, full map[string]local.Watched, n float64) error {
	fmt.Println()
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "%s\tbare\tfull\tKiB bare\tKiB full\tKiB difference\t\n", title)
	keys := make([]string, 0, len(full)+len(bare))
	var tb, tf local.Watched
	for k, v := range full {
		keys = append(keys, k)
		tf.Events, tf.Bytes = tf.Events+v.Events, tf.Bytes+v.Bytes
	}
	for k, v := range bare {
		tb.Events, tb.Bytes = tb.Events+v.Events, tb.Bytes+v.Bytes
		if _, ok := full[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		di, dj := full[keys[i]].Bytes-bare[keys[i]].Bytes, full[keys[j]].Bytes-bare[keys[j]].Bytes
		if di != dj {
			return di > dj
		}
		return keys[i] < keys[j]
	})
	for i, k := range keys {
		if i == 12 {
			break
		}
		fmt.Fprintf(w, "%s\t%.1f\t%.1f\t%.1f\t%.1f\t%+.1f\t\n", k, bare[k].Events/n, full[k].Events/n, bare[k].Bytes/n/1024, full[k].Bytes/n/1024, (full[k].Bytes-bare[k].Bytes)/n/1024)
	}
	fmt.Fprintf(w, "all watches\t%.1f\t%.1f\t%.1f\t%.1f\t%+.1f\t\n", tb.Events/n, tf.Events/n, tb.Bytes/n/1024, tf.Bytes/n/1024, (tf.Bytes-tb.Bytes)/n/1024)
	return w.Flush()
}
