package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/mpijob/mpijob/pkg/api"
)

// A job's life, Pending -> Starting -> Running -> (update) -> Failed,
// is counted once and timed at each step.
func TestTransition(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 4, 0, 0, 0, time.UTC)
	placed := t0.Add(5 * time.Second)
	ns, rt := "team-x", "mpi-openmpi"
	steps := []struct {
		prev *api.Status
		next api.Status
		at   time.Duration
	}{
		{nil, api.Status{Phase: api.PhasePending}, 0},
		{&api.Status{Phase: api.PhasePending}, api.Status{Phase: api.PhaseStarting}, 5 * time.Second},
		{&api.Status{Phase: api.PhaseStarting}, api.Status{Phase: api.PhaseRunning}, 8 * time.Second},
		{&api.Status{Phase: api.PhaseRunning}, api.Status{Phase: api.PhaseRunning, WorkersReady: 2}, 9 * time.Second},
		{&api.Status{Phase: api.PhaseRunning}, api.Status{Phase: api.PhaseFailed, Reason: "WorkerOOMKilled"}, 60 * time.Second},
	}
	for _, s := range steps {
		Transition(ns, rt, s.prev, s.next, t0, placed, t0.Add(s.at))
	}

	counters := map[string]struct {
		c    prometheus.Counter
		want float64
	}{
		"created":                 {JobsCreated.WithLabelValues(ns, rt), 1},
		"failed{WorkerOOMKilled}": {JobsFailed.WithLabelValues(ns, rt, "WorkerOOMKilled"), 1},
		"succeeded":               {JobsSucceeded.WithLabelValues(ns, rt), 0},
	}
	for name, c := range counters {
		if got := testutil.ToFloat64(c.c); got != c.want {
			t.Errorf("%s = %v, want %v", name, got, c.want)
		}
	}
	histograms := map[string]struct {
		h         prometheus.Observer
		wantCount uint64
		wantSum   float64
	}{
		"scheduling wait (Pending -> Starting at 5s)": {SchedulingWait.WithLabelValues(ns, rt), 1, 5},
		"time to start (Running at 8s, once)":         {TimeToStart.WithLabelValues(ns, rt), 1, 8},
		"workers placed to Launcher running (3s)":     {WorkersReadyToLauncher.WithLabelValues(ns, rt), 1, 3},
		"duration of the failed job (60s)":            {JobDuration.WithLabelValues(ns, rt, "Failed"), 1, 60},
	}
	for name, h := range histograms {
		m := &dto.Metric{}
		if err := h.h.(prometheus.Metric).Write(m); err != nil {
			t.Fatal(err)
		}
		if got := m.GetHistogram(); got.GetSampleCount() != h.wantCount || got.GetSampleSum() != h.wantSum {
			t.Errorf("%s: count=%d sum=%v, want %d and %v", name, got.GetSampleCount(), got.GetSampleSum(), h.wantCount, h.wantSum)
		}
	}
	if problems, err := testutil.CollectAndLint(TimeToStart); err != nil || len(problems) > 0 {
		t.Errorf("metric lint: %v %v", problems, err)
	}
}
