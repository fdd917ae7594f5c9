package cli

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/mpijob/mpijob/pkg/jobpods"
	"github.com/mpijob/mpijob/pkg/runtimetest"
)

// runtimesTestOptions is `kubectl mpijob runtimes test`.
type runtimesTestOptions struct {
	*Options
	name    string
	timeout time.Duration
	keep    bool
}

func newRuntimesTestCommand(o *Options) *cobra.Command {
	r := &runtimesTestOptions{Options: o}
	cmd := &cobra.Command{
		Use:   "test NAME",
		Short: "Run a 1 Launcher + 2 Worker job on a runtime and check image pull, SSH keys, MPI spawn and rank placement",
		Long: `Run the runtime's own test program with 2 Workers and report four checks:
image pull (every pod got its image), SSH key mount (every Worker's sshd,
which reads the job's key, is Ready), MPI spawn (the Launcher's mpirun
exited 0) and rank placement (every rank printed "rank R of N on HOST" from
a Worker, one per slot, none from the Launcher; SKIP when the runtime's
program prints no such line). The test job is deleted after.`,
		Args:              exactlyOneName("runtimes test"),
		ValidArgsFunction: o.completeRuntimes,
		RunE: func(cmd *cobra.Command, args []string) error {
			r.Complete(args)
			if err := r.Validate(); err != nil {
				return err
			}
			return r.Run(cmd.Context())
		},
	}
	cmd.Flags().DurationVar(&r.timeout, "timeout", 5*time.Minute, "give up after this long")
	cmd.Flags().BoolVar(&r.keep, "keep", false, "keep the test job for inspection")
	return cmd
}

// Complete takes the runtime's name.
func (r *runtimesTestOptions) Complete(args []string) { r.name = args[0] }

// Validate checks the flags; no API call.
func (r *runtimesTestOptions) Validate() error {
	if r.timeout <= 0 {
		return usageErr("--timeout %s: use a positive duration, e.g. 5m", r.timeout)
	}
	return nil
}

// Run runs the test job and reports the checks.
func (r *runtimesTestOptions) Run(ctx context.Context) error {
	cl, err := r.clients()
	if err != nil {
		return err
	}
	return runtimeTest(ctx, r.Options, cl, r.name, r.timeout, r.keep)
}

func runtimeTest(ctx context.Context, o *Options, cl *clients, name string, timeout time.Duration, keep bool) error {
	rt, err := cl.baseRuntime(ctx, cl.namespace, name)
	if err != nil {
		return err
	}
	started := false
	p, err := runtimetest.Run(ctx, cl, cl.namespace, rt, runtimetest.Options{Timeout: timeout, Keep: keep, Log: jobpods.Reader{CS: cl.cs}.Log, Progress: func(p runtimetest.Progress) {
		if !started {
			started = true
			fmt.Fprintf(o.ErrOut, "testing runtime %s with job %s/%s (1 Launcher + 2 Workers)...\n", name, p.Namespace, p.Job)
		}
	}})
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(o.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "CHECK\tRESULT\tDETAIL")
	for _, c := range p.Checks {
		fmt.Fprintf(w, "%s\t%s\t%s\n", c.Name, c.Result, c.Detail)
	}
	_ = w.Flush()
	if p.Failed() {
		return &exitError{code: ExitOtherPhase, msg: fmt.Sprintf("runtime %s failed its test (job %s is %s): kubectl mpijob describe %s", name, p.Job, p.Phase, p.Job)}
	}
	return nil
}
