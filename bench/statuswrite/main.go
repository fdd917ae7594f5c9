//go:build e2e

// Command statuswrite measures where a job's status costs the control
// plane least, on the running local cluster (full install), in one run: the
// evidence for issue "At the control plane's pace"'s design decision on
// where mpijob's status lives.
//
// It starts -jobs running MPI jobs of -workers Workers on the kwok GPU
// nodes and waits for mpijob-manager to say each one Running. Then, in
// -rounds rounds, it writes -writes changes of a status-sized value
// (-size bytes; 0: the size of the jobs' own mpijob.dev/status
// annotation), spread over the jobs at -rate writes a second, to each of
// three places in turn, as mpijob-manager writes its status (a server-side
// apply under one field owner):
//
//   - trainjob: an annotation on the TrainJob (where the status lives
//     today), written as mpijob-manager (its service account,
//     impersonated). Every such write passes the TrainJob's admission
//     webhooks that do not skip the manager's writes (Trainer's and
//     Kueue's) and wakes every controller that watches TrainJobs. The key
//     is one mpijob-manager's controllers do not wake for, as they do not
//     for their own writes;
//   - configmap: a ConfigMap per job, owned by the TrainJob;
//   - custom: an object of a small custom resource of mpijob's own per job,
//     owned by the TrainJob (a CRD the bench makes and removes);
//
// and, for comparison, the other call mpijob-manager makes per running
// job: logread, a read of a Launcher's log as the progress controller and
// the diagnosis make it (the last 200 lines, through the API server to the
// kubelet), of one more job on the real nodes that printed 300 lines (kwok
// serves no log).
//
// Each round also has an idle phase as long as the longest write phase, in
// which nothing is written: what the cluster spends anyway (kwok, the
// manager's Launcher reads, Prometheus) is taken off each phase's CPU.
// It prints, per place: the writes' latency, the CPU each write cost by
// program (this machine runs the whole cluster) and the API server's
// requests per write by verb and resource.
//
//	go run -tags e2e ./bench/statuswrite [-jobs 20] [-workers 2] [-writes 1000] [-rate 20] [-rounds 2] [-size 0]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/mpijob/mpijob/bench/internal/local"
	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/jobstatus"
	"github.com/mpijob/mpijob/pkg/launcherlog"
	"github.com/mpijob/mpijob/pkg/progress"
	"github.com/mpijob/mpijob/test/framework"
)

var (
	jobs    = flag.Int("jobs", 20, "running MPI jobs whose status is written")
	workers = flag.Int("workers", 2, "Workers per job")
	writes  = flag.Int("writes", 1000, "writes per place per round")
	rate    = flag.Float64("rate", 20, "writes a second, spread over the jobs")
	rounds  = flag.Int("rounds", 2, "rounds (each writes to every place once, then idles)")
	size    = flag.Int("size", 0, "bytes of the value written (0: the size of the jobs' own status annotation)")
)

const (
	fieldOwner = "mpijob-bench-statuswrite"
	// trainJobKey is the TrainJob annotation the bench writes: one that
	// mpijob-manager's controllers do not wake for (progress.Annotation is
	// in both IgnoredWrites), so a write costs what one of the manager's
	// own status writes costs. The bench's jobs print nothing, so the
	// progress controller writes no value of its own there.
	trainJobKey = progress.Annotation
	settle      = 10 * time.Second
	managerUser = "system:serviceaccount:mpijob-system:mpijob-manager"
	// readerJob is the one job on the real nodes, whose Launcher the
	// logread place reads.
	readerJob = "reader"
)

var crdGVR = schema.GroupVersionResource{Group: "bench.mpijob.dev", Version: "v1", Resource: "jobstatuses"}

