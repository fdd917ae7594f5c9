package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
	kubectlget "k8s.io/kubectl/pkg/cmd/get"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/jobstatus"
	"github.com/mpijob/mpijob/pkg/jobview"
)

// getOptions is `kubectl mpijob get`.
type getOptions struct {
	*Options
	print         *genericclioptions.PrintFlags
	columns       *kubectlget.CustomColumnsPrintFlags
	allNamespaces bool
	runtime       string
	watch         bool
	names         []string
	// allFrameworks lists every TrainJob, with its framework.
	allFrameworks bool
}

func newGetOptions(o *Options) *getOptions {
	return &getOptions{Options: o, print: genericclioptions.NewPrintFlags("").WithTypeSetter(scheme), columns: kubectlget.NewCustomColumnsPrintFlags()}
}

func newGetCommand(o *Options) *cobra.Command {
	g := newGetOptions(o)
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
			g.Complete(args)
			if err := g.Validate(); err != nil {
				return err
			}
			return g.Run(cmd.Context())
		},
	}
	g.print.AddFlags(cmd)
	// The table (default, and wide) is mpijob's own; custom columns are
	// kubectl's printer.
	out := cmd.Flags().Lookup("output")
	out.Usage = "Output format. One of: (wide, " + strings.Join(append(g.print.AllowedFormats(), g.columns.AllowedFormats()...), ", ") +
		"). The default is a table; wide adds columns; custom-columns=NAME:.metadata.name,RUNTIME:.spec.runtimeRef.name works as in kubectl get."
	_ = cmd.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return append(append([]string{"wide"}, g.print.AllowedFormats()...), g.columns.AllowedFormats()...), cobra.ShellCompDirectiveNoFileComp
	})
	cmd.Flags().BoolVarP(&g.allNamespaces, "all-namespaces", "A", false, "list the jobs of every namespace")
	cmd.Flags().StringVar(&g.runtime, "runtime", "", "only jobs on this runtime")
	cmd.Flags().BoolVarP(&g.watch, "watch", "w", false, "after listing, print changes as they happen")
	cmd.Flags().BoolVar(&g.allFrameworks, "all-frameworks", false, "list every TrainJob (PyTorch, JAX, ... too), with a FRAMEWORK column; without it only MPI jobs are listed")
	_ = cmd.RegisterFlagCompletionFunc("runtime", o.completeRuntimes)
	return cmd
}

func (g *getOptions) wide() bool {
	return g.print.OutputFormat != nil && *g.print.OutputFormat == "wide"
}

func (g *getOptions) table() bool {
	return g.print.OutputFormat == nil || *g.print.OutputFormat == "" || g.wide()
}

// Complete takes the job names (none: every job).
func (g *getOptions) Complete(args []string) { g.names = args }

// Validate checks -o: a bad format is a usage error, said before any API
// call.
func (g *getOptions) Validate() error {
	if !g.table() {
		if _, err := g.printer(); err != nil {
			if strings.HasPrefix(*g.print.OutputFormat, "custom-columns") {
				return usageErr("-o %s: %v", *g.print.OutputFormat, err)
			}
			return usageErr("-o %s: not an output format; use wide or one of %s", *g.print.OutputFormat,
				strings.Join(append(g.print.AllowedFormats(), g.columns.AllowedFormats()...), ", "))
		}
	}
	return nil
}

// printer is the printer of a format other than the table: kubectl's
// custom columns, or cli-runtime's JSON, YAML, name and templates.
func (g *getOptions) printer() (printers.ResourcePrinter, error) {
	if f := *g.print.OutputFormat; strings.HasPrefix(f, "custom-columns") {
		if g.print.TemplatePrinterFlags != nil && g.print.TemplatePrinterFlags.TemplateArgument != nil {
			g.columns.TemplateArgument = *g.print.TemplatePrinterFlags.TemplateArgument
		}
		return g.columns.ToPrinter(f)
	}
	return g.print.ToPrinter()
}

