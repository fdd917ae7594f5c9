package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/mpijob/mpijob/config"
	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/diagnose"
	"github.com/mpijob/mpijob/pkg/progress"
	"github.com/mpijob/mpijob/pkg/runtimes"
)

var t0 = time.Date(2026, 11, 26, 22, 0, 0, 0, time.UTC)

// cluster is a fake API server with one running MPI job "hello" on the
// runtime the project ships (its JobSet, Jobs and a running Launcher pod),
// and a Reconciler over it whose Launcher log and clock the test sets.
type cluster struct {
	client client.Client
	r      *Reconciler
	log    string
	now    time.Time
	key    types.NamespacedName
}

func newCluster(t *testing.T, tj *trainer.TrainJob) *cluster {
	t.Helper()
	rt, err := config.Runtime("mpi-openmpi")
	if err != nil {
		t.Fatal(err)
	}
	tj.Name, tj.Namespace, tj.UID = "hello", "team-a", "job-uid"
	tj.Spec.RuntimeRef = trainer.RuntimeRef{Name: rt.Name}
	tj.Spec.Trainer = &trainer.Trainer{NumNodes: ptr.To[int32](2)}
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: tj.Name, Namespace: tj.Namespace, UID: "jobset-uid"}}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "hello-launcher-0", Namespace: tj.Namespace, UID: "launcher-job",
		Labels:          map[string]string{jobsetv1alpha2.JobSetNameKey: tj.Name},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: jobsetv1alpha2.GroupVersion.String(), Kind: "JobSet", Name: tj.Name, UID: js.UID, Controller: ptr.To(true)}}}}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hello-launcher-0-0", Namespace: tj.Namespace, Labels: map[string]string{
			jobsetv1alpha2.JobSetNameKey: tj.Name, jobsetv1alpha2.ReplicatedJobNameKey: api.LauncherJob},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: ptr.To(true)}}},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: api.NodeContainer}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	c := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(rt, tj, js, job, pod).
		WithStatusSubresource(&trainer.TrainJob{}).Build()
	cl := &cluster{client: c, now: t0, key: client.ObjectKeyFromObject(tj)}
	cl.r = &Reconciler{Client: c, Runtimes: runtimes.RuntimeLookup{Client: c}, Now: func() time.Time { return cl.now },
		LauncherLog: func(context.Context, *corev1.Pod) ([]byte, error) { return []byte(cl.log), nil }}
	return cl
}

func (c *cluster) reconcile(t *testing.T) {
	t.Helper()
	if _, err := c.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: c.key}); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
}

func (c *cluster) job(t *testing.T) *trainer.TrainJob {
	t.Helper()
	tj := &trainer.TrainJob{}
	if err := c.client.Get(context.Background(), c.key, tj); err != nil {
		t.Fatal(err)
	}
	return tj
}

// A rank's report becomes the annotation and Trainer's
// status.trainerStatus, which agree.
func TestReportReachesAnnotationAndTrainerStatus(t *testing.T) {
	c := newCluster(t, &trainer.TrainJob{})
	c.log = "2026-11-26T21:59:50Z [1,0]<stdout>:MPIJOB_PROGRESS {\"epoch\": 9, \"total_epochs\": 20, \"loss\": 0.31, \"eta_seconds\": 120}\n"
	c.reconcile(t)
	tj := c.job(t)
	ours, ok := progress.Read(tj.Annotations)
	if !ok || ours.Short() != "45% epoch 9/20" {
		t.Fatalf("annotation %q, want 45%% epoch 9/20", tj.Annotations[progress.Annotation])
	}
	theirs, ok := progress.FromTrainer(tj.Status.TrainerStatus)
	if !ok || !ours.SameForTrainer(theirs) {
		t.Fatalf("status.trainerStatus %+v does not say what the annotation says (%+v)", tj.Status.TrainerStatus, ours)
	}
	// The same report again writes nothing (the resource version stays).
	rv := tj.ResourceVersion
	c.now = c.now.Add(Interval)
	c.reconcile(t)
	if got := c.job(t).ResourceVersion; got != rv {
		t.Errorf("the same report wrote the job again (resource version %s → %s)", rv, got)
	}
}