func main() {
	flag.Parse()
	ctrllog.SetLogger(logr.Discard())
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

type bench struct {
	cl client.Client
	// manager writes the TrainJob place as mpijob-manager does, under its
	// service account: the admission webhooks and policies it skips
	// (config/webhook) are skipped here too.
	manager client.Client
	cs      kubernetes.Interface
	ns      string
	jobs    []*trainer.TrainJob
	// launchers are the jobs' Launcher pods, read at the logread place.
	launchers []*corev1.Pod
	pad       int
}

// phase is one place's writes in one round, or an idle phase.
type phase struct {
	place    string
	round    int
	dur      time.Duration
	latency  []time.Duration
	failures int
	first    error
	cpu      map[string]time.Duration
	calls    map[string]float64
}

func run() error {
	switch {
	case *jobs < 1:
		return fmt.Errorf("-jobs %d: want at least 1", *jobs)
	case *writes < 1:
		return fmt.Errorf("-writes %d: want at least 1", *writes)
	case *rate <= 0:
		return fmt.Errorf("-rate %v: want writes a second above 0, e.g. 20", *rate)
	case *rounds < 1:
		return fmt.Errorf("-rounds %d: want at least 1", *rounds)
	case *size < 0:
		return fmt.Errorf("-size %d: want bytes, 0 or more (0: the status annotation's size)", *size)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
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
	asManager := rest.CopyConfig(cfg)
	asManager.Impersonate = rest.ImpersonationConfig{UserName: managerUser}
	manager, err := client.New(asManager, client.Options{Scheme: framework.Scheme})
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if err := apiextensionsv1.AddToScheme(cl.Scheme()); err != nil {
		return err
	}
	ns, done, err := local.Namespace(ctx, cl, "statuswrite")
	if err != nil {
		return err
	}
	defer done()
	b := &bench{cl: cl, manager: manager, cs: cs, ns: ns}
	removeCRD, err := b.crd(ctx)
	if err != nil {
		return err
	}
	defer removeCRD()
	if err := b.start(ctx); err != nil {
		return err
	}
	if err := b.owned(ctx); err != nil {
		return err
	}
	places := []string{"trainjob", "configmap", "custom", "logread"}
	// One call to each place first, outside the measure: a place that
	// cannot be written stops the run here, not after its 1,000 failures.
	for _, p := range places {
		if err := b.apply(ctx, p, 0, b.value(0)); err != nil {
			return fmt.Errorf("the %s place: %w", p, err)
		}
	}
	var all []*phase
	for r := 1; r <= *rounds; r++ {
		var longest time.Duration
		for _, p := range places {
			fmt.Fprintf(os.Stderr, "round %d: %d writes to the %s place at %.0f/s\n", r, *writes, p, *rate)
			ph, err := b.measure(ctx, func(ctx context.Context) (*phase, error) { return b.write(ctx, p, r) })
			if err != nil {
				return err
			}
			ph.round = r
			longest = max(longest, ph.dur)
			all = append(all, ph)
		}
		fmt.Fprintf(os.Stderr, "round %d: idle for %s\n", r, (longest + settle).Round(time.Second))
		ph, err := b.measure(ctx, func(ctx context.Context) (*phase, error) {
			start := time.Now()
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(longest):
			}
			return &phase{place: "idle", dur: time.Since(start)}, nil
		})
		if err != nil {
			return err
		}
		ph.round = r
		all = append(all, ph)
	}
	return report(os.Stdout, places, all, b.pad)
}

// crd makes the custom resource of the "custom" place: a namespaced
// object with one string, as small as mpijob's own status object would be.
func (b *bench) crd(ctx context.Context) (func(), error) {
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: crdGVR.Resource + "." + crdGVR.Group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: crdGVR.Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: crdGVR.Resource, Singular: "jobstatus", Kind: "JobStatus", ListKind: "JobStatusList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: crdGVR.Version, Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"apiVersion": {Type: "string"}, "kind": {Type: "string"}, "metadata": {Type: "object"},
						"status": {Type: "string"},
					},
				}},
			}},
		},
	}
	if err := b.cl.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("the bench's CustomResourceDefinition %s: %w", crd.Name, err)
	}
	remove := func() { _ = b.cl.Delete(context.Background(), crd) }
	err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		got := &apiextensionsv1.CustomResourceDefinition{}
		if err := b.cl.Get(ctx, client.ObjectKeyFromObject(crd), got); err != nil {
			return false, nil //nolint:nilerr // keep polling until it is established
		}
		for _, c := range got.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		remove()
		return nil, fmt.Errorf("the bench's CustomResourceDefinition %s is not established after a minute: %w", crd.Name, err)
	}
	return remove, nil
}

