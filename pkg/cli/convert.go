package cli

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/mpijob/mpijob/pkg/jobspec"
	"github.com/mpijob/mpijob/pkg/legacy"
)

// convertOptions is `kubectl mpijob convert`.
type convertOptions struct {
	*Options
	file, output   string
	apply, quiet   bool
	namespaceGiven bool
	data           []byte
}

func newConvertCommand(o *Options) *cobra.Command {
	c := &convertOptions{Options: o}
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
			c.namespaceGiven = cmd.Flags().Changed("namespace")
			if err := c.Validate(); err != nil {
				return err
			}
			if err := c.Complete(); err != nil {
				return err
			}
			return c.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVarP(&c.file, "filename", "f", "", "legacy MPIJob manifest (- for stdin)")
	cmd.Flags().StringVarP(&c.output, "output", "o", "yaml", "yaml, or json (with the report inside)")
	cmd.Flags().BoolVar(&c.apply, "apply", false, "create the job's runtime (if any) and the TrainJob in the namespace")
	cmd.Flags().BoolVarP(&c.quiet, "quiet", "q", false, "no report on stderr")
	return cmd
}

// Validate checks the flags; no file read, no API call.
func (c *convertOptions) Validate() error {
	if c.file == "" {
		return usageErr("-f is required: the legacy MPIJob manifest (- for stdin)")
	}
	if c.output != "yaml" && c.output != "json" {
		return usageErr("--output %q: use yaml or json", c.output)
	}
	return nil
}

// Complete reads the manifest.
func (c *convertOptions) Complete() error {
	var err error
	if c.file == "-" {
		c.data, err = io.ReadAll(c.In)
	} else {
		c.data, err = os.ReadFile(c.file)
	}
	if err != nil {
		return usageErr("-f %s: %v", c.file, err)
	}
	return nil
}

// Run converts, then prints or applies.
func (c *convertOptions) Run(ctx context.Context) error {
	res, err := legacy.Convert(c.data)
	if err != nil {
		return usageErr("-f %s cannot be converted: %v", c.file, err)
	}
	if !c.quiet {
		fmt.Fprint(c.ErrOut, res.Report())
	}
	if c.apply {
		return c.applyConverted(ctx, res)
	}
	var b []byte
	if c.output == "json" {
		b, err = jsonIndent(res)
	} else {
		b, err = res.YAML()
	}
	if err != nil {
		return err
	}
	_, err = c.Out.Write(b)
	return err
}

// applyConverted creates the converted job as kubectl mpijob create does:
// its runtime (if any) first, then the TrainJob, which then owns the
// runtime; a refused TrainJob leaves nothing behind.
func (c *convertOptions) applyConverted(ctx context.Context, res *legacy.Result) error {
	cl, err := c.clients()
	if err != nil {
		return err
	}
	if res.TrainJob.Namespace == "" || c.namespaceGiven {
		res.TrainJob.Namespace = cl.namespace
	}
	if err := cl.createJob(ctx, &jobspec.Job{TrainJob: res.TrainJob, Runtime: res.Runtime}, false); err != nil {
		return err
	}
	if res.Runtime != nil {
		fmt.Fprintf(c.Out, "runtime %s (the job's own) created in namespace %s\n", res.Runtime.Name, res.TrainJob.Namespace)
	}
	fmt.Fprintf(c.Out, "mpijob %s created in namespace %s\n", res.TrainJob.Name, res.TrainJob.Namespace)
	return nil
}
