package cli

import (
	"context"
	"errors"
	"fmt"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/spf13/cobra"

	"github.com/mpijob/mpijob/pkg/queue"
)

// suspendOptions is `kubectl mpijob suspend` and `resume`: Complete reads
// the arguments, Validate checks them without the cluster, Run suspends
// or resumes each job the way that holds (queue.SetSuspended: through its
// Kueue Workload when Kueue manages it).
type suspendOptions struct {
	*Options
	suspend bool
	names   []string
}

func newSuspendCommand(o *Options) *cobra.Command {
	return suspendCommand(o, true, "suspend NAME...", "Suspend MPI jobs: their pods stop, and they keep their place until resumed",
		`  kubectl mpijob suspend hello
  kubectl mpijob suspend a b   # a job Kueue manages is suspended through its Workload (spec.active)`)
}

func newResumeCommand(o *Options) *cobra.Command {
	return suspendCommand(o, false, "resume NAME...", "Resume suspended MPI jobs (a job Kueue manages queues again for admission)",
		`  kubectl mpijob resume hello`)
}

func suspendCommand(o *Options, suspend bool, use, short, example string) *cobra.Command {
	s := &suspendOptions{Options: o, suspend: suspend}
	return &cobra.Command{
		Use: use, Short: short, Example: example,
		Long: short + `.

A job that Kueue manages (it has a LocalQueue) is suspended and resumed
through its Kueue Workload's spec.active, as the dashboard does: Kueue sets
a job's spec.suspend back within seconds, and its program would start over.
Any other job is suspended through its spec.suspend. A suspended job's
pods stop (its program starts from the beginning, or from its own
checkpoint, when resumed).`,
		ValidArgsFunction: o.completeJobs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := s.Complete(args); err != nil {
				return err
			}
			if err := s.Validate(); err != nil {
				return err
			}
			return s.Run(cmd.Context())
		},
	}
}

// Complete takes the job names.
func (s *suspendOptions) Complete(args []string) error {
	s.names = args
	return nil
}

// Validate checks the arguments; no API call.
func (s *suspendOptions) Validate() error {
	if len(s.names) == 0 {
		verb := "resume"
		if s.suspend {
			verb = "suspend"
		}
		return usageErr("%s takes one or more job NAMEs", verb)
	}
	return nil
}

// Run finds every job first (nothing changes when one name is wrong), then
// suspends or resumes each.
func (s *suspendOptions) Run(ctx context.Context) error {
	cl, err := s.clients()
	if err != nil {
		return err
	}
	jobs := make([]*trainer.TrainJob, 0, len(s.names))
	for _, n := range s.names {
		tj, err := cl.job(ctx, n)
		if err != nil {
			return err
		}
		jobs = append(jobs, tj)
	}
	for _, tj := range jobs {
		how, err := queue.SetSuspended(ctx, cl, tj, s.suspend)
		if errors.Is(err, queue.ErrNoWorkload) {
			return &exitError{code: ExitError, msg: fmt.Sprintf("mpijob %s: %v", tj.Name, err)}
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(s.Out, "mpijob %s %s\n", tj.Name, how.Describe(s.suspend))
	}
	return nil
}
