// Command dashboard measures listing many jobs, against the running local
// cluster, acting as dev-a:
//
//   - `kubectl mpijob get`, the SDK's list_jobs (a python process, and the
//     call alone; its metadata list and, for reference, list_jobs(full=True)
//     of whole jobs) and `kubectl get trainjob`, end to end, in one run, with
//     their ratios to kubectl;
//   - the list API's latency (p50/p95) with N jobs in a namespace: the
//     first page (what the list page asks for), a page deep in the list
//     sorted by name, and every job in one answer;
//   - first contentful paint of the list page with N jobs, and the time
//     until its first rows are drawn, in headless Chromium
//     (dashboard/web/e2e/bench.mjs through playwright-core);
//   - how long a change (a job deleted) takes to show in the open page.
//
// It creates N suspended MPI TrainJobs in namespace bench-dashboard (dev-a
// may edit it), and deletes the namespace at the end. With -namespace NS it
// lists the jobs already in NS instead (e.g. the running ones that
// bench/scale -keep leaves), creates none and keeps NS (the change it
// times deletes one of its jobs).
//
//	go run ./bench/dashboard [-n 1000] [-runs 5] [-keep] [-namespace NS]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/mpijob/mpijob/bench/internal/local"
	"github.com/mpijob/mpijob/dashboard"
	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/jobstatus"
	"github.com/mpijob/mpijob/pkg/localcluster"
)

var (
	ns   = "bench-dashboard"
	runs int
	keep bool
	// existing is set by -namespace: the lists are of the jobs already
	// there (bench/scale -keep leaves its running ones), and the bench
	// creates and deletes no job.
	existing bool
	// prefix is what every listed job's name starts with: each client's
	// answer must hold n of them.
	prefix = "bench-"
)

func main() {
	n := flag.Int("n", 1000, "jobs")
	flag.IntVar(&runs, "runs", 5, "runs of each client's list")
	flag.BoolVar(&keep, "keep", false, "keep the namespace and its jobs for the next run (which creates only those missing)")
	namespace := flag.String("namespace", "", "time the lists of the jobs already in this namespace (e.g. the running ones bench/scale -keep left) instead of creating suspended ones; -n is then their number")
	flag.Parse()
	if *namespace != "" {
		ns, existing = *namespace, true
	}
	if err := run(*n); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(n int) error {
	ctrllog.SetLogger(logr.Discard())
	ctx := context.Background()
	opts, err := local.Cluster(ctx)
	if err != nil {
		return err
	}
	admin, err := local.Config(opts, "admin", 500, 500)
	if err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = trainer.AddToScheme(scheme)
	_ = api.AddJobStatusToScheme(scheme)
	cl, err := client.New(admin, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	devA, err := local.Config(opts, "dev-a", 0, 0)
	if err != nil {
		return err
	}
	token := devA.BearerToken
	if existing {
		l := &metav1.PartialObjectMetadataList{}
		l.SetGroupVersionKind(trainer.GroupVersion.WithKind("TrainJobList"))
		if err := cl.List(ctx, l, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(l.Items) == 0 {
			return fmt.Errorf("-namespace %s: no TrainJob there to list; give a namespace with jobs (bench/scale -keep prints its own), or leave -namespace out to create %d suspended ones", ns, n)
		}
		n = len(l.Items)
		prefix = l.Items[0].Name
		for _, m := range l.Items {
			for !strings.HasPrefix(m.Name, prefix) {
				prefix = prefix[:len(prefix)-1]
			}
		}
		fmt.Fprintf(os.Stderr, "timing the lists of the %d jobs in %s (their names start %q)\n", n, ns, prefix)
	}
	// The namespace, dev-a as its editor, N suspended jobs.
	if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); client.IgnoreAlreadyExists(err) != nil {
		return err
	}
	defer func() {
		if existing {
			return
		}
		if keep {
			fmt.Fprintln(os.Stderr, "keeping namespace", ns, "(-keep)")
			return
		}
		fmt.Fprintln(os.Stderr, "deleting namespace", ns)
		_ = cl.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}()
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "dev-a", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "edit"},
		Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "dev-a"}}}
	if err := cl.Create(ctx, rb); client.IgnoreAlreadyExists(err) != nil {
		return err
	}
	if !existing {
		if err := create(ctx, cl, n); err != nil {
			return err
		}
	}
	// The lists are timed once mpijob-manager has written every job's
	// status: a settled namespace, not one whose 10,000 jobs all change.
	if err := settled(ctx, cl, n); err != nil {
		return err
	}
	return measure(opts, admin, token, n)
}

