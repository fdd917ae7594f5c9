package controller

import (
	"context"
	"errors"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/mpijob/mpijob/config"
	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/diagnose"
	"github.com/mpijob/mpijob/pkg/diagnose/diagnosetest"
	"github.com/mpijob/mpijob/pkg/jobstatus"
	"github.com/mpijob/mpijob/pkg/launcherlog"
	"github.com/mpijob/mpijob/pkg/runtimes"
	"github.com/mpijob/mpijob/pkg/stacks"
)

// The builders the diagnosis's tests share (package diagnosetest).
var (
	t0       = diagnosetest.T0
	job      = diagnosetest.Job
	jobset   = diagnosetest.JobSet
	worker   = diagnosetest.Worker
	launcher = diagnosetest.Launcher
)

// openMPIRuntime is the runtime the project ships (config/runtimes).
func openMPIRuntime(t *testing.T) *trainer.ClusterTrainingRuntime {
	t.Helper()
	rt, err := config.Runtime("mpi-openmpi")
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// cluster is a fake API server with one MPI job "hello" of 2 Workers, its
// JobSet and running pods, and a Reconciler over it with a clock the test
// moves.
type cluster struct {
	client   client.WithWatch
	recorder *events.FakeRecorder
	r        *Reconciler
	now      time.Time
	key      types.NamespacedName
	// emitted are the transition Events read so far, by name.
	emitted map[string]bool
}

func newCluster(t *testing.T, tj *trainer.TrainJob, objs ...client.Object) *cluster {
	t.Helper()
	rt := openMPIRuntime(t)
	tj.Spec.RuntimeRef = trainer.RuntimeRef{Name: rt.Name}
	tj.CreationTimestamp = metav1.NewTime(t0.Add(-time.Minute))
	if tj.UID == "" {
		// As the API server gives every object: the job's JobStatus is
		// owned by this UID.
		tj.UID = types.UID("uid-" + tj.Name)
	}
	js := jobset(2)
	js.Name, js.Namespace, js.UID = tj.Name, tj.Namespace, "jobset-uid"
	js.OwnerReferences = []metav1.OwnerReference{{APIVersion: trainer.GroupVersion.String(), Kind: "TrainJob", Name: tj.Name, Controller: ptr.To(true)}}
	// The JobSet's Jobs, which own its pods (jobPod).
	for _, rj := range []string{api.LauncherJob, api.WorkerJob} {
		objs = append(objs, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: tj.Name + "-" + rj + "-0", Namespace: tj.Namespace, UID: types.UID("job-" + rj),
			Labels:          map[string]string{jobsetv1alpha2.JobSetNameKey: tj.Name},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: jobsetv1alpha2.GroupVersion.String(), Kind: "JobSet", Name: tj.Name, UID: js.UID, Controller: ptr.To(true)}}}})
	}
	objs = append(objs, rt, tj, js)
	c := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(objs...).Build()
	cl := &cluster{client: c, recorder: events.NewFakeRecorder(20), now: t0, key: client.ObjectKeyFromObject(tj)}
	cl.r = &Reconciler{Client: c, Reader: c, Logs: kubefake.NewClientset(), Recorder: cl.recorder,
		Runtimes: runtimes.RuntimeLookup{Client: c}, Now: func() time.Time { return cl.now }}
	return cl
}

// jobPod makes a pod of the job's JobSet in the fake API server, owned by
// the JobSet's Job of its role.
func jobPod(tj *trainer.TrainJob, w *diagnosetest.PodW) *corev1.Pod {
	p := w.DeepCopy()
	p.Namespace = tj.Namespace
	p.Labels[jobsetv1alpha2.JobSetNameKey] = tj.Name
	rj := p.Labels[jobsetv1alpha2.ReplicatedJobNameKey]
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: tj.Name + "-" + rj + "-0", UID: types.UID("job-" + rj), Controller: ptr.To(true)}}
	return p
}

// A pod someone made with the JobSet's labels (a bare pod, or one that
// names a Job of another UID as its controller) is not the job's: the
// diagnosis does not count it. The red team's pod, labelled with another
// job's JobSet and the Launcher's role, made the manager write that job's
// status from its own.
func TestForgedPodsAreNotTheJobs(t *testing.T) {
	tj := job(2).Obj()
	bare := jobPod(tj, launcher().Running(false))
	bare.Name, bare.OwnerReferences = "forged-launcher", nil
	wrongUID := jobPod(tj, launcher().Running(false))
	wrongUID.Name = "forged-owner"
	wrongUID.OwnerReferences[0].UID = "someone-elses-job"
	c := newCluster(t, tj, jobPod(tj, worker("0").Running(true)), jobPod(tj, worker("1").Running(true)), bare, wrongUID)
	c.reconcile(t)
	c.now = c.now.Add(2 * time.Second)
	c.reconcile(t)
	s, ok := c.status(t)
	if !ok {
		t.Fatal("no status written")
	}
	for _, p := range s.Pods {
		if strings.HasPrefix(p.Pod, "forged") {
			t.Errorf("the status records the forged pod %s: %+v", p.Pod, p)
		}
	}
	if s.Launcher != api.LauncherNotCreated {
		t.Errorf("Launcher %s, want %s: the only Launchers are forged", s.Launcher, api.LauncherNotCreated)
	}
}