// start creates the jobs and waits until mpijob-manager says each runs.
func (b *bench) start(ctx context.Context) error {
	fmt.Fprintf(os.Stderr, "starting %d jobs × %d Workers on the kwok nodes in %s\n", *jobs, *workers, b.ns)
	for i := range *jobs {
		tj := framework.MakeTrainJob(fmt.Sprintf("w%03d", i), b.ns, "mpi-openmpi").NumNodes(int32(*workers)).OnKwokNodes().HoldOnKwok().Obj()
		if err := b.cl.Create(ctx, tj); err != nil {
			return fmt.Errorf("create job %s: %w", tj.Name, err)
		}
	}
	// The logread place reads a real Launcher's log: kwok serves none.
	reader := framework.MakeTrainJob(readerJob, b.ns, "mpi-openmpi").NumNodes(1).
		Command("sh", "-c", "for i in $(seq 300); do echo step $i of 300; done; sleep 3600").Obj()
	if err := b.cl.Create(ctx, reader); err != nil {
		return fmt.Errorf("create job %s: %w", reader.Name, err)
	}
	statusSize := 0
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 15*time.Minute, true, func(ctx context.Context) (bool, error) {
		l := &trainer.TrainJobList{}
		if err := b.cl.List(ctx, l, client.InNamespace(b.ns)); err != nil {
			return false, nil //nolint:nilerr // keep polling through a busy API server
		}
		if err := jobstatus.List(ctx, b.cl, l.Items, client.InNamespace(b.ns)); err != nil {
			return false, nil //nolint:nilerr // keep polling through a busy API server
		}
		running := 0
		for _, tj := range l.Items {
			if st, ok, _ := api.ReadStatus(tj.Annotations); ok && st.Phase == api.PhaseRunning {
				running++
				statusSize = max(statusSize, len(tj.Annotations[api.StatusAnnotation]))
			}
		}
		if running < *jobs+1 {
			return false, nil
		}
		b.jobs = nil
		for i := range l.Items {
			if l.Items[i].Name != readerJob {
				b.jobs = append(b.jobs, &l.Items[i])
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("not every job's status said Running within 15 minutes: %w", err)
	}
	pods, err := b.cs.CoreV1().Pods(b.ns).List(ctx, metav1.ListOptions{LabelSelector: "jobset.sigs.k8s.io/jobset-name=" + readerJob + ",jobset.sigs.k8s.io/replicatedjob-name=launcher"})
	if err != nil {
		return fmt.Errorf("list the Launchers: %w", err)
	}
	for i := range pods.Items {
		b.launchers = append(b.launchers, &pods.Items[i])
	}
	if len(b.launchers) == 0 {
		return fmt.Errorf("no Launcher pod of job %s/%s", b.ns, readerJob)
	}
	b.pad = *size
	if b.pad == 0 {
		b.pad = statusSize
	}
	fmt.Fprintf(os.Stderr, "every job runs; each write carries %d bytes (the largest status annotation: %d)\n", b.pad, statusSize)
	return nil
}

// owned creates each job's ConfigMap and custom object, owned by its
// TrainJob as mpijob's own status object would be: created once per job,
// outside the measured phases.
func (b *bench) owned(ctx context.Context) error {
	for i, tj := range b.jobs {
		for _, p := range []string{"configmap", "custom"} {
			if err := b.apply(ctx, p, i, ""); err != nil {
				return fmt.Errorf("create the %s of job %s: %w", p, tj.Name, err)
			}
		}
	}
	return nil
}

// value is the i-th write's value: a progress report as the progress
// controller writes it, padded to the bench's size.
func (b *bench) value(i int) string {
	type padded struct {
		progress.Report
		Pad string `json:"pad,omitempty"`
	}
	step := float64(i)
	v := padded{Report: progress.Report{Step: &step}}
	raw, err := json.Marshal(v)
	if n := b.pad - len(raw) - len(`,"pad":""`); err == nil && n > 0 {
		v.Pad = strings.Repeat("x", n)
		raw, err = json.Marshal(v)
	}
	if err != nil {
		panic(err) // a step number always encodes
	}
	return string(raw)
}

// apply writes value to the i-th job's status at place, as a server-side
// apply; at the logread place it reads the i-th Launcher's log instead, as
// mpijob-manager does (launcherlog.ReadLauncherLog).
func (b *bench) apply(ctx context.Context, place string, i int, value string) error {
	if place == "logread" {
		_, err := launcherlog.ReadLauncherLog(ctx, b.cs, b.launchers[i%len(b.launchers)])
		return err
	}
	tj := b.jobs[i%len(b.jobs)]
	owner := map[string]any{"apiVersion": trainer.GroupVersion.String(), "kind": "TrainJob", "name": tj.Name, "uid": string(tj.UID)}
	var obj map[string]any
	switch place {
	case "trainjob":
		obj = map[string]any{"apiVersion": trainer.GroupVersion.String(), "kind": "TrainJob",
			"metadata": map[string]any{"name": tj.Name, "namespace": tj.Namespace, "annotations": map[string]any{trainJobKey: value}}}
	case "configmap":
		obj = map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": tj.Name + "-status", "namespace": tj.Namespace, "ownerReferences": []any{owner}},
			"data":     map[string]any{"status": value}}
	case "custom":
		obj = map[string]any{"apiVersion": crdGVR.GroupVersion().String(), "kind": "JobStatus",
			"metadata": map[string]any{"name": tj.Name, "namespace": tj.Namespace, "ownerReferences": []any{owner}},
			"status":   value}
	default:
		return fmt.Errorf("place %q: want trainjob, configmap, custom or logread", place)
	}
	u := &unstructured.Unstructured{Object: obj}
	raw, err := u.MarshalJSON()
	if err != nil {
		return err
	}
	cl := b.cl
	if place == "trainjob" {
		cl = b.manager
	}
	return cl.Patch(ctx, u, client.RawPatch(types.ApplyPatchType, raw), client.FieldOwner(fieldOwner), client.ForceOwnership)
}

// write makes -writes writes to place at -rate a second, the jobs in
// turn, from up to 8 clients at once.
func (b *bench) write(ctx context.Context, place string, round int) (*phase, error) {
	ph := &phase{place: place}
	var mu sync.Mutex
	work := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				t := time.Now()
				err := b.apply(ctx, place, i, b.value(round*1_000_000+i))
				d := time.Since(t)
				mu.Lock()
				ph.latency = append(ph.latency, d)
				if err != nil {
					ph.failures++
					if ph.first == nil {
						ph.first = err
					}
				}
				mu.Unlock()
			}
		}()
	}
	start := time.Now()
	every := time.Duration(float64(time.Second) / *rate)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for i := 0; i < *writes; i++ {
		select {
		case <-ctx.Done():
			close(work)
			wg.Wait()
			return nil, ctx.Err()
		case <-tick.C:
		}
		work <- i
	}
	close(work)
	wg.Wait()
	ph.dur = time.Since(start)
	if ph.failures > 0 {
		return nil, fmt.Errorf("%d of %d writes to the %s place failed, the first: %w", ph.failures, *writes, place, ph.first)
	}
	return ph, nil
}