// create makes n suspended MPI jobs in the bench's namespace.
func create(ctx context.Context, cl client.Client, n int) error {
	fmt.Fprintf(os.Stderr, "creating %d suspended MPI jobs in %s\n", n, ns)
	start := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			tj := &trainer.TrainJob{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-%04d", i), Namespace: ns},
				Spec: trainer.TrainJobSpec{
					RuntimeRef: trainer.RuntimeRef{Name: "mpi-openmpi", APIGroup: ptr.To(trainer.GroupVersion.Group), Kind: ptr.To(trainer.ClusterTrainingRuntimeKind)},
					Trainer:    &trainer.Trainer{NumNodes: ptr.To[int32](2)},
					Suspend:    ptr.To(true),
				},
			}
			if err := cl.Create(ctx, tj); client.IgnoreAlreadyExists(err) != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return err
	}
	fmt.Fprintf(os.Stderr, "created in %s\n", time.Since(start).Round(time.Millisecond))
	return nil
}

// measure times the clients' lists, the list API and the page at n jobs.
func measure(opts localcluster.Options, admin *rest.Config, token string, n int) error {
	lists, err := clients(opts, n)
	if err != nil {
		return err
	}

	srv := &dashboard.Server{Base: admin}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()

	// The list API: the page the list page asks for (50 newest jobs), a
	// page deep in the list by name, and the whole list in one answer.
	type api struct {
		name, query string
		rows        int
		p50, p95    time.Duration
	}
	apis := []api{
		{name: "list API, first page (50 rows, newest first)", query: "&perPage=50", rows: min(50, n)},
		{name: "list API, a page deep in the list, by name", query: "&perPage=50&sort=name&page=" + fmt.Sprint(max(1, n/100)), rows: min(50, n)},
		{name: "list API, every job in one answer", query: "", rows: n},
	}
	for i := range apis {
		var lat []time.Duration
		for range 60 {
			t := time.Now()
			req, _ := http.NewRequest("GET", ts.URL+"/api/jobs?namespace="+ns+apis[i].query, nil)
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			got := strings.Count(string(body), `"name":"`+prefix)
			if resp.StatusCode != http.StatusOK || got != apis[i].rows || !strings.Contains(string(body), fmt.Sprintf(`"total":%d,`, n)) {
				return fmt.Errorf("%s: HTTP %d with %d rows, want %d of %d", apis[i].name, resp.StatusCode, got, apis[i].rows, n)
			}
			lat = append(lat, time.Since(t))
		}
		lat = lat[10:] // warm-up: token review, connection, the user's watch
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		p := func(q float64) time.Duration { return lat[int(q*float64(len(lat)-1))] }
		apis[i].p50, apis[i].p95 = p(0.5), p(0.95)
	}

	// The page, in Chromium.
	web := filepath.Join(opts.RepoRoot, "dashboard", "web")
	cmd := exec.Command("node", "e2e/bench.mjs")
	cmd.Dir = web
	cmd.Env = append(os.Environ(), "DASHBOARD_URL="+ts.URL, "TOKEN="+token, "NAMESPACE="+ns, "JOBS="+fmt.Sprint(n))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("browser bench: %w", err)
	}
	var fcp, rows, change float64
	if _, err := fmt.Sscanf(strings.TrimSpace(string(out)), "%f %f %f", &fcp, &rows, &change); err != nil {
		return fmt.Errorf("browser bench printed %q: %w", out, err)
	}

	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "list of %d jobs, end to end (median of %d)\tvalue\tto kubectl\ttarget\n", n, runs)
	for _, l := range lists {
		fmt.Fprintf(w, "%s\t%s\t%.2f\t%s\n", l.name, l.median.Round(time.Millisecond), float64(l.median)/float64(lists[0].median), l.target)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "measure (%d jobs)\tvalue\ttarget\tratio to target\n", n)
	for _, a := range apis {
		fmt.Fprintf(w, "%s, p50 / p95\t%s / %s\tp95 100ms\t%.2f\n", a.name, a.p50.Round(time.Microsecond*100), a.p95.Round(time.Microsecond*100), float64(a.p95)/float64(100*time.Millisecond))
	}
	fmt.Fprintf(w, "first contentful paint\t%.0fms\t1000ms\t%.2f\n", fcp, fcp/1000)
	fmt.Fprintf(w, "first rows drawn\t%.0fms\t1500ms\t%.2f\n", rows, rows/1500)
	fmt.Fprintf(w, "a change visible in the open page\t%.0fms\t2000ms\t%.2f\n", change, change/2000)
	return w.Flush()
}

