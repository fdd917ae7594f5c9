package cli

import (
	"context"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/utils/ptr"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/launcherlog"
	"github.com/mpijob/mpijob/pkg/progress"
	"github.com/mpijob/mpijob/pkg/runtimes"
	"github.com/mpijob/mpijob/pkg/usage"
)

// topOptions is `kubectl mpijob top`.
type topOptions struct {
	*Options
	name    string
	promURL string
	now     func() time.Time
}

func newTopCommand(o *Options) *cobra.Command {
	t := &topOptions{Options: o, now: time.Now}
	cmd := &cobra.Command{
		Use:   "top NAME",
		Short: "What the Launcher and each Worker of a running job use now: CPU and memory against their requests and limits, and GPUs",
		Long: "Show, for the Launcher and each Worker of a job, its node, the CPU it used over the last minute and its memory now (from Prometheus's " +
			"recording rules, as kubectl mpijob usage reads them: --prometheus-url or $" + PrometheusURLEnv + ") against the pod's requests and limits, " +
			"and its GPUs with their utilisation now where NVIDIA's DCGM exporter runs (DCGM_FI_DEV_GPU_UTIL). A pod that uses nine tenths of its CPU limit or more is marked: the kernel throttles it there, and in synchronous " +
			"training every rank waits for the slowest.",
		Example: "  kubectl mpijob top hello --prometheus-url http://127.0.0.1:9459",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t.name = args[0]
			var err error
			if t.promURL, err = prometheusURL(t.promURL); err != nil {
				return err
			}
			return t.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&t.promURL, "prometheus-url", "", "Prometheus (or Thanos querier) with mpijob's recording rules (default $"+PrometheusURLEnv+")")
	return cmd
}

// Run prints a row per pod of the job.
func (t *topOptions) Run(ctx context.Context) error {
	cl, err := t.clients()
	if err != nil {
		return err
	}
	tj, err := cl.job(ctx, t.name)
	if err != nil {
		return err
	}
	launcher, workers, err := cl.pods(ctx, tj)
	if err != nil {
		return err
	}
	if len(launcher)+len(workers) == 0 {
		return &exitError{code: ExitOtherPhase, msg: fmt.Sprintf("job %s has no pods now (kubectl mpijob describe %s says why): top shows a running job", tj.Name, tj.Name)}
	}
	prom, err := cl.prometheus(t.promURL, tj.Namespace)
	if err != nil {
		return err
	}
	use, err := usage.ReadTop(ctx, prom, tj.Namespace, tj.Name, t.now())
	if err != nil {
		return fmt.Errorf("prometheus at %s did not answer: %w", t.promURL, err)
	}
	w := tabwriter.NewWriter(t.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "POD\tROLE\tNODE\tCPU (USED/REQUEST/LIMIT)\tMEMORY (USED/REQUEST/LIMIT)\tGPUS\tNOTE")
	missing := 0
	type rolePod struct {
		pod  *corev1.Pod
		role string
	}
	var pods []rolePod
	for i := range launcher {
		pods = append(pods, rolePod{&launcher[i], api.RoleLauncher})
	}
	for i := range workers {
		pods = append(pods, rolePod{&workers[i], api.RoleWorker})
	}
	for _, rp := range pods {
		p, role := rp.pod, rp.role
		req, lim := runtimes.PodDemand(&p.Spec)
		u, ok := use[p.Name]
		cpuUsed, memUsed, note := "-", "-", ""
		if ok {
			cpuUsed, memUsed = strconv.FormatFloat(u.CPUCores, 'f', 2, 64), humanBytes(int64(u.MemoryBytes))
			if l, has := lim[corev1.ResourceCPU]; has && l.AsApproximateFloat64() > 0 && u.CPUCores >= 0.9*l.AsApproximateFloat64() {
				note = "at its CPU limit: throttled"
			}
		} else {
			missing++
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s/%s/%s\t%s/%s/%s\t%s\t%s\n", p.Name, role, orDash(p.Spec.NodeName),
			cpuUsed, qty(req, corev1.ResourceCPU), qty(lim, corev1.ResourceCPU),
			memUsed, qty(req, corev1.ResourceMemory), qty(lim, corev1.ResourceMemory), gpuCell(runtimes.GPUsOf(&p.Spec), u.GPUPercent), orDash(note))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if missing > 0 {
		fmt.Fprintf(t.ErrOut, "%s no sample in Prometheus yet (a pod that just started, or one on a node whose kubelet it does not scrape).\n", api.Count(missing, "pod has", "pods have"))
	}
	if len(launcher) > 0 {
		t.printSteps(ctx, cl, tj, &launcher[0])
	}
	return nil
}

// printSteps prints the ranks' own step times from the last progress
// report that has them (rank_step_seconds, read from the Launcher's log as
// the user): the median rank's and the slowest rank's, with its Worker.
func (t *topOptions) printSteps(ctx context.Context, cl *clients, tj *trainer.TrainJob, launcher *corev1.Pod) {
	log, err := launcherlog.ReadLauncherLog(ctx, cl.cs, launcher)
	if err != nil {
		return
	}
	p, steps, ok := progress.LastSteps(progress.All(log))
	if !ok {
		fmt.Fprintln(t.Out, "\nStep times: none reported (a program reports each rank's with rank_step_seconds in its progress lines: docs/training.md#progress).")
		return
	}
	st, _ := statusOf(tj)
	slots := st.SlotsPerWorker
	if slots == 0 && tj.Spec.Trainer != nil {
		slots = ptr.Deref(tj.Spec.Trainer.NumProcPerNode, 1)
	}
	when := ""
	if !p.Time.IsZero() {
		when = fmt.Sprintf(", reported %s ago", duration.HumanDuration(t.now().Sub(p.Time)))
	}
	fmt.Fprintf(t.Out, "\nStep times (each rank's own work per step, %d ranks%s): median %s; slowest rank %d (Worker %d) %s, %.1f× the other ranks' median\n",
		steps.Ranks, when, progress.StepSeconds(steps.Median), steps.Slowest, steps.Slowest/int(max(slots, 1)), progress.StepSeconds(steps.SlowestSeconds), ratio(steps.SlowestSeconds, steps.Others))
}

// gpuCell is a pod's GPUs and, where NVIDIA's DCGM exporter reports them,
// their mean utilisation now: "nvidia.com/gpu: 2 (87% used)".
func gpuCell(gpus string, percent *float64) string {
	switch {
	case gpus == "" && percent == nil:
		return "-"
	case percent == nil:
		return gpus
	case gpus == "":
		return fmt.Sprintf("%.0f%% used", *percent)
	}
	return fmt.Sprintf("%s (%.0f%% used)", gpus, *percent)
}

func ratio(a, b float64) float64 {
	if b <= 0 {
		return 1
	}
	return a / b
}

func qty(l corev1.ResourceList, name corev1.ResourceName) string {
	if q, ok := l[name]; ok {
		return q.String()
	}
	return "-"
}
