// Package local finds the running local cluster for the benchmarks and
// makes their clients' configurations.
package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/localcluster"
)

// Cluster returns the Options of the local cluster of the checkout the
// bench runs in, or an error that says how to start it when it is not
// running.
func Cluster(ctx context.Context) (localcluster.Options, error) {
	wd, err := os.Getwd()
	if err != nil {
		return localcluster.Options{}, err
	}
	opts, err := localcluster.DefaultOptions(wd)
	if err != nil {
		return opts, err
	}
	if ok, msg := localcluster.Status(ctx, opts); !ok {
		return opts, errors.New(msg)
	}
	return opts, nil
}

// Config is a client configuration of the local cluster as user, a
// context of its kubeconfig ("" for the current one, admin), with the
// client-side rate limit qps/burst (0: client-go's default): a bench's own
// clients must not be what sets its pace.
func Config(opts localcluster.Options, user string, qps float32, burst int) (*rest.Config, error) {
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: opts.KubeconfigPath()}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: user}).ClientConfig()
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = qps, burst
	return cfg, nil
}

// Namespace makes a namespace for one of a bench's scenarios, labelled as
// a bench's; its cleanup deletes it and waits until it is gone (up to 15
// minutes, saying how long it took), so the next scenario starts on a
// quiet cluster.
func Namespace(ctx context.Context, cl client.Client, prefix string) (string, func(), error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-", Labels: map[string]string{"mpijob.dev/test": "bench"}}}
	if err := cl.Create(ctx, ns); err != nil {
		return "", nil, err
	}
	return ns.Name, func() {
		start := time.Now()
		_ = cl.Delete(context.Background(), ns)
		err := wait.PollUntilContextTimeout(context.Background(), time.Second, 15*time.Minute, true, func(ctx context.Context) (bool, error) {
			err := cl.Get(ctx, client.ObjectKeyFromObject(ns), &corev1.Namespace{})
			return apierrors.IsNotFound(err), nil
		})
		if err != nil {
			fmt.Fprintf(os.Stderr, "  namespace %s still there after %s\n", ns.Name, time.Since(start).Round(time.Second))
			return
		}
		fmt.Fprintf(os.Stderr, "  namespace %s deleted in %s\n", ns.Name, time.Since(start).Round(time.Second))
	}, nil
}

// ProcTime is one process's program name and CPU time (user+system).
type ProcTime struct {
	Comm string
	CPU  time.Duration
}

// ProcessCPU reads the CPU time of this machine's processes by pid: the
// whole local cluster runs here.
func ProcessCPU() map[string]ProcTime {
	out := map[string]ProcTime{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if comm, cpu, err := localcluster.ProcessCPU(pid); err == nil {
			out[e.Name()] = ProcTime{Comm: comm, CPU: cpu}
		}
	}
	return out
}

// CPUSince is each program's CPU time between two readings (now, then).
// Processes are matched by pid (a kernel worker renames itself as it
// works), and those started between the readings count whole.
func CPUSince(now, then map[string]ProcTime) map[string]time.Duration {
	out := map[string]time.Duration{}
	for pid, p := range now {
		if d := p.CPU - then[pid].CPU; d > 0 {
			out[p.Comm] += d
		}
	}
	return out
}

// APIMetrics reads and parses the API server's own metrics (/metrics).
func APIMetrics(ctx context.Context, cs kubernetes.Interface) (map[string]*dto.MetricFamily, error) {
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(bytes.NewReader(raw))
}

// APIRequests reads the API server's request counts by verb and resource
// ("LIST pods", "PATCH trainjobs.trainer.kubeflow.org/status"): every
// client's, a bench's own included (apiserver_request_total).
func APIRequests(ctx context.Context, cs kubernetes.Interface) (map[string]float64, error) {
	fams, err := APIMetrics(ctx, cs)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	fam := fams["apiserver_request_total"]
	if fam == nil {
		return out, nil
	}
	for _, m := range fam.GetMetric() {
		res := resourceOf(m)
		if res == "" {
			continue // discovery, /metrics, health
		}
		if sub := Label(m, "subresource"); sub != "" {
			res += "/" + sub
		}
		out[Label(m, "verb")+" "+res] += m.GetCounter().GetValue()
	}
	return out, nil
}

