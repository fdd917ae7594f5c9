package cli

import (
	"context"
	"fmt"
	"maps"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/spf13/cobra"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/jobspec"
	"github.com/mpijob/mpijob/pkg/queue"
)

// cloneOptions is `kubectl mpijob clone`.
type cloneOptions struct {
	*Options
	jobFlags
	src, name string
	command   []string
	changed   func(string) bool
}

func newCloneCommand(o *Options) *cobra.Command {
	c := &cloneOptions{Options: o}
	cmd := &cobra.Command{
		Use:   "clone NAME NEW [flags] [-- COMMAND ARGS...]",
		Short: "Submit a copy of an MPI job with changes; the original is untouched",
		Example: `  kubectl mpijob clone hello hello-4 --workers 4
  kubectl mpijob clone train train-lr2 --env LR=0.02 -- mpirun -x LR python3 train.py`,
		ValidArgsFunction: o.completeJobs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := c.Complete(args, cmd.ArgsLenAtDash(), cmd.Flags().Changed); err != nil {
				return err
			}
			return c.Run(cmd.Context())
		},
	}
	c.add(cmd.Flags(), false)
	_ = cmd.RegisterFlagCompletionFunc("runtime", o.completeRuntimes)
	return cmd
}

// Complete takes NAME, NEW and the command after --.
func (c *cloneOptions) Complete(args []string, dash int, changed func(string) bool) error {
	names := args
	if dash >= 0 {
		names = args[:dash]
		c.command = args[dash:]
	}
	if len(names) != 2 {
		return usageErr("clone takes the job NAME and the NEW name: kubectl mpijob clone NAME NEW [flags]")
	}
	c.src, c.name, c.changed = names[0], names[1], changed
	return nil
}

// Run builds the copy from the source's Input with the flags applied and
// creates it.
func (c *cloneOptions) Run(ctx context.Context) error {
	cl, err := c.clients()
	if err != nil {
		return err
	}
	src, err := cl.job(ctx, c.src)
	if err != nil {
		return err
	}
	job, err := cl.cloneJob(ctx, src, c.name, &c.jobFlags, c.changed)
	if err != nil {
		return err
	}
	c.printWarnings(c.ErrOut)
	if len(c.command) > 0 {
		job.TrainJob.Spec.Trainer.Command = c.command
	}
	if err := cl.createJob(ctx, job, false); err != nil {
		return err
	}
	tj := job.TrainJob
	fmt.Fprintf(c.Out, "mpijob %s created in namespace %s (a clone of %s)\n", tj.Name, tj.Namespace, src.Name)
	return nil
}

// cloneJob builds a copy of src named name, with the flags' changes: the
// source's Input (from its TrainJob and per-job runtime) with the flags
// applied, built again. Runtime patches the builder does not write
// (volumes, tolerations) and other labels and annotations are kept.
func (c *clients) cloneJob(ctx context.Context, src *trainer.TrainJob, name string, f *jobFlags, changed func(string) bool) (*jobspec.Job, error) {
	baseName := api.RuntimeOf(src.Labels, src.Spec.RuntimeRef.Name)
	baseKind := src.Labels[api.BaseRuntimeKindLabel]
	var rt *trainer.TrainingRuntime
	if ptr.Deref(src.Spec.RuntimeRef.Kind, "") == trainer.TrainingRuntimeKind {
		rt = &trainer.TrainingRuntime{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: src.Namespace, Name: src.Spec.RuntimeRef.Name}, rt); err != nil {
			return nil, err
		}
		if !jobspec.IsDerived(rt.Labels) {
			// On the namespace's own runtime itself: that is the base.
			rt, baseKind = nil, trainer.TrainingRuntimeKind
		}
	}
	base, err := c.baseRuntimeOfKind(ctx, src.Namespace, baseName, baseKind)
	if err != nil {
		return nil, err
	}
	in, kept := jobspec.InputOf(src, rt, base)
	in.Name = name
	if err := f.input(&in, changed); err != nil {
		return nil, err
	}
	if in.Runtime != base.Name {
		if base, err = c.baseRuntime(ctx, src.Namespace, in.Runtime); err != nil {
			return nil, err
		}
	}
	job, err := jobspec.Build(in, base)
	if err != nil {
		return nil, buildErr(err)
	}
	tj := job.TrainJob
	for k, v := range src.Labels {
		if _, set := tj.Labels[k]; !set && k != api.BaseRuntimeLabel && k != api.BaseRuntimeKindLabel && k != queue.NameLabel && k != queue.PriorityLabel {
			if tj.Labels == nil {
				tj.Labels = map[string]string{}
			}
			tj.Labels[k] = v
		}
	}
	built := tj.Annotations // the description, as the flags left it
	tj.Annotations = maps.Clone(src.Annotations)
	for _, k := range []string{api.StatusAnnotation, api.CreatorAnnotation, api.DescriptionAnnotation, "kubectl.kubernetes.io/last-applied-configuration"} {
		delete(tj.Annotations, k)
	}
	for k, v := range built {
		if tj.Annotations == nil {
			tj.Annotations = map[string]string{}
		}
		tj.Annotations[k] = v
	}
	if len(tj.Annotations) == 0 {
		tj.Annotations = nil
	}
	tj.Spec.RuntimePatches = append(tj.Spec.RuntimePatches, kept...)
	// What the builder does not know is kept as the source had it.
	if st := src.Spec.Trainer; st != nil {
		tj.Spec.Trainer.Args = st.Args
	}
	tj.Spec.Initializer = src.Spec.Initializer
	tj.Spec.ManagedBy = src.Spec.ManagedBy
	return job, nil
}
