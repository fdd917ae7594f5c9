package cli

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/runtimes"
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
		Short: "Run a 1 Launcher + 2 Worker job on a runtime and check image pull, SSH keys and MPI spawn",
		Long: `Run the runtime's own test program with 2 Workers and report three checks:
image pull (every pod got its image), SSH key mount (every Worker's sshd,
which reads the job's key, is Ready) and MPI spawn (the Launcher's mpirun
started ranks on the Workers and exited 0). The test job is deleted after.`,
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

type check struct {
	name, result, detail string
}

func runtimeTest(ctx context.Context, o *Options, cl *clients, name string, timeout time.Duration, keep bool) error {
	spec, _, err := cl.runtimeSpec(ctx, "", name, trainer.ClusterTrainingRuntimeKind)
	if err != nil {
		return err
	}
	if !runtimes.IsMPI(spec) {
		return usageErr("runtime %s is not an MPI runtime", name)
	}
	tj := &trainer.TrainJob{}
	tj.Name, tj.Namespace = "rt-test-"+rand.String(5), cl.namespace
	tj.Spec.RuntimeRef = trainer.RuntimeRef{Name: name, APIGroup: ptr.To(trainer.GroupVersion.Group), Kind: ptr.To(trainer.ClusterTrainingRuntimeKind)}
	nodes := int32(2)
	if runtimes.LauncherAsNode(spec) {
		nodes = 3
	}
	tj.Spec.Trainer = &trainer.Trainer{NumNodes: ptr.To(nodes)}
	if err := cl.Create(ctx, tj); err != nil {
		return err
	}
	fmt.Fprintf(o.ErrOut, "testing runtime %s with job %s/%s (1 Launcher + 2 Workers)...\n", name, tj.Namespace, tj.Name)
	if !keep {
		defer func() {
			_ = cl.Delete(context.Background(), tj, client.PropagationPolicy(metav1.DeletePropagationBackground))
		}()
	}
	var (
		s   api.Status
		obs observed
	)
	_ = wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		cur, err := cl.job(ctx, tj.Name)
		if err != nil {
			return false, err
		}
		s, _ = statusOf(cur)
		// Pods are watched while the job runs: once it finishes, JobSet
		// stops the Workers, so what they showed must be recorded before.
		launcher, workers, err := cl.pods(ctx, tj)
		if err != nil {
			return false, err
		}
		obs.record(launcher, workers)
		return s.Phase.Finished() || obs.pullFailure != "", nil
	})
	checks := []check{obs.imageCheck(), obs.sshCheck(2, s.Phase), spawnCheck(s)}
	w := tabwriter.NewWriter(o.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "CHECK\tRESULT\tDETAIL")
	failed := false
	for _, c := range checks {
		fmt.Fprintf(w, "%s\t%s\t%s\n", c.name, c.result, c.detail)
		failed = failed || c.result == "FAIL"
	}
	_ = w.Flush()
	if failed || !s.Phase.Finished() {
		return &exitError{code: ExitOtherPhase, msg: fmt.Sprintf("runtime %s failed its test (job %s is %s): kubectl mpijob describe %s", name, tj.Name, s.Phase, tj.Name)}
	}
	return nil
}

// observed is what the pods of a runtime test showed at any time while the
// job ran.
type observed struct {
	pods        sets.Set[string] // every pod seen
	started     sets.Set[string] // pods whose containers all started their images
	sshReady    sets.Set[string] // Workers whose sshd passed its readiness probe
	pullFailure string           // the first image pull failure seen
	notStarted  string           // a pod and image not started yet, at the last look
}

func (o *observed) record(launcher, workers []corev1.Pod) {
	if o.pods == nil {
		o.pods, o.started, o.sshReady = sets.New[string](), sets.New[string](), sets.New[string]()
	}
	o.notStarted = ""
	for _, p := range append(launcher, workers...) {
		o.pods.Insert(p.Name)
		all := len(p.Status.ContainerStatuses) > 0
		for _, c := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			if api.PullFailed(c) && o.pullFailure == "" {
				o.pullFailure = fmt.Sprintf("pod %s: %s: %s", p.Name, c.State.Waiting.Reason, c.State.Waiting.Message)
			}
		}
		for _, c := range p.Status.ContainerStatuses {
			if c.ImageID == "" && c.State.Running == nil && c.State.Terminated == nil {
				all = false
				if !o.started.Has(p.Name) {
					o.notStarted = fmt.Sprintf("pod %s never started %s", p.Name, c.Image)
				}
			}
		}
		if all {
			o.started.Insert(p.Name)
		}
	}
	for _, p := range workers {
		for _, c := range p.Status.ContainerStatuses {
			if c.Ready {
				o.sshReady.Insert(p.Name)
			}
		}
	}
}

func (o *observed) imageCheck() check {
	switch {
	case o.pullFailure != "":
		return check{"image pull", "FAIL", o.pullFailure}
	case o.pods.Len() == 0:
		return check{"image pull", "FAIL", "no pod was created"}
	case o.started.Len() < o.pods.Len() && o.notStarted != "":
		return check{"image pull", "FAIL", o.notStarted}
	}
	return check{"image pull", "PASS", fmt.Sprintf("%d pods started their images", o.started.Len())}
}

func (o *observed) sshCheck(want int, phase api.Phase) check {
	n := o.sshReady.Len()
	if n < want && phase == api.PhaseSucceeded {
		// Too quick to be seen Ready between two looks, but mpirun on the
		// Launcher reached every Worker over SSH with the job's key.
		return check{"SSH key mount", "PASS", "the Launcher's mpirun logged in to every Worker with the job's key"}
	}
	if n < want {
		return check{"SSH key mount", "FAIL", fmt.Sprintf("%d of %d Workers' sshd came up with the job's key", n, want)}
	}
	return check{"SSH key mount", "PASS", fmt.Sprintf("%d Workers' sshd accepted connections with the job's key", o.sshReady.Len())}
}

func spawnCheck(s api.Status) check {
	switch s.Phase {
	case api.PhaseSucceeded:
		return check{"MPI spawn", "PASS", "the Launcher's mpirun ran ranks on the Workers and exited 0"}
	case api.PhaseFailed:
		return check{"MPI spawn", "FAIL", strings.TrimSpace(s.Reason + ": " + s.Message)}
	}
	return check{"MPI spawn", "FAIL", fmt.Sprintf("the job is still %s: %s", s.Phase, s.Message)}
}
