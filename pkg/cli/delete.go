package cli

import (
	"context"
	"fmt"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
)

// deleteOptions is `kubectl mpijob delete`: Complete reads the arguments,
// Validate checks them without the cluster, Run deletes.
type deleteOptions struct {
	*Options
	names   []string
	wait    bool
	timeout time.Duration
	grace   int64
}

func newDeleteCommand(o *Options) *cobra.Command {
	d := &deleteOptions{Options: o}
	cmd := &cobra.Command{
		Use:   "delete NAME...",
		Short: "Delete MPI jobs and wait until their Launcher and Workers are gone",
		Example: `  kubectl mpijob delete hello
  kubectl mpijob delete a b c --wait=false
  kubectl mpijob delete stuck --grace-period 0   # a Launcher that ignores SIGTERM goes at once`,
		ValidArgsFunction: o.completeJobs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := d.Complete(args); err != nil {
				return err
			}
			if err := d.Validate(); err != nil {
				return err
			}
			return d.Run(cmd.Context())
		},
	}
	cmd.Flags().BoolVar(&d.wait, "wait", true, "wait until the job's pods are gone (--wait=false returns at once)")
	cmd.Flags().DurationVar(&d.timeout, "timeout", 2*time.Minute, "how long to wait for the pods to go")
	cmd.Flags().Int64Var(&d.grace, "grace-period", -1, "seconds the Launcher and Workers get to stop after SIGTERM (0: at once; -1: each pod's own, 30 s by default)")
	return cmd
}

// Complete takes the job names.
func (d *deleteOptions) Complete(args []string) error {
	d.names = args
	return nil
}

// Validate checks the arguments and flags; no API call.
func (d *deleteOptions) Validate() error {
	if len(d.names) == 0 {
		return usageErr("delete takes one or more job NAMEs")
	}
	if d.grace < -1 {
		return usageErr("--grace-period %d: use seconds, 0 or more (0: at once), or -1 for each pod's own", d.grace)
	}
	if d.timeout <= 0 {
		return usageErr("--timeout %s: use a positive duration, e.g. 2m", d.timeout)
	}
	return nil
}

// Run deletes every job once all names are found (nothing is deleted when
// one is wrong), shortens the pods' grace period when asked, and waits for
// the pods to go.
func (d *deleteOptions) Run(ctx context.Context) error {
	cl, err := d.clients()
	if err != nil {
		return err
	}
	var jobs []*trainer.TrainJob
	for _, n := range d.names {
		tj, err := cl.job(ctx, n)
		if err != nil {
			return err
		}
		jobs = append(jobs, tj)
	}
	for _, tj := range jobs {
		if err := cl.Delete(ctx, tj, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if d.grace >= 0 {
			// The garbage collector deletes the pods with their own grace
			// period; a second delete with a shorter one shortens it.
			if err := cl.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(tj.Namespace),
				client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: tj.Name}, client.GracePeriodSeconds(d.grace)); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
		fmt.Fprintf(d.Out, "mpijob %s deleted\n", tj.Name)
	}
	if !d.wait {
		return nil
	}
	for _, n := range d.names {
		if err := waitGone(ctx, cl, n, d.timeout); err != nil {
			return err
		}
	}
	return nil
}

func waitGone(ctx context.Context, cl *clients, name string, timeout time.Duration) error {
	left := 0
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		pods := &corev1.PodList{}
		if err := cl.List(ctx, pods, client.InNamespace(cl.namespace), client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: name}); err != nil {
			return false, err
		}
		left = len(pods.Items)
		if left > 0 {
			return false, nil
		}
		err := cl.Get(ctx, client.ObjectKey{Namespace: cl.namespace, Name: name}, &trainer.TrainJob{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	if err != nil {
		return &exitError{code: ExitTimeout, msg: fmt.Sprintf("job %s: %d pod(s) still there after %s (deletion continues in the cluster)", name, left, timeout)}
	}
	return nil
}
