// Package cli is kubectl-mpijob: one file per verb, the standard kubectl
// flags through cli-runtime, and errors written for people. It reads the
// Status mpijob-manager writes and computes none of its own; without the
// manager it shows what Trainer's conditions say.
package cli

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/mpijob/mpijob/pkg/api"
)

// Exit codes, documented in docs/cli.md.
const (
	ExitOK        = 0
	ExitError     = 1
	ExitUsage     = 2
	ExitNotFound  = 3
	ExitForbidden = 4
	ExitDenied    = 5
	// ExitOtherPhase: wait saw the job finish in a phase it did not wait for.
	ExitOtherPhase = 6
	ExitTimeout    = 7
)

// exitError carries an exit code with a message for people.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func usageErr(format string, args ...any) error {
	return &exitError{code: ExitUsage, msg: fmt.Sprintf(format, args...)}
}

// Main runs the CLI and returns its exit code.
func Main(args []string, streams genericiooptions.IOStreams) int {
	return MainContext(context.Background(), args, streams)
}

// MainContext is Main, stopped when ctx ends (get -w, logs -f, wait).
func MainContext(ctx context.Context, args []string, streams genericiooptions.IOStreams) int {
	root := NewRootCommand(streams)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return ExitOK
	}
	if err == nil {
		return ExitOK
	}
	code, msg := explain(err, root)
	if msg != "" {
		// A remote command's own exit code (exec) comes without words.
		fmt.Fprintln(api.CleanWriter(streams.ErrOut), "error: "+msg)
	}
	return code
}

// Options are what every verb shares.
type Options struct {
	genericiooptions.IOStreams
	Config *genericclioptions.ConfigFlags
	// ClientsFunc, when set, makes the API clients instead of the
	// kubeconfig: the seam through which verbs are unit-tested with fake
	// clients (see fakeOptions in the tests).
	ClientsFunc func() (*clients, error)
}

// NewRootCommand builds the command tree.
func NewRootCommand(streams genericiooptions.IOStreams) *cobra.Command {
	return newRoot(&Options{IOStreams: streams, Config: genericclioptions.NewConfigFlags(true)})
}

