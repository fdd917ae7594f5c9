package jobspec

import (
	"context"
	"regexp"
	"strings"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

// runtimeSeenTimeout bounds how long a create waits for Trainer to see a
// runtime just created.
const runtimeSeenTimeout = 10 * time.Second

// CreateTrainJob creates tj whose runtime was just created, trying again
// (for up to 10 s) while Trainer's or Kueue's webhook has not seen that
// runtime; any
// other error, or the same one after 10 s, is returned as it is.
func CreateTrainJob(ctx context.Context, c client.Client, tj *trainer.TrainJob, opts ...client.CreateOption) error {
	var last error
	backoff := wait.Backoff{Duration: 100 * time.Millisecond, Factor: 1.5, Steps: 100, Cap: time.Second}
	deadline := time.Now().Add(runtimeSeenTimeout)
	err := wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		last = c.Create(ctx, tj, opts...)
		if RuntimeNotSeen(last) && time.Now().Before(deadline) {
			return false, nil
		}
		return true, nil
	})
	if last == nil && err != nil {
		return err
	}
	return last
}
