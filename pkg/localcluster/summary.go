package localcluster

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"

	"github.com/mpijob/mpijob/pkg/manifests"
)

// Summary says what runs and how to use it.
func (c *Cluster) Summary() string {
	var b strings.Builder
	kc := c.opts.KubeconfigPath()
	fmt.Fprintf(&b, "\nRunning (logs in %s):\n", c.opts.logDir())
	names := make([]string, 0, len(c.pids))
	for n := range c.pids {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, "  %-28s pid %d\n", n, c.pids[n])
	}
	fmt.Fprintf(&b, `
Nodes: %d real (%s), %d kwok GPU nodes (8 nvidia.com/gpu each, taint %s:NoSchedule, tolerated by every pod that asks for GPUs)
Users (kubeconfig contexts): admin (cluster-admin), dev-a (edit team-a), dev-b (edit team-b), viewer-a (view team-a)
Dashboard: %s (log in as dev-a, dev-b or viewer-a; it acts as that user)
Prometheus: %s (kubelets' container metrics and mpijob-manager every %s; recording rules from config/monitoring)

Use it:
  export KUBECONFIG=%s
  %s get nodes
  %s get trainjobs -A
  %s --context dev-a -n team-a get trainjobs
Stop it: make dev-down
`, c.opts.RealNodes, strings.Join(realNodeNames(c.opts.RealNodes), ", "), c.opts.KwokNodes, GPUTaintKey,
		DashboardURL, PrometheusURL, ScrapeInterval, kc, c.opts.bin("kubectl"), c.opts.bin("kubectl"), c.opts.bin("kubectl"))
	return b.String()
}

func realNodeNames(n int) []string {
	var out []string
	for i := 1; i <= n; i++ {
		out = append(out, nodeName(i))
	}
	return out
}

// SubmitSample applies a TrainJob manifest (path relative to the repository).
func (c *Cluster) SubmitSample(ctx context.Context, path string) error {
	if !filepath.IsAbs(path) {
		path = filepath.Join(c.opts.RepoRoot, path)
	}
	objs, err := manifests.ParseFiles(path)
	if err != nil {
		return err
	}
	cl, err := c.newClient()
	if err != nil {
		return err
	}
	if err := manifests.Apply(ctx, cl, fieldOwner, objs); err != nil {
		return err
	}
	for _, o := range objs {
		fmt.Fprintf(c.progress.out, "submitted sample %s %s/%s: watch it with `kubectl get %s -n %s -w`;\n  its Launcher's log: kubectl logs -n %s -l jobset.sigs.k8s.io/jobset-name=%s,jobset.sigs.k8s.io/replicatedjob-name=launcher\n",
			o.GetKind(), o.GetNamespace(), o.GetName(), strings.ToLower(o.GetKind()), o.GetNamespace(), o.GetNamespace(), o.GetName())
		if o.GetKind() == "TrainJob" {
			go c.reportSample(ctx, cl, client.ObjectKey{Namespace: o.GetNamespace(), Name: o.GetName()})
		}
	}
	return nil
}

// reportSample says when the sample job ends, and after how long since
// `mpijob-dev up` began: the time a newcomer waits for a first job.
func (c *Cluster) reportSample(ctx context.Context, cl client.Client, key client.ObjectKey) {
	_ = wait.PollUntilContextTimeout(ctx, 2*time.Second, 30*time.Minute, false, func(ctx context.Context) (bool, error) {
		var tj trainer.TrainJob
		if err := cl.Get(ctx, key, &tj); err != nil {
			// Deleted meanwhile: nothing to report; any other error
			// passes, and the next poll reads again.
			return apierrors.IsNotFound(err), nil
		}
		for _, typ := range []string{trainer.TrainJobComplete, trainer.TrainJobFailed} {
			if cond := meta.FindStatusCondition(tj.Status.Conditions, typ); cond != nil && cond.Status == "True" {
				c.progress.Infof("sample TrainJob %s: %s (%s)", key, typ, cond.Message)
				return true, nil
			}
		}
		return false, nil
	})
}
