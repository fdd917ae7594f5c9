package cli

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"k8s.io/utils/ptr"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/jobview"
	"github.com/mpijob/mpijob/pkg/runtimes"
)

// runtimesDescribeOptions is `kubectl mpijob runtimes describe`.
type runtimesDescribeOptions struct {
	*Options
	name string
}

func newRuntimesDescribeCommand(o *Options) *cobra.Command {
	r := &runtimesDescribeOptions{Options: o}
	return &cobra.Command{
		Use:               "describe NAME",
		Short:             "Show an MPI runtime: MPI, images, pod shape, policy",
		Args:              exactlyOneName("runtimes describe"),
		ValidArgsFunction: o.completeRuntimes,
		RunE: func(cmd *cobra.Command, args []string) error {
			r.name = args[0]
			return r.Run(cmd.Context())
		},
	}
}

// Run prints the runtime: MPI flavour, images, commands, requests, policy.
func (r *runtimesDescribeOptions) Run(ctx context.Context) error {
	cl, err := r.clients()
	if err != nil {
		return err
	}
	rt, err := cl.baseRuntime(ctx, cl.namespace, r.name)
	if err != nil {
		return err
	}
	spec, ann := &rt.Spec, rt.Annotations
	w := tabwriter.NewWriter(r.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "Name:\t%s\n", r.name)
	fmt.Fprintf(w, "Scope:\t%s\n", runtimeScope(rt))
	fmt.Fprintf(w, "Description:\t%s\n", orDash(ann[api.DescriptionAnnotation]))
	fmt.Fprintf(w, "MPI:\t%s\n", orDash(ann["mpijob.dev/mpi-implementation"]))
	fmt.Fprintf(w, "Launcher hosts ranks:\t%v\n", runtimes.LauncherAsNode(spec))
	fmt.Fprintf(w, "Default slots per worker:\t%d\n", ptr.Deref(spec.MLPolicy.MPI.NumProcPerNode, 1))
	fmt.Fprintf(w, "SSH keys at:\t%s\n", ptr.Deref(spec.MLPolicy.MPI.SSHAuthMountPath, "-"))
	for _, rj := range spec.Template.Spec.ReplicatedJobs {
		role := api.PodRole(rj.Name)
		pod := rj.Template.Spec.Template.Spec
		for _, c := range pod.Containers {
			if c.Name != "node" {
				continue
			}
			fmt.Fprintf(w, "%s image:\t%s\n", role, c.Image)
			fmt.Fprintf(w, "%s command:\t%s\n", role, strings.Join(c.Command, " "))
			fmt.Fprintf(w, "%s requests:\t%s\n", role, describeResources(c.Resources.Requests))
		}
	}
	if pol, errs := runtimes.ParsePolicy(ann); len(errs) > 0 {
		fmt.Fprintf(w, "Policy:\tINVALID: %v\n", errs.ToAggregate())
	} else if lines := jobview.PolicyLines(pol); len(lines) > 0 {
		fmt.Fprintf(w, "Policy:\t%s\n", strings.Join(lines, "; "))
	} else {
		fmt.Fprintf(w, "Policy:\tnone\n")
	}
	return w.Flush()
}