// measure runs one phase and then lets the cluster settle (the watchers'
// work on the last writes), and records the CPU by program and the API
// server's requests over both.
func (b *bench) measure(ctx context.Context, do func(context.Context) (*phase, error)) (*phase, error) {
	procs := local.ProcessCPU()
	calls, err := local.APIRequests(ctx, b.cs)
	if err != nil {
		return nil, fmt.Errorf("the API server's request counts: %w", err)
	}
	ph, err := do(ctx)
	if err != nil {
		return nil, err
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(settle):
	}
	ph.dur += settle
	ph.cpu = local.CPUSince(local.ProcessCPU(), procs)
	after, err := local.APIRequests(ctx, b.cs)
	if err != nil {
		return nil, fmt.Errorf("the API server's request counts: %w", err)
	}
	ph.calls = map[string]float64{}
	for k, v := range after {
		if d := v - calls[k]; d > 0 {
			ph.calls[k] = d
		}
	}
	return ph, nil
}

// perWrite is a place's cost per write over its rounds: each phase's CPU
// (or requests) less what its idle round spent in as long, divided by its
// writes.
func perWrite[V float64 | time.Duration](phases []*phase, idle map[int]*phase, get func(*phase) map[string]V) map[string]float64 {
	out := map[string]float64{}
	n := 0
	for _, ph := range phases {
		id := idle[ph.round]
		if id == nil {
			continue
		}
		n++
		scale := ph.dur.Seconds() / id.dur.Seconds()
		for k, v := range get(ph) {
			out[k] += float64(v)
		}
		for k, v := range get(id) {
			out[k] -= scale * float64(v)
		}
	}
	for k := range out {
		out[k] /= float64(n * *writes)
	}
	return out
}

