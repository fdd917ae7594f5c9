package diagnose

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/runtimes"
)

// neverFinishes are the reasons of a job that holds pods yet can never
// finish: a rank failed while the others wait for it (mpirun does not
// notice), an image that cannot be pulled, Workers no node can ever take.
// Past the job's end-stuck-after (runtimes.EndStuckAfterOf), mpijob-manager
// ends such a job. A job queued that Kueue can never admit holds nothing
// and is only reported.
var neverFinishes = map[string]bool{
	ReasonRankFailedOthersWaiting: true,
	ReasonImagePullFailed:         true,
	ReasonCannotStart:             true,
}

// stuckSince is when s's never-finishing reason began (from its history),
// for a job that holds pods; ok is false for any other status.
func stuckSince(s api.Status) (since time.Time, ok bool) {
	if !neverFinishes[s.Reason] || s.Phase.Finished() || s.Phase == api.PhaseQueued || s.Phase == api.PhaseSuspended || len(s.History) == 0 {
		return time.Time{}, false
	}
	last := s.History[len(s.History)-1]
	if last.Reason != s.Reason || last.Phase != s.Phase {
		return time.Time{}, false
	}
	return last.Time.Time, true
}

// ToEnd is the record of the ending of a job whose status s has said it
// can never finish for at least grace (nil: not yet, or never, and when
// to look again for it: 0 when nothing is due).
func ToEnd(s api.Status, grace time.Duration, now time.Time) (*api.Ended, time.Duration) {
	since, ok := stuckSince(s)
	if !ok || grace <= 0 {
		return nil, 0
	}
	if left := grace - now.Sub(since); left > 0 {
		return nil, left + time.Second
	}
	return &api.Ended{Reason: s.Reason, Message: s.Message, After: grace.String(), Subject: s.Subject, At: metav1.NewTime(now)}, 0
}

// endedFinding explains a job mpijob-manager ended (e, from its
// annotation): what was done and why, whether Trainer has already marked
// it Failed (done) or its pods are still stopping.
func endedFinding(e *api.Ended, done bool) finding {
	why := strings.TrimSuffix(e.Message, ".")
	if why == "" {
		why = e.Reason
	}
	did := "mpijob-manager is ending the job"
	if done {
		did = "mpijob-manager ended the job"
	}
	msg := fmt.Sprintf("%s: it could never finish, and said so for longer than its grace period of %s (%s). %s. Its logs and diagnosis are kept.",
		did, e.After, runtimes.EndStuckAfterAnnotation, why)
	next := []api.Step{}
	switch e.Reason {
	case ReasonRankFailedOthersWaiting:
		next = append(next, stepf("Read why the rank failed in every rank's output (`%s`), fix it, and resubmit.", cli("logs", "--all")))
	case ReasonImagePullFailed:
		next = append(next, stepf("Correct the image (a name, tag or registry that exists and that the cluster may pull) and resubmit: `%s`.", cli("clone", "--image", "IMAGE")))
	case ReasonCannotStart:
		next = append(next, stepf("Resubmit it so the cluster can place it (fewer or smaller Workers, placement the nodes meet): `%s`.", cli("clone", "--workers", "N")))
	}
	next = append(next,
		stepf("Resubmit it as it was once the cause is fixed: `%s`.", cli("clone")),
		step("To give such a job longer, or never end it, set the annotation "+runtimes.EndStuckAfterAnnotation+" on the job (a duration such as 30m, or off)."))
	return finding{reason: e.Reason, message: msg, next: ranked(next...), subject: e.Subject}
}
