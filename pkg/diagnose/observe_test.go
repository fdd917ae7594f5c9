package diagnose

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/metrics"
	"github.com/mpijob/mpijob/pkg/progress"
	"github.com/mpijob/mpijob/pkg/runtimes"
)

// One read of a Launcher's log holds every fact its readers take: the
// last progress report, a failed rank, a silent rank, the last line with
// its time, and the lines without their timestamps for the diagnosis's
// rules.
func TestObserve(t *testing.T) {
	log := `2026-11-23T10:00:00Z [1,0]<stdout>:MPIJOB_PROGRESS {"epoch": 1, "total_epochs": 4, "loss": 0.9}
2026-11-23T10:00:01Z [1,1]<stdout>:epoch 1 done
2026-11-23T10:00:02Z [1,1]<stderr>:Traceback (most recent call last):
2026-11-23T10:00:02Z [1,1]<stderr>:RuntimeError: boom
2026-11-23T10:09:00Z [1,0]<stdout>:MPIJOB_PROGRESS {"epoch": 2, "total_epochs": 4, "loss": 0.5}
2026-11-23T10:09:30Z [1,0]<stdout>:waiting for rank 1
`
	now := time.Date(2026, 11, 23, 10, 10, 0, 0, time.UTC)
	o := Observe(log, now, 5*time.Minute)
	if o.Progress == nil || o.Progress.Epoch == nil || *o.Progress.Epoch != 2 || !o.Progress.Time.Equal(time.Date(2026, 11, 23, 10, 9, 0, 0, time.UTC)) {
		t.Errorf("progress %+v, want the last report (epoch 2) at its line's time, 10:09:00", o.Progress)
	}
	// The one parse of the lines finds what progress.Last finds in the log.
	if want, _ := progress.Last(log); o.Progress == nil || !cmp.Equal(want, *o.Progress) {
		t.Errorf("progress %+v, progress.Last %+v", o.Progress, want)
	}
	// A report on a line without the kubelet's time has none.
	if o := Observe(`MPIJOB_PROGRESS {"step": 3, "total_steps": 9}`+"\n", now, 0); o.Progress == nil || *o.Progress.Step != 3 || !o.Progress.Time.IsZero() {
		t.Errorf("an untimed report: %+v", o.Progress)
	}
	if o.RankFailure == nil || *o.RankFailure.Rank != 1 || o.RankFailure.Error != "RuntimeError: boom" {
		t.Errorf("rank failure %+v, want rank 1's RuntimeError", o.RankFailure)
	}
	if o.Silent == nil || *o.Silent.Rank != 1 || !o.Silent.Silent {
		t.Errorf("silent %+v, want rank 1: nothing for 8 minutes while rank 0 prints", o.Silent)
	}
	if o.LastLine != "[1,0]<stdout>:waiting for rank 1" || o.LastAt == nil || !o.LastAt.Equal(time.Date(2026, 11, 23, 10, 9, 30, 0, time.UTC)) {
		t.Errorf("last line %q at %v", o.LastLine, o.LastAt)
	}
	if strings.Contains(o.Tail, "2026-11-23T") || !strings.HasPrefix(o.Tail, "[1,0]<stdout>:MPIJOB_PROGRESS") || strings.Count(o.Tail, "\n") != 6 {
		t.Errorf("tail without timestamps:\n%s", o.Tail)
	}
	if !o.PrintedSince(0, time.Date(2026, 11, 23, 10, 9, 0, 0, time.UTC)) || o.PrintedSince(1, time.Date(2026, 11, 23, 10, 5, 0, 0, time.UTC)) {
		t.Error("PrintedSince: rank 0 printed at 10:09:30, rank 1 not since 10:00:02")
	}
	if o := Observe(log, now, 0); o.Silent != nil {
		t.Errorf("no progress timeout, yet a silent rank: %+v", o.Silent)
	}
	if o := Observe("", now, time.Minute); o.Progress != nil || o.RankFailure != nil || o.Silent != nil || o.LastAt != nil || o.Tail != "" {
		t.Errorf("an empty log: %+v", o)
	}
	// A line without the kubelet's time has no time to judge by.
	if o := Observe("no time here\n", now, time.Minute); o.LastAt != nil || o.LastLine != "" || o.Tail != "no time here\n" {
		t.Errorf("a line without a timestamp: %+v", o)
	}
}

// The Launcher's log is read one way: its node container, the last
// LogTailLines lines, with timestamps.
func TestReadLauncherLog(t *testing.T) {
	cs := kubefake.NewClientset()
	if _, err := ReadLauncherLog(context.Background(), cs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "hello-launcher-0-0", Namespace: "ns"}}); err != nil {
		t.Fatal(err)
	}
	want := []corev1.PodLogOptions{{Container: api.NodeContainer, TailLines: ptr.To[int64](LogTailLines), Timestamps: true}}
	if diff := cmp.Diff(want, logReads(cs)); diff != "" {
		t.Errorf("log reads (-want +got):\n%s", diff)
	}
}

// logReads are the options of every log read the fake client saw.
func logReads(cs *kubefake.Clientset) []corev1.PodLogOptions {
	var out []corev1.PodLogOptions
	for _, a := range cs.Actions() {
		if a.GetSubresource() != "log" {
			continue
		}
		if g, ok := a.(clienttesting.GenericAction); ok {
			if o, ok := g.GetValue().(*corev1.PodLogOptions); ok {
				out = append(out, *o)
			}
		}
	}
	return out
}

