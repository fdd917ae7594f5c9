// Command admission measures what mpijob's admission webhooks add to a
// request: the latency of server-side dry-run creates of an MPI TrainJob
// (Trainer's and mpijob's webhooks, quota pre-flight included) against the
// same number of dry-run creates of a ConfigMap (no webhooks), through the
// running local cluster's API server. It prints p50/p99 and their ratio.
//
//	go run ./bench/admission [-n 300]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"text/tabwriter"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/bench/internal/local"
	"github.com/mpijob/mpijob/pkg/localcluster"
)

func main() {
	n := flag.Int("n", 300, "requests per kind")
	flag.Parse()
	if err := run(*n); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(n int) error {
	wd, _ := os.Getwd()
	opts, err := localcluster.DefaultOptions(wd)
	if err != nil {
		return err
	}
	if ok, msg := localcluster.Status(context.Background(), opts); !ok {
		return fmt.Errorf("%s", msg)
	}
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: opts.KubeconfigPath()}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: "dev-a"}).ClientConfig()
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 1000, 1000
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = trainer.AddToScheme(scheme)
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	ctx := context.Background()
	mpi := func(i int) client.Object {
		return &trainer.TrainJob{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-%d", i), Namespace: "team-a"},
			Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: "mpi-openmpi"},
				Trainer: &trainer.Trainer{NumNodes: ptr.To[int32](4), NumProcPerNode: ptr.To[int32](2)}},
		}
	}
	cm := func(i int) client.Object {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-%d", i), Namespace: "team-a"}}
	}
	measure := func(mk func(int) client.Object) ([]time.Duration, error) {
		out := make([]time.Duration, 0, n)
		for i := 0; i < n; i++ {
			start := time.Now()
			if err := cl.Create(ctx, mk(i), client.DryRunAll); err != nil {
				return nil, err
			}
			out = append(out, time.Since(start))
		}
		sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
		return out, nil
	}
	// Warm both paths (connections, caches) before measuring.
	if _, err := measure(cm); err != nil {
		return err
	}
	base, err := measure(cm)
	if err != nil {
		return err
	}
	withHooks, err := measure(mpi)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "dry-run create (n=%d, as dev-a in team-a)\tp50\tp99\tp50 ratio\t\n", n)
	row := func(name string, d []time.Duration) {
		fmt.Fprintf(w, "%s\t%s\t%s\t%.2f\t\n", name, pct(d, 50), pct(d, 99), float64(pct(d, 50))/float64(pct(base, 50)))
	}
	row("ConfigMap (no webhooks)", base)
	row("MPI TrainJob (Trainer + mpijob webhooks)", withHooks)
	return w.Flush()
}

func pct(sorted []time.Duration, p int) time.Duration {
	return local.Percentile(sorted, p).Round(10 * time.Microsecond)
}
