//go:build e2e

// Command manager measures mpijob-manager on the running local cluster:
//
//  1. Overhead: the time from creating an MPI job (8 Workers on kwok nodes)
//     to all its Workers Running, one job at a time, with mpijob-manager
//     and its webhooks installed and then without them (webhook
//     configurations removed, process stopped; both restored afterwards).
//
//  2. Scale: the manager's CPU time and memory while -jobs MPI jobs of
//     -workers Workers each start and stay Running on the kwok nodes,
//     then while they idle, and how long their diagnosis takes to say
//     Running for all of them.
//
//  3. Queued: the manager's CPU time in steady state with -queued jobs
//     (e.g. 100,500) waiting in one Kueue ClusterQueue behind a job that
//     holds its 8 GPUs, each
//     with its position in its status, and the Workload List calls the API
//     server served meanwhile. Linear growth: 5× the jobs cost at most 5×
//     the CPU, not 25×.
//
//     go run -tags e2e ./bench/manager [-jobs 500] [-workers 8] [-overhead-jobs 20] [-queued 100,500]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"

	"github.com/mpijob/mpijob/bench/internal/local"
	"github.com/mpijob/mpijob/bench/internal/stack"
	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/jobstatus"
	"github.com/mpijob/mpijob/pkg/localcluster"
	"github.com/mpijob/mpijob/test/framework"
)

func main() {
	jobs := flag.Int("jobs", 500, "MPI jobs for the scale run (0: skip it)")
	workers := flag.Int("workers", 8, "Workers per job")
	overheadJobs := flag.Int("overhead-jobs", 20, "jobs per mode for the overhead run")
	flag.BoolVar(&webhooksOnly, "webhooks-only", false, "in the run without, remove only the webhooks (the manager's controllers keep running): splits the overhead")
	flag.StringVar(&queuedRuns, "queued", "", "comma-separated numbers of queued jobs for the queued run, e.g. 100,500 (empty: skip it)")
	flag.Parse()
	if err := run(*jobs, *workers, *overheadJobs); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

var (
	webhooksOnly bool
	queuedRuns   string
)

type bench struct {
	opts        localcluster.Options
	cl          client.Client
	restCfg     *rest.Config
	scrapeToken string
}

func run(jobs, workers, overheadJobs int) error {
	ctx := context.Background()
	opts, err := local.Cluster(ctx)
	if err != nil {
		return err
	}
	cfg, err := local.Config(opts, "", 500, 1000)
	if err != nil {
		return err
	}
	cl, err := client.New(cfg, client.Options{Scheme: framework.Scheme})
	if err != nil {
		return err
	}
	b := &bench{opts: opts, cl: cl, restCfg: cfg}
	if queuedRuns != "" {
		var ns []int
		for _, f := range strings.Split(queuedRuns, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n <= 0 {
				return fmt.Errorf("-queued %q: want positive numbers separated by commas, e.g. 100,500", queuedRuns)
			}
			ns = append(ns, n)
		}
		if err := b.queued(ctx, ns); err != nil {
			return err
		}
		fmt.Println()
	}
	if overheadJobs == 0 {
		if jobs == 0 {
			return nil
		}
		return b.scale(ctx, jobs, workers)
	}

	with, without, err := b.overhead(ctx, workers, overheadJobs)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "create → all %d Workers Running (n=%d each)\tp50\tp90\tmean\t\n", workers, overheadJobs)
	fmt.Fprintf(w, "without mpijob-manager\t%s\t%s\t%s\t\n", pct(without, 50), pct(without, 90), mean(without))
	fmt.Fprintf(w, "with mpijob-manager\t%s\t%s\t%s\t\n", pct(with, 50), pct(with, 90), mean(with))
	fmt.Fprintf(w, "added by mpijob-manager\t%+.1f%%\t%+.1f%%\t%+.1f%%\t\n", ratio(pct(with, 50), pct(without, 50)), ratio(pct(with, 90), pct(without, 90)), ratio(mean(with), mean(without)))
	_ = w.Flush()
	if jobs == 0 {
		return nil
	}
	fmt.Println()
	return b.scale(ctx, jobs, workers)
}

