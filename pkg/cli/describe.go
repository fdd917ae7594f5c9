package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/mpijob/mpijob/pkg/admission"
	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/dataconn"
	"github.com/mpijob/mpijob/pkg/jobspec"
	"github.com/mpijob/mpijob/pkg/jobview"
	"github.com/mpijob/mpijob/pkg/logs"
	"github.com/mpijob/mpijob/pkg/progress"
	"github.com/mpijob/mpijob/pkg/queue"
	"github.com/mpijob/mpijob/pkg/runtimes"
)

// describeOptions is `kubectl mpijob describe`.
type describeOptions struct {
	*Options
	name string
	now  func() time.Time
}

func newDescribeCommand(o *Options) *cobra.Command {
	d := &describeOptions{Options: o, now: time.Now}
	return &cobra.Command{
		Use:               "describe NAME",
		Short:             "Show an MPI job: phase, diagnosis and next step, events, pods, resources, runtime",
		Args:              exactlyOneName("describe"),
		ValidArgsFunction: o.completeJobs,
		RunE: func(cmd *cobra.Command, args []string) error {
			d.name = args[0]
			return d.Run(cmd.Context())
		},
	}
}

// Run prints the job.
func (d *describeOptions) Run(ctx context.Context) error {
	cl, err := d.clients()
	if err != nil {
		return err
	}
	return describe(ctx, cl, d.name, d.Out, d.now())
}

func exactlyOneName(verb string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != 1 {
			return usageErr("%s takes one job NAME (got %d arguments): kubectl mpijob %s NAME", verb, len(args), verb)
		}
		return nil
	}
}

