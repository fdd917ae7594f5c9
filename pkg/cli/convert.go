package cli

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/mpijob/mpijob/pkg/jobspec"
	"github.com/mpijob/mpijob/pkg/legacy"
)

func newConvertCommand(o *Options) *cobra.Command {
	var file, output string
	var apply, quiet bool
	cmd := &cobra.Command{
		Use:   "convert -f legacy-mpijob.yaml [--apply]",
		Short: "Convert a kubeflow.org/v2beta1 MPIJob into a TrainJob (and its own runtime when needed)",
		Long: `Convert a legacy MPIJob into a TrainJob on one of mpijob's runtimes.
Images and resources of the legacy Launcher and Workers go into a
TrainingRuntime of the job's own, in its namespace (derived from the
shipped runtime, owned by the job once created); volumes, environment,
node selector, tolerations, affinity and the service account go into the
TrainJob's runtimePatches. Everything is namespaced: a namespace editor
applies it, no cluster administrator is needed.

The manifests go to stdout (the runtime first); the report (every legacy
field mapped, changed or dropped, and why) to stderr. --apply creates them
as kubectl mpijob create does; so do "kubectl apply -n NS -f" and
"kubectl mpijob create -f" with the output.`,
		Example: `  kubectl mpijob convert -f mpijob.yaml > trainjob.yaml
  kubectl apply -n team-a -f trainjob.yaml
  kubectl mpijob convert -f mpijob.yaml --apply -n team-a
  cat mpijob.yaml | kubectl mpijob convert -f - | kubectl mpijob create -f -`,
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
	cmd.Flags().BoolVar(&apply, "apply", false, "create the job's runtime (if any) and the TrainJob in the namespace")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no report on stderr")
	return cmd
}

// applyConverted creates the converted job as kubectl mpijob create does:
// its runtime (if any) first, then the TrainJob, which then owns the
// runtime; a refused TrainJob leaves nothing behind.
func applyConverted(cmd *cobra.Command, o *Options, res *legacy.Result) error {
	cl, err := o.clients()
	if err != nil {
		return err
	}
	if res.TrainJob.Namespace == "" || cmd.Flags().Changed("namespace") {
		res.TrainJob.Namespace = cl.namespace
	}
	if err := cl.createJob(cmd.Context(), &jobspec.Job{TrainJob: res.TrainJob, Runtime: res.Runtime}, false); err != nil {
		return err
	}
	if res.Runtime != nil {
		fmt.Fprintf(o.Out, "runtime %s (the job's own) created in namespace %s\n", res.Runtime.Name, res.TrainJob.Namespace)
	}
	fmt.Fprintf(o.Out, "mpijob %s created in namespace %s\n", res.TrainJob.Name, res.TrainJob.Namespace)
	return nil
}