// A job that reports to Trainer's runtime status server only gets the
// annotation from it.
func TestTrainerOnlyReportGetsTheAnnotation(t *testing.T) {
	tj := &trainer.TrainJob{}
	tj.Status.TrainerStatus = &trainer.TrainerStatus{ProgressPercentage: ptr.To[int32](42),
		Metrics: []trainer.Metric{{Name: "loss", Value: "0.123"}}}
	c := newCluster(t, tj)
	c.log = "2026-11-26T21:59:50Z training, no report line\n"
	c.reconcile(t)
	got, ok := progress.Read(c.job(t).Annotations)
	if !ok || got.Short() != "42%" || got.TrainMetrics["loss"] != 0.123 {
		t.Fatalf("annotation %+v (ok %v), want Trainer's 42%% and loss 0.123", got, ok)
	}
}

// A silent rank's finding stays while its lines are out of the lines
// read (the others printed on), and goes once it prints again.
func TestSilentRankStaysUntilItPrints(t *testing.T) {
	f := &api.RankFailure{Rank: ptr.To(1), Error: "step 3", Lines: []string{"step 3"}, At: metav1.NewTime(t0.Add(-5 * time.Minute)), Silent: true}
	c := newCluster(t, &trainer.TrainJob{})
	// Written as the controller writes it (its field owner removes it).
	if err := c.r.writeRankFailure(context.Background(), c.job(t), f); err != nil {
		t.Fatal(err)
	}
	// Only rank 0's lines: rank 1's scrolled out of the 200 read.
	c.log = "2026-11-26T21:59:58Z [1,0]<stdout>:step 99\n2026-11-26T21:59:59Z [1,0]<stdout>:step 100\n"
	c.reconcile(t)
	if _, ok := c.job(t).Annotations[api.RankFailureAnnotation]; !ok {
		t.Fatal("the silent rank's finding was cleared though the rank printed nothing new")
	}
	c.log += "2026-11-26T22:00:00Z [1,1]<stdout>:step 4\n"
	// The next round reads the log again (a read moments old would serve).
	c.now = c.now.Add(Interval)
	c.reconcile(t)
	if v, ok := c.job(t).Annotations[api.RankFailureAnnotation]; ok {
		t.Fatalf("the rank printed again, yet its finding stays: %s", v)
	}
}

// A finished job is remembered (its log is not read again) until it is
// gone, and at most maxFinished jobs are.
func TestFinishedJobsAreForgotten(t *testing.T) {
	tj := &trainer.TrainJob{}
	tj.Status.Conditions = []metav1.Condition{{Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue, Reason: "Done", LastTransitionTime: metav1.NewTime(t0)}}
	c := newCluster(t, tj)
	reads := 0
	c.r.LauncherLog = func(context.Context, *corev1.Pod) ([]byte, error) { reads++; return nil, nil }
	c.reconcile(t)
	c.reconcile(t)
	if reads != 1 || c.r.remembered() != 1 {
		t.Fatalf("%d log reads, %d remembered; want 1 read of a finished job, remembered", reads, c.r.remembered())
	}
	if err := c.client.Delete(context.Background(), c.job(t)); err != nil {
		t.Fatal(err)
	}
	c.reconcile(t)
	if c.r.remembered() != 0 {
		t.Fatalf("%d finished jobs remembered after the job is gone, want 0", c.r.remembered())
	}
	for i := range maxFinished + 5 {
		c.r.markFinished(&trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "ns", UID: types.UID(rune('a'+i%26)) + types.UID(time.Duration(i).String())}})
	}
	if got := c.r.remembered(); got != maxFinished {
		t.Fatalf("%d finished jobs remembered, want at most %d", got, maxFinished)
	}
}