// A running job with a progress timeout: each diagnosis round reads the
// Launcher's log once, the same way the progress controller does (it
// read the last line apart before).
func TestDiagnosisReadsTheLauncherLogOnce(t *testing.T) {
	tj := job(2).obj()
	tj.Annotations = map[string]string{runtimes.ProgressTimeoutAnnotation: "10m"}
	c := newCluster(t, tj, jobPod(tj, launcher().running(true)), jobPod(tj, worker("0").running(true)), jobPod(tj, worker("1").running(true)))
	cs := kubefake.NewClientset()
	c.r.Logs = cs
	c.reconcile(t)
	want := []corev1.PodLogOptions{{Container: api.NodeContainer, TailLines: ptr.To[int64](LogTailLines), Timestamps: true}}
	if diff := cmp.Diff(want, logReads(cs)); diff != "" {
		t.Errorf("log reads of one round (-want +got):\n%s", diff)
	}
}

// The Observer reads a Launcher once for every reader that takes a read
// of its age, again when the pod's phase changed, when a reader needs the
// lines and the kept read has none, or when the read is too old.
func TestObserverSharesReads(t *testing.T) {
	logs := "2026-11-23T10:00:00Z [1,0]<stdout>:step 1\n"
	reads := 0
	o := &Observer{Read: func(context.Context, *corev1.Pod) (string, error) { reads++; return logs, nil }}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "l", UID: "u-1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	now := time.Date(2026, 11, 23, 10, 0, 5, 0, time.UTC)
	ctx := context.Background()
	look := func(at time.Time, maxAge time.Duration, tail bool) Observation {
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
		{name: "the diagnosis takes that read", at: now.Add(8 * time.Second), maxAge: ObservationMaxAge, wantReads: 1},
		{name: "the next round reads again", at: now.Add(10 * time.Second), maxAge: 5 * time.Second, wantReads: 2},
		{name: "a reader of the lines reads them", at: now.Add(11 * time.Second), maxAge: ObservationMaxAge, tail: true, wantReads: 3},
		{name: "which then serve another", at: now.Add(12 * time.Second), maxAge: ObservationMaxAge, tail: true, wantReads: 3},
		{name: "the pod ended: read again", at: now.Add(13 * time.Second), maxAge: keepFor, phase: corev1.PodFailed, wantReads: 4},
		{name: "the ended pod's read serves", at: now.Add(70 * time.Second), maxAge: keepFor, phase: corev1.PodFailed, wantReads: 4},
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
	// Old reads go: past keepFor, a new read of another pod sweeps them.
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "l2", UID: "u-2"}}
	if _, err := o.Observe(ctx, other, 0, 0, now.Add(keepFor+time.Hour), false); err != nil {
		t.Fatal(err)
	}
	if n := len(o.kept); n != 1 {
		t.Errorf("%d reads kept after the sweep, want 1 (the new one)", n)
	}
	// A read that fails is said, and kept nowhere.
	o.Read = func(context.Context, *corev1.Pod) (string, error) { return "", errors.New("container not found") }
	if _, err := o.Observe(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u-3"}}, 0, time.Hour, now, false); err == nil {
		t.Error("a failed read was not said")
	}
}

// A running job's diagnosis takes the progress controller's read of its
// Launcher (one read per round, not two).
func TestDiagnosisTakesTheProgressRead(t *testing.T) {
	tj := job(2).obj()
	tj.Annotations = map[string]string{runtimes.ProgressTimeoutAnnotation: "10m"}
	l := jobPod(tj, launcher().running(true))
	c := newCluster(t, tj, l, jobPod(tj, worker("0").running(true)), jobPod(tj, worker("1").running(true)))
	cs := kubefake.NewClientset()
	obs := &Observer{Logs: cs}
	c.r.Observer = obs
	// The progress controller's round, a moment before.
	if _, err := obs.Observe(context.Background(), l, 10*time.Minute, 5*time.Second, c.now.Add(-3*time.Second), false); err != nil {
		t.Fatal(err)
	}
	c.reconcile(t)
	if n := len(logReads(cs)); n != 1 {
		t.Errorf("%d log reads for one round of both, want 1", n)
	}
}

// A running Launcher whose log cannot be read (a pod on a kwok node, with
// no kubelet to serve it) costs one read per round and no wait: the
// reconcile worker is not held. A failed job's lines are tried again.
func TestUnreadableLogIsTriedOnceWhileRunning(t *testing.T) {
	tj := job(2).obj()
	tj.Annotations = map[string]string{runtimes.ProgressTimeoutAnnotation: "10m"}
	l := jobPod(tj, launcher().running(true))
	c := newCluster(t, tj, l, jobPod(tj, worker("0").running(true)), jobPod(tj, worker("1").running(true)))
	reads := 0
	c.r.Observer = &Observer{Read: func(context.Context, *corev1.Pod) (string, error) {
		reads++
		return "", errors.New("the server could not find the requested resource")
	}}
	c.reconcile(t)
	// One try: the half-second waits come only between tries.
	if reads != 1 {
		t.Errorf("%d reads for a running job's round, want 1", reads)
	}
	if _, ok := c.r.observe(context.Background(), l, 0, c.now, true); ok || reads != 4 {
		t.Errorf("a failed job's lines: %d reads in all, want 3 more", reads)
	}
}
