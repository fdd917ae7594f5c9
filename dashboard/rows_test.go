package dashboard

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/jobview"
)

// A job's row is made again only when the job changed (its
// resourceVersion), and the fields a caller sets on a row stay its own.
func TestRowsRemembersByVersion(t *testing.T) {
	status := func(phase api.Phase, steps ...string) string {
		enc, err := (&api.Status{Phase: phase, NextStep: steps[0], NextSteps: steps}).Encode()
		if err != nil {
			t.Fatal(err)
		}
		return enc
	}
	tj := mpiJob("team-a", "j", nil)[0].(*trainer.TrainJob)
	tj.UID, tj.ResourceVersion = "uid-1", "10"
	tj.Annotations[api.StatusAnnotation] = status(api.PhaseStarting, "Wait.")
	var r rows
	t1 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

	first := r.view(tj, t1)
	if first.Phase != api.PhaseStarting {
		t.Fatalf("phase %q, want Starting", first.Phase)
	}
	// What a caller sets on its row (an estimate, say) does not
	// reach the next one.
	creator := first.Creator
	first.Estimate, first.Creator = &jobview.Estimate{Basis: "set by a caller"}, "a caller"

	// Same version: the remembered row, though the annotation says
	// otherwise (it cannot change without a new version; this shows the
	// row was not made again).
	tj.Annotations[api.StatusAnnotation] = status(api.PhaseRunning, "Nothing.")
	if got := r.view(tj, t1); got.Phase != api.PhaseStarting || cmp.Diff([]string{"Wait."}, got.NextSteps) != "" || got.Estimate != nil || got.Creator != creator {
		t.Errorf("same version: phase %q, next steps %q, estimate %v, creator %q; want the remembered Starting, [Wait.], none, %q",
			got.Phase, got.NextSteps, got.Estimate, got.Creator, creator)
	}
	// A new version: made again.
	tj.ResourceVersion = "11"
	if got := r.view(tj, t1); got.Phase != api.PhaseRunning {
		t.Errorf("new version: phase %q, want Running", got.Phase)
	}
	// Rows nobody listed since go.
	r.forget(t1.Add(time.Second))
	if len(r.m) != 0 {
		t.Errorf("%d rows kept after forget, want 0", len(r.m))
	}
	// A job without a UID or version (a fake's) is never remembered.
	plain := mpiJob("team-a", "k", nil)[0].(*trainer.TrainJob)
	r.view(plain, t1)
	if len(r.m) != 0 {
		t.Errorf("a job without UID was remembered")
	}
}

// A live stream's pushes reuse the namespaces a user may list for up to
// the age they allow; a fresh answer asks the API server again, and a
// namespace the user lost access to is gone from it.
func TestListableReusesItsAnswerOnlyWhileYoung(t *testing.T) {
	f := newFakeAPI(t)
	asked := 0
	namespaces := []string{"team-a", "team-b"}
	f.server.Namespaces = func(context.Context) ([]string, error) {
		asked++
		return namespaces, nil
	}
	ctx := context.Background()
	c, err := f.server.clientsFor(ctx, token("dev-a"))
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name       string
		maxAge     time.Duration
		candidates []string
		want       []string
		wantAsked  int
	}{
		{name: "first answer", maxAge: time.Minute, candidates: []string{"team-a", "team-b"}, want: []string{"team-a"}, wantAsked: 1},
		{name: "young answer reused", maxAge: time.Minute, candidates: []string{"team-b"}, want: []string{"team-a"}, wantAsked: 1},
		{name: "fresh answer asked", maxAge: 0, candidates: []string{"team-b"}, want: []string{}, wantAsked: 2},
		{name: "old answer asked again", maxAge: time.Nanosecond, candidates: []string{"team-a"}, want: []string{"team-a"}, wantAsked: 3},
	}
	for _, st := range steps {
		namespaces = st.candidates
		if st.maxAge == time.Nanosecond {
			time.Sleep(time.Millisecond)
		}
		got, err := f.server.listable(ctx, c, st.maxAge)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if diff := cmp.Diff(st.want, got); diff != "" {
			t.Errorf("%s: namespaces (-want,+got):\n%s", st.name, diff)
		}
		if asked != st.wantAsked {
			t.Errorf("%s: the namespaces were asked for %d times, want %d", st.name, asked, st.wantAsked)
		}
	}
}
