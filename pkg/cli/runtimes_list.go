package cli

import (
	"context"
	"fmt"
	"sort"
	"text/tabwriter"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/spf13/cobra"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/runtimes"
)

// runtimesListOptions is `kubectl mpijob runtimes list`.
type runtimesListOptions struct{ *Options }

func newRuntimesListCommand(o *Options) *cobra.Command {
	r := &runtimesListOptions{Options: o}
	return &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the MPI runtimes",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return r.Run(cmd.Context())
		},
	}
}

// Run prints the cluster's MPI runtimes, by name.
func (r *runtimesListOptions) Run(ctx context.Context) error {
	cl, err := r.clients()
	if err != nil {
		return err
	}
	l := &trainer.ClusterTrainingRuntimeList{}
	if err := cl.List(ctx, l); err != nil {
		return err
	}
	sort.Slice(l.Items, func(i, j int) bool { return l.Items[i].Name < l.Items[j].Name })
	w := tabwriter.NewWriter(r.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tMPI\tLAUNCHER HOSTS RANKS\tIMAGE\tDESCRIPTION")
	n := 0
	for _, rt := range l.Items {
		if !runtimes.IsMPI(&rt.Spec) {
			continue
		}
		n++
		fmt.Fprintf(w, "%s\t%s\t%v\t%s\t%s\n", rt.Name, orDash(rt.Annotations["mpijob.dev/mpi-implementation"]),
			runtimes.LauncherAsNode(&rt.Spec), workerImage(&rt.Spec), orDash(rt.Annotations[api.DescriptionAnnotation]))
	}
	if n == 0 {
		fmt.Fprintln(r.ErrOut, "No MPI runtimes: install them with kubectl apply --server-side -k config/runtimes")
		return nil
	}
	return w.Flush()
}

func workerImage(spec *trainer.TrainingRuntimeSpec) string {
	for _, rj := range spec.Template.Spec.ReplicatedJobs {
		if rj.Name != api.WorkerJob {
			continue
		}
		for _, c := range rj.Template.Spec.Template.Spec.Containers {
			if c.Name == "node" {
				return c.Image
			}
		}
	}
	return "-"
}