func describe(ctx context.Context, cl *clients, name string, out io.Writer, now time.Time) error {
	tj, err := cl.job(ctx, name)
	if err != nil {
		return err
	}
	s, fromManager := statusOf(tj)
	launcher, workers, err := cl.pods(ctx, tj)
	if err != nil {
		return err
	}
	events, _ := jobEvents(ctx, cl, tj)
	rtKind := trainer.ClusterTrainingRuntimeKind
	if tj.Spec.RuntimeRef.Kind != nil {
		rtKind = *tj.Spec.RuntimeRef.Kind
	}
	spec, rtAnn, rtErr := cl.runtimeSpec(ctx, tj.Namespace, tj.Spec.RuntimeRef.Name, rtKind)

	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	p := func(k, format string, args ...any) { fmt.Fprintf(w, "%s:\t%s\n", k, fmt.Sprintf(format, args...)) }
	p("Name", "%s", tj.Name)
	p("Namespace", "%s", tj.Namespace)
	p("Runtime", "%s", runtimeLabel(tj))
	p("Creator", "%s", orDash(tj.Annotations[api.CreatorAnnotation]))
	p("Created", "%s (%s ago)", tj.CreationTimestamp.UTC().Format(time.RFC3339), duration.HumanDuration(now.Sub(tj.CreationTimestamp.Time)))
	set := jobview.SettingsOf(tj, spec)
	if set.Description != "" {
		p("Description", "%s", set.Description)
	}
	if q := tj.Labels[queue.NameLabel]; q != "" {
		p("Queue", "%s", q)
	}
	if set.Priority != "" {
		p("Priority", "%s (Kueue WorkloadPriorityClass)", set.Priority)
	}
	if set.Timeout != "" {
		p("Timeout", "%s (spec.activeDeadlineSeconds %d)", set.Timeout, set.TimeoutSeconds)
	}
	if set.Retries > 0 {
		p("Retries", "up to %d (the whole job starts again after a failure)", set.Retries)
	}
	p("Phase", "%s", s.Phase)
	if fromManager {
		if note := cl.managerState(ctx).StaleNote(s.ObservedTime, now); note != "" {
			p("Status", "%s", note)
		}
	}
	if !fromManager {
		p("Diagnosis", "none: mpijob-manager has not written a status for this job (is it installed?); phase from Trainer's conditions")
	}
	if s.Reason != "" {
		p("Reason", "%s", s.Reason)
	}
	if s.Message != "" {
		p("Message", "%s", s.Message)
	}
	switch {
	case len(s.NextSteps) > 1:
		p("Next steps", "1. %s", s.NextSteps[0])
		for i, step := range s.NextSteps[1:] {
			fmt.Fprintf(w, "\t%d. %s\n", i+2, step)
		}
	case s.NextStep != "":
		p("Next step", "%s", s.NextStep)
	}
	if s.QueuePosition != nil {
		p("Queue position", "%d", *s.QueuePosition)
	}
	p("Launcher", "%s", orDash(string(s.Launcher)))
	p("Workers", "%d/%d ready", s.WorkersReady, s.WorkersTotal)
	slots := s.SlotsPerWorker
	if slots == 0 && tj.Spec.Trainer != nil && tj.Spec.Trainer.NumProcPerNode != nil {
		slots = *tj.Spec.Trainer.NumProcPerNode
	}
	p("Slots per worker", "%d", max(slots, 1))
	if pr, ok := progress.Of(tj); ok {
		line := pr.Short()
		if left := pr.EstimatedRemainingTimeSummary; left != "" && left != "complete" {
			line += ", about " + left + " left"
		}
		p("Progress", "%s", orDash(line))
		var ms []string
		for _, m := range pr.Metrics() {
			ms = append(ms, fmt.Sprintf("%s %.4g", m, pr.TrainMetrics[m]))
		}
		if len(ms) > 0 {
			p("Metrics", "%s", strings.Join(ms, ", "))
		}
		if pr.LastUpdatedTime != "" {
			p("Progress updated", "%s", pr.LastUpdatedTime)
		}
	}
	if spec != nil {
		if conns, pvcs := jobspec.StorageOf(spec); len(conns) > 0 || len(pvcs) > 0 {
			if len(conns) > 0 {
				p("Data connections", "%s (keys from their Secrets)", strings.Join(conns, ", "))
			}
			for i, pv := range pvcs {
				k := "PVCs"
				if i > 0 {
					k = ""
				}
				if k == "" {
					fmt.Fprintf(w, "\t%s at %s\n", pv.Claim, dataconn.MountPathOf(pv))
				} else {
					p(k, "%s at %s", pv.Claim, dataconn.MountPathOf(pv))
				}
			}
			p("Artifacts", "kubectl mpijob artifacts %s -n %s", tj.Name, tj.Namespace)
		}
		for i, cm := range jobspec.ConfigMapsOf(spec) {
			if i == 0 {
				p("ConfigMaps", "%s at %s (read-only)", cm.Name, dataconn.ConfigMapPathOf(cm))
			} else {
				fmt.Fprintf(w, "\t%s at %s (read-only)\n", cm.Name, dataconn.ConfigMapPathOf(cm))
			}
		}
	}
	if s.StartTime != nil {
		p("Started", "%s", s.StartTime.UTC().Format(time.RFC3339))
	}
	if s.CompletionTime != nil {
		p("Finished", "%s (ran %s)", s.CompletionTime.UTC().Format(time.RFC3339), jobDuration(s, now))
	}
	if tj.Spec.Trainer != nil && len(tj.Spec.Trainer.Command) > 0 {
		// The command can carry a secret (an access key, a password): it is
		// redacted as logs are.
		cmdline, _ := logs.String(strings.Join(append(append([]string{}, tj.Spec.Trainer.Command...), tj.Spec.Trainer.Args...), " "))
		p("Command", "%s", cmdline)
	}
	if tj.Spec.Trainer != nil {
		for i, e := range tj.Spec.Trainer.Env {
			if i == 0 {
				p("Env", "%s", describeEnv(e))
			} else {
				fmt.Fprintf(w, "\t%s\n", describeEnv(e))
			}
		}
	}
	_ = w.Flush()

	fmt.Fprintln(out, "\nResources:")
	if rtErr != nil {
		fmt.Fprintf(out, "  runtime %s: %v\n", tj.Spec.RuntimeRef.Name, rtErr)
	} else if shape, err := runtimes.ShapeOf(tj, spec); err == nil {
		d := admission.DemandOf(shape)
		w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		// Limits too: an OOM's next step sends the user here to read them.
		fmt.Fprintf(w, "  Launcher\t%d × requests %s; limits %s\n", d.Launchers, describeResources(d.LauncherRequests), describeResources(d.LauncherLimits))
		fmt.Fprintf(w, "  Worker\t%d × requests %s; limits %s\n", d.Workers, describeResources(d.WorkerRequests), describeResources(d.WorkerLimits))
		total := d.TotalRequests()
		fmt.Fprintf(w, "  Total requested\t%s\n", describeResources(total))
		_ = w.Flush()
		if pol, errs := runtimes.ParsePolicy(rtAnn); len(errs) == 0 {
			if lines := policyLines(pol); len(lines) > 0 {
				fmt.Fprintln(out, "\nRuntime policy:")
				for _, l := range lines {
					fmt.Fprintln(out, "  "+l)
				}
			}
		}
	}

	fmt.Fprintln(out, "\nPods:")
	// The one view of the job's pods (pkg/jobview): those there now, and
	// those JobSet removed as the status kept them.
	pods := jobview.Pods(append(append([]corev1.Pod{}, launcher...), workers...), s, s.WorkersTotal)
	gone := 0
	for _, pod := range pods {
		if pod.Gone {
			gone++
		}
	}
	switch {
	case len(pods) == 0:
		fmt.Fprintln(out, "  none yet")
	default:
		if gone == len(pods) {
			// A post-mortem: JobSet removed them; the status kept them.
			fmt.Fprintln(out, "  gone; as mpijob-manager last saw them:")
		}
		w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "  ROLE\tPOD\tNODE\tSTATE\tRESTARTS")
		for _, pod := range pods {
			fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%d\n", podLabel(pod.Role, pod.Index), pod.Name, orDash(pod.Node), pod.State, pod.Restarts)
		}
		_ = w.Flush()
		if gone > 0 {
			fmt.Fprintf(out, "  (their logs: kubectl mpijob logs %s --all)\n", tj.Name)
		}
	}
	if len(s.Failed) > 0 {
		var names []string
		for _, f := range s.Failed {
			why := f.Reason
			if ended := f.Ended(); ended != "" && !strings.Contains(why, "(exit ") {
				why += "; " + ended
			} else if f.Signal != 0 {
				why += "; " + api.SignalName(f.Signal)
			}
			names = append(names, fmt.Sprintf("%s (%s)", podLabel(f.Role, int(f.Index)), why))
		}
		fmt.Fprintf(out, "  Failed: %s\n", strings.Join(names, ", "))
	}

	fmt.Fprintln(out, "\nEvents:")
	switch {
	case len(events) == 0 && len(s.History) > 0:
		// The cluster's Events expire (an hour by default): the status
		// kept the job's transitions.
		fmt.Fprintln(out, "  none left in the cluster (Events expire); the job's transitions as its status kept them:")
		w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "  AGE\tPHASE\tREASON\tMESSAGE")
		for _, t := range s.History {
			fmt.Fprintf(w, "  %s\t%s\t%s\t%s\n", duration.HumanDuration(now.Sub(t.Time.Time)), t.Phase, orDash(t.Reason), t.Message)
		}
		_ = w.Flush()
	case len(events) == 0:
		fmt.Fprintln(out, "  none")
	default:
		printEvents(out, events, tj, now)
	}
	return nil
}