// newRoot builds the command tree over o (the tests' seam: o may hold fake
// clients).
func newRoot(o *Options) *cobra.Command {
	// Everything printed passes through CleanText: Events, env values,
	// statuses and logs come from the cluster, where a tenant may have put
	// escape sequences that recolour the terminal or hide a line.
	o.Out, o.ErrOut = api.CleanWriter(o.Out), api.CleanWriter(o.ErrOut)
	root := &cobra.Command{
		Use: "kubectl-mpijob",
		// kubectl runs the plugin: help and usage say "kubectl mpijob".
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl mpijob"},
		Short:       "Run, watch and debug MPI jobs on Kubeflow Trainer V2",
		Long: `kubectl mpijob manages MPI jobs: TrainJobs whose runtime has an MPI policy.
A job has one Launcher (runs mpirun) and Workers (host the ranks, with a
number of slots per worker). Its phase, reason and next step come from
mpijob-manager.

Use it as "kubectl mpijob", "oc mpijob" or on its own.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.CompletionOptions.HiddenDefaultCmd = false
	// Bad flags (a value of the wrong type, an unknown flag) are usage
	// errors: exit 2, as kubectl does.
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageErr("%v\nSee '%s --help'.", err, c.CommandPath())
	})
	o.Config.AddFlags(root.PersistentFlags())
	_ = root.RegisterFlagCompletionFunc("namespace", o.completeNamespaces)
	_ = root.RegisterFlagCompletionFunc("context", o.completeContexts)
	root.AddCommand(
		newCreateCommand(o),
		newGetCommand(o),
		newDescribeCommand(o),
		newLogsCommand(o),
		newWaitCommand(o),
		newDeleteCommand(o),
		newSuspendCommand(o),
		newExecCommand(o),
		newPortForwardCommand(o),
		newResumeCommand(o),
		newCloneCommand(o),
		newConvertCommand(o),
		newRuntimesCommand(o),
		newEventsCommand(o),
		newArtifactsCommand(o),
		newRegisterCommand(o),
		newDocsCommand(o),
		newVersionCommand(o),
		newDoctorCommand(o),
		newUsageCommand(o),
		newTopCommand(o),
		newStacksCommand(o),
	)
	return root
}

// explain turns an error into an exit code and a sentence for people.
func explain(err error, root *cobra.Command) (int, string) {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code, ee.msg
	}
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		st := se.Status()
		switch {
		case len(api.QuotaCauses(st)) > 0:
			// mpijob's quota denial: structured causes with the numbers.
			return ExitDenied, "the cluster refused the job: " + st.Message
		case apierrors.IsInvalid(err):
			return ExitDenied, "the cluster refused the job: " + st.Message
		case strings.Contains(st.Message, api.ManagerRunningPolicy):
			// The API server's own policy: no mpijob-manager replica is
			// ready. Its sentence says what to do.
			said := st.Message
			if _, after, ok := strings.Cut(said, "denied request: "); ok {
				said = after
			}
			return ExitError, "mpijob admission is unavailable: " + said
		case strings.Contains(st.Message, "failed calling webhook") && strings.Contains(st.Message, ".mpijob.dev"):
			// mpijob's webhooks are down: nothing is admitted unchecked.
			return ExitError, "mpijob admission is unavailable, so no MPI job can be created or changed now (jobs already running are not affected): " +
				"try again in a minute; if it lasts, ask an administrator to check mpijob-manager (kubectl -n mpijob-system get pods). The API server said: " + st.Message
		case strings.Contains(st.Message, "admission webhook"):
			// Other webhooks' denials (Trainer's, Kueue's, a policy engine's)
			// carry no structure of their own: shown as they wrote them.
			return ExitDenied, "the cluster refused the job: " + st.Message
		case apierrors.IsForbidden(err):
			// RBAC: the API server's message names the user, verb and
			// namespace; what wrapped it says what it was for.
			if msg := err.Error(); msg != st.Message {
				return ExitForbidden, "permission denied: " + msg
			}
			return ExitForbidden, "permission denied: " + st.Message
		case apierrors.IsNotFound(err):
			return ExitNotFound, st.Message
		case apierrors.IsAlreadyExists(err):
			return ExitUsage, st.Message + " (pick another name, or `kubectl mpijob delete` it first)"
		}
	}
	if m := noContext.FindStringSubmatch(err.Error()); m != nil {
		return ExitUsage, fmt.Sprintf("--context %s: no such context in the kubeconfig; `kubectl config get-contexts` lists them", m[1])
	}
	if meta.IsNoMatchError(err) {
		return ExitError, "the cluster has no TrainJob API (trainer.kubeflow.org/v1alpha1): install Kubeflow Trainer V2 first"
	}
	if strings.Contains(err.Error(), "unknown flag") || strings.Contains(err.Error(), "unknown command") || strings.Contains(err.Error(), "accepts ") {
		return ExitUsage, err.Error() + "\nSee '" + root.Name() + " --help'."
	}
	return ExitError, err.Error()
}

// noContext is client-go's error for a --context the kubeconfig lacks.
var noContext = regexp.MustCompile(`context "([^"]*)" does not exist`)

// Version is the plugin's version, set at build time with
// -ldflags "-X github.com/mpijob/mpijob/pkg/cli.Version=v0.1.0".
var Version = "dev"

func newVersionCommand(o *Options) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the plugin's version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := Version
			if bi, ok := debug.ReadBuildInfo(); ok && v == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
				v = bi.Main.Version
			}
			fmt.Fprintf(o.Out, "kubectl-mpijob %s (%s, %s/%s)\n", v, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		},
	}
}