// Run lists the jobs and prints them (then their changes, with -w).
func (g *getOptions) Run(ctx context.Context) error {
	names := g.names
	cl, err := g.clients()
	if err != nil {
		return err
	}
	var opts []client.ListOption
	if !g.allNamespaces {
		opts = append(opts, client.InNamespace(cl.namespace))
	}
	l := &trainer.TrainJobList{}
	// The JobStatuses are listed once, after the jobs, and serve the
	// table, the whole jobs when the table gives up, and the watch.
	var js jobStatuses
	fromMetadata := false
	if g.table() {
		if fromMetadata, js, err = listRows(ctx, cl, opts, l); err != nil {
			return err
		}
	}
	if !fromMetadata {
		if err := cl.List(ctx, l, opts...); err != nil {
			return err
		}
		if !g.table() { // the table's listRows listed them already
			if js.index, js.rv, err = jobstatus.IndexAt(ctx, cl, opts...); err != nil {
				return err
			}
		}
		js.index.Join(l.Items)
	}
	// MPI jobs only, by the rule admission scopes them with (one rule:
	// jobview.FrameworkOf); --all-frameworks lists the rest, marked.
	rtNamespace := cl.namespace
	if g.allNamespaces {
		rtNamespace = ""
	}
	fws := cl.frameworks(ctx, rtNamespace)
	frameworkOf := func(tj *trainer.TrainJob) string { return jobview.FrameworkOf(jobview.RefOf(tj), fws) }
	all := filterJobs(l.Items, names, g.runtime)
	jobs := all
	if !g.allFrameworks {
		jobs = slices.DeleteFunc(slices.Clone(all), func(tj trainer.TrainJob) bool { return frameworkOf(&tj) != jobview.FrameworkMPI })
	}
	for _, n := range names {
		found := false
		for _, j := range jobs {
			found = found || j.Name == n
		}
		if !found {
			for i := range all {
				if all[i].Name == n {
					return notMPI(&all[i], frameworkOf(&all[i]))
				}
			}
			if _, err := cl.job(ctx, n); err != nil {
				return err
			}
		}
	}
	if !g.table() {
		p, err := g.printer()
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
	if len(jobs) == 0 {
		where := "namespace " + cl.namespace
		if g.allNamespaces {
			where = "any namespace"
		}
		if g.runtime != "" {
			where += " on runtime " + g.runtime
		}
		if !g.watch {
			fmt.Fprintf(g.ErrOut, "No MPI jobs found in %s.\n", where)
			return nil
		}
		// Said once the list is read: the watch starts where it ended, so
		// a job created from now on shows up.
		fmt.Fprintf(g.ErrOut, "No MPI jobs in %s yet; watching for them (Ctrl-C stops).\n", where)
	}
	tp := printers.NewTablePrinter(printers.PrintOptions{Wide: g.wide(), WithNamespace: g.allNamespaces})
	now := time.Now()
	table := JobTable(jobs, now)
	if g.watch {
		// Progress moves while a job runs: a watch always has the column.
		table = jobTable(jobs, now)
	}
	if g.allFrameworks {
		withFramework(table, frameworkOf)
	}
	if len(jobs) > 0 {
		if err := tp.PrintObj(table, g.Out); err != nil {
			return err
		}
		if note := cl.managerState(ctx).StaleListNote(now); note != "" {
			fmt.Fprintf(g.ErrOut, "Warning: %s.\n", note)
		}
	}
	if !g.watch {
		return nil
	}
	rows := newRowPrinter(table, g.wide(), g.allNamespaces, len(jobs) > 0)
	return g.watchJobs(ctx, cl, opts, l.ResourceVersion, js, names, rows, frameworkOf, jobs)
}

// jobStatuses is one list of the JobStatuses: their index by job, and the
// list's resourceVersion for a watch to start from ("" when they cannot be
// read: api.JobStatusesUnread).
type jobStatuses struct {
	index api.JobStatusIndex
	rv    string
}

// withFramework adds the FRAMEWORK column after RUNTIME (--all-frameworks).
func withFramework(t *metav1.Table, frameworkOf func(*trainer.TrainJob) string) {
	t.ColumnDefinitions = slices.Insert(t.ColumnDefinitions, 2, metav1.TableColumnDefinition{Name: "Framework", Type: "string"})
	for i := range t.Rows {
		fw := jobview.FrameworkUnknown
		if tj, ok := t.Rows[i].Object.Object.(*trainer.TrainJob); ok {
			fw = frameworkOf(tj)
		}
		t.Rows[i].Cells = slices.Insert(t.Rows[i].Cells, 2, any(fw))
	}
}

// listRows lists the jobs for the table from their metadata: the manager's
// status (with the job's runtime and shape: slots, GPUs; its JobStatus,
// listed beside) is all the table reads, and the API server sends labels and annotations instead of whole
// jobs: 10,000 jobs in a fifth of the time (docs/development.md). A job
// without such a status (the manager has not seen it yet, it is not on an
// MPI runtime, an older manager wrote it) is read whole, one by one for up
// to api.MaxWholeReads of them; ok is false when there are more, and the caller
// lists whole jobs.
func listRows(ctx context.Context, cl client.Reader, opts []client.ListOption, into *trainer.TrainJobList) (ok bool, js jobStatuses, err error) {
	ml := &metav1.PartialObjectMetadataList{}
	ml.SetGroupVersionKind(trainer.GroupVersion.WithKind("TrainJobList"))
	if err := cl.List(ctx, ml, opts...); err != nil {
		return false, js, err
	}
	if js.index, js.rv, err = jobstatus.IndexAt(ctx, cl, opts...); err != nil {
		return false, js, err
	}
	statuses := js.index
	items := make([]trainer.TrainJob, 0, len(ml.Items))
	var whole []int
	for _, m := range ml.Items {
		tj := trainer.TrainJob{ObjectMeta: m.ObjectMeta}
		statuses.JoinMeta(&tj.ObjectMeta)
		st, fromStatus := api.RowFromStatus(tj.Annotations)
		// The manager's status names the job's runtime (it writes one
		// for MPI jobs only): that runtime tells the framework.
		if !fromStatus {
			if whole = append(whole, len(items)); len(whole) > api.MaxWholeReads {
				return false, js, nil
			}
		}
		tj.Spec.RuntimeRef.Name = st.Runtime
		items = append(items, tj)
	}
	for _, i := range whole {
		tj := &trainer.TrainJob{}
		if err := cl.Get(ctx, client.ObjectKeyFromObject(&items[i]), tj); apierrors.IsNotFound(err) {
			tj = &trainer.TrainJob{} // deleted since the list: no name, dropped below
		} else if err != nil {
			return false, js, err
		}
		statuses.JoinMeta(&tj.ObjectMeta)
		items[i] = *tj
	}
	into.Items = slices.DeleteFunc(items, func(tj trainer.TrainJob) bool { return tj.Name == "" })
	into.ResourceVersion = ml.ResourceVersion
	return true, js, nil
}

func (g *getOptions) watchJobs(ctx context.Context, cl *clients, opts []client.ListOption, rv string, js jobStatuses, names []string, rows *rowPrinter, frameworkOf func(*trainer.TrainJob) string, shown []trainer.TrainJob) error {
	// mpijob-manager's status of each job is its JobStatus: both are
	// watched (from the lists Run made), and a change of either prints
	// the job's row again.
	statuses, statusRV := js.index, js.rv
	w, err := cl.Watch(ctx, &trainer.TrainJobList{}, append(opts, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})...)
	if err != nil {
		return err
	}
	defer w.Stop()
	var statusEvents <-chan watch.Event
	if statusRV != "" {
		sw, err := cl.Watch(ctx, &api.JobStatusList{}, append(opts, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: statusRV}})...)
		if err != nil && !api.JobStatusesUnread(err) {
			return err
		}
		if err == nil {
			defer sw.Stop()
			statusEvents = sw.ResultChan()
		}
	}
	jobs := map[types.NamespacedName]*trainer.TrainJob{}
	for i := range shown {
		jobs[client.ObjectKeyFromObject(&shown[i])] = &shown[i]
	}
	show := func(tj *trainer.TrainJob) {
		if len(filterJobs([]trainer.TrainJob{*tj}, names, g.runtime)) == 0 {
			return
		}
		if !g.allFrameworks && frameworkOf(tj) != jobview.FrameworkMPI {
			return
		}
		t := jobTable([]trainer.TrainJob{*tj}, time.Now())
		if g.allFrameworks {
			withFramework(t, frameworkOf)
		}
		rows.print(g.Out, tj, t.Rows[0])
	}
	for {
		select {
		case <-ctx.Done(): // Ctrl-C: the watch ends with the command
			return nil
		case ev, open := <-w.ResultChan():
			if !open {
				return nil
			}
			tj, ok := ev.Object.(*trainer.TrainJob)
			if !ok || ev.Type == watch.Bookmark {
				continue
			}
			key := client.ObjectKeyFromObject(tj)
			if ev.Type == watch.Deleted {
				delete(jobs, key)
			} else {
				jobs[key] = tj
			}
			statuses.JoinMeta(&tj.ObjectMeta)
			show(tj)
		case ev, open := <-statusEvents:
			if !open {
				statusEvents = nil // rows still follow the jobs
				continue
			}
			s, ok := ev.Object.(*api.JobStatus)
			if !ok || ev.Type == watch.Bookmark {
				continue
			}
			key := client.ObjectKeyFromObject(s)
			if ev.Type == watch.Deleted {
				delete(statuses, key)
				continue
			}
			statuses[key] = s
			if tj := jobs[key]; tj != nil && api.JoinStatus(&tj.ObjectMeta, s) {
				show(tj)
			}
		}
	}
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
// WORKERS (ready/total), PROGRESS (only when some job reports progress, so
// jobs that report none look as they always did), AGE, DURATION, and with
// -o wide SLOTS, GPUS, CREATOR, REASON.
func JobTable(jobs []trainer.TrainJob, now time.Time) *metav1.Table {
	t := jobTable(jobs, now)
	for _, r := range t.Rows {
		if r.Cells[progressColumn] != "-" {
			return t
		}
	}
	t.ColumnDefinitions = slices.Delete(t.ColumnDefinitions, progressColumn, progressColumn+1)
	for i := range t.Rows {
		t.Rows[i].Cells = slices.Delete(t.Rows[i].Cells, progressColumn, progressColumn+1)
	}
	return t
}

