package cli

import (
	"context"
	"fmt"
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

// Run prints the MPI runtimes a job here may pick: the cluster's, then
// the namespace's own (marked in SCOPE), by name.
func (r *runtimesListOptions) Run(ctx context.Context) error {
	cl, err := r.clients()
	if err != nil {
		return err
	}
	bases, err := runtimes.ListBases(ctx, cl, cl.namespace)
	if err != nil {
		return err
	}
	if len(bases) == 0 {
		fmt.Fprintln(r.ErrOut, "No MPI runtimes: install them with kubectl apply --server-side -k config/runtimes")
		return nil
	}
	w := tabwriter.NewWriter(r.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tSCOPE\tMPI\tLAUNCHER HOSTS RANKS\tIMAGE\tDESCRIPTION")
	for _, rt := range bases {
		fmt.Fprintf(w, "%s\t%s\t%s\t%v\t%s\t%s\n", rt.Name, runtimeScope(rt), orDash(rt.Annotations["mpijob.dev/mpi-implementation"]),
			runtimes.LauncherAsNode(&rt.Spec), orDash(runtimes.WorkerImage(&rt.Spec)), orDash(rt.Annotations[api.DescriptionAnnotation]))
	}
	return w.Flush()
}

// runtimeScope is "cluster" for a ClusterTrainingRuntime and "namespace
// NS" for a namespace's own.
func runtimeScope(rt *trainer.ClusterTrainingRuntime) string {
	if runtimes.IsNamespaced(rt) {
		return "namespace " + rt.Namespace
	}
	return "cluster"
}