// Watched is what the API server's watches sent of one resource: events
// (one for each watcher an event went to) and their bytes.
type Watched struct {
	Events, Bytes float64
}

// APIWatches reads what the API server's watches have sent, by resource
// ("pods", "jobsets.jobset.x-k8s.io"; apiserver_watch_events_total and
// apiserver_watch_events_sizes): an event goes to every watcher whose
// selector it matches, so a resource's traffic grows with its watchers.
func APIWatches(ctx context.Context, cs kubernetes.Interface) (map[string]Watched, error) {
	fams, err := APIMetrics(ctx, cs)
	if err != nil {
		return nil, err
	}
	return WatchesOf(fams), nil
}

// WatchesOf is APIWatches of parsed metrics.
func WatchesOf(fams map[string]*dto.MetricFamily) map[string]Watched {
	out := map[string]Watched{}
	for _, m := range fams["apiserver_watch_events_total"].GetMetric() {
		w := out[resourceOf(m)]
		w.Events += m.GetCounter().GetValue()
		out[resourceOf(m)] = w
	}
	for _, m := range fams["apiserver_watch_events_sizes"].GetMetric() {
		w := out[resourceOf(m)]
		w.Bytes += m.GetHistogram().GetSampleSum()
		out[resourceOf(m)] = w
	}
	return out
}

// resourceOf is the resource an API server metric is about, with its
// group ("pods", "trainjobs.trainer.kubeflow.org"; "" for none).
func resourceOf(m *dto.Metric) string {
	res := Label(m, "resource")
	if g := Label(m, "group"); g != "" && res != "" {
		res += "." + g
	}
	return res
}

// Label is the value of a metric's label name ("" without it).
func Label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// Percentile is the p-th percentile of sorted (nearest rank), 0 for none.
func Percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := (len(sorted)*p + 99) / 100
	if i > 0 {
		i--
	}
	return sorted[i]
}

// ProfileChunk is how long each of ProfileAPIServer's CPU profiles lasts.
const ProfileChunk = 30 * time.Second

// ProfileAPIServer takes CPU profiles of kube-apiserver, one after
// another, each ProfileChunk long, into dir as <name>-NN.pprof, until
// the returned stop is called; stop waits for the profile being taken
// and says how many were written. The API server must run with
// --profiling (the local cluster's MPIJOB_APISERVER_PROFILING=1). Read
// them together with `go tool pprof -top dir/<name>-*.pprof`, and what
// one run added over another with -diff_base.
func ProfileAPIServer(ctx context.Context, cs kubernetes.Interface, dir, name string) (stop func() (int, error), err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	// One short profile first: an API server without --profiling answers
	// 404 here, before the scenario starts.
	if _, err := cs.Discovery().RESTClient().Get().AbsPath("/debug/pprof/profile").Param("seconds", "1").DoRaw(ctx); err != nil {
		return nil, fmt.Errorf("kube-apiserver does not serve CPU profiles (%w): start the local cluster with MPIJOB_APISERVER_PROFILING=1 (make dev-down; MPIJOB_APISERVER_PROFILING=1 make dev-detach)", err)
	}
	var (
		quit    = make(chan struct{})
		done    = make(chan struct{})
		written int
		first   error
	)
	go func() {
		defer close(done)
		for i := 1; ; i++ {
			select {
			case <-quit:
				return
			case <-ctx.Done():
				return
			default:
			}
			raw, err := cs.Discovery().RESTClient().Get().AbsPath("/debug/pprof/profile").
				Param("seconds", strconv.Itoa(int(ProfileChunk/time.Second))).Timeout(ProfileChunk + time.Minute).DoRaw(ctx)
			if err == nil {
				err = os.WriteFile(fmt.Sprintf("%s/%s-%02d.pprof", dir, name, i), raw, 0o644)
			}
			if err != nil {
				if first == nil {
					first = err
				}
				return
			}
			written++
		}
	}()
	return func() (int, error) {
		close(quit)
		<-done
		return written, first
	}, nil
}