// progressColumn is the PROGRESS column's index.
const progressColumn = 4

func jobTable(jobs []trainer.TrainJob, now time.Time) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name"},
		{Name: "Runtime", Type: "string"},
		{Name: "Phase", Type: "string"},
		{Name: "Workers", Type: "string"},
		{Name: "Progress", Type: "string"},
		{Name: "Age", Type: "string"},
		{Name: "Duration", Type: "string"},
		{Name: "Slots", Type: "integer", Priority: 1},
		{Name: "GPUs", Type: "string", Priority: 1},
		{Name: "Creator", Type: "string", Priority: 1},
		{Name: "Reason", Type: "string", Priority: 1},
	}}
	for i := range jobs {
		j := &jobs[i]
		// The job as every interface shows it (pkg/jobview): one row, the
		// SDK's MPIJob.row too.
		r := jobview.RowOf(jobview.JobOf(j), now)
		t.Rows = append(t.Rows, metav1.TableRow{
			Cells:  []any{r.Name, r.Runtime, r.Phase, r.Workers, r.Progress, r.Age, r.Duration, int64(r.Slots), r.GPUs, r.Creator, r.Reason},
			Object: runtime.RawExtension{Object: j},
		})
	}
	return t
}

// rowPrinter prints get -w's rows aligned with the table above them (the
// table printer's tabwriter: columns at least 10 wide, 3 spaces apart),
// one row per change a person can see: an update that changes nothing but
// the age is not printed again.
type rowPrinter struct {
	columns []int // the table's columns shown, in order
	// clock marks the shown cells that change by themselves (Age,
	// Duration): not news.
	clock   []bool
	ns      bool
	widths  []int
	header  []string
	printed bool
	last    map[string]string
}

