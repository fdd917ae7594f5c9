package queue

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Suspension is how a job was suspended or resumed.
type Suspension struct {
	// Workload names the Kueue Workload whose spec.active was set; empty
	// when the job's own spec.suspend was.
	Workload string
}

// SetSuspended suspends (true) or resumes (false) the TrainJob named by
// obj the way that holds, with c's credentials (the user's): a job that
// Kueue manages (label kueue.x-k8s.io/queue-name) through its Workload's
// spec.active, since Kueue sets spec.suspend back within seconds and the
// program would start over; any other job through spec.suspend. The CLI,
// the SDK (the same rule in Python) and the dashboard all call it.
// ErrNoWorkload: Kueue has not made the Workload yet.
func SetSuspended(ctx context.Context, c client.Client, obj client.Object, suspend bool) (Suspension, error) {
	if obj.GetLabels()[NameLabel] != "" {
		wl, err := SetActive(ctx, c, obj.GetNamespace(), obj.GetUID(), !suspend)
		return Suspension{Workload: wl}, err
	}
	patch := fmt.Sprintf(`{"spec":{"suspend":%t}}`, suspend)
	return Suspension{}, c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(patch)))
}

// Describe says what SetSuspended did, for people.
func (s Suspension) Describe(suspend bool) string {
	verb := "resumed"
	if suspend {
		verb = "suspended"
	}
	if s.Workload != "" {
		return fmt.Sprintf("%s through its Kueue Workload %s (spec.active %t): Kueue manages the job, so its spec.suspend is Kueue's", verb, s.Workload, !suspend)
	}
	return fmt.Sprintf("%s (spec.suspend %t)", verb, suspend)
}
