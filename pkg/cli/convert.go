package cli

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/mpijob/mpijob/pkg/legacy"
)

func newConvertCommand(o *Options) *cobra.Command {
	var file, output string
	var apply, quiet bool
	cmd := &cobra.Command{
		Use:   "convert -f legacy-mpijob.yaml [--apply]",
		Short: "Convert a kubeflow.org/v2beta1 MPIJob into a TrainJob (and a runtime when needed)",
		Long: `Convert a legacy MPIJob into a TrainJob on one of mpijob's runtimes. When the
legacy pod templates carry what a TrainJob cannot (Worker images and
resources, volumes, scheduling), a ClusterTrainingRuntime for it comes too.

The manifests go to stdout; the report (every legacy field mapped, changed
or dropped, and why) to stderr. --apply creates them.`,
		Example: `  kubectl mpijob convert -f mpijob.yaml > trainjob.yaml
  kubectl mpijob convert -f mpijob.yaml --apply -n team-a
  cat mpijob.yaml | kubectl mpijob convert -f -`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return usageErr("-f is required: the legacy MPIJob manifest (- for stdin)")
			}
			if output != "yaml" && output != "json" {
				return usageErr("--output %q: use yaml or json", output)
			}
			var data []byte
			var err error
			if file == "-" {
				data, err = io.ReadAll(o.In)
			} else {
				data, err = os.ReadFile(file)
			}
			if err != nil {
				return usageErr("-f %s: %v", file, err)
			}
			res, err := legacy.Convert(data)
			if err != nil {
				return usageErr("-f %s cannot be converted: %v", file, err)
			}
			if !quiet {
				fmt.Fprint(o.ErrOut, res.Report())
			}
			if apply {
				return applyConverted(cmd, o, res)
			}
			if output == "json" {
				b, err := jsonIndent(res)
				if err != nil {
					return err
				}
				_, err = o.Out.Write(b)
				return err
			}
			b, err := res.YAML()
			if err != nil {
				return err
			}
			_, err = o.Out.Write(b)
			return err
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "legacy MPIJob manifest (- for stdin)")
	cmd.Flags().StringVarP(&output, "output", "o", "yaml", "yaml, or json (with the report inside)")
	cmd.Flags().BoolVar(&apply, "apply", false, "create the runtime (if any) and the TrainJob")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no report on stderr")
	return cmd
}

func applyConverted(cmd *cobra.Command, o *Options, res *legacy.Result) error {
	cl, err := o.clients()
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	if res.TrainJob.Namespace == "" || cmd.Flags().Changed("namespace") {
		res.TrainJob.Namespace = cl.namespace
	}
	if res.Runtime != nil {
		if err := cl.Create(ctx, res.Runtime); err != nil {
			return fmt.Errorf("creating runtime %s (cluster-wide: an administrator's job): %w", res.Runtime.Name, err)
		}
		fmt.Fprintf(o.Out, "runtime %s created\n", res.Runtime.Name)
	}
	if err := cl.Create(ctx, res.TrainJob); err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "mpijob %s created in namespace %s\n", res.TrainJob.Name, res.TrainJob.Namespace)
	return nil
}