// A rank's error in a job that keeps running is noted once the grace for
// mpirun to stop the job has passed, not before; a rank silent past the
// progress timeout while another prints is noted as silent.
func TestRankFailureAndSilentRankAreNoted(t *testing.T) {
	c := newCluster(t, &trainer.TrainJob{})
	c.log = "2026-11-26T21:59:55Z [1,1]<stderr>:Traceback (most recent call last):\n" +
		"2026-11-26T21:59:55Z [1,1]<stderr>:  File \"train.py\", line 3, in <module>\n" +
		"2026-11-26T21:59:55Z [1,1]<stderr>:ZeroDivisionError: division by zero\n"
	c.reconcile(t)
	if v, ok := c.job(t).Annotations[api.RankFailureAnnotation]; ok {
		t.Fatalf("noted 5 s after the error, within mpirun's grace: %s", v)
	}
	c.now = t0.Add(diagnose.RankFailureGrace)
	c.reconcile(t)
	f, err := api.ReadRankFailure(c.job(t).Annotations)
	if err != nil || f == nil || f.Silent || f.Rank == nil || *f.Rank != 1 || !strings.Contains(f.Error, "ZeroDivisionError") {
		t.Fatalf("rank failure %+v (err %v), want rank 1's ZeroDivisionError", f, err)
	}

	// Silence: rank 1 printed its 3 lines 10 minutes ago, rank 0 prints on.
	s := silentRankCluster(t, "")
	s.reconcile(t)
	f, err = api.ReadRankFailure(s.job(t).Annotations)
	if err != nil || f == nil || !f.Silent || f.Rank == nil || *f.Rank != 1 || f.Error != "step 2" {
		t.Fatalf("silent rank %+v (err %v), want rank 1 silent since \"step 2\"", f, err)
	}
}

// silentRankCluster is a job under a 2 min progress timeout whose rank 1
// printed its 3 lines 10 minutes ago while rank 0 prints on; frac is the
// stamps' fraction of a second ("" for none).
func silentRankCluster(t *testing.T, frac string) *cluster {
	t.Helper()
	s := newCluster(t, &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{runtimes.ProgressTimeoutAnnotation: "2m"}}})
	for i := range 3 {
		s.log += fmt.Sprintf("2026-11-26T21:50:0%d%sZ [1,1]<stdout>:step %d\n", i, frac, i)
	}
	for i := range 3 {
		s.log += fmt.Sprintf("2026-11-26T21:59:5%d%sZ [1,0]<stdout>:step %d\n", i, frac, 100+i)
	}
	return s
}

// A finding already noted is not written again at the next read, though
// the log's stamps have sub-second times the annotation does not keep.
func TestNotedRankIsNotWrittenAgain(t *testing.T) {
	s := silentRankCluster(t, ".123456789")
	s.reconcile(t)
	tj := s.job(t)
	if _, ok := tj.Annotations[api.RankFailureAnnotation]; !ok {
		t.Fatal("the silent rank was not noted")
	}
	for range 3 {
		s.now = s.now.Add(Interval)
		s.reconcile(t)
		if got := s.job(t).ResourceVersion; got != tj.ResourceVersion {
			t.Fatalf("the same finding was written again (resource version %s → %s): %s", tj.ResourceVersion, got, s.job(t).Annotations[api.RankFailureAnnotation])
		}
	}
}