func newRowPrinter(t *metav1.Table, wide, withNamespace, headerPrinted bool) *rowPrinter {
	r := &rowPrinter{ns: withNamespace, printed: headerPrinted, last: map[string]string{}}
	if withNamespace {
		r.header, r.clock = append(r.header, "NAMESPACE"), append(r.clock, false)
	}
	for i, c := range t.ColumnDefinitions {
		if c.Priority == 0 || wide {
			r.columns = append(r.columns, i)
			r.header = append(r.header, strings.ToUpper(c.Name))
			r.clock = append(r.clock, c.Name == "Age" || c.Name == "Duration")
		}
	}
	r.widths = make([]int, len(r.header))
	for i, h := range r.header {
		r.widths[i] = max(10, len(h)+3)
	}
	for _, row := range t.Rows {
		cells := r.cells(row)
		for i, cell := range cells {
			r.widths[i] = max(r.widths[i], len(cell)+3)
		}
		// What the table shows is not news either.
		if o, ok := row.Object.Object.(metav1.Object); ok {
			r.last[o.GetNamespace()+"/"+o.GetName()] = r.signature(cells)
		}
	}
	return r
}

// signature is a row without the cells that change by themselves.
func (r *rowPrinter) signature(cells []string) string {
	var seen []string
	for i, c := range cells {
		if !r.clock[i] {
			seen = append(seen, c)
		}
	}
	return strings.Join(seen, "\x00")
}

func (r *rowPrinter) cells(row metav1.TableRow) []string {
	var out []string
	if r.ns {
		ns := ""
		if o, ok := row.Object.Object.(metav1.Object); ok {
			ns = o.GetNamespace()
		}
		out = append(out, ns)
	}
	for _, i := range r.columns {
		out = append(out, fmt.Sprint(row.Cells[i]))
	}
	return out
}

func (r *rowPrinter) print(w io.Writer, tj *trainer.TrainJob, row metav1.TableRow) {
	cells := r.cells(row)
	key, sig := tj.Namespace+"/"+tj.Name, r.signature(cells)
	if r.last[key] == sig {
		return
	}
	r.last[key] = sig
	line := func(cells []string) string {
		var b strings.Builder
		for i, c := range cells {
			if i == len(cells)-1 {
				b.WriteString(c)
				break
			}
			b.WriteString(c)
			b.WriteString(strings.Repeat(" ", max(r.widths[i]-len(c), 3)))
		}
		return strings.TrimRight(b.String(), " ")
	}
	if !r.printed {
		fmt.Fprintln(w, line(r.header))
		r.printed = true
	}
	fmt.Fprintln(w, line(cells))
}