func (c *cluster) reconcile(t *testing.T) ctrl.Result {
	t.Helper()
	res, err := c.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: c.key})
	if err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	return res
}

// trainJob is the job as the API server holds it now.
func (c *cluster) trainJob(t *testing.T) *trainer.TrainJob {
	t.Helper()
	tj := &trainer.TrainJob{}
	if err := c.client.Get(context.Background(), c.key, tj); err != nil {
		t.Fatal(err)
	}
	return tj
}

// succeed ends tj as a successful job does: Trainer says Complete and its
// Launcher exited 0.
func (c *cluster) succeed(t *testing.T, tj *trainer.TrainJob) {
	t.Helper()
	done := c.trainJob(t)
	done.Status.Conditions = job(2).Cond(trainer.TrainJobComplete, "JobSetCompleted", "done").Status.Conditions
	if err := c.client.Update(context.Background(), done); err != nil {
		t.Fatal(err)
	}
	l := jobPod(tj, launcher().Terminated("Completed", 0))
	old := &corev1.Pod{}
	if err := c.client.Get(context.Background(), client.ObjectKeyFromObject(l), old); err != nil {
		t.Fatal(err)
	}
	old.Status = l.Status
	if err := c.client.Status().Update(context.Background(), old); err != nil {
		t.Fatal(err)
	}
}

// jobStatus is the job's JobStatus as the API server holds it now.
func (c *cluster) jobStatus(t *testing.T) *api.JobStatus {
	t.Helper()
	js := &api.JobStatus{}
	if err := c.client.Get(context.Background(), c.key, js); err != nil {
		t.Fatalf("the job's JobStatus: %v", err)
	}
	return js
}

// status is the job's status as every reader reads it: its JobStatus, or
// the annotation an older manager wrote (ok false: none).
func (c *cluster) status(t *testing.T) (api.Status, bool) {
	t.Helper()
	tj := &trainer.TrainJob{}
	if err := c.client.Get(context.Background(), c.key, tj); err != nil {
		t.Fatal(err)
	}
	if err := jobstatus.Get(context.Background(), c.client, tj); err != nil {
		t.Fatal(err)
	}
	s, ok, err := api.ReadStatus(tj.Annotations)
	if err != nil {
		t.Fatal(err)
	}
	return s, ok
}