// A log that cannot be read is read again later; a job whose Launcher is
// not running (none yet, a pending one) is not polled: its Launcher's
// start wakes the controller (wake.LauncherMoved). A job being deleted,
// or one that is not MPI's, is left alone.
func TestReconcileWaitsOrLeavesAlone(t *testing.T) {
	cases := map[string]struct {
		setup   func(*cluster)
		requeue bool
	}{
		"a pending Launcher": {setup: func(c *cluster) {
			p := &corev1.Pod{}
			_ = c.client.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: "hello-launcher-0-0"}, p)
			p.Status.Phase = corev1.PodPending
			_ = c.client.Status().Update(context.Background(), p)
		}},
		"a log that cannot be read": {setup: func(c *cluster) {
			c.r.LauncherLog = func(context.Context, *corev1.Pod) ([]byte, error) {
				return nil, fmt.Errorf("the kubelet does not answer")
			}
		}, requeue: true},
		"no Launcher": {setup: func(c *cluster) {
			_ = c.client.Delete(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "hello-launcher-0-0"}})
		}},
		"a job that is not MPI's": {setup: func(c *cluster) {
			tj := c.job(t)
			tj.Spec.RuntimeRef.Name = "torch-distributed"
			_ = c.client.Update(context.Background(), tj)
		}},
		"a job being deleted": {setup: func(c *cluster) {
			tj := c.job(t)
			tj.Finalizers = []string{"example.com/hold"}
			_ = c.client.Update(context.Background(), tj)
			_ = c.client.Delete(context.Background(), c.job(t))
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := newCluster(t, &trainer.TrainJob{})
			c.log = "2026-11-26T21:59:50Z [1,0]<stdout>:MPIJOB_PROGRESS {\"epoch\": 1, \"total_epochs\": 2}\n"
			tc.setup(c)
			res, err := c.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: c.key})
			if err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			if (res.RequeueAfter > 0) != tc.requeue {
				t.Errorf("requeue after %s, want a retry: %v", res.RequeueAfter, tc.requeue)
			}
			if _, wrote := c.job(t).Annotations[progress.Annotation]; wrote {
				t.Errorf("wrote progress though the log was not to be read")
			}
		})
	}
}

// RankPlan, the pure decision of the rank-failure annotation from one
// read of the log and the annotation the job has.
func TestRankPlan(t *testing.T) {
	at := func(s string) string { return "2026-11-26T22:" + s + "Z" }
	line := func(ts, rank, text string) string { return at(ts) + " [1," + rank + "]<stdout>:" + text + "\n" }
	now := t0.Add(20 * time.Minute)
	failedLog := line("01:00", "1", "") + at("01:00") + " [1,1]<stderr>:Traceback (most recent call last):\n" + at("01:00") + " [1,1]<stderr>:RuntimeError: boom\n" + line("19:00", "0", "waiting")
	silentLog := line("00:50", "1", "step 0") + line("00:55", "1", "step 1") + line("01:00", "1", "step 1") +
		line("18:00", "0", "step 7") + line("18:30", "0", "step 8") + line("19:00", "0", "step 9")
	printedLog := line("01:00", "1", "step 1") + line("18:00", "1", "step 2") + line("19:00", "0", "step 9")
	silentOld := &api.RankFailure{Rank: ptr.To(1), Silent: true, Error: "step 1", At: metav1.NewTime(t0.Add(time.Minute))}
	failedOld := &api.RankFailure{Rank: ptr.To(1), Error: "RuntimeError: boom", At: metav1.NewTime(t0.Add(time.Minute))}
	cases := map[string]struct {
		log       string
		old       *api.RankFailure
		now       time.Time
		wantError string // the noted failure's error ("": none)
		wantClear bool
	}{
		"a failed rank, past the grace":                {log: failedLog, now: now, wantError: "RuntimeError: boom"},
		"a failed rank, within the grace":              {log: failedLog, now: t0.Add(time.Minute + 5*time.Second)},
		"a silent rank":                                {log: silentLog, now: now, wantError: "step 1"},
		"a noted failure stays, even once it scrolled": {log: line("19:00", "0", "waiting"), old: failedOld, now: now},
		"a silent rank that printed again is cleared":  {log: printedLog, old: silentOld, now: now, wantClear: true},
		// The defect the issue named: a silent rank whose lines scrolled
		// out of the lines read was cleared as if it had printed.
		"a silent rank whose lines scrolled out stays": {log: line("19:00", "0", "step 9"), old: silentOld, now: now},
		"nothing noted, nothing found":                 {log: line("19:00", "0", "step 9"), now: now},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := diagnose.Observe(tc.log, tc.now, 10*time.Minute)
			note, drop := RankPlan(o, tc.old, tc.now)
			got := ""
			if note != nil {
				got = note.Error
			}
			if got != tc.wantError || drop != tc.wantClear {
				t.Errorf("RankPlan = note %q, drop %v; want %q, %v", got, drop, tc.wantError, tc.wantClear)
			}
		})
	}
}

