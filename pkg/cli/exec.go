package cli

import (
	"context"
	"errors"
	"fmt"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	kscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/exec"
	kexec "k8s.io/kubectl/pkg/cmd/exec"
	"k8s.io/utils/ptr"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/jobpods"
)

// target is the pod of a job a verb reaches: the Launcher, a Worker by
// index, or the Worker that hosts a rank.
type target struct {
	launcher bool
	worker   int // -1: not asked
	rank     int // -1: not asked
}

// flags adds --launcher, --worker and --rank to a verb.
func (t *target) flags(cmd *cobra.Command, verb string) {
	cmd.Flags().BoolVar(&t.launcher, "launcher", false, verb+" the Launcher (the default)")
	cmd.Flags().IntVar(&t.worker, "worker", -1, verb+" Worker N (its index, from 0)")
	cmd.Flags().IntVar(&t.rank, "rank", -1, verb+" the Worker that hosts MPI rank N (mpirun's default placement: ranks fill each Worker's slots in order)")
}

// validate checks that one target at most is asked for; no API call.
func (t *target) validate() error {
	n := 0
	for _, set := range []bool{t.launcher, t.worker >= 0, t.rank >= 0} {
		if set {
			n++
		}
	}
	if n > 1 {
		return usageErr("--launcher, --worker and --rank choose the pod: give one of them")
	}
	return nil
}

// workerOfRank is the Worker index that hosts rank on a job with slots
// ranks per Worker and workers Workers (mpirun fills each host's slots of
// the hostfile in order, the Workers by index); an error names the ranks
// the job has.
func workerOfRank(rank int, slots, workers int32) (int, error) {
	if slots < 1 {
		slots = 1
	}
	total := int(slots) * int(workers)
	if rank < 0 || rank >= total {
		return 0, &exitError{code: ExitNotFound, msg: fmt.Sprintf("--rank %d: the job has %d ranks (0 to %d: %d Workers × %d slots)", rank, total, total-1, workers, slots)}
	}
	return rank / int(slots), nil
}

// choose picks the pod of t among a job's Launcher and Workers (Workers
// by their completion index), and says which it is.
func (t *target) choose(tj *trainer.TrainJob, launcher, workers []corev1.Pod) (*corev1.Pod, string, error) {
	st, _ := statusOf(tj)
	slots, total := st.SlotsPerWorker, st.WorkersTotal
	if tr := tj.Spec.Trainer; tr != nil {
		if slots == 0 {
			slots = ptr.Deref(tr.NumProcPerNode, 0)
		}
		if total == 0 {
			total = ptr.Deref(tr.NumNodes, 0)
		}
	}
	index, what := t.worker, ""
	switch {
	case t.rank >= 0:
		w, err := workerOfRank(t.rank, slots, total)
		if err != nil {
			return nil, "", err
		}
		index, what = w, fmt.Sprintf("rank %d runs on Worker %d", t.rank, w)
	case t.worker >= 0:
		if int32(t.worker) >= total && total > 0 {
			return nil, "", &exitError{code: ExitNotFound, msg: fmt.Sprintf("--worker %d: job %s has %d Workers (0 to %d)", t.worker, tj.Name, total, total-1)}
		}
		what = fmt.Sprintf("Worker %d", t.worker)
	default:
		if pod := (jobpods.Pods{Launchers: launcher}).Running(jobpods.RoleLauncher, -1); pod != nil {
			return pod, "the Launcher", nil
		}
		return nil, "", &exitError{code: ExitNotFound, msg: fmt.Sprintf("job %s has no running Launcher (phase %s): kubectl mpijob describe %s", tj.Name, st.Phase, tj.Name)}
	}
	if pod := (jobpods.Pods{Launchers: launcher, Workers: workers}).Running(jobpods.RoleWorker, index); pod != nil {
		return pod, what, nil
	}
	return nil, "", &exitError{code: ExitNotFound, msg: fmt.Sprintf("%s of job %s, which has no running pod now (phase %s): kubectl mpijob describe %s", what, tj.Name, st.Phase, tj.Name)}
}

// find reads job name and its pods as the user and picks t's pod: the
// lookup exec and port-forward share.
func (t *target) find(ctx context.Context, o *Options, name string) (*clients, *corev1.Pod, string, error) {
	cl, err := o.clients()
	if err != nil {
		return nil, nil, "", err
	}
	tj, err := cl.job(ctx, name)
	if err != nil {
		return nil, nil, "", err
	}
	launcher, workers, err := cl.pods(ctx, tj)
	if err != nil {
		return nil, nil, "", err
	}
	pod, what, err := t.choose(tj, launcher, workers)
	return cl, pod, what, err
}