// events are the Events written since the last call, as "Type Reason
// Note": the transitions' (objects in the API server) and the recorder's.
func (c *cluster) events() []string {
	var out []string
	l := &eventsv1.EventList{}
	if err := c.client.List(context.Background(), l); err != nil {
		panic(err)
	}
	if c.emitted == nil {
		c.emitted = map[string]bool{}
	}
	for _, e := range l.Items {
		if !c.emitted[e.Name] {
			c.emitted[e.Name] = true
			out = append(out, e.Type+" "+e.Reason+" "+e.Note)
		}
	}
	for {
		select {
		case e := <-c.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// The status goes to the job's JobStatus, owned by the job, and never to
// the TrainJob: a write there passed Trainer's and Kueue's webhooks and
// woke their controllers (75 ms of the control plane's CPU a write against
// 10 ms, bench/statuswrite). The TrainJob is not written at all while its
// status goes from nothing to Running and on to a finding.
func TestStatusIsWrittenToItsJobStatusNotTheTrainJob(t *testing.T) {
	tj := job(2).Obj()
	c := newCluster(t, tj,
		jobPod(tj, launcher().Running(true)), jobPod(tj, worker("0").Running(true)), jobPod(tj, worker("1").Running(true)))
	before := c.trainJob(t)
	for range 3 {
		c.reconcile(t)
		c.now = c.now.Add(2 * time.Second)
	}
	after := c.trainJob(t)
	if after.ResourceVersion != before.ResourceVersion || after.Annotations[api.StatusAnnotation] != "" {
		t.Errorf("the TrainJob was written (resourceVersion %s -> %s, status annotation %q); the status belongs in its JobStatus",
			before.ResourceVersion, after.ResourceVersion, after.Annotations[api.StatusAnnotation])
	}
	js := c.jobStatus(t)
	got, ok, err := api.ReadStatus(map[string]string{api.StatusAnnotation: js.Status})
	if !js.OwnedBy(tj.UID) || js.Phase != string(api.PhaseRunning) || js.Reason != got.Reason || !ok || err != nil || got.Phase != api.PhaseRunning {
		t.Errorf("JobStatus: owned by the job %v, phase %q, reason %q; its status %+v (%v)", js.OwnedBy(tj.UID), js.Phase, js.Reason, got, err)
	}
}

// The stacks of a stuck job go into its JobStatus beside its status, not
// onto the TrainJob (a write there passed Trainer's and Kueue's webhooks
// and woke their controllers): taken once, kept through the status writes
// after them, and added to the message. The JobStatus's change is what
// wakes the diagnosis for that (wake.StacksOrGone).
func TestStacksAreKeptInTheJobStatusNotTheTrainJob(t *testing.T) {
	tj := job(2).Obj()
	tj.Annotations = map[string]string{runtimes.ProgressTimeoutAnnotation: "1m"}
	c := newCluster(t, tj, jobPod(tj, launcher().Running(true)), jobPod(tj, worker("0").Running(true)), jobPod(tj, worker("1").Running(true)))
	// The Launcher prints nothing: NoProgress after the timeout.
	c.r.Observer = &launcherlog.Observer{Read: func(context.Context, *corev1.Pod) (string, error) { return "", nil }}
	taken := 0
	c.r.Stacks = func(context.Context, string, []stacks.Pod) (stacks.Result, error) {
		taken++
		return stacks.Result{Contrast: "rank 1 waits in comm.recv while rank 0 waits in comm.Allreduce"}, nil
	}
	before := c.trainJob(t)
	for range 8 {
		c.reconcile(t)
		c.now = c.now.Add(30 * time.Second)
	}
	s, ok := c.status(t)
	if !ok || s.Reason != diagnose.ReasonNoProgress || !strings.Contains(s.Message, "comm.recv") {
		t.Errorf("status %s: %q, want NoProgress whose message says where the ranks wait", s.Reason, s.Message)
	}
	if taken != 1 {
		t.Errorf("stacks taken %d times, want once", taken)
	}
	after := c.trainJob(t)
	if after.ResourceVersion != before.ResourceVersion || after.Annotations[api.StacksAnnotation] != "" {
		t.Errorf("the TrainJob was written (resourceVersion %s -> %s, stacks annotation %q); the stacks belong in its JobStatus",
			before.ResourceVersion, after.ResourceVersion, after.Annotations[api.StacksAnnotation])
	}
	js := c.jobStatus(t)
	snap, err := api.ReadStackSnapshot(map[string]string{api.StacksAnnotation: js.Stacks})
	if err != nil || snap == nil || snap.Reason != diagnose.ReasonNoProgress || !strings.Contains(snap.Contrast, "comm.recv") {
		t.Errorf("the JobStatus's stacks: %+v (%v)", snap, err)
	}
}

// A job whose status an older manager wrote on the TrainJob (it has no
// JobStatus) keeps its stacks there, where that manager kept them.
func TestStacksOfAJobWithoutAJobStatusStayOnTheTrainJob(t *testing.T) {
	tj := job(2).Obj()
	c := newCluster(t, tj)
	if err := c.r.keepStacks(context.Background(), tj, `{"at":"2026-11-22T04:00:00Z","reason":"NoProgress"}`); err != nil {
		t.Fatal(err)
	}
	if got := c.trainJob(t); got.Annotations[api.StacksAnnotation] == "" {
		t.Errorf("annotations %v: want the stacks on the TrainJob", got.Annotations)
	}
}

// A running job: the status a second later, and the transition's Event
// with it, then nothing new; a status someone else wrote is put back; a deleted job is
// forgotten.
func TestReconcileRunningJob(t *testing.T) {
	tj := job(2).Obj()
	c := newCluster(t, tj,
		jobPod(tj, launcher().Running(true)), jobPod(tj, worker("0").Running(true)), jobPod(tj, worker("1").Running(true)))

	res := c.reconcile(t)
	if res.RequeueAfter != diagnose.StatusCoalesce {
		t.Errorf("first round: RequeueAfter = %v, want %v (the status waits a second)", res.RequeueAfter, diagnose.StatusCoalesce)
	}
	if _, ok := c.status(t); ok {
		t.Errorf("first round wrote the status; it should wait %v", diagnose.StatusCoalesce)
	}
	if ev := c.events(); len(ev) != 0 {
		t.Errorf("first round's Events = %q, want none before the status that vouches for them is written", ev)
	}

	c.now = c.now.Add(2 * time.Second)
	res = c.reconcile(t)
	s, ok := c.status(t)
	if !ok || s.Phase != api.PhaseRunning || s.WorkersReady != 2 || len(s.Pods) != 3 || len(s.History) != 1 {
		t.Fatalf("second round's status = %+v (written %v), want Running with 2 Workers ready, 3 pods and 1 transition", s, ok)
	}
	if res.RequeueAfter != diagnose.RunningRefresh {
		t.Errorf("second round: RequeueAfter = %v, want %v", res.RequeueAfter, diagnose.RunningRefresh)
	}
	if ev := c.events(); len(ev) != 1 || !strings.HasPrefix(ev[0], "Normal Running") {
		t.Errorf("second round's Events = %q, want one Normal Running, with the write", ev)
	}
	c.now = c.now.Add(2 * time.Second)
	c.reconcile(t)
	if ev := c.events(); len(ev) != 0 {
		t.Errorf("third round emitted %q; the transition had its Event already", ev)
	}

	// Someone else writes the status: the manager puts its own back.
	forged := api.Status{Phase: api.PhaseSucceeded}
	raw, _ := forged.Encode()
	patch := []byte(`{"metadata":{"annotations":{"` + api.StatusAnnotation + `":` + strconv.Quote(raw) + `}}}`)
	if err := c.client.Patch(context.Background(), &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: c.key.Name, Namespace: c.key.Namespace}},
		client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	c.now = c.now.Add(2 * time.Second)
	c.reconcile(t)
	if s, _ := c.status(t); s.Phase != api.PhaseRunning {
		t.Errorf("after a forged status the phase on the job is %s, want Running put back", s.Phase)
	}

	if err := c.client.Delete(context.Background(), tj); err != nil {
		t.Fatal(err)
	}
	c.reconcile(t)
	if _, ok := c.r.seen[c.key]; ok {
		t.Errorf("the manager still remembers a deleted job")
	}
}

// A manager that stops between a transition and the coalesced write that
// records it, or between that write and the transition's Event, and one
// that takes over: the transition's Event exists once, and the status's
// history holds the transition once.
func TestTransitionEventOnceAcrossRestart(t *testing.T) {
	cases := map[string]struct {
		restartAfter int  // rounds before the new leader (0: none)
		lose         bool // the Event the old leader wrote is lost (it was killed before it went out)
	}{
		"one manager":                                        {},
		"the leader stops before the write":                  {restartAfter: 1},
		"the leader stops after the write and its Event":     {restartAfter: 2},
		"the leader stops after the write, before its Event": {restartAfter: 2, lose: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tj := job(2).Obj()
			c := newCluster(t, tj,
				jobPod(tj, launcher().Running(true)), jobPod(tj, worker("0").Running(true)), jobPod(tj, worker("1").Running(true)))
			for round := 1; round <= 4; round++ {
				c.reconcile(t)
				if round == tc.restartAfter {
					c.r = &Reconciler{Client: c.r.Client, Reader: c.r.Reader, Logs: c.r.Logs, Recorder: c.r.Recorder, Runtimes: c.r.Runtimes, Now: c.r.Now}
					if tc.lose {
						if err := c.client.DeleteAllOf(context.Background(), &eventsv1.Event{}, client.InNamespace(tj.Namespace)); err != nil {
							t.Fatal(err)
						}
					}
				}
				c.now = c.now.Add(2 * time.Second)
			}
			l := &eventsv1.EventList{}
			if err := c.client.List(context.Background(), l); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range l.Items {
				got = append(got, e.Type+" "+e.Reason)
			}
			if diff := cmp.Diff([]string{"Normal Running"}, got); diff != "" {
				t.Errorf("Events (-want +got):\n%s", diff)
			}
			s, _ := c.status(t)
			var hist []api.Phase
			for _, h := range s.History {
				hist = append(hist, h.Phase)
			}
			if diff := cmp.Diff([]api.Phase{api.PhaseRunning}, hist); diff != "" {
				t.Errorf("history (-want +got):\n%s", diff)
			}
			if len(l.Items) == 1 && api.ForgedEvent(corev1.Event{InvolvedObject: corev1.ObjectReference{UID: tj.UID}, Type: l.Items[0].Type, Reason: l.Items[0].Reason,
				Message: l.Items[0].Note, ReportingController: l.Items[0].ReportingController}, s) {
				t.Errorf("the status does not vouch for its Event %q", l.Items[0].Note)
			}
		})
	}
}

// Transitions kept for one coalesced write go out with it, each once: a
// job seen Starting, then Running before its first write.
func TestKeptTransitionsGoOutWithTheWrite(t *testing.T) {
	tj := job(2).Obj()
	l := jobPod(tj, launcher())
	c := newCluster(t, tj, l, jobPod(tj, worker("0").Running(true)), jobPod(tj, worker("1").Running(true)))
	c.reconcile(t)
	first := c.events()
	now := &corev1.Pod{}
	if err := c.client.Get(context.Background(), client.ObjectKeyFromObject(l), now); err != nil {
		t.Fatal(err)
	}
	now.Status = launcher().Running(true).Status
	if err := c.client.Status().Update(context.Background(), now); err != nil {
		t.Fatal(err)
	}
	c.now = c.now.Add(300 * time.Millisecond)
	c.reconcile(t)
	if ev := c.events(); len(first)+len(ev) != 0 {
		t.Fatalf("Events before the first write: %q %q", first, ev)
	}
	c.now = c.now.Add(2 * time.Second)
	c.reconcile(t)
	var got []string
	for _, e := range c.events() {
		f := strings.Fields(e)
		got = append(got, f[0]+" "+f[1])
	}
	if len(got) != 2 || !slices.Contains(got, "Normal Running") || got[0] == got[1] {
		t.Errorf("Events with the first write = %q, want the start's and Normal Running", got)
	}
	s, _ := c.status(t)
	if len(s.History) != 2 || s.History[1].Phase != api.PhaseRunning {
		t.Errorf("history = %+v, want the start's transition, then Running", s.History)
	}
}

// A job past its gang-scheduling timeout with a Worker placed is
// suspended; the status says why before the job is suspended.
func TestReconcileSuspendsAfterTheGangTimeout(t *testing.T) {
	tj := job(2).Obj()
	tj.Annotations = map[string]string{}
	prev := api.Status{Phase: api.PhaseGangScheduling, Reason: diagnose.ReasonUnschedulable, WorkersTotal: 2,
		LastTransitionTime: ptr.To(metav1.NewTime(t0.Add(-10 * time.Minute)))}
	raw, _ := prev.Encode()
	tj.Annotations[api.StatusAnnotation] = raw
	c := newCluster(t, tj, jobPod(tj, worker("0").Running(true)), jobPod(tj, worker("1")))
	rt := &trainer.ClusterTrainingRuntime{}
	if err := c.client.Get(context.Background(), client.ObjectKey{Name: tj.Spec.RuntimeRef.Name}, rt); err != nil {
		t.Fatal(err)
	}
	rt.Annotations[runtimes.GangTimeoutAnnotation] = "5m"
	if err := c.client.Update(context.Background(), rt); err != nil {
		t.Fatal(err)
	}

	c.reconcile(t)
	got := &trainer.TrainJob{}
	if err := c.client.Get(context.Background(), c.key, got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Suspend == nil || !*got.Spec.Suspend || got.Annotations[api.SuspendedByAnnotation] != api.SuspendedByGangTimeout {
		t.Errorf("suspend = %v, %s = %q; want the job suspended by the gang-scheduling timeout",
			got.Spec.Suspend, api.SuspendedByAnnotation, got.Annotations[api.SuspendedByAnnotation])
	}
	if s, _ := c.status(t); s.Reason != diagnose.ReasonGangSchedulingTimeout {
		t.Errorf("status reason = %q, want %s", s.Reason, diagnose.ReasonGangSchedulingTimeout)
	}
	if ev := c.events(); len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning "+diagnose.ReasonGangSchedulingTimeout) {
		t.Errorf("Events = %q, want one Warning %s", ev, diagnose.ReasonGangSchedulingTimeout)
	}
}

// A job whose runtime is not an MPI runtime, or is gone, is left alone.
func TestReconcileLeavesOtherJobsAlone(t *testing.T) {
	tj := job(2).Obj()
	c := newCluster(t, tj)
	tj2 := job(2).Obj()
	tj2.Name = "torch"
	tj2.Spec.RuntimeRef = trainer.RuntimeRef{Name: "torch-distributed"}
	if err := c.client.Create(context.Background(), tj2); err != nil {
		t.Fatal(err)
	}
	c.key = client.ObjectKeyFromObject(tj2)
	if res := c.reconcile(t); res.RequeueAfter != 0 {
		t.Errorf("a job without an MPI runtime is requeued after %v", res.RequeueAfter)
	}
	if _, ok := c.status(t); ok || len(c.events()) != 0 {
		t.Errorf("a job without an MPI runtime got a status or an Event")
	}
}

// The Launcher log's tail that the manager logs is redacted as the
// status's quotes are: its own log is read by people who may not read
// the job's.
func TestLogTailIsRedacted(t *testing.T) {
	got := logTail("step 1\nexport AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\nwandb key 0123456789abcdef0123456789abcdef01\n")
	if strings.Contains(got, "wJalrXUtnFEMI") || strings.Contains(got, "0123456789abcdef0123456789abcdef01") {
		t.Fatalf("the logged tail keeps a secret: %q", got)
	}
	if long := logTail(strings.Repeat("x", 1000)); len(long) != 300 {
		t.Fatalf("the tail is %d bytes, want the last 300", len(long))
	}
}

// What the diagnosis remembers of finished jobs is bounded: beyond
// MaxRemembered the finished job written to longest ago goes, running
// jobs stay.
func TestMemoryOfFinishedJobsIsBounded(t *testing.T) {
	r := &Reconciler{MaxRemembered: 3}
	tjOf := func(name string) *trainer.TrainJob {
		return &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name)}}
	}
	at := func(minutes int) time.Time { return t0.Add(time.Duration(minutes) * time.Minute) }
	r.store(tjOf("running-old"), diagnose.Memory{UID: "running-old", Diagnosed: api.Status{Phase: api.PhaseRunning}, WroteAt: at(0)})
	r.store(tjOf("done-2"), diagnose.Memory{UID: "done-2", Diagnosed: api.Status{Phase: api.PhaseSucceeded}, WroteAt: at(2)})
	r.store(tjOf("done-1"), diagnose.Memory{UID: "done-1", Diagnosed: api.Status{Phase: api.PhaseFailed}, WroteAt: at(1)})
	r.store(tjOf("new"), diagnose.Memory{UID: "new", Diagnosed: api.Status{Phase: api.PhaseRunning}, FirstSeen: at(3)})
	var got []string
	for k := range r.seen {
		got = append(got, k.Name)
	}
	sort.Strings(got)
	if diff := cmp.Diff([]string{"done-2", "new", "running-old"}, got); diff != "" {
		t.Errorf("remembered (-want,+got):\n%s", diff)
	}
	// Only running jobs left beyond the bound: none is forgotten.
	r.MaxRemembered = 1
	r.store(tjOf("new-2"), diagnose.Memory{UID: "new-2", Diagnosed: api.Status{Phase: api.PhaseRunning}})
	if _, ok := r.seen[types.NamespacedName{Namespace: "ns", Name: "running-old"}]; !ok {
		t.Error("a running job was forgotten")
	}
	if _, ok := r.seen[types.NamespacedName{Namespace: "ns", Name: "done-2"}]; ok {
		t.Error("the last finished job is still remembered beyond the bound")
	}
}