func report(w0 *os.File, places []string, all []*phase, pad int) error {
	byPlace := map[string][]*phase{}
	idle := map[int]*phase{}
	for _, ph := range all {
		if ph.place == "idle" {
			idle[ph.round] = ph
			continue
		}
		byPlace[ph.place] = append(byPlace[ph.place], ph)
	}
	cpu := map[string]map[string]float64{}
	calls := map[string]map[string]float64{}
	progs, verbs := map[string]bool{}, map[string]bool{}
	for _, p := range places {
		cpu[p] = perWrite(byPlace[p], idle, func(ph *phase) map[string]time.Duration { return ph.cpu })
		calls[p] = perWrite(byPlace[p], idle, func(ph *phase) map[string]float64 { return ph.calls })
		for k := range cpu[p] {
			progs[k] = true
		}
		for k, v := range calls[p] {
			if v >= 0.05 || v <= -0.05 {
				verbs[k] = true
			}
		}
	}
	w := tabwriter.NewWriter(w0, 0, 0, 2, ' ', tabwriter.AlignRight|tabwriter.Debug)
	fmt.Fprintf(w0, "\n%d jobs × %d Workers, %d calls per place per round at %.0f/s, %d rounds, values of %d bytes (CPU and requests less the idle phase's)\n\n",
		*jobs, *workers, *writes, *rate, *rounds, pad)
	head := "place\t"
	for _, p := range places {
		head += p + "\t"
	}
	fmt.Fprintln(w, head)
	row := func(name string, f func(p string) string) {
		line := name + "\t"
		for _, p := range places {
			line += f(p) + "\t"
		}
		fmt.Fprintln(w, line)
	}
	row("latency p50 / p99", func(p string) string {
		var l []time.Duration
		for _, ph := range byPlace[p] {
			l = append(l, ph.latency...)
		}
		sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
		return fmt.Sprintf("%s / %s", ms(local.Percentile(l, 50)), ms(local.Percentile(l, 99)))
	})
	total := func(p string) float64 {
		t := 0.0
		for _, v := range cpu[p] {
			t += v
		}
		return t
	}
	row("CPU per call, all programs", func(p string) string { return fmt.Sprintf("%.1f ms", 1000*total(p)/float64(time.Second)) })
	row("  each round", func(p string) string {
		var s []string
		for _, ph := range byPlace[p] {
			s = append(s, fmt.Sprintf("%.1f", 1000*sum(perWrite([]*phase{ph}, idle, func(ph *phase) map[string]time.Duration { return ph.cpu }))/float64(time.Second)))
		}
		return strings.Join(s, ", ") + " ms"
	})
	names := keys(progs)
	sort.Slice(names, func(i, j int) bool { return cpu["trainjob"][names[i]] > cpu["trainjob"][names[j]] })
	for _, k := range names {
		shown := false
		for _, p := range places {
			shown = shown || cpu[p][k] >= 0.1*float64(time.Millisecond)
		}
		if !shown {
			continue // noise: kernel workers, a probe
		}
		row("  "+k, func(p string) string { return fmt.Sprintf("%.2f ms", 1000*cpu[p][k]/float64(time.Second)) })
	}
	row("API requests per call", func(p string) string { return fmt.Sprintf("%.2f", sum(calls[p])) })
	vs := keys(verbs)
	sort.Slice(vs, func(i, j int) bool { return calls["trainjob"][vs[i]] > calls["trainjob"][vs[j]] })
	for _, k := range vs {
		row("  "+k, func(p string) string { return fmt.Sprintf("%.2f", calls[p][k]) })
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if total("trainjob") <= 0 {
		return errors.New("no CPU was measured for the TrainJob's writes: is the cluster on this machine?")
	}
	return nil
}

func sum(m map[string]float64) float64 {
	t := 0.0
	for _, v := range m {
		t += v
	}
	return t
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