// execOptions is `kubectl mpijob exec`: a command in the Launcher's or a
// Worker's "node" container, as kubectl exec runs it (its library, so -i
// and -t behave the same).
type execOptions struct {
	*Options
	target
	name       string
	command    []string
	stdin, tty bool
	quiet      bool
}

func newExecCommand(o *Options) *cobra.Command {
	e := &execOptions{Options: o}
	cmd := &cobra.Command{
		Use:   "exec NAME [--launcher | --worker N | --rank N] [-i] [-t] -- COMMAND [ARG...]",
		Short: "Run a command in a job's Launcher, one of its Workers, or the Worker that hosts a rank",
		Long: `Run a command in a running MPI job's pod, in its "node" container (where
mpirun or the ranks run): the Launcher by default, Worker N with --worker,
or with --rank the Worker that hosts that rank (mpirun's default placement,
the one the rank tags of logs --rank follow: ranks fill each Worker's slots
in order, so with 4 slots ranks 0-3 are on Worker 0, 4-7 on Worker 1).
-i passes your input, -t gives a terminal: -it runs a shell.

It takes what kubectl exec takes: the right to create pods/exec in the
job's namespace. The pods run as the job's user with the restricted pod
security the jobs have; what they lack (no root, no added capabilities)
exec lacks too.`,
		Example: `  kubectl mpijob exec hello -- ps aux
  kubectl mpijob exec hello --rank 5 -- cat /proc/loadavg
  kubectl mpijob exec hello --worker 1 -it -- bash`,
		ValidArgsFunction: o.completeJobs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := e.Complete(cmd, args); err != nil {
				return err
			}
			if err := e.Validate(); err != nil {
				return err
			}
			return e.Run(cmd.Context())
		},
	}
	e.flags(cmd, "run in")
	cmd.Flags().BoolVarP(&e.stdin, "stdin", "i", false, "pass stdin to the command")
	cmd.Flags().BoolVarP(&e.tty, "tty", "t", false, "give the command a terminal (with -i: a shell)")
	cmd.Flags().BoolVarP(&e.quiet, "quiet", "q", false, "say nothing of which pod the command runs in")
	return cmd
}

// Complete takes the job's name and the command after --.
func (e *execOptions) Complete(cmd *cobra.Command, args []string) error {
	dash := cmd.ArgsLenAtDash()
	if dash < 0 {
		if len(args) > 1 {
			return usageErr("exec NAME -- COMMAND: put -- before the command (%q)", args[1])
		}
		dash = len(args)
	}
	if dash > 0 {
		e.name = args[0]
	}
	if dash > 1 {
		return usageErr("exec takes one job NAME before -- (got %d): kubectl mpijob exec NAME -- COMMAND", dash)
	}
	e.command = args[dash:]
	return nil
}

// Validate checks the arguments; no API call.
func (e *execOptions) Validate() error {
	if e.name == "" {
		return usageErr("exec takes a job NAME: kubectl mpijob exec NAME -- COMMAND")
	}
	if len(e.command) == 0 {
		return usageErr("exec needs a COMMAND after --: kubectl mpijob exec %s -- ps aux", e.name)
	}
	return e.validate()
}

// Run finds the pod and runs the command there; the command's exit code
// is exec's.
func (e *execOptions) Run(ctx context.Context) error {
	cl, pod, what, err := e.find(ctx, e.Options, e.name)
	if err != nil {
		return err
	}
	if !e.quiet {
		fmt.Fprintf(e.ErrOut, "%s: pod %s, container %s\n", what, pod.Name, api.NodeContainer)
	}
	if cl.cfg == nil {
		return errors.New("exec needs a cluster connection")
	}
	// kubectl's exec makes a REST client of the config: the core group's.
	cfg := rest.CopyConfig(cl.cfg)
	cfg.GroupVersion, cfg.APIPath = &corev1.SchemeGroupVersion, "/api"
	cfg.NegotiatedSerializer = kscheme.Codecs.WithoutConversion()
	opts := &kexec.ExecOptions{
		StreamOptions: kexec.StreamOptions{
			Namespace: pod.Namespace, PodName: pod.Name, ContainerName: api.NodeContainer,
			Stdin: e.stdin, TTY: e.tty, Quiet: e.quiet, IOStreams: e.IOStreams,
		},
		Command:   e.command,
		Executor:  &kexec.DefaultRemoteExecutor{},
		PodClient: cl.cs.CoreV1(),
		Config:    cfg,
	}
	err = opts.Run()
	var code exec.CodeExitError
	if errors.As(err, &code) {
		return &exitError{code: code.Code, msg: ""}
	}
	return err
}