func (b *bench) job(ns, name string, workers int) *trainer.TrainJob {
	return framework.MakeTrainJob(name, ns, "mpi-openmpi").NumNodes(int32(workers)).OnKwokNodes().HoldOnKwok().Obj()
}

func (b *bench) namespace(ctx context.Context, prefix string) (string, func(), error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-", Labels: map[string]string{"mpijob.dev/test": "bench"}}}
	if err := b.cl.Create(ctx, ns); err != nil {
		return "", nil, err
	}
	return ns.Name, func() { _ = b.cl.Delete(context.Background(), ns) }, nil
}

// workersRunning counts the Running Worker pods of each job of ns.
func (b *bench) workersRunning(ctx context.Context, ns string) (map[string]int, error) {
	pods := &corev1.PodList{}
	if err := b.cl.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"jobset.sigs.k8s.io/replicatedjob-name": "node"}); err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning {
			out[p.Labels["jobset.sigs.k8s.io/jobset-name"]]++
		}
	}
	return out, nil
}

// overhead measures jobs one at a time, alternating with and without
// mpijob-manager (ABBA order) so that drift in the cluster's speed falls on
// both sides equally.
func (b *bench) overhead(ctx context.Context, workers, n int) (with, without []time.Duration, err error) {
	ns, cleanup, err := b.namespace(ctx, "bench-overhead")
	if err != nil {
		return nil, nil, err
	}
	defer cleanup()
	fmt.Fprintf(os.Stderr, "overhead: %d jobs of %d Workers with and %d without mpijob-manager, alternating\n", n, workers, n)
	enabled := true
	var saved *stack.Saved
	defer func() {
		if !enabled {
			if rerr := b.enableManager(ctx, saved, ns); rerr != nil && err == nil {
				err = fmt.Errorf("restoring mpijob-manager: %w (run `make dev-down` and `make dev`)", rerr)
			}
		}
	}()
	for i := 0; i < n; i++ {
		order := []bool{true, false}
		if i%2 == 1 {
			order = []bool{false, true}
		}
		for _, on := range order {
			switch {
			case on && !enabled:
				if err := b.enableManager(ctx, saved, ns); err != nil {
					return nil, nil, err
				}
				enabled = true
				time.Sleep(settle)
			case !on && enabled:
				if saved, err = b.disableManager(ctx); err != nil {
					return nil, nil, err
				}
				enabled = false
				time.Sleep(settle)
			}
			d, err := b.one(ctx, ns, fmt.Sprintf("job-%d-%v", i, on), workers)
			if err != nil {
				return nil, nil, err
			}
			if on {
				with = append(with, d)
			} else {
				without = append(without, d)
			}
		}
	}
	sort.Slice(with, func(i, j int) bool { return with[i] < with[j] })
	sort.Slice(without, func(i, j int) bool { return without[i] < without[j] })
	return with, without, nil
}

// one creates a job and returns the time until all its Workers are Running.
func (b *bench) one(ctx context.Context, ns, name string, workers int) (time.Duration, error) {
	start := time.Now()
	if err := b.cl.Create(ctx, b.job(ns, name, workers)); err != nil {
		return 0, err
	}
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		r, err := b.workersRunning(ctx, ns)
		return err == nil && r[name] >= workers, err
	})
	if err != nil {
		return 0, fmt.Errorf("job %s/%s: Workers not Running: %w", ns, name, err)
	}
	d := time.Since(start)
	return d, b.cl.Delete(ctx, b.job(ns, name, workers), client.PropagationPolicy(metav1.DeletePropagationBackground))
}

func (b *bench) disableManager(ctx context.Context) (*stack.Saved, error) {
	return stack.Bare(ctx, b.cl, webhooksOnly)
}

func (b *bench) enableManager(ctx context.Context, saved *stack.Saved, ns string) error {
	return saved.Restore(ctx, b.cl, ns, b.job2)
}

