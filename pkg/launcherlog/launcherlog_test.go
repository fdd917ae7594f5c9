package launcherlog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/diagnose"
	"github.com/mpijob/mpijob/pkg/diagnose/diagnosetest"
	"github.com/mpijob/mpijob/pkg/metrics"
)

// The Launcher's log is read one way: its node container, the last
// LogTailLines lines, with timestamps.
func TestReadLauncherLog(t *testing.T) {
	cs := kubefake.NewClientset()
	if _, err := ReadLauncherLog(context.Background(), cs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "hello-launcher-0-0", Namespace: "ns"}}); err != nil {
		t.Fatal(err)
	}
	want := []corev1.PodLogOptions{{Container: api.NodeContainer, TailLines: ptr.To[int64](LogTailLines), Timestamps: true}}
	if diff := cmp.Diff(want, diagnosetest.LogReads(cs)); diff != "" {
		t.Errorf("log reads (-want +got):\n%s", diff)
	}
}

// The Observer reads a Launcher once for every reader that takes a read
// of its age, again when the pod's phase changed, when a reader needs the
// lines and the kept read has none, or when the read is too old.
// diagnosisAge is the age of a read the diagnosis takes (its controller's
// ObservationMaxAge).
const diagnosisAge = 20 * time.Second

func TestObserverSharesReads(t *testing.T) {
	logs := "2026-11-23T10:00:00Z [1,0]<stdout>:step 1\n"
	reads := 0
	o := &Observer{Read: func(context.Context, *corev1.Pod) (string, error) { reads++; return logs, nil }}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "l", UID: "u-1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	now := time.Date(2026, 11, 23, 10, 0, 5, 0, time.UTC)
	ctx := context.Background()
	look := func(at time.Time, maxAge time.Duration, tail bool) diagnose.Observation {
		t.Helper()
		obs, err := o.Observe(ctx, pod, time.Minute, maxAge, at, tail)
		if err != nil {
			t.Fatal(err)
		}
		return obs
	}
	steps := []struct {
		name      string
		at        time.Time
		maxAge    time.Duration
		tail      bool
		phase     corev1.PodPhase
		wantReads int
	}{
		{name: "the progress controller's round reads", at: now, maxAge: 5 * time.Second, wantReads: 1},
		{name: "the diagnosis takes that read", at: now.Add(8 * time.Second), maxAge: diagnosisAge, wantReads: 1},
		{name: "the next round reads again", at: now.Add(10 * time.Second), maxAge: 5 * time.Second, wantReads: 2},
		{name: "a reader of the lines reads them", at: now.Add(11 * time.Second), maxAge: diagnosisAge, tail: true, wantReads: 3},
		{name: "which then serve another", at: now.Add(12 * time.Second), maxAge: diagnosisAge, tail: true, wantReads: 3},
		{name: "the pod ended: read again", at: now.Add(13 * time.Second), maxAge: KeepFor, phase: corev1.PodFailed, wantReads: 4},
		{name: "the ended pod's read serves", at: now.Add(70 * time.Second), maxAge: KeepFor, phase: corev1.PodFailed, wantReads: 4},
	}
	shared := testutil.ToFloat64(metrics.LauncherLogReads.WithLabelValues("shared"))
	read := testutil.ToFloat64(metrics.LauncherLogReads.WithLabelValues("read"))
	for _, s := range steps {
		if s.phase != "" {
			pod.Status.Phase = s.phase
		}
		obs := look(s.at, s.maxAge, s.tail)
		if reads != s.wantReads || o.Reads() != reads {
			t.Errorf("%s: %d reads (Reads %d), want %d", s.name, reads, o.Reads(), s.wantReads)
		}
		if s.tail && obs.Tail == "" {
			t.Errorf("%s: no lines", s.name)
		}
		if obs.LastLine != "[1,0]<stdout>:step 1" {
			t.Errorf("%s: last line %q", s.name, obs.LastLine)
		}
	}
	// The manager's metric says the same.
	if d := testutil.ToFloat64(metrics.LauncherLogReads.WithLabelValues("read")) - read; d != 4 {
		t.Errorf("mpijob_launcher_log_reads_total{outcome=read} rose by %v, want 4", d)
	}
	if d := testutil.ToFloat64(metrics.LauncherLogReads.WithLabelValues("shared")) - shared; d != 3 {
		t.Errorf("mpijob_launcher_log_reads_total{outcome=shared} rose by %v, want 3", d)
	}
	// Old reads go: past KeepFor, a new read of another pod sweeps them.
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "l2", UID: "u-2"}}
	if _, err := o.Observe(ctx, other, 0, 0, now.Add(KeepFor+time.Hour), false); err != nil {
		t.Fatal(err)
	}
	if n := len(o.kept); n != 1 {
		t.Errorf("%d reads kept after the sweep, want 1 (the new one)", n)
	}
}