// The job's last progress report goes out before the status that ends
// every watch: BeforeFinished runs once, before the first finished status
// is written, and not for the rounds after it.
func TestBeforeFinishedRunsOnceBeforeTheFinishedStatus(t *testing.T) {
	tj := job(2).Obj()
	c := newCluster(t, tj,
		jobPod(tj, launcher().Running(true)), jobPod(tj, worker("0").Running(true)), jobPod(tj, worker("1").Running(true)))
	var calls []api.Phase // the phase on the job when the hook ran
	c.r.BeforeFinished = func(_ context.Context, got *trainer.TrainJob, l *corev1.Pod) (*api.Resumed, error) {
		if got.Name != tj.Name {
			t.Errorf("BeforeFinished for %s, want %s", got.Name, tj.Name)
		}
		// The Launcher the diagnosis gathered, ended as it saw it.
		if l == nil || l.Labels[jobsetv1alpha2.ReplicatedJobNameKey] != api.LauncherJob || l.Status.Phase != corev1.PodSucceeded {
			t.Errorf("BeforeFinished was given the Launcher %+v, want the job's, Succeeded", l)
		}
		s, _ := c.status(t)
		calls = append(calls, s.Phase)
		return &api.Resumed{Epoch: 3}, nil
	}
	for range 2 {
		c.reconcile(t)
		c.now = c.now.Add(2 * time.Second)
	}
	if s, _ := c.status(t); s.Phase != api.PhaseRunning || len(calls) != 0 {
		t.Fatalf("while running: phase %s and %d calls of BeforeFinished, want Running and none", s.Phase, len(calls))
	}
	// The job ends: Trainer says Complete and the Launcher exited 0.
	c.succeed(t, tj)
	for range 4 {
		c.reconcile(t)
		c.now = c.now.Add(2 * time.Second)
	}
	if s, _ := c.status(t); s.Phase != api.PhaseSucceeded {
		t.Fatalf("after the job ended: phase %s, want Succeeded", s.Phase)
	}
	// Where the program resumed, read by the hook, is on the first finished status.
	if s, _ := c.status(t); s.Resumed == nil || s.Resumed.Epoch != 3 {
		t.Errorf("the finished status's resume %+v, want the hook's epoch 3", s.Resumed)
	}
	if diff := cmp.Diff([]api.Phase{api.PhaseRunning}, calls); diff != "" {
		t.Errorf("BeforeFinished calls (the phase on the job at each) (-want +got):\n%s", diff)
	}
}

