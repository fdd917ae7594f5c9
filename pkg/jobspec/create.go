package jobspec

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/api"
)

// RuntimeNotSeenText is what Trainer's TrainJob webhook says when it does
// not know the job's runtime; runtimeNotSeenKueue is what Kueue's says (for
// a job with a queue). Right after the runtime is created this is only
// their caches lagging, so a create that gets it is tried again. The
// Python SDK uses the same patterns (pkg/jobspec/testdata/runtime-not-seen.json
// holds the vectors both test).
const RuntimeNotSeenText = "must be created before the TrainJob is created"

var runtimeNotSeenKueue = regexp.MustCompile(`runtime '[^']+' not found`)

// RuntimeNotSeen reports Trainer or Kueue refusing a TrainJob for a
// runtime they have not seen yet.
func RuntimeNotSeen(err error) bool {
	return err != nil && (strings.Contains(err.Error(), RuntimeNotSeenText) || runtimeNotSeenKueue.MatchString(err.Error()))
}

// webhookUnreachable is the API server failing to reach an admission
// webhook at all: a replica restarting while its address is still listed
// (mpijob-manager runs two), or none ready for a moment. Nothing was
// judged, so another try a moment later reaches one that answers. (With
// every mpijob-manager replica gone, the API server's own policy refuses
// instead, in words, and that is not tried again.)
var webhookUnreachable = regexp.MustCompile(`failed calling webhook "[^"]+": failed to call webhook: .*(connect: connection refused|no endpoints available for service)`)

// TryAgain says whether a create refused with err is worth another try:
// a webhook that could not be reached, or, right after the job's runtime
// was created (afterRuntime), Trainer or Kueue not having seen it yet. The
// Python SDK follows the same rule (testdata/runtime-not-seen.json holds
// the vectors both test).
func TryAgain(err error, afterRuntime bool) bool {
	return err != nil && (webhookUnreachable.MatchString(err.Error()) || afterRuntime && RuntimeNotSeen(err))
}

// runtimeSeenTimeout bounds how long a create tries again.
const runtimeSeenTimeout = 10 * time.Second

// CreateTrainJob creates tj whose runtime was just created, trying again
// (for up to 10 s) while Trainer's or Kueue's webhook has not seen that
// runtime or a webhook cannot be reached; any other error, or the same one
// after 10 s, is returned as it is.
func CreateTrainJob(ctx context.Context, c client.Client, tj *trainer.TrainJob, opts ...client.CreateOption) error {
	return create(ctx, c, tj, true, opts...)
}

// create creates tj, trying again for up to 10 s while TryAgain says so.
func create(ctx context.Context, c client.Client, tj *trainer.TrainJob, afterRuntime bool, opts ...client.CreateOption) error {
	var last error
	backoff := wait.Backoff{Duration: 100 * time.Millisecond, Factor: 1.5, Steps: 100, Cap: time.Second}
	deadline := time.Now().Add(runtimeSeenTimeout)
	err := wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		last = c.Create(ctx, tj, opts...)
		if TryAgain(last, afterRuntime) && time.Now().Before(deadline) {
			return false, nil
		}
		return true, nil
	})
	if last == nil && err != nil {
		return err
	}
	return last
}

// Create creates a job's objects: its per-job runtime first (Trainer
// refuses a TrainJob whose runtime is missing), then the TrainJob, then
// the runtime is owned by the TrainJob. A failed or dry-run TrainJob takes
// its runtime with it; a runtime whose owner could not be set is adopted
// (or removed) by mpijob-manager.
func Create(ctx context.Context, c client.Client, job *Job, serverDryRun bool) error {
	tj, rt := job.TrainJob, job.Runtime
	var opts []client.CreateOption
	if serverDryRun {
		opts = append(opts, client.DryRunAll)
	}
	if rt == nil {
		return create(ctx, c, tj, false, opts...)
	}
	rt.Namespace = tj.Namespace
	if err := createRuntime(ctx, c, rt); err != nil {
		return err
	}
	cleanup := func() {
		_ = c.Delete(context.WithoutCancel(ctx), rt, client.PropagationPolicy("Background"))
	}
	if err := CreateTrainJob(ctx, c, tj, opts...); err != nil {
		cleanup()
		return err
	}
	if serverDryRun {
		cleanup()
		return nil
	}
	patch := client.MergeFrom(rt.DeepCopy())
	rt.OwnerReferences = Owned(rt, tj)
	if err := c.Patch(ctx, rt, patch); err != nil {
		return fmt.Errorf("job %s was created, but its runtime %s could not be given to it (mpijob-manager will): %w", tj.Name, rt.Name, err)
	}
	return nil
}

// createRuntime creates a per-job runtime. One left behind by an earlier
// job of the same name that is gone (or by a client that stopped half-way)
// is replaced; anyone else's TrainingRuntime of that name is not touched.
func createRuntime(ctx context.Context, c client.Client, rt *trainer.TrainingRuntime) error {
	err := c.Create(ctx, rt)
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	old := &trainer.TrainingRuntime{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(rt), old); apierrors.IsNotFound(err) {
		// It went between the two calls (an earlier dry run's runtime,
		// deleted a moment ago): the name is free again.
		return createAgain(ctx, c, rt)
	} else if err != nil {
		return err
	}
	if old.Labels[api.JobLabel] != rt.Name {
		return &NameTakenError{Msg: fmt.Sprintf("a TrainingRuntime named %s already exists in namespace %s and is not this job's: give the job another name", rt.Name, rt.Namespace)}
	}
	tj := &trainer.TrainJob{}
	err = c.Get(ctx, types.NamespacedName{Namespace: rt.Namespace, Name: rt.Name}, tj)
	if err == nil && tj.DeletionTimestamp == nil {
		return &NameTakenError{Msg: fmt.Sprintf("MPI job %s already exists in namespace %s: pick another name, or delete it first", rt.Name, rt.Namespace)}
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if err := c.Delete(ctx, old, client.Preconditions{UID: &old.UID}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return createAgain(ctx, c, rt)
}

// createAgain creates rt while an earlier runtime of its name may still be
// going (garbage collection of a job just deleted, a finalizer being
// released): it waits for it a little.
func createAgain(ctx context.Context, c client.Client, rt *trainer.TrainingRuntime) error {
	for deadline := time.Now().Add(30 * time.Second); ; {
		err := c.Create(ctx, rt.DeepCopy())
		if !apierrors.IsAlreadyExists(err) || time.Now().After(deadline) {
			if err == nil {
				return c.Get(ctx, client.ObjectKeyFromObject(rt), rt)
			}
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// NameTakenError says a job's name is taken: by a running job, or by a
// TrainingRuntime that is not the job's.
type NameTakenError struct{ Msg string }

func (e *NameTakenError) Error() string { return e.Msg }