// job2 is a 2-Worker job, the probe Restore creates.
func (b *bench) job2(ns, name string) *trainer.TrainJob { return b.job(ns, name, 2) }

// settle lets the cluster finish what switching the manager on or off
// started, the same time either way.
const settle = 2 * time.Second

func (b *bench) scale(ctx context.Context, jobs, workers int) error {
	pid, err := b.leaderPID(ctx)
	if err != nil {
		return err
	}
	ns, cleanup, err := b.namespace(ctx, "bench-scale")
	if err != nil {
		return err
	}
	defer cleanup()
	cpu0, rss0, _, err := localcluster.ProcessUse(pid)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "scale: creating %d jobs of %d Workers (%d pods) in %s\n", jobs, workers, jobs*(workers+1), ns)
	start := time.Now()
	for i := 0; i < jobs; i++ {
		if err := b.cl.Create(ctx, b.job(ns, fmt.Sprintf("job-%d", i), workers)); err != nil {
			return err
		}
	}
	created := time.Since(start)
	// Wait until mpijob's status says Running for every job.
	last := time.Now()
	err = wait.PollUntilContextTimeout(ctx, 2*time.Second, 30*time.Minute, true, func(ctx context.Context) (bool, error) {
		l := &trainer.TrainJobList{}
		if err := b.cl.List(ctx, l, client.InNamespace(ns)); err != nil {
			return false, err
		}
		if err := jobstatus.List(ctx, b.cl, l.Items, client.InNamespace(ns)); err != nil {
			return false, err
		}
		running := 0
		for _, tj := range l.Items {
			if s, ok, _ := api.ReadStatus(tj.Annotations); ok && s.Phase == api.PhaseRunning {
				running++
			}
		}
		if time.Since(last) > 15*time.Second {
			fmt.Fprintf(os.Stderr, "  %s: %d/%d jobs Running\n", time.Since(start).Round(time.Second), running, jobs)
			last = time.Now()
		}
		return running == jobs, nil
	})
	if err != nil {
		return fmt.Errorf("not every job reached Running: %w", err)
	}
	allRunning := time.Since(start)
	cpu1, rss1, peak1, err := localcluster.ProcessUse(pid)
	if err != nil {
		return err
	}
	const idle = 60 * time.Second
	fmt.Fprintf(os.Stderr, "scale: all Running after %s; measuring %s of steady state\n", allRunning.Round(time.Second), idle)
	time.Sleep(idle)
	cpu2, rss2, peak2, err := localcluster.ProcessUse(pid)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "mpijob-manager, %d jobs × %d Workers on kwok\tvalue\t\n", jobs, workers)
	fmt.Fprintf(w, "create calls (client side)\t%s\t\n", created.Round(time.Millisecond))
	fmt.Fprintf(w, "create → every job's status Running\t%s\t\n", allRunning.Round(time.Second))
	fmt.Fprintf(w, "manager CPU during start-up\t%s (%.0f%% of one core)\t\n", (cpu1 - cpu0).Round(10*time.Millisecond), 100*float64(cpu1-cpu0)/float64(allRunning))
	fmt.Fprintf(w, "manager CPU, %s steady state\t%s (%.1f%% of one core)\t\n", idle, (cpu2 - cpu1).Round(10*time.Millisecond), 100*float64(cpu2-cpu1)/float64(idle))
	fmt.Fprintf(w, "manager RSS before / all Running / steady\t%d / %d / %d MiB\t\n", rss0>>20, rss1>>20, rss2>>20)
	fmt.Fprintf(w, "manager peak RSS (VmHWM)\t%d MiB\t\n", max(peak1, peak2)>>20)
	return w.Flush()
}

func pct(sorted []time.Duration, p int) time.Duration {
	return local.Percentile(sorted, p).Round(time.Millisecond)
}

func mean(d []time.Duration) time.Duration {
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	return (sum / time.Duration(len(d))).Round(time.Millisecond)
}

func ratio(a, b time.Duration) float64 { return 100 * (float64(a)/float64(b) - 1) }

