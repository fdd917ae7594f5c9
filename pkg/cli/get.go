package cli

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/api"
)

type getOptions struct {
	*Options
	print         *genericclioptions.PrintFlags
	allNamespaces bool
	runtime       string
	watch         bool
}

func newGetCommand(o *Options) *cobra.Command {
	g := &getOptions{Options: o, print: genericclioptions.NewPrintFlags("").WithTypeSetter(scheme)}
	cmd := &cobra.Command{
		Use:     "get [NAME...]",
		Aliases: []string{"list", "ls"},
		Short:   "List MPI jobs with their phase and Workers",
		Example: `  kubectl mpijob get
  kubectl mpijob list -A -o wide
  kubectl mpijob get hello -o yaml
  kubectl mpijob get -w`,
		ValidArgsFunction: o.completeJobs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.run(cmd.Context(), args)
		},
	}
	g.print.AddFlags(cmd)
	cmd.Flags().BoolVarP(&g.allNamespaces, "all-namespaces", "A", false, "list the jobs of every namespace")
	cmd.Flags().StringVar(&g.runtime, "runtime", "", "only jobs on this runtime")
	cmd.Flags().BoolVarP(&g.watch, "watch", "w", false, "after listing, print changes as they happen")
	_ = cmd.RegisterFlagCompletionFunc("runtime", o.completeRuntimes)
	return cmd
}

func (g *getOptions) wide() bool {
	return g.print.OutputFormat != nil && *g.print.OutputFormat == "wide"
}

func (g *getOptions) table() bool {
	return g.print.OutputFormat == nil || *g.print.OutputFormat == "" || g.wide()
}

func (g *getOptions) run(ctx context.Context, names []string) error {
	// A bad -o is a usage error, said before any API call.
	if !g.table() {
		if _, err := g.print.ToPrinter(); err != nil {
			return usageErr("-o %s: not an output format; use wide or one of %s", *g.print.OutputFormat, strings.Join(g.print.AllowedFormats(), ", "))
		}
	}
	cl, err := g.clients()
	if err != nil {
		return err
	}
	var opts []client.ListOption
	if !g.allNamespaces {
		opts = append(opts, client.InNamespace(cl.namespace))
	}
	l := &trainer.TrainJobList{}
	if err := cl.List(ctx, l, opts...); err != nil {
		return err
	}
	jobs := filterJobs(l.Items, names, g.runtime)
	for _, n := range names {
		found := false
		for _, j := range jobs {
			found = found || j.Name == n
		}
		if !found {
			if _, err := cl.job(ctx, n); err != nil {
				return err
			}
		}
	}
	if !g.table() {
		p, err := g.print.ToPrinter()
		if err != nil {
			return err
		}
		if len(names) == 1 && len(jobs) == 1 {
			return p.PrintObj(&jobs[0], g.Out)
		}
		// The name printer takes one object at a time, as kubectl get
		// feeds it.
		if *g.print.OutputFormat == "name" {
			for i := range jobs {
				if err := p.PrintObj(&jobs[i], g.Out); err != nil {
					return err
				}
			}
			return nil
		}
		return p.PrintObj(&trainer.TrainJobList{Items: jobs}, g.Out)
	}
	if len(jobs) == 0 && !g.watch {
		where := "namespace " + cl.namespace
		if g.allNamespaces {
			where = "any namespace"
		}
		fmt.Fprintf(g.ErrOut, "No MPI jobs found in %s.\n", where)
		return nil
	}
	tp := printers.NewTablePrinter(printers.PrintOptions{Wide: g.wide(), WithNamespace: g.allNamespaces})
	now := time.Now()
	if err := tp.PrintObj(JobTable(jobs, now), g.Out); err != nil {
		return err
	}
	if !g.watch {
		return nil
	}
	return g.watchJobs(ctx, cl, opts, l.ResourceVersion, names)
}