// A Launcher whose log cannot be read (its node serves none: a kubelet
// that is down, kwok's nodes) is asked once a round, not once per reader:
// the diagnosis takes the progress controller's failed read as it takes a
// good one. A reader of the lines tries again, a new phase or an old
// failure is read again, and the step reports of the reads before a
// failure are carried on by the next good read.
func TestObserverSharesAFailedRead(t *testing.T) {
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	var fail error
	reads := 0
	o := &Observer{Read: func(context.Context, *corev1.Pod) (string, error) {
		reads++
		if fail != nil {
			return "", fail
		}
		return now.Format(time.RFC3339Nano) + " [1,0]<stdout>:MPIJOB_PROGRESS {\"step\": 1, \"rank_step_seconds\": [0.01, 0.04]}\n", nil
	}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "l", UID: "u-1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	ctx := context.Background()
	if _, err := o.Observe(ctx, pod, time.Minute, 0, now, false); err != nil {
		t.Fatal(err)
	}
	fail = errors.New("the server rejected our request (get pods l)")
	errs := testutil.ToFloat64(metrics.LauncherLogReads.WithLabelValues("error"))
	steps := []struct {
		name      string
		after     time.Duration
		maxAge    time.Duration
		tail      bool
		phase     corev1.PodPhase
		fails     bool
		wantReads int
	}{
		{name: "the progress controller's round fails", after: 10 * time.Second, maxAge: 5 * time.Second, fails: true, wantReads: 2},
		{name: "the diagnosis takes that failure", after: 15 * time.Second, maxAge: diagnosisAge, fails: true, wantReads: 2},
		{name: "and so does the next look within its age", after: 29 * time.Second, maxAge: diagnosisAge, fails: true, wantReads: 2},
		{name: "a reader of the lines tries again", after: 30 * time.Second, maxAge: diagnosisAge, tail: true, fails: true, wantReads: 3},
		{name: "a failure older than the reader's age is tried again", after: 55 * time.Second, maxAge: diagnosisAge, fails: true, wantReads: 4},
		{name: "a new phase is tried again", after: 56 * time.Second, maxAge: diagnosisAge, phase: corev1.PodSucceeded, fails: true, wantReads: 5},
	}
	for _, s := range steps {
		if s.phase != "" {
			pod.Status.Phase = s.phase
		}
		obs, err := o.Observe(ctx, pod, time.Minute, s.maxAge, now.Add(s.after), s.tail)
		if (err != nil) != s.fails || (err != nil && err.Error() != fail.Error()) {
			t.Errorf("%s: error %v, want %v", s.name, err, fail)
		}
		if err != nil && (obs.LastLine != "" || obs.LastAt != nil || len(obs.Steps) != 0) {
			t.Errorf("%s: a failed read said %+v", s.name, obs)
		}
		if reads != s.wantReads || o.Reads() != reads {
			t.Errorf("%s: %d reads (Reads %d), want %d", s.name, reads, o.Reads(), s.wantReads)
		}
	}
	if d := testutil.ToFloat64(metrics.LauncherLogReads.WithLabelValues("error")) - errs; d != 4 {
		t.Errorf("mpijob_launcher_log_reads_total{outcome=error} rose by %v, want 4", d)
	}
	// The next good read carries on the reports of the one before the
	// failures.
	fail = nil
	obs, err := o.Observe(ctx, pod, time.Minute, 0, now.Add(time.Minute), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(obs.Steps) != 1 || !obs.Steps[0].At.Equal(now) {
		t.Errorf("step reports after the failures: %+v, want the one at %s", obs.Steps, now)
	}
}

// A job that reports its ranks' step times ten times a second fills the
// LogTailLines lines of one read in 20 s, less than the two thirds of a
// 40 s slow-rank window that a finding needs: the Observer keeps the
// reports of earlier reads, so its slow rank is named within the window
// (seen on the local cluster: a resized Worker never named when its job
// reported that often).
func TestObserverKeepsStepReportsAcrossReads(t *testing.T) {
	start := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	now := start
	// The last LogTailLines reports up to now, one per 100 ms, rank 1
	// four times slower than rank 0.
	logAt := func(at time.Time) string {
		var b strings.Builder
		first := at.Add(-time.Duration(LogTailLines-1) * 100 * time.Millisecond)
		for ts := first; !ts.After(at); ts = ts.Add(100 * time.Millisecond) {
			if ts.Before(start) {
				continue
			}
			fmt.Fprintf(&b, "%s [1,0]<stdout>:MPIJOB_PROGRESS {\"step\": 1, \"rank_step_seconds\": [0.01, 0.04]}\n", ts.Format(time.RFC3339Nano))
		}
		return b.String()
	}
	o := &Observer{Read: func(context.Context, *corev1.Pod) (string, error) { return logAt(now), nil }}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "l", UID: "u-1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	const window = 40 * time.Second
	var named time.Duration
	// The progress controller's rounds, every 10 s for a minute.
	for now = start.Add(10 * time.Second); !now.After(start.Add(time.Minute)); now = now.Add(10 * time.Second) {
		obs, err := o.Observe(context.Background(), pod, 0, 0, now, false)
		if err != nil {
			t.Fatal(err)
		}
		if first := obs.Steps[0].At; now.Sub(first) > 20*time.Second && now.Sub(start) <= 20*time.Second {
			t.Errorf("at %s the reports go back to %s: more than one read holds", now.Sub(start), first.Sub(start))
		}
		if sr := diagnose.FindSlowRank(obs.Steps, window, now); sr != nil && named == 0 {
			named = now.Sub(start)
			if sr.Rank != 1 || sr.Ratio != 4 {
				t.Errorf("named rank %d, %.1f× slower; want rank 1, 4×", sr.Rank, sr.Ratio)
			}
		}
	}
	if named == 0 || named > window {
		t.Errorf("rank 1 named after %s, want within the %s window (two thirds of it covered)", named, window)
	}
}
