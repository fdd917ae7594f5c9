package dashboard

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

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
	f.server.Namespaces = func(context.Context) ([]corev1.Namespace, error) {
		asked++
		out := make([]corev1.Namespace, 0, len(namespaces))
		for _, n := range namespaces {
			out = append(out, corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}})
		}
		return out, nil
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

// appendViews appends each job's row after what jobs holds, in the order
// given, and marks a job MPI when its runtime is one of the MPI runtimes.
func TestAppendViews(t *testing.T) {
	a := mpiJob("team-a", "a", nil)[0].(*trainer.TrainJob)
	b := mpiJob("team-a", "b", nil)[0].(*trainer.TrainJob)
	b.Spec.RuntimeRef.Name = "torch-distributed"
	var r rows
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	before := []jobview.Job{{Name: "earlier"}}
	for name, tc := range map[string]struct {
		mpi     map[string]bool
		wantMPI []bool
	}{
		"runtime b's is not MPI": {mpi: map[string]bool{}, wantMPI: []bool{false, r.view(a, now).MPI, false}},
		"runtime b's is MPI":     {mpi: map[string]bool{"torch-distributed": true}, wantMPI: []bool{false, r.view(a, now).MPI, true}},
	} {
		t.Run(name, func(t *testing.T) {
			got := r.appendViews(slices.Clone(before), []*trainer.TrainJob{a, b}, nil, tc.mpi, now)
			var names []string
			var mpi []bool
			for _, j := range got {
				names, mpi = append(names, j.Name), append(mpi, j.MPI)
			}
			if d := cmp.Diff([]string{"earlier", "a", "b"}, names); d != "" {
				t.Errorf("rows (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.wantMPI, mpi); d != "" {
				t.Errorf("MPI (-want +got):\n%s", d)
			}
		})
	}
}

// BenchmarkAppendViews is the rows of a list of 10,000 remembered jobs
// (bench/dashboard's scale): what every list request and stream push does
// before JobQuery.Apply filters, sorts and pages them, sized once against
// grown by append. Run: go test ./dashboard -run '^$' -bench AppendViews -benchmem
func BenchmarkAppendViews(b *testing.B) {
	tjs := make([]*trainer.TrainJob, 10000)
	for i := range tjs {
		tj := mpiJob("bench", fmt.Sprintf("bench-%04d", i), nil)[0].(*trainer.TrainJob)
		tj.UID, tj.ResourceVersion = types.UID(fmt.Sprint("uid-", i)), "1"
		tjs[i] = tj
	}
	var r rows
	now := time.Now()
	mpi := map[string]bool{"mpi-openmpi": true}
	b.Run("sized (appendViews)", func(b *testing.B) {
		for b.Loop() {
			if got := r.appendViews(nil, tjs, nil, mpi, now); len(got) != len(tjs) {
				b.Fatalf("%d rows of %d jobs", len(got), len(tjs))
			}
		}
	})
	// How the list made them before: appended one by one from nothing.
	b.Run("grown by append", func(b *testing.B) {
		for b.Loop() {
			var got []jobview.Job
			for _, tj := range tjs {
				j := r.view(tj, now)
				j.MPI = j.MPI || mpi[j.Runtime]
				got = append(got, j)
			}
			if len(got) != len(tjs) {
				b.Fatalf("%d rows of %d jobs", len(got), len(tjs))
			}
		}
	})
}
