package dashboard

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"

	"github.com/mpijob/mpijob/pkg/api"
)

// A job's row is made again only when the job changed (its
// resourceVersion), and what a caller does to a row stays its own.
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

	first := r.of(tj, t1)
	if first.Phase != api.PhaseStarting {
		t.Fatalf("phase %q, want Starting", first.Phase)
	}
	// What a caller does to its row does not reach the next one.
	first.NextSteps = append(first.NextSteps[:0], "changed by a caller")

	// Same version: the remembered row, though the annotation says
	// otherwise (it cannot change without a new version; this shows the
	// row was not made again).
	tj.Annotations[api.StatusAnnotation] = status(api.PhaseRunning, "Nothing.")
	if got := r.of(tj, t1); got.Phase != api.PhaseStarting || cmp.Diff([]string{"Wait."}, got.NextSteps) != "" {
		t.Errorf("same version: phase %q, next steps %q; want the remembered Starting, [Wait.]", got.Phase, got.NextSteps)
	}
	// A new version: made again.
	tj.ResourceVersion = "11"
	if got := r.of(tj, t1); got.Phase != api.PhaseRunning {
		t.Errorf("new version: phase %q, want Running", got.Phase)
	}
	// Rows nobody listed since go.
	r.forget(t1.Add(time.Second))
	if len(r.m) != 0 {
		t.Errorf("%d rows kept after forget, want 0", len(r.m))
	}
	// A job without a UID or version (a fake's) is never remembered.
	plain := mpiJob("team-a", "k", nil)[0].(*trainer.TrainJob)
	r.of(plain, t1)
	if len(r.m) != 0 {
		t.Errorf("a job without UID was remembered")
	}
}