func (g *getOptions) watchJobs(ctx context.Context, cl *clients, opts []client.ListOption, rv string, names []string) error {
	w, err := cl.Watch(ctx, &trainer.TrainJobList{}, append(opts, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})...)
	if err != nil {
		return err
	}
	defer w.Stop()
	tp := printers.NewTablePrinter(printers.PrintOptions{Wide: g.wide(), WithNamespace: g.allNamespaces, NoHeaders: true})
	for ev := range w.ResultChan() {
		tj, ok := ev.Object.(*trainer.TrainJob)
		if !ok || ev.Type == watch.Bookmark {
			continue
		}
		if len(filterJobs([]trainer.TrainJob{*tj}, names, g.runtime)) == 0 {
			continue
		}
		if err := tp.PrintObj(JobTable([]trainer.TrainJob{*tj}, time.Now()), g.Out); err != nil {
			return err
		}
	}
	return nil
}

func filterJobs(in []trainer.TrainJob, names []string, rt string) []trainer.TrainJob {
	var out []trainer.TrainJob
	for _, j := range in {
		if rt != "" && api.RuntimeOf(j.Labels, j.Spec.RuntimeRef.Name) != rt {
			continue
		}
		if len(names) > 0 && !contains(names, j.Name) {
			continue
		}
		out = append(out, j)
	}
	sort.SliceStable(out, func(i, k int) bool {
		if out[i].Namespace != out[k].Namespace {
			return out[i].Namespace < out[k].Namespace
		}
		return out[i].Name < out[k].Name
	})
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// JobTable renders jobs as the table get prints: NAME, RUNTIME, PHASE,
// WORKERS (ready/total), AGE, DURATION, and with -o wide SLOTS, GPUS,
// CREATOR, REASON.
func JobTable(jobs []trainer.TrainJob, now time.Time) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name"},
		{Name: "Runtime", Type: "string"},
		{Name: "Phase", Type: "string"},
		{Name: "Workers", Type: "string"},
		{Name: "Age", Type: "string"},
		{Name: "Duration", Type: "string"},
		{Name: "Slots", Type: "integer", Priority: 1},
		{Name: "GPUs", Type: "string", Priority: 1},
		{Name: "Creator", Type: "string", Priority: 1},
		{Name: "Reason", Type: "string", Priority: 1},
	}}
	for i := range jobs {
		j := &jobs[i]
		s, fromManager := statusOf(j)
		workers := fmt.Sprintf("%d/%d", s.WorkersReady, s.WorkersTotal)
		reason := s.Reason
		if !fromManager {
			workers = fmt.Sprintf("?/%d", s.WorkersTotal)
			reason = "(no mpijob-manager status)"
		}
		if reason == "" {
			reason = "-"
		}
		phase := string(s.Phase)
		if s.Phase == api.PhaseQueued && s.QueuePosition != nil {
			phase = fmt.Sprintf("Queued (#%d)", *s.QueuePosition)
		}
		slots := int32(1)
		if s.SlotsPerWorker > 0 {
			slots = s.SlotsPerWorker
		} else if j.Spec.Trainer != nil && j.Spec.Trainer.NumProcPerNode != nil {
			slots = *j.Spec.Trainer.NumProcPerNode
		}
		// What the Worker pods get, as the manager read it from the job's
		// runtime; the job's own resourcesPerNode without a manager.
		gpus := s.GPUsPerWorker
		if gpus == "" {
			gpus = gpusOf(j)
		}
		creator := j.Annotations[api.CreatorAnnotation]
		if creator == "" {
			creator = "-"
		}
		row := metav1.TableRow{
			Cells: []any{j.Name, api.RuntimeOf(j.Labels, j.Spec.RuntimeRef.Name), phase, workers,
				duration.HumanDuration(now.Sub(j.CreationTimestamp.Time)), jobDuration(s, now), int64(slots), gpus, creator, reason},
			Object: runtime.RawExtension{Object: j},
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

func jobDuration(s api.Status, now time.Time) string {
	if s.StartTime == nil {
		return "-"
	}
	end := now
	if s.CompletionTime != nil {
		end = s.CompletionTime.Time
	}
	return duration.HumanDuration(end.Sub(s.StartTime.Time))
}

func gpusOf(j *trainer.TrainJob) string {
	if j.Spec.Trainer == nil || j.Spec.Trainer.ResourcesPerNode == nil {
		return "-"
	}
	r := j.Spec.Trainer.ResourcesPerNode
	if q, ok := r.Limits["nvidia.com/gpu"]; ok {
		return q.String()
	}
	if q, ok := r.Requests["nvidia.com/gpu"]; ok {
		return q.String()
	}
	return "-"
}
