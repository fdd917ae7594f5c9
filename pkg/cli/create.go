package cli

import (
	"fmt"
	"os"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/mpijob/mpijob/pkg/runtimes"
)

type createOptions struct {
	*Options
	jobFlags
	file   string
	dryRun string
	output string
}

func newCreateCommand(o *Options) *cobra.Command {
	c := &createOptions{Options: o}
	cmd := &cobra.Command{
		Use:   "create NAME --workers N [flags] -- COMMAND [ARGS...] | create -f job.yaml",
		Short: "Create an MPI job",
		Long: `Create an MPI job: a Launcher that runs COMMAND (default: the runtime's) and
N Workers that host the ranks, with --slots-per-worker ranks each.`,
		Example: `  # 2 Workers, 2 slots each, the runtime's test program
  kubectl mpijob create hello --workers 2 --slots-per-worker 2

  # 4 GPU Workers with 8 GPUs each, through the Kueue queue "default"
  kubectl mpijob create train --runtime mpi-openmpi-gpu --workers 4 --gpus 8 --queue default \
    --image registry.example.com/train:1 -- mpirun python3 train.py

  # from a manifest
  kubectl mpijob create -f job.yaml`,
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.run(cmd, args)
		},
	}
	c.add(cmd.Flags(), true)
	cmd.Flags().StringVarP(&c.file, "filename", "f", "", "TrainJob manifest to create")
	cmd.Flags().StringVar(&c.dryRun, "dry-run", "none", `"client" prints the job, "server" has the cluster check it (admission included) without creating it`)
	cmd.Flags().Lookup("dry-run").NoOptDefVal = "client"
	cmd.Flags().StringVarP(&c.output, "output", "o", "", "print the created job as yaml or json")
	_ = cmd.RegisterFlagCompletionFunc("runtime", o.completeRuntimes)
	return cmd
}

func (c *createOptions) run(cmd *cobra.Command, args []string) error {
	if c.dryRun != "none" && c.dryRun != "client" && c.dryRun != "server" {
		return usageErr("--dry-run %q: use client or server", c.dryRun)
	}
	if c.output != "" && c.output != "yaml" && c.output != "json" {
		return usageErr("--output %q: use yaml or json", c.output)
	}
	cl, err := c.clients()
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	var tj *trainer.TrainJob
	if c.file != "" {
		if len(args) > 0 || anyChanged(cmd, jobFlagNames...) {
			return usageErr("-f takes the whole job from the file: give no NAME, COMMAND or job flags with it")
		}
		tj, err = readJobFile(c.file)
		if err != nil {
			return err
		}
		if tj.Namespace == "" || c.Config.Namespace != nil && *c.Config.Namespace != "" {
			tj.Namespace = cl.namespace
		}
	} else {
		if len(args) == 0 || cmd.ArgsLenAtDash() == 0 {
			return usageErr("give the job a NAME: kubectl mpijob create NAME --workers N [-- COMMAND ARGS...]")
		}
		name := args[0]
		if dash := cmd.ArgsLenAtDash(); dash > 1 || dash < 0 && len(args) > 1 {
			return usageErr("unexpected arguments %q: put the command after --, e.g. create %s --workers 2 -- mpirun python3 train.py", args[1:], name)
		}
		if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
			return usageErr("NAME %q is not a valid job name: %s", name, errs[0])
		}
		if !cmd.Flags().Changed("workers") {
			return usageErr("--workers is required: how many Workers host the ranks, e.g. --workers 2")
		}
		spec, _, err := cl.runtimeSpec(ctx, cl.namespace, c.runtime, trainer.ClusterTrainingRuntimeKind)
		if err != nil {
			return err
		}
		if !runtimes.IsMPI(spec) {
			return usageErr("--runtime %s is not an MPI runtime (it has no MPI policy): see kubectl mpijob runtimes list", c.runtime)
		}
		tj = &trainer.TrainJob{}
		tj.Name, tj.Namespace = name, cl.namespace
		tj.Spec.RuntimeRef = trainer.RuntimeRef{Name: c.runtime, APIGroup: ptr.To(trainer.GroupVersion.Group), Kind: ptr.To(trainer.ClusterTrainingRuntimeKind)}
		if err := c.apply(tj, spec, c.runtime, cmd.Flags().Changed); err != nil {
			return err
		}
		if dash := cmd.ArgsLenAtDash(); dash >= 0 && len(args) > dash {
			tj.Spec.Trainer.Command = args[dash:]
		}
	}
	tj.APIVersion, tj.Kind = trainer.GroupVersion.String(), trainer.TrainJobKind
	if c.dryRun == "client" {
		return c.print(tj, "yaml")
	}
	var opts []client.CreateOption
	if c.dryRun == "server" {
		opts = append(opts, client.DryRunAll)
	}
	if err := cl.Create(ctx, tj, opts...); err != nil {
		return err
	}
	if c.output != "" {
		return c.print(tj, c.output)
	}
	suffix := ""
	if c.dryRun == "server" {
		suffix = " (server dry run: checked, not created)"
	}
	fmt.Fprintf(c.Out, "mpijob %s created in namespace %s%s\n", tj.Name, tj.Namespace, suffix)
	if c.dryRun != "server" {
		fmt.Fprintf(c.Out, "Follow it: kubectl mpijob wait %s -n %s --for=Running && kubectl mpijob logs %s -n %s --all\n", tj.Name, tj.Namespace, tj.Name, tj.Namespace)
	}
	return nil
}

func (c *createOptions) print(tj *trainer.TrainJob, format string) error {
	tj.ManagedFields = nil
	var b []byte
	var err error
	if format == "json" {
		b, err = jsonIndent(tj)
	} else {
		b, err = yaml.Marshal(tj)
	}
	if err != nil {
		return err
	}
	_, err = c.Out.Write(b)
	return err
}

func readJobFile(path string) (*trainer.TrainJob, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, usageErr("-f %s: %v", path, err)
	}
	tj := &trainer.TrainJob{}
	if err := yaml.UnmarshalStrict(b, tj); err != nil {
		return nil, usageErr("-f %s is not a valid TrainJob: %v", path, err)
	}
	if tj.Kind != trainer.TrainJobKind {
		return nil, usageErr("-f %s: kind is %q, want TrainJob (convert a legacy MPIJob with kubectl mpijob convert -f)", path, tj.Kind)
	}
	if tj.Name == "" {
		return nil, usageErr("-f %s: metadata.name is empty", path)
	}
	return tj, nil
}

var jobFlagNames = []string{"workers", "slots-per-worker", "runtime", "image", "gpus", "cpu", "memory", "launcher-cpu", "launcher-memory", "env", "node-selector", "queue"}

func anyChanged(cmd *cobra.Command, names ...string) bool {
	for _, n := range names {
		if cmd.Flags().Changed(n) {
			return true
		}
	}
	return false
}