// TestEventReadsAreShared: the diagnosis of two jobs in one namespace
// within EventReadTTL lists the namespace's Events of a reason once, and
// each job still gets only its own; after the TTL the next round reads
// again, and a failed read is not kept.
func TestEventReadsAreShared(t *testing.T) {
	ev := func(name, obj string) *corev1.Event {
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a"}, Reason: "FailedCreate",
			InvolvedObject: corev1.ObjectReference{Kind: "Job", Namespace: "team-a", Name: obj}}
	}
	lists := 0
	fail := false
	c := fake.NewClientBuilder().WithScheme(api.NewScheme()).
		WithObjects(ev("a", "alpha-launcher-0"), ev("b", "beta-node-0"), ev("c", "gamma-node-0")).
		WithIndex(&corev1.Event{}, "reason", func(o client.Object) []string { return []string{o.(*corev1.Event).Reason} }).
		WithInterceptorFuncs(interceptor.Funcs{List: func(ctx context.Context, cl client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*corev1.EventList); ok {
				lists++
				if fail {
					return errors.New("the API server is away")
				}
			}
			return cl.List(ctx, list, opts...)
		}}).Build()
	now := t0
	r := &Reconciler{Client: c, Reader: c, Now: func() time.Time { return now }}
	job := func(name string) *trainer.TrainJob {
		return &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a"}}
	}
	names := func(evs []corev1.Event) []string {
		var out []string
		for _, e := range evs {
			out = append(out, e.InvolvedObject.Name)
		}
		return out
	}
	ctx := context.Background()
	got := map[string][]string{
		"alpha": names(r.jobEvents(ctx, job("alpha"), "FailedCreate", "Job")),
		"beta":  names(r.jobEvents(ctx, job("beta"), "FailedCreate", "Job")),
		"delta": names(r.jobEvents(ctx, job("delta"), "FailedCreate", "Job")),
	}
	want := map[string][]string{"alpha": {"alpha-launcher-0"}, "beta": {"beta-node-0"}, "delta": nil}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("each job's Events (-want +got):\n%s", diff)
	}
	if lists != 1 {
		t.Errorf("three jobs in one namespace within %v listed Events %d times, want 1", EventReadTTL, lists)
	}
	now = now.Add(EventReadTTL)
	fail = true
	if evs := r.jobEvents(ctx, job("alpha"), "FailedCreate", "Job"); evs != nil {
		t.Errorf("a failed read gave %v, want none", names(evs))
	}
	fail = false
	if got := names(r.jobEvents(ctx, job("alpha"), "FailedCreate", "Job")); !cmp.Equal(got, []string{"alpha-launcher-0"}) {
		t.Errorf("after a failed read: %v", got)
	}
	if lists != 3 {
		t.Errorf("after the TTL, a failed read and a retry: %d lists, want 3", lists)
	}
}