// Finish, which the diagnosis calls before it writes Succeeded, writes a
// finished job's last report as final at once, with no round of this
// controller in between: a job that trained for less than Interval was
// never read while it ran.
func TestFinishWritesTheLastReport(t *testing.T) {
	tj := &trainer.TrainJob{}
	tj.Status.Conditions = []metav1.Condition{{Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue, Reason: "Done", LastTransitionTime: metav1.NewTime(t0)}}
	c := newCluster(t, tj)
	c.log = "2026-11-26T21:59:50Z [1,0]<stdout>:MPIJOB_PROGRESS {\"epoch\": 12, \"total_epochs\": 12, \"loss\": 0.05, \"accuracy\": 0.97}\n"
	if _, err := c.r.Finish(context.Background(), c.job(t), c.launcher(t)); err != nil {
		t.Fatal(err)
	}
	got, ok := progress.Read(c.job(t).Annotations)
	if !ok || got.Short() != "100% epoch 12/12" || got.TrainMetrics["accuracy"] != 0.97 {
		t.Fatalf("after Finish the annotation is %q (ok %v), want 100%% epoch 12/12 with accuracy 0.97", c.job(t).Annotations[progress.Annotation], ok)
	}
	if c.r.remembered() != 1 {
		t.Errorf("%d finished jobs remembered after Finish, want 1: its own round must not read the log again", c.r.remembered())
	}
}

// A program that resumed from a checkpoint says so in a report: the
// controller notes it on the job (mpijob.dev/resumed) and Finish returns
// it for the finished status, even once the report scrolled past.
func TestResumedIsNotedAndReturned(t *testing.T) {
	tj := &trainer.TrainJob{}
	tj.Status.Conditions = []metav1.Condition{{Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue, Reason: "Done", LastTransitionTime: metav1.NewTime(t0)}}
	c := newCluster(t, tj)
	c.log = "2026-11-26T21:59:40Z [1,0]<stdout>:MPIJOB_PROGRESS {\"epoch\": 4, \"total_epochs\": 8, \"resumed\": {\"epoch\": 4, \"age_seconds\": 31}}\n" +
		"2026-11-26T21:59:50Z [1,0]<stdout>:MPIJOB_PROGRESS {\"epoch\": 8, \"total_epochs\": 8}\n"
	res, err := c.r.Finish(context.Background(), c.job(t), c.launcher(t))
	if err != nil {
		t.Fatal(err)
	}
	want := api.Resumed{Epoch: 4, TotalEpochs: 8, AgeSeconds: 31, At: metav1.NewTime(time.Date(2026, 11, 26, 21, 59, 40, 0, time.UTC))}
	if res == nil || !res.At.Equal(&want.At) || res.Epoch != 4 || res.TotalEpochs != 8 || res.AgeSeconds != 31 {
		t.Fatalf("Finish returned %+v, want %+v", res, want)
	}
	noted, err := api.ReadResumed(c.job(t).Annotations)
	if err != nil || noted == nil || noted.Text() != "resumed from epoch 4 of 8 (checkpoint written 31 seconds earlier)" {
		t.Errorf("the job's %s: %+v (%v)", api.ResumedAnnotation, noted, err)
	}
}

// A Launcher whose log cannot be served holds Finish, and so the job's
// finished status, for FinishTimeout at most: the read is given up and the
// job is not read again.
func TestFinishGivesUpOnALogThatDoesNotCome(t *testing.T) {
	tj := &trainer.TrainJob{}
	tj.Status.Conditions = []metav1.Condition{{Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue, Reason: "Done", LastTransitionTime: metav1.NewTime(t0)}}
	c := newCluster(t, tj)
	c.r.FinishTimeout = 50 * time.Millisecond
	c.r.LauncherLog = func(ctx context.Context, _ *corev1.Pod) ([]byte, error) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Minute):
			return nil, fmt.Errorf("the read was not bounded")
		}
	}
	done := make(chan error, 1)
	go func() { _, err := c.r.Finish(context.Background(), c.job(t), c.launcher(t)); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Finish: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Finish still waits for a log that does not come")
	}
	if _, ok := c.job(t).Annotations[progress.Annotation]; ok || c.r.remembered() != 1 {
		t.Errorf("after a read given up: annotation written %v, %d jobs remembered; want none written and the job remembered", ok, c.r.remembered())
	}
}

