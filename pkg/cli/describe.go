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
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/jobview"
	"github.com/mpijob/mpijob/pkg/queue"
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
	// Gather: what the user may read of the job.
	tj, err := cl.job(ctx, name)
	if err != nil {
		return err
	}
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
	k := jobview.Known{Job: tj, Pods: append(append([]corev1.Pod{}, launcher...), workers...), Runtime: spec, RuntimeAnnotations: rtAnn, Now: now}
	if rtErr != nil {
		k.Runtime, k.RuntimeError = nil, rtErr.Error()
	}
	if api.HasStatus(tj.Annotations) {
		m := cl.managerState(ctx)
		k.Manager = &m
	}
	// Decide: the one detail of a job (pkg/jobview), which the dashboard's
	// job page shows too. Then print it.
	printDetail(out, jobview.DetailOf(k), tj, events, now)
	return nil
}

// printDetail prints a job's detail as describe does.
func printDetail(out io.Writer, d jobview.Detail, tj *trainer.TrainJob, events []corev1.Event, now time.Time) {
	j := d.Job
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	p := func(k, format string, args ...any) { fmt.Fprintf(w, "%s:\t%s\n", k, fmt.Sprintf(format, args...)) }
	more := func(line string) { fmt.Fprintf(w, "\t%s\n", line) }
	list := func(k string, lines []string) {
		for i, l := range lines {
			if i == 0 {
				p(k, "%s", l)
			} else {
				more(l)
			}
		}
	}
	p("Name", "%s", j.Name)
	p("Namespace", "%s", j.Namespace)
	if d.RuntimeCopy != "" {
		p("Runtime", "%s (this job's own copy: TrainingRuntime %s, with its images and resources)", j.Runtime, d.RuntimeCopy)
	} else {
		p("Runtime", "%s", j.Runtime)
	}
	p("Creator", "%s", orDash(j.Creator))
	p("Created", "%s (%s ago)", j.Created.UTC().Format(time.RFC3339), duration.HumanDuration(now.Sub(j.Created)))
	set := d.Settings
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
	if set.GracePeriod != "" {
		p("Grace period", "%s (the ranks get SIGTERM and this long to save a checkpoint when the job is stopped)", set.GracePeriod)
	}
	if len(set.NodeSelector) > 0 {
		p("Node selector", "%s", k8slabels.FormatLabels(set.NodeSelector))
	}
	if len(set.Tolerations) > 0 {
		p("Tolerations", "%s", strings.Join(set.Tolerations, ", "))
	}
	if len(set.ImagePullSecrets) > 0 {
		p("Pull Secrets", "%s", strings.Join(set.ImagePullSecrets, ", "))
	}
	p("Phase", "%s", j.Phase)
	if d.StaleNote != "" {
		p("Status", "%s", d.StaleNote)
	}
	if !j.Reported {
		p("Diagnosis", "none: mpijob-manager has not written a status for this job (is it installed?); phase from Trainer's conditions")
	}
	if j.Reason != "" {
		p("Reason", "%s", j.Reason)
	}
	if j.Message != "" {
		p("Message", "%s", j.Message)
	}
	switch {
	case len(j.NextSteps) > 1:
		p("Next steps", "1. %s", j.NextSteps[0])
		for i, step := range j.NextSteps[1:] {
			more(fmt.Sprintf("%d. %s", i+2, step))
		}
	case j.NextStep != "":
		p("Next step", "%s", j.NextStep)
	}
	if j.QueuePosition != nil {
		p("Queue position", "%d", *j.QueuePosition)
	}
	p("Launcher", "%s", orDash(string(j.Launcher)))
	p("Workers", "%d/%d ready", j.WorkersReady, j.WorkersTotal)
	p("Slots per worker", "%d", max(j.SlotsPerWorker, 1))
	if pr := j.Progress; pr != nil {
		p("Progress", "%s", orDash(d.ProgressLine))
		if d.ResumedLine != "" {
			p("Resumed", "%s", d.ResumedLine)
		}
		if d.AttemptsLine != "" {
			p("Attempts", "%s", d.AttemptsLine)
		}
		if len(d.Metrics) > 0 {
			p("Metrics", "%s", strings.Join(d.Metrics, ", "))
		}
		if pr.LastUpdatedTime != "" {
			p("Progress updated", "%s", pr.LastUpdatedTime)
		}
	}
	if len(d.DataConnections) > 0 {
		p("Data connections", "%s (keys from their Secrets)", strings.Join(d.DataConnections, ", "))
	}
	list("PVCs", mounts(d.PVCs, ""))
	if d.Stores() {
		p("Artifacts", "kubectl mpijob artifacts %s -n %s", j.Name, j.Namespace)
	}
	list("ConfigMaps", mounts(d.ConfigMaps, " (read-only)"))
	if j.Started != nil {
		if j.AttemptStarted != nil {
			p("Started", "%s (this attempt: %s)", j.Started.UTC().Format(time.RFC3339), j.AttemptStarted.UTC().Format(time.RFC3339))
		} else {
			p("Started", "%s", j.Started.UTC().Format(time.RFC3339))
		}
	}
	if j.Finished != nil {
		p("Finished", "%s (ran %s)", j.Finished.UTC().Format(time.RFC3339), jobview.Ran(j.Started, j.Finished, now))
	}
	if d.Command != "" {
		p("Command", "%s", d.Command)
	}
	list("Env", d.Env)
	_ = w.Flush()

	fmt.Fprintln(out, "\nResources:")
	if d.RuntimeError != "" {
		fmt.Fprintf(out, "  runtime %s: %s\n", tj.Spec.RuntimeRef.Name, d.RuntimeError)
	} else if r := d.Resources; r != nil {
		w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		// Limits too: an OOM's next step sends the user here to read them.
		fmt.Fprintf(w, "  Launcher\t%d × requests %s; limits %s\n", r.Launchers, describeWords(r.LauncherRequests), describeWords(r.LauncherLimits))
		fmt.Fprintf(w, "  Worker\t%d × requests %s; limits %s\n", r.Workers, describeWords(r.WorkerRequests), describeWords(r.WorkerLimits))
		fmt.Fprintf(w, "  Total requested\t%s\n", describeWords(r.TotalRequests))
		_ = w.Flush()
		if len(d.Policy) > 0 {
			fmt.Fprintln(out, "\nRuntime policy:")
			for _, l := range d.Policy {
				fmt.Fprintln(out, "  "+l)
			}
		}
	}

	fmt.Fprintln(out, "\nPods:")
	// The one view of the job's pods (pkg/jobview): those there now, and
	// those JobSet removed as the status kept them.
	gone := 0
	for _, pod := range d.Pods {
		if pod.Gone {
			gone++
		}
	}
	switch {
	case len(d.Pods) == 0:
		fmt.Fprintln(out, "  none yet")
	default:
		if gone == len(d.Pods) {
			// A post-mortem: JobSet removed them; the status kept them.
			fmt.Fprintln(out, "  gone; as mpijob-manager last saw them:")
		}
		w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "  ROLE\tPOD\tNODE\tSTATE\tRESTARTS")
		for _, pod := range d.Pods {
			fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%d\n", jobview.PodLabel(pod.Role, pod.Index), pod.Name, orDash(pod.Node), pod.State, pod.Restarts)
		}
		_ = w.Flush()
		if gone > 0 {
			fmt.Fprintf(out, "  (their logs: kubectl mpijob logs %s --all)\n", j.Name)
		}
	}
	if len(j.Failed) > 0 {
		names := make([]string, 0, len(j.Failed))
		for _, f := range j.Failed {
			names = append(names, jobview.FailedLine(f))
		}
		fmt.Fprintf(out, "  Failed: %s\n", strings.Join(names, ", "))
	}

	fmt.Fprintln(out, "\nEvents:")
	switch {
	case len(events) == 0 && len(d.History) > 0:
		// The cluster's Events expire (an hour by default): the status
		// kept the job's transitions.
		fmt.Fprintln(out, "  none left in the cluster (Events expire); the job's transitions as its status kept them:")
		w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "  AGE\tPHASE\tREASON\tMESSAGE")
		for _, t := range d.History {
			fmt.Fprintf(w, "  %s\t%s\t%s\t%s\n", duration.HumanDuration(now.Sub(t.Time.Time)), t.Phase, orDash(t.Reason), t.Message)
		}
		_ = w.Flush()
	case len(events) == 0:
		fmt.Fprintln(out, "  none")
	default:
		printEvents(out, events, tj, now)
	}
}

// mounts are PVCs or ConfigMaps as describe lists them: NAME at PATH.
func mounts(ms []jobview.Mount, suffix string) []string {
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, fmt.Sprintf("%s at %s%s", m.Name, m.Path, suffix))
	}
	return out
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
