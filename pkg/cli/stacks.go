package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/mpijob/mpijob/pkg/jobpods"
	"github.com/mpijob/mpijob/pkg/stacks"
)

// stacksOptions is `kubectl mpijob stacks`.
type stacksOptions struct {
	*Options
	name   string
	output string
}

func newStacksCommand(o *Options) *cobra.Command {
	s := &stacksOptions{Options: o}
	cmd := &cobra.Command{
		Use:   "stacks NAME",
		Short: "Where each rank of a running job is now: every rank's Python stack, identical ones grouped",
		Long: `Take the Python stack of every rank of a running MPI job, at once, and
group identical ones: the line of code each group is in, the call it makes
there (comm.Allreduce, comm.recv, time.sleep), and who differs from the rest.
A hang in synchronous training is usually one rank somewhere else while all
the others wait in a collective.

It runs a small collector in the job's pods (kubectl mpijob exec's right:
create pods/exec in the namespace), which signals each rank's process to
write its stacks; the process keeps running. mpijob's images have the hook
that answers (Python's faulthandler, registered at start-up for SIGUSR2). It
answers while the rank is inside MPI, NCCL or another C extension, and shows
the Python line that called it; it cannot show frames inside the C code. A
rank that is not Python, or Python without the hook (your own image: copy
/opt/mpijob/python/mpijob_stacks.py and import it), shows its state only.`,
		Example: `  kubectl mpijob stacks train
  kubectl mpijob stacks train -o json`,
		ValidArgsFunction: o.completeJobs,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErr("stacks takes one job NAME (got %d): kubectl mpijob stacks NAME", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			s.name = args[0]
			if err := s.Validate(); err != nil {
				return err
			}
			return s.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVarP(&s.output, "output", "o", "", "json: every rank's stack and the groups")
	return cmd
}

// Validate checks the flags; no API call.
func (s *stacksOptions) Validate() error {
	if s.output != "" && s.output != "json" {
		return usageErr("--output %q: stacks prints text, or json with -o json", s.output)
	}
	return nil
}

// Run takes the stacks and prints the groups.
func (s *stacksOptions) Run(ctx context.Context) error {
	cl, err := s.clients()
	if err != nil {
		return err
	}
	tj, err := cl.job(ctx, s.name)
	if err != nil {
		return err
	}
	st, _ := statusOf(tj)
	if st.Phase.Finished() {
		return &exitError{code: ExitOtherPhase, msg: fmt.Sprintf("job %s is %s: stacks shows where a running job's ranks are (its output: kubectl mpijob logs %s)", tj.Name, st.Phase, tj.Name)}
	}
	jp, err := jobpods.ListLive(ctx, cl, tj)
	if err != nil {
		return err
	}
	pods := stacks.PodsOf(jp)
	if len(pods) == 0 {
		return &exitError{code: ExitOtherPhase, msg: fmt.Sprintf("job %s has no running pod now (phase %s): kubectl mpijob describe %s says why", tj.Name, st.Phase, tj.Name)}
	}
	if cl.cfg == nil {
		return errors.New("stacks needs a cluster connection")
	}
	res, err := stacks.Collect(ctx, cl.cfg, cl.cs, tj.Namespace, pods)
	if err != nil {
		return err
	}
	for _, f := range res.Failed {
		fmt.Fprintf(s.ErrOut, "warning: no stacks from %s\n", f)
	}
	if s.output == "json" {
		enc := json.NewEncoder(s.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	if len(res.Ranks) == 0 {
		return &exitError{code: ExitOtherPhase, msg: fmt.Sprintf("no MPI rank runs in job %s's pods now (phase %s): mpirun starts the ranks once every Worker is ready; kubectl mpijob logs %s shows how far it got", tj.Name, st.Phase, tj.Name)}
	}
	printGroups(s.Out, res)
	return nil
}

// printGroups writes each group: its headline, its frames with their
// lines of code, and where its ranks run; then the contrast.
func printGroups(out io.Writer, res stacks.Result) {
	for i, g := range res.Groups {
		if i > 0 {
			fmt.Fprintln(out)
		}
		fmt.Fprintln(out, g.Headline)
		w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		for _, f := range g.Frames {
			fmt.Fprintf(w, "    %s\t%s\n", f, f.Source)
		}
		_ = w.Flush()
		where := g.Pods
		if len(g.Nodes) > 0 {
			where += " (node " + strings.Join(g.Nodes, ", ") + ")"
		}
		fmt.Fprintf(out, "    %s, on %s\n", g.States, where)
	}
	if res.Contrast != "" {
		fmt.Fprintf(out, "\n%s.\n", capitalize(res.Contrast))
	}
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