// queued measures the manager with n jobs waiting in a Kueue ClusterQueue
// that has no quota, for each n: the time until every job's status shows
// its position, then the manager's CPU over a minute of steady state (the
// diagnosis looks at every waiting job every 15 s, backing off to a
// minute while its reason stays) and the Workload List
// calls the API server served in that minute.
func (b *bench) queued(ctx context.Context, counts []int) error {
	pid, err := b.leaderPID(ctx)
	if err != nil {
		return err
	}
	type row struct {
		jobs           int
		toPositions    time.Duration
		cpu            time.Duration
		workloadLists  float64
		visibilityGets float64
	}
	var rows []row
	const idle = 60 * time.Second
	for _, n := range counts {
		ns, cleanup, err := b.namespace(ctx, "bench-queued")
		if err != nil {
			return err
		}
		cq := ns + "-cq"
		docs := []string{fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: %s}
spec:
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: %s}}
  resourceGroups:
  - coveredResources: ["cpu", "memory", "nvidia.com/gpu"]
    flavors:
    - name: default-flavor
      resources:
      - {name: cpu, nominalQuota: "1000"}
      - {name: memory, nominalQuota: 1000Gi}
      - {name: nvidia.com/gpu, nominalQuota: "8"}
`, cq, ns), fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: q, namespace: %s}
spec: {clusterQueue: %s}
`, ns, cq)}
		var created []*unstructured.Unstructured
		for _, d := range docs {
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(d), &u.Object); err != nil {
				return err
			}
			if err := b.cl.Create(ctx, u); err != nil {
				return fmt.Errorf("create %s: %w", u.GetKind(), err)
			}
			created = append(created, u)
		}
		done := func() {
			cleanup()
			_ = b.cl.Delete(context.Background(), created[0])
		}
		// One job holds the ClusterQueue's 8 GPUs; the n others wait behind it.
		fmt.Fprintf(os.Stderr, "queued: one job takes the 8 GPUs of ClusterQueue %s, then %d jobs queue behind it in %s\n", cq, n, ns)
		gpuJob := func(name string) *framework.TrainJobWrapper {
			return framework.MakeTrainJob(name, ns, "mpi-openmpi-gpu").NumNodes(2).GPUsPerWorker(4).OnKwokNodes().HoldOnKwok().Queue("q")
		}
		if err := framework.SubmitW(ctx, b.cl, gpuJob("holder")); err != nil {
			done()
			return err
		}
		start := time.Now()
		for i := 0; i < n; i++ {
			if err := framework.SubmitW(ctx, b.cl, gpuJob(fmt.Sprintf("job-%d", i))); err != nil {
				done()
				return err
			}
		}
		last := time.Now()
		err = wait.PollUntilContextTimeout(ctx, 2*time.Second, 20*time.Minute, true, func(ctx context.Context) (bool, error) {
			l := &trainer.TrainJobList{}
			if err := b.cl.List(ctx, l, client.InNamespace(ns)); err != nil {
				return false, err
			}
			if err := jobstatus.List(ctx, b.cl, l.Items, client.InNamespace(ns)); err != nil {
				return false, err
			}
			positioned := 0
			for _, tj := range l.Items {
				if s, ok, _ := api.ReadStatus(tj.Annotations); ok && s.Phase == api.PhaseQueued && s.QueuePosition != nil {
					positioned++
				}
			}
			if time.Since(last) > 15*time.Second {
				fmt.Fprintf(os.Stderr, "  %s: %d/%d jobs Queued with a position\n", time.Since(start).Round(time.Second), positioned, n)
				last = time.Now()
			}
			return positioned >= n, nil
		})
		if err != nil {
			done()
			return fmt.Errorf("not every job got its queue position: %w", err)
		}
		toPositions := time.Since(start)
		// Let the start-up work end, then measure a steady minute.
		time.Sleep(15 * time.Second)
		cpu0, _, _, err := localcluster.ProcessUse(pid)
		if err != nil {
			done()
			return err
		}
		lists0, gets0, err := b.apiserverCounts(ctx)
		if err != nil {
			done()
			return err
		}
		time.Sleep(idle)
		cpu1, _, _, err := localcluster.ProcessUse(pid)
		if err != nil {
			done()
			return err
		}
		lists1, gets1, err := b.apiserverCounts(ctx)
		if err != nil {
			done()
			return err
		}
		rows = append(rows, row{jobs: n, toPositions: toPositions, cpu: cpu1 - cpu0, workloadLists: lists1 - lists0, visibilityGets: gets1 - gets0})
		fmt.Fprintf(os.Stderr, "queued: %d jobs measured; deleting them\n", n)
		_ = b.cl.DeleteAllOf(ctx, &trainer.TrainJob{}, client.InNamespace(ns))
		done()
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "queued jobs\tcreate → all positioned\tmanager CPU per %s\tCPU vs first\tjobs vs first\tWorkload LISTs per %s\tmanager's visibility requests per %s\t\n", idle, idle, idle)
	for _, r := range rows {
		fmt.Fprintf(w, "%d\t%s\t%s\t%.2f×\t%.2f×\t%.0f\t%.0f\t\n", r.jobs, r.toPositions.Round(time.Second), r.cpu.Round(10*time.Millisecond),
			float64(r.cpu)/float64(max(rows[0].cpu, 10*time.Millisecond)), float64(r.jobs)/float64(rows[0].jobs), r.workloadLists, r.visibilityGets)
	}
	return w.Flush()
}

