package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/mpijob/mpijob/pkg/api"
)

// waitOptions is `kubectl mpijob wait`.
type waitOptions struct {
	*Options
	name     string
	forPhase string
	want     api.Phase
	timeout  time.Duration
}

func newWaitCommand(o *Options) *cobra.Command {
	w := &waitOptions{Options: o}
	cmd := &cobra.Command{
		Use:   "wait NAME --for=PHASE [--timeout D]",
		Short: "Wait until an MPI job reaches a phase; the exit code says how it ended",
		Long: `Wait until the job reaches PHASE (Running, Succeeded, Failed, or any phase).

Exit codes: 0 the job reached PHASE; 6 it finished in another phase (for
example Failed while waiting for Succeeded), or it can never start
(reason CannotStart or PodsRefused); the diagnosis and its next steps are
printed; 7 the timeout passed; 3 no such job.`,
		Example: `  kubectl mpijob wait hello --for=Succeeded --timeout 10m && echo done
  kubectl mpijob wait hello --for=Running`,
		Args:              exactlyOneName("wait"),
		ValidArgsFunction: o.completeJobs,
		RunE: func(cmd *cobra.Command, args []string) error {
			w.Complete(args)
			if err := w.Validate(); err != nil {
				return err
			}
			return w.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&w.forPhase, "for", string(api.PhaseSucceeded), "phase to wait for: Running, Succeeded, Failed, ...")
	cmd.Flags().DurationVar(&w.timeout, "timeout", 30*time.Minute, "give up after this long")
	_ = cmd.RegisterFlagCompletionFunc("for", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		var out []string
		for _, p := range api.Phases {
			out = append(out, string(p))
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	})
	return cmd
}

// Complete takes the job's name.
func (w *waitOptions) Complete(args []string) { w.name = args[0] }

// Validate checks --for and --timeout; no API call.
func (w *waitOptions) Validate() error {
	want, err := api.ParsePhase(w.forPhase)
	if err != nil {
		return usageErr("--for %q: %v", w.forPhase, err)
	}
	w.want = want
	if w.timeout <= 0 {
		return usageErr("--timeout %s: use a positive duration, e.g. 10m", w.timeout)
	}
	return nil
}

// Run waits; its error's exit code says how the job ended.
func (w *waitOptions) Run(ctx context.Context) error {
	cl, err := w.clients()
	if err != nil {
		return err
	}
	return waitFor(ctx, cl, w.Options, w.name, w.want, w.timeout)
}

func waitFor(ctx context.Context, cl *clients, o *Options, name string, want api.Phase, timeout time.Duration) error {
	var last api.Status
	var other error
	warned := false
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		tj, err := cl.job(ctx, name)
		if err != nil {
			var exit *exitError
			if errors.As(err, &exit) || apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
				return false, err
			}
			// A slow or briefly unreachable API server (or the client's
			// rate limiter near the deadline) is not the job's answer:
			// keep waiting; the timeout still ends it.
			return false, nil
		}
		s, fromManager := statusOf(tj)
		if !warned && fromManager {
			warned = true
			if note := cl.managerState(ctx).StaleNote(s.ObservedTime, time.Now()); note != "" {
				fmt.Fprintf(o.ErrOut, "Warning: %s; waiting for it to come back.\n", note)
			}
		}
		if s.Phase != last.Phase {
			fmt.Fprintf(o.ErrOut, "%s: %s\n", name, s.Phase)
		}
		last = s
		if s.Phase == want {
			return true, nil
		}
		// Running is passed on the way to a final phase: a job that has
		// succeeded has run.
		if want == api.PhaseRunning && s.Phase == api.PhaseSucceeded {
			return true, nil
		}
		// A job that can never start never reaches a later phase.
		if neverStarts(s) && want != api.PhasePending && want != api.PhaseQueued && want != api.PhaseGangScheduling {
			other = &exitError{code: ExitOtherPhase, msg: fmt.Sprintf("job %s can never reach %s: %s: %s", name, want, s.Reason, s.Message) + nextStepsText(s)}
			return true, nil
		}
		if s.Phase.Finished() {
			msg := fmt.Sprintf("job %s finished %s, not %s", name, s.Phase, want)
			if s.Reason != "" {
				msg += fmt.Sprintf(": %s: %s", s.Reason, s.Message)
			}
			other = &exitError{code: ExitOtherPhase, msg: msg + nextStepsText(s)}
			return true, nil
		}
		return false, nil
	})
	if other != nil {
		return other
	}
	if errors.Is(err, context.DeadlineExceeded) || wait.Interrupted(err) {
		msg := fmt.Sprintf("job %s did not reach %s within %s; it is %s", name, want, timeout, last.Phase)
		if last.Message != "" {
			msg += ": " + last.Message
		}
		return &exitError{code: ExitTimeout, msg: msg}
	}
	if err == nil {
		fmt.Fprintf(o.Out, "mpijob %s is %s\n", name, last.Phase)
	}
	return err
}

// neverStarts reports the diagnoses after which no wait helps.
func neverStarts(s api.Status) bool {
	return s.Reason == "CannotStart" || s.Reason == "PodsRefused"
}

// nextStepsText prints a status's ranked next steps for an error message.
func nextStepsText(s api.Status) string {
	switch {
	case len(s.NextSteps) > 1:
		msg := "\nNext steps, most likely fix first:"
		for i, step := range s.NextSteps {
			msg += fmt.Sprintf("\n  %d. %s", i+1, step)
		}
		return msg
	case s.NextStep != "":
		return "\nNext step: " + s.NextStep
	}
	return ""
}