// podLabel names a Launcher or Worker as logs --all does: launcher,
// worker-N.
func podLabel(role string, index int) string {
	if role == "launcher" {
		return "launcher"
	}
	return fmt.Sprintf("worker-%d", index)
}

func policyLines(p runtimes.Policy) []string {
	var out []string
	if p.MaxWorkers > 0 {
		out = append(out, fmt.Sprintf("max workers per job: %d", p.MaxWorkers))
	}
	if p.MaxGPUsPerWorker != nil {
		out = append(out, fmt.Sprintf("max GPUs per worker: %s", p.MaxGPUsPerWorker.String()))
	}
	if len(p.RequiredNodeSelector) > 0 {
		out = append(out, fmt.Sprintf("required node labels: %v", p.RequiredNodeSelector))
	}
	if len(p.RequiredTolerations) > 0 {
		tols := make([]string, 0, len(p.RequiredTolerations))
		for _, t := range p.RequiredTolerations {
			tols = append(tols, runtimes.FormatToleration(t))
		}
		out = append(out, "required tolerations: "+strings.Join(tols, ","))
	}
	if p.GangTimeout > 0 {
		out = append(out, fmt.Sprintf("gang-scheduling timeout: %s", p.GangTimeout))
	}
	return out
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// runtimeLabel names the runtime the user chose, and the per-job copy.
func runtimeLabel(tj *trainer.TrainJob) string {
	base := api.RuntimeOf(tj.Labels, tj.Spec.RuntimeRef.Name)
	if base != tj.Spec.RuntimeRef.Name {
		return fmt.Sprintf("%s (this job's own copy: TrainingRuntime %s, with its images and resources)", base, tj.Spec.RuntimeRef.Name)
	}
	return base
}

// describeEnv shows a variable as NAME=VALUE with the value redacted as
// logs are, or where it comes from.
func describeEnv(e corev1.EnvVar) string {
	switch {
	case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
		return fmt.Sprintf("%s from Secret %s, key %s", e.Name, e.ValueFrom.SecretKeyRef.Name, e.ValueFrom.SecretKeyRef.Key)
	case e.ValueFrom != nil:
		return e.Name + " from a reference (valueFrom)"
	}
	line, _ := logs.String(e.Name + "=" + e.Value)
	return line
}