// apiserverCounts reads how many Workload LIST calls the API server has
// served (its own metrics), and how many requests mpijob-manager made to
// Kueue's visibility API (the manager's metrics: aggregated requests are
// not in the API server's request counts).
func (b *bench) apiserverCounts(ctx context.Context) (workloadLists, visibilityGets float64, err error) {
	cs, err := kubernetes.NewForConfig(b.restCfg)
	if err != nil {
		return 0, 0, err
	}
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, 0, err
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(l, "apiserver_request_total{") && strings.Contains(l, `resource="workloads"`) && strings.Contains(l, `verb="LIST"`) {
			v, _ := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
			workloadLists += v
		}
	}
	if b.scrapeToken == "" {
		if b.scrapeToken, err = b.metricsToken(ctx, cs); err != nil {
			return 0, 0, err
		}
	}
	leader, err := localcluster.ManagerLeader(ctx, cs)
	if err != nil {
		return 0, 0, err
	}
	url, tlsCfg, err := localcluster.ManagerMetrics(ctx, b.cl, leader)
	if err != nil {
		return 0, 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+b.scrapeToken)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("manager metrics: %s: %s", resp.Status, body)
	}
	for _, l := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(l, "mpijob_kueue_visibility_requests_total{") {
			v, _ := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
			visibilityGets += v
		}
	}
	return workloadLists, visibilityGets, nil
}

// metricsToken makes a ServiceAccount allowed to read the manager's
// metrics (as Prometheus would be) and returns a token of it.
func (b *bench) metricsToken(ctx context.Context, cs kubernetes.Interface) (string, error) {
	const ns, name = "default", "mpijob-bench-scraper"
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	if err := b.cl.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "mpijob-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}},
	}
	if err := b.cl.Create(ctx, crb); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	// RBAC reaches the manager's authorizer within a moment.
	time.Sleep(2 * time.Second)
	return tr.Status.Token, nil
}

// leaderPID is the process, on this machine, of the manager pod that leads
// (the one that runs the controllers).
func (b *bench) leaderPID(ctx context.Context) (int, error) {
	cs, err := kubernetes.NewForConfig(b.restCfg)
	if err != nil {
		return 0, err
	}
	leader, err := localcluster.ManagerLeader(ctx, cs)
	if err != nil {
		return 0, err
	}
	if leader == "" {
		return 0, fmt.Errorf("no mpijob-manager pod leads")
	}
	return localcluster.ManagerPID(leader)
}
