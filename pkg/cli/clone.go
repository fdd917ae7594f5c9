package cli

import (
	"fmt"
	"maps"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/mpijob/mpijob/pkg/api"
)

func newCloneCommand(o *Options) *cobra.Command {
	f := &jobFlags{}
	cmd := &cobra.Command{
		Use:   "clone NAME NEW [flags] [-- COMMAND ARGS...]",
		Short: "Submit a copy of an MPI job with changes; the original is untouched",
		Example: `  kubectl mpijob clone hello hello-4 --workers 4
  kubectl mpijob clone train train-lr2 --env LR=0.02 -- mpirun -x LR python3 train.py`,
		ValidArgsFunction: o.completeJobs,
		RunE: func(cmd *cobra.Command, args []string) error {
			dash := cmd.ArgsLenAtDash()
			names := args
			if dash >= 0 {
				names = args[:dash]
			}
			if len(names) != 2 {
				return usageErr("clone takes the job NAME and the NEW name: kubectl mpijob clone NAME NEW [flags]")
			}
			if errs := validation.IsDNS1123Label(names[1]); len(errs) > 0 {
				return usageErr("NEW %q is not a valid job name: %s", names[1], errs[0])
			}
			cl, err := o.clients()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			src, err := cl.job(ctx, names[0])
			if err != nil {
				return err
			}
			runtimeName, kind := src.Spec.RuntimeRef.Name, trainer.ClusterTrainingRuntimeKind
			if src.Spec.RuntimeRef.Kind != nil {
				kind = *src.Spec.RuntimeRef.Kind
			}
			if cmd.Flags().Changed("runtime") {
				runtimeName, kind = f.runtime, trainer.ClusterTrainingRuntimeKind
			}
			spec, _, err := cl.runtimeSpec(ctx, src.Namespace, runtimeName, kind)
			if err != nil {
				return err
			}
			tj := Clone(src, names[1])
			tj.Spec.RuntimeRef.Name = runtimeName
			tj.Spec.RuntimeRef.Kind = &kind
			if err := f.apply(tj, spec, runtimeName, cmd.Flags().Changed); err != nil {
				return err
			}
			if dash >= 0 && len(args) > dash {
				tj.Spec.Trainer.Command = args[dash:]
			}
			if err := cl.Create(ctx, tj); err != nil {
				return err
			}
			fmt.Fprintf(o.Out, "mpijob %s created in namespace %s (a clone of %s)\n", tj.Name, tj.Namespace, src.Name)
			return nil
		},
	}
	f.add(cmd.Flags(), false)
	_ = cmd.RegisterFlagCompletionFunc("runtime", o.completeRuntimes)
	return cmd
}

// Clone copies a job's spec, labels and annotations under a new name,
// without what the cluster and mpijob-manager wrote (status, creator,
// suspension by a queue).
func Clone(src *trainer.TrainJob, name string) *trainer.TrainJob {
	tj := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: src.Namespace, Labels: maps.Clone(src.Labels), Annotations: maps.Clone(src.Annotations)},
		Spec:       *src.Spec.DeepCopy(),
	}
	delete(tj.Annotations, api.StatusAnnotation)
	delete(tj.Annotations, api.CreatorAnnotation)
	delete(tj.Annotations, "kubectl.kubernetes.io/last-applied-configuration")
	if len(tj.Annotations) == 0 {
		tj.Annotations = nil
	}
	// Kueue suspends queued jobs; the copy is queued afresh.
	tj.Spec.Suspend = nil
	// Kueue's own runtime patches are re-added when it admits the copy.
	var kept []trainer.RuntimePatch
	for _, p := range tj.Spec.RuntimePatches {
		if p.Manager != "kueue.x-k8s.io/manager" {
			kept = append(kept, p)
		}
	}
	tj.Spec.RuntimePatches = kept
	return tj
}