// settled waits until mpijob-manager has written the status of each of
// the n jobs, with its runtime (the current manager's), saying how many
// it has as it waits.
func settled(ctx context.Context, cl client.Client, n int) error {
	start, last := time.Now(), time.Time{}
	for {
		l := &metav1.PartialObjectMetadataList{}
		l.SetGroupVersionKind(trainer.GroupVersion.WithKind("TrainJobList"))
		if err := cl.List(ctx, l, client.InNamespace(ns)); err != nil {
			return err
		}
		statuses, err := jobstatus.Index(ctx, cl, client.InNamespace(ns))
		if err != nil {
			return err
		}
		done := 0
		for _, m := range l.Items {
			statuses.JoinMeta(&m.ObjectMeta)
			if st, ok, err := api.ReadStatus(m.Annotations); ok && err == nil && st.Runtime != "" {
				done++
			}
		}
		if done == n {
			fmt.Fprintf(os.Stderr, "every job's status written %s after the creates\n", time.Since(start).Round(time.Second))
			return nil
		}
		if time.Since(start) > 15*time.Minute {
			return fmt.Errorf("mpijob-manager wrote %d of %d jobs' statuses in 15 minutes", done, n)
		}
		if time.Since(last) > 10*time.Second {
			fmt.Fprintf(os.Stderr, "waiting for mpijob-manager's statuses: %d of %d\n", done, n)
			last = time.Now()
		}
		time.Sleep(2 * time.Second)
	}
}

// listing is one client's list, timed.
type listing struct {
	name, target string
	median       time.Duration
}

// clients times kubectl, the CLI and the SDK listing the namespace as
// dev-a, each runs times, and checks each listed every job. kubectl comes
// first: the others' ratios are to it.
func clients(opts localcluster.Options, n int) ([]listing, error) {
	kc := opts.KubeconfigPath()
	py := filepath.Join(opts.CacheDir, "sdk-venv", "bin", "python")
	sdk := `import sys, time
from mpijob import MPIJobClient
t = time.monotonic()
jobs = MPIJobClient(namespace=sys.argv[1], context="dev-a", config_file=sys.argv[2]).list_jobs(full=sys.argv[3] == "full")
d = time.monotonic() - t
print("\n".join(j.name for j in jobs))
print(f"call {d:.4f}", file=sys.stderr)
`
	cmds := []struct {
		name, target string
		argv         []string
		env          []string
	}{
		{"kubectl get trainjob", "", []string{opts.Kubectl(), "--kubeconfig", kc, "--context", "dev-a", "-n", ns, "get", "trainjob"}, nil},
		{"kubectl mpijob get (CLI)", "≤ 2s, ≤ 1.5× kubectl", []string{filepath.Join(opts.RepoRoot, "bin", "kubectl-mpijob"), "--kubeconfig", kc, "--context", "dev-a", "-n", ns, "get"}, nil},
		{"SDK list_jobs (python process)", "≤ 2s, ≤ 1.5× kubectl", []string{py, "-c", sdk, ns, kc, "metadata"}, []string{"PYTHONPATH=" + filepath.Join(opts.RepoRoot, "sdk", "python")}},
		// Whole TrainJobs, as list_jobs read them before it listed metadata.
		{"SDK list_jobs(full=True) (python process)", "", []string{py, "-c", sdk, ns, kc, "full"}, []string{"PYTHONPATH=" + filepath.Join(opts.RepoRoot, "sdk", "python")}},
	}
	var out, alone []listing
	for _, c := range cmds {
		var calls []time.Duration
		var ds []time.Duration
		for range runs {
			cmd := exec.Command(c.argv[0], c.argv[1:]...)
			cmd.Env = append(os.Environ(), c.env...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			t := time.Now()
			b, err := cmd.Output()
			d := time.Since(t)
			if err != nil {
				return nil, fmt.Errorf("%s: %w: %s", c.name, err, stderr.String())
			}
			if got := strings.Count(string(b), prefix); got != n {
				return nil, fmt.Errorf("%s listed %d of %d jobs", c.name, got, n)
			}
			ds = append(ds, d)
			for _, l := range strings.Split(stderr.String(), "\n") {
				var call float64
				if _, err := fmt.Sscanf(l, "call %f", &call); err == nil {
					calls = append(calls, time.Duration(call*float64(time.Second)))
				}
			}
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		out = append(out, listing{name: c.name, target: c.target, median: ds[len(ds)/2]})
		if len(calls) > 0 {
			sort.Slice(calls, func(i, j int) bool { return calls[i] < calls[j] })
			alone = append(alone, listing{name: strings.TrimSuffix(c.name, " (python process)") + " (the call alone, in that process)", median: calls[len(calls)/2]})
		}
	}
	return append(out, alone...), nil
}
