//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/diagnose"
	"github.com/mpijob/mpijob/test/framework"
)

// A job that can never finish is ended after its grace period (here
// --end-stuck-after 30s), with its logs and diagnosis kept and a failure
// that says what was done and why: a rank that failed while the others
// wait for it, an image that cannot be pulled, and Workers no node can
// ever take. Before, each of them held its pods until someone deleted it.
func TestNeverFinishingJobsAreEnded(t *testing.T) {
	t.Parallel()
	c := framework.Get(t)
	const ns, user = "team-a", "dev-a"

	// A bad grace period is refused at once, naming the flag and the fix.
	expect(t, mpijob(t, user, ns, "create", framework.UniqueName("grace"), "--workers", "1", "--end-stuck-after", "soon", "--", "mpirun", "hostname"), 2,
		`--end-stuck-after "soon": is not a grace period: use a duration such as 10m, 30m or 2h, or off`)

	cases := []struct {
		name, reason string
		args         []string
		// logged is a line the job printed before it was ended ("": none).
		logged string
	}{
		{name: "ended-rank", reason: diagnose.ReasonRankFailedOthersWaiting, logged: "rank one cannot go on",
			args: []string{"--workers", "2", "--", "mpirun", "python3", "-c", stuckProgram}},
		{name: "ended-image", reason: diagnose.ReasonImagePullFailed,
			args: []string{"--workers", "1", "--image", "registry.invalid/mpijob/nope:1", "--", "mpirun", "hostname"}},
		{name: "ended-placed", reason: diagnose.ReasonCannotStart,
			args: []string{"--workers", "1", "--node-selector", "disktype=ssd", "--", "mpirun", "hostname"}},
	}
	// All three run at once; each is then checked in turn.
	names := make([]string, len(cases))
	for i, tc := range cases {
		name := framework.UniqueName(tc.name)
		names[i] = name
		t.Cleanup(func() { mpijob(t, user, ns, "delete", name, "--wait=false") })
		expect(t, mpijob(t, user, ns, append([]string{"create", name, "--end-stuck-after", "30s"}, tc.args...)...), 0)
	}
	for i, tc := range cases {
		name := names[i]
		t.Run(tc.reason, func(t *testing.T) {
			ctx := context.Background()
			s := c.WaitForStatus(t, ns, name, 10*time.Minute, func(s api.Status) bool { return s.Phase.Finished() })
			// First named for what it is while it ran or waited, then ended.
			var named *api.Transition
			for i := range s.History {
				if h := s.History[i]; h.Reason == tc.reason && !h.Phase.Finished() && named == nil {
					named = &s.History[i]
				}
			}
			if named == nil {
				t.Errorf("%s was never named %s before it ended: history %+v", name, tc.reason, s.History)
			} else {
				t.Logf("%s: named %s at %s, ended at %s: %s", name, tc.reason, named.Time.Format(time.RFC3339), s.CompletionTime, s.Message)
			}
			if s.Phase != api.PhaseFailed || s.Reason != tc.reason {
				t.Errorf("%s ended %s %s, want Failed %s: %s", name, s.Phase, s.Reason, tc.reason, s.Message)
			}
			for _, want := range []string{"mpijob-manager ended the job: it could never finish", "grace period of 30s", "Its logs and diagnosis are kept."} {
				if !strings.Contains(s.Message, want) {
					t.Errorf("%s's failure lacks %q: %s", name, want, s.Message)
				}
			}
			if !strings.Contains(s.NextStep, "kubectl mpijob") {
				t.Errorf("%s's next step names no command: %q", name, s.NextStep)
			}
			// Trainer itself marked it Failed, and its pods are gone.
			tj := &trainer.TrainJob{}
			if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, tj); err != nil {
				t.Errorf("%s: %v", name, err)
				return
			}
			if !meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobFailed) {
				t.Errorf("%s: Trainer's conditions %v, want Failed", name, tj.Status.Conditions)
			}
			waitFor(t, 2*time.Minute, name+"'s pods gone", func() (bool, string) {
				pods := &corev1.PodList{}
				if err := c.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: name}); err != nil {
					return false, err.Error()
				}
				return len(pods.Items) == 0, "pods still there"
			})
			events := c.WaitForManagerEvents(t, ns, name, []string{"Ended"}, time.Minute)
			for _, e := range events {
				if e.Reason == "Ended" && (e.Type != corev1.EventTypeWarning || !strings.Contains(e.Message, tc.reason)) {
					t.Errorf("%s: Event %s %s: %s", name, e.Type, e.Reason, e.Message)
				}
			}
			if tc.logged != "" {
				expect(t, mpijob(t, user, ns, "logs", name, "--all"), 0, tc.logged)
			}
			expect(t, mpijob(t, user, ns, "describe", name), 0, "mpijob-manager ended the job", "ended when it can never finish, after: 30s")
		})
	}

	t.Run("a tenant cannot forge the ending", func(t *testing.T) {
		name := framework.UniqueName("forge")
		t.Cleanup(func() { mpijob(t, user, ns, "delete", name, "--wait=false") })
		expect(t, mpijob(t, user, ns, "create", name, "--workers", "1", "--", "mpirun", "sleep", "60"), 0)
		out, err := c.Kubectl(t, user, ns, "", "annotate", "trainjob", name, api.EndedByAnnotation+`={"reason":"CannotStart","after":"1s","at":null}`)
		if err == nil || !strings.Contains(out, "only mpijob-manager writes why it ended a job") {
			t.Errorf("dev-a wrote the ending (%v): %s", err, out)
		}
	})
}