func TestPace(t *testing.T) {
	cases := map[string]struct {
		seen, last string
		ok         bool
		finding    bool
		wait       time.Duration
		want       time.Duration
	}{
		"first read":                     {seen: "a", wait: 0, ok: true, want: Interval},
		"a new line":                     {seen: "b", last: "a", ok: true, wait: QuietInterval, want: Interval},
		"nothing new once":               {seen: "a", last: "a", ok: true, wait: Interval, want: 2 * Interval},
		"nothing new again":              {seen: "a", last: "a", ok: true, wait: 2 * Interval, want: 4 * Interval},
		"nothing new for long":           {seen: "a", last: "a", ok: true, wait: QuietInterval, want: QuietInterval},
		"an unreadable log":              {seen: "a", last: "a", ok: false, wait: Interval, want: 2 * Interval},
		"an unreadable first read":       {ok: false, want: Interval},
		"unreadable past the quiet wait": {seen: "a", last: "a", ok: false, wait: QuietInterval, want: 2 * QuietInterval},
		"unreadable for long":            {seen: "a", last: "a", ok: false, wait: 2 * QuietInterval, want: UnreadableInterval},
		"unreadable at the longest wait": {seen: "a", last: "a", ok: false, wait: UnreadableInterval, want: UnreadableInterval},
		"readable again, nothing new":    {seen: "a", last: "a", ok: true, wait: UnreadableInterval, want: QuietInterval},
		"readable again, a new line":     {seen: "b", last: "a", ok: true, wait: UnreadableInterval, want: Interval},
		"a finding that waits on a read": {seen: "a", last: "a", ok: true, finding: true, wait: QuietInterval, want: Interval},
		"an empty log stays empty":       {ok: true, wait: 2 * Interval, want: 4 * Interval},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Pace(tc.seen, tc.last, tc.ok, tc.finding, tc.wait); got != tc.want {
				t.Errorf("Pace = %v, want %v", got, tc.want)
			}
		})
	}
}

// A Launcher whose log says nothing new is read less and less often, down
// to one read per QuietInterval, and a new line brings the reads back to
// every Interval.
func TestQuietLauncherIsReadLessOften(t *testing.T) {
	c := newCluster(t, &trainer.TrainJob{})
	reads := 0
	c.r.LauncherLog = func(context.Context, *corev1.Pod) ([]byte, error) { reads++; return []byte(c.log), nil }
	c.log = "2026-11-26T21:59:50Z [1,0]<stdout>:loading the data\n"
	var waits []time.Duration
	round := func() {
		t.Helper()
		res, err := c.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: c.key})
		if err != nil {
			t.Fatal(err)
		}
		waits = append(waits, res.RequeueAfter)
		c.now = c.now.Add(res.RequeueAfter)
	}
	for range 5 {
		round()
	}
	c.log += "2026-11-26T22:01:30Z [1,0]<stdout>:epoch 1\n"
	round()
	round()
	want := []time.Duration{Interval, 2 * Interval, QuietInterval, QuietInterval, QuietInterval, Interval, 2 * Interval}
	if diff := cmp.Diff(want, waits); diff != "" {
		t.Errorf("waits between reads (-want +got):\n%s", diff)
	}
	if reads != 7 {
		t.Errorf("%d reads in 7 rounds, want 7", reads)
	}
}

// launcher is the job's Launcher pod, as the diagnosis hands it to Finish.
func (c *cluster) launcher(t *testing.T) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{}
	if err := c.client.Get(context.Background(), types.NamespacedName{Namespace: c.key.Namespace, Name: "hello-launcher-0-0"}, p); err != nil {
		t.Fatal(err)
	}
	return p
}
