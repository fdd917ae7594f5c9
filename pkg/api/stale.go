package api

import (
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ManagerState is what mpijob-manager's Lease says about whether the
// statuses clients show are current.
type ManagerState struct {
	// Running is false when no manager has renewed the Lease in time:
	// statuses stay as it last wrote them.
	Running bool
	// Since is the Lease's last renewal (zero when there is none).
	Since time.Time
}

// leaseGrace is how many lease durations may pass without a renewal
// before a manager counts as gone (controller-runtime renews every 2 s
// within a 15 s lease).
const leaseGrace = 2

// ManagerStateOf reads the Lease. A Lease without holder was handed back
// by a manager that stopped. No Lease (nil) claims nothing: a manager run
// without leader election has none. The SDK has the same rule, checked by
// the vectors in testdata/stale-status.json.
func ManagerStateOf(lease *coordinationv1.Lease, now time.Time) ManagerState {
	if lease == nil {
		return ManagerState{Running: true}
	}
	var since time.Time
	if lease.Spec.RenewTime != nil {
		since = lease.Spec.RenewTime.Time
	} else if lease.Spec.AcquireTime != nil {
		since = lease.Spec.AcquireTime.Time
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" || since.IsZero() {
		return ManagerState{Since: since}
	}
	duration := 15 * time.Second
	if d := lease.Spec.LeaseDurationSeconds; d != nil && *d > 0 {
		duration = time.Duration(*d) * time.Second
	}
	return ManagerState{Running: now.Sub(since) <= leaseGrace*duration, Since: since}
}

// StaleNote says why a status may no longer be current, or "" when the
// manager runs. observed is when the status was written
// (Status.ObservedTime; nil: unknown).
func (m ManagerState) StaleNote(observed *metav1.Time, now time.Time) string {
	if m.Running {
		return ""
	}
	note := "mpijob-manager is not running"
	if !m.Since.IsZero() {
		note = fmt.Sprintf("mpijob-manager is not running (its Lease was last renewed %s ago)", HumanDuration(now.Sub(m.Since)))
	}
	if observed != nil && !observed.IsZero() {
		return note + fmt.Sprintf(": this status is as it saw the job %s ago, and may be stale", HumanDuration(now.Sub(observed.Time)))
	}
	return note + ": this status may be stale"
}

// StaleListNote is StaleNote for a list of jobs ("" when the manager runs).
func (m ManagerState) StaleListNote(now time.Time) string {
	if m.Running {
		return ""
	}
	if m.Since.IsZero() {
		return "mpijob-manager is not running: the phases shown are as it last saw them and may be stale"
	}
	return fmt.Sprintf("mpijob-manager is not running (its Lease was last renewed %s ago): the phases shown are as it last saw them and may be stale", HumanDuration(now.Sub(m.Since)))
}

// HumanDuration is d as kubectl shows ages: 45s, 12m, 3h, 2d.
func HumanDuration(d time.Duration) string {
	switch {
	case d < 0:
		d = 0
		fallthrough
	case d < 2*time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < 2*time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}