// A running job with a progress timeout: each diagnosis round reads the
// Launcher's log once, the same way the progress controller does (it
// read the last line apart before).
func TestDiagnosisReadsTheLauncherLogOnce(t *testing.T) {
	tj := job(2).Obj()
	tj.Annotations = map[string]string{runtimes.ProgressTimeoutAnnotation: "10m"}
	c := newCluster(t, tj, jobPod(tj, launcher().Running(true)), jobPod(tj, worker("0").Running(true)), jobPod(tj, worker("1").Running(true)))
	cs := kubefake.NewClientset()
	c.r.Logs = cs
	c.reconcile(t)
	want := []corev1.PodLogOptions{{Container: api.NodeContainer, TailLines: ptr.To[int64](launcherlog.LogTailLines), Timestamps: true}}
	if diff := cmp.Diff(want, diagnosetest.LogReads(cs)); diff != "" {
		t.Errorf("log reads of one round (-want +got):\n%s", diff)
	}
}

// A running job's diagnosis takes the progress controller's read of its
// Launcher (one read per round, not two).
func TestDiagnosisTakesTheProgressRead(t *testing.T) {
	tj := job(2).Obj()
	tj.Annotations = map[string]string{runtimes.ProgressTimeoutAnnotation: "10m"}
	l := jobPod(tj, launcher().Running(true))
	c := newCluster(t, tj, l, jobPod(tj, worker("0").Running(true)), jobPod(tj, worker("1").Running(true)))
	cs := kubefake.NewClientset()
	obs := &launcherlog.Observer{Logs: cs}
	c.r.Observer = obs
	// The progress controller's round, a moment before.
	if _, err := obs.Observe(context.Background(), l, 10*time.Minute, 5*time.Second, c.now.Add(-3*time.Second), false); err != nil {
		t.Fatal(err)
	}
	c.reconcile(t)
	if n := len(diagnosetest.LogReads(cs)); n != 1 {
		t.Errorf("%d log reads for one round of both, want 1", n)
	}
}

// A running Launcher whose log cannot be read (a pod on a kwok node, with
// no kubelet to serve it) costs one read per round and no wait: the
// reconcile worker is not held. A failed job's lines are tried again.
func TestUnreadableLogIsTriedOnceWhileRunning(t *testing.T) {
	tj := job(2).Obj()
	tj.Annotations = map[string]string{runtimes.ProgressTimeoutAnnotation: "10m"}
	l := jobPod(tj, launcher().Running(true))
	c := newCluster(t, tj, l, jobPod(tj, worker("0").Running(true)), jobPod(tj, worker("1").Running(true)))
	reads := 0
	c.r.Observer = &launcherlog.Observer{Read: func(context.Context, *corev1.Pod) (string, error) {
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

// A job whose namespace is being deleted is not diagnosed again: its
// JobSet and pods may go before it, and a status written then (the pods
// not created yet) is read by nobody but costs a write through Trainer's
// and Kueue's webhooks for every job of the namespace.
func TestNoDiagnosisWhileTheNamespaceGoes(t *testing.T) {
	tj := job(2).Obj()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tj.Namespace}}
	c := newCluster(t, tj, ns,
		jobPod(tj, launcher().Running(true)), jobPod(tj, worker("0").Running(true)), jobPod(tj, worker("1").Running(true)))
	c.reconcile(t)
	c.now = c.now.Add(2 * time.Second)
	c.reconcile(t)
	before, ok := c.status(t)
	if !ok {
		t.Fatal("no status for a running job in a live namespace")
	}
	// The namespace goes: the JobSet (and with it the pods) first.
	ns.Status.Phase = corev1.NamespaceTerminating
	if err := c.client.Status().Update(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	js := &jobsetv1alpha2.JobSet{}
	if err := c.client.Get(context.Background(), c.key, js); err != nil {
		t.Fatal(err)
	}
	if err := c.client.Delete(context.Background(), js); err != nil {
		t.Fatal(err)
	}
	writes := 0
	c.r.Client = interceptor.NewClient(c.client, interceptor.Funcs{
		Apply: func(ctx context.Context, cl client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			writes++
			return cl.Apply(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			writes++
			return cl.Patch(ctx, obj, patch, opts...)
		},
		Update: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			writes++
			return cl.Update(ctx, obj, opts...)
		},
	})
	c.now = c.now.Add(time.Minute)
	c.reconcile(t)
	after, _ := c.status(t)
	if writes != 0 {
		t.Errorf("%d writes for a job whose namespace is being deleted, want none", writes)
	}
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("the status changed while the namespace goes (-before +after):\n%s", diff)
	}
}

// A finished job's JobStatus deleted while the job is there (the manager
// never deletes one; wake.StacksOrGone wakes the diagnosis for it) is
// written again as it was, reason and pod records included, in the round
// that wakes: no transition Event again, and nothing read of the job's
// children for it.
func TestDeletedJobStatusIsWrittenAgain(t *testing.T) {
	tj := job(2).Obj()
	c := newCluster(t, tj,
		jobPod(tj, launcher().Running(true)), jobPod(tj, worker("0").Running(true)), jobPod(tj, worker("1").Running(true)))
	for range 2 {
		c.reconcile(t)
		c.now = c.now.Add(2 * time.Second)
	}
	c.succeed(t, tj)
	for range 3 {
		c.reconcile(t)
		c.now = c.now.Add(2 * time.Second)
	}
	want, ok := c.status(t)
	if !ok || want.Phase != api.PhaseSucceeded || len(want.Pods) == 0 {
		t.Fatalf("before the delete: status %+v, want Succeeded with its pods recorded", want)
	}
	c.events() // the transitions' Events so far
	if err := c.client.Delete(context.Background(), c.jobStatus(t)); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.status(t); ok {
		t.Fatal("the JobStatus is still read after its delete")
	}
	c.reconcile(t)
	got, ok := c.status(t)
	if !ok {
		t.Fatal("the round after the delete wrote no JobStatus")
	}
	// ObservedTime says when the manager wrote it: now.
	if d := cmp.Diff(want, got, cmpopts.IgnoreFields(api.Status{}, "ObservedTime")); d != "" {
		t.Errorf("the status written again (-before the delete +after):\n%s", d)
	}
	if got.ObservedTime == nil || !got.ObservedTime.Time.Equal(c.now) {
		t.Errorf("ObservedTime %v, want the round's time %v", got.ObservedTime, c.now)
	}
	if evs := c.events(); len(evs) != 0 {
		t.Errorf("Events after the rewrite %v, want none: each transition's Event is written once", evs)
	}
}
