package jobpods

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/jobview"
	"github.com/mpijob/mpijob/pkg/logstore"
)

type podVector struct {
	Name          string    `json:"name"`
	ReplicatedJob string    `json:"replicatedJob"`
	Index         *string   `json:"index"`
	Created       time.Time `json:"created"`
}

func TestSplitVectors(t *testing.T) {
	var file struct {
		Vectors []struct {
			Name      string      `json:"name"`
			Pods      []podVector `json:"pods"`
			Launchers []string    `json:"launchers"`
			Workers   []string    `json:"workers"`
		} `json:"vectors"`
	}
	readJSON(t, "testdata/job-pods.json", &file)
	for _, v := range file.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			var items []corev1.Pod
			for _, p := range v.Pods {
				labels := map[string]string{}
				if p.ReplicatedJob != "" {
					labels["jobset.sigs.k8s.io/replicatedjob-name"] = p.ReplicatedJob
				}
				if p.Index != nil {
					labels[indexLabel] = *p.Index
				}
				items = append(items, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Labels: labels, CreationTimestamp: metav1.NewTime(p.Created)}})
			}
			got := Split(items)
			names := func(ps []corev1.Pod) []string {
				out := []string{}
				for _, p := range ps {
					out = append(out, p.Name)
				}
				return out
			}
			if diff := cmp.Diff(v.Launchers, names(got.Launchers)); diff != "" {
				t.Errorf("Launchers (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(v.Workers, names(got.Workers)); diff != "" {
				t.Errorf("Workers (-want +got):\n%s", diff)
			}
		})
	}
}

// List reads the job's pods through a client (another job's are left out)
// and sorts them as Split does: Workers by index as a number, Launchers
// newest first.
func TestList(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	pod := func(job, rj, name, index string, created time.Time) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, CreationTimestamp: metav1.NewTime(created), Labels: map[string]string{
			"jobset.sigs.k8s.io/jobset-name": job, "jobset.sigs.k8s.io/replicatedjob-name": rj, indexLabel: index,
		}}}
	}
	c := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(
		pod("j", "node", "j-node-0-10-aaaaa", "10", t0),
		pod("j", "node", "j-node-0-2-bbbbb", "2", t0),
		pod("j", "launcher", "j-launcher-0-0-old00", "0", t0),
		pod("j", "launcher", "j-launcher-0-0-new00", "0", t0.Add(time.Minute)),
		pod("other", "node", "other-node-0-0-ccccc", "0", t0),
	).Build()
	got, err := List(context.Background(), c, &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "j"}})
	if err != nil {
		t.Fatal(err)
	}
	names := func(ps []corev1.Pod) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.Name)
		}
		return out
	}
	if d := cmp.Diff([]string{"j-launcher-0-0-new00", "j-launcher-0-0-old00"}, names(got.Launchers)); d != "" {
		t.Errorf("launchers (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"j-node-0-2-bbbbb", "j-node-0-10-aaaaa"}, names(got.Workers)); d != "" {
		t.Errorf("workers (-want +got):\n%s", d)
	}
}

func TestLogOptionsVectors(t *testing.T) {
	var file struct {
		Vectors []struct {
			Name   string               `json:"name"`
			Window Window               `json:"window"`
			Want   corev1.PodLogOptions `json:"want"`
		} `json:"vectors"`
	}
	readJSON(t, "testdata/log-options.json", &file)
	if len(file.Vectors) == 0 {
		t.Fatal("no vectors")
	}
	for _, v := range file.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			if diff := cmp.Diff(&v.Want, LogOptions(v.Window)); diff != "" {
				t.Errorf("LogOptions(%+v) (-want +got):\n%s", v.Window, diff)
			}
		})
	}
}

func worker(name, index string, phase corev1.PodPhase) corev1.Pod {
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"jobset.sigs.k8s.io/replicatedjob-name": "node", indexLabel: index}},
		Status:     corev1.PodStatus{Phase: phase},
	}
}

func TestPodsPick(t *testing.T) {
	p := Split([]corev1.Pod{
		worker("w0-old", "0", corev1.PodSucceeded),
		worker("w0-new", "0", corev1.PodRunning),
		worker("w1", "1", corev1.PodPending),
		{ObjectMeta: metav1.ObjectMeta{Name: "l-old", Labels: map[string]string{"jobset.sigs.k8s.io/replicatedjob-name": "launcher"}, CreationTimestamp: metav1.NewTime(time.Unix(1, 0))},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}},
		{ObjectMeta: metav1.ObjectMeta{Name: "l-new", Labels: map[string]string{"jobset.sigs.k8s.io/replicatedjob-name": "launcher"}, CreationTimestamp: metav1.NewTime(time.Unix(2, 0))},
			Status: corev1.PodStatus{Phase: corev1.PodPending}},
	})
	name := func(p *corev1.Pod) string {
		if p == nil {
			return "<none>"
		}
		return p.Name
	}
	got := map[string]string{
		"launcher":          name(p.Launcher()),
		"worker 0":          name(p.Worker(0)),
		"worker 1":          name(p.Worker(1)),
		"worker 2":          name(p.Worker(2)),
		"running launcher":  name(p.Running(RoleLauncher, -1)),
		"running worker 0":  name(p.Running(RoleWorker, 0)),
		"running worker 1":  name(p.Running(RoleWorker, 1)),
		"read of worker 0":  name(p.PodOf(jobview.LogRead{Role: RoleWorker, Index: 0, From: jobview.LogPod})),
		"read from a store": name(p.PodOf(jobview.LogRead{Role: RoleWorker, Index: 0, From: jobview.LogStore})),
	}
	want := map[string]string{
		"launcher":          "l-new",
		"worker 0":          "w0-new",
		"worker 1":          "w1",
		"worker 2":          "<none>",
		"running launcher":  "l-old",
		"running worker 0":  "w0-new",
		"running worker 1":  "<none>",
		"read of worker 0":  "w0-new",
		"read from a store": "<none>",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("picks (-want +got):\n%s", diff)
	}
	job := p.LogJob(&trainer.TrainJob{}, api.Status{}, true)
	if diff := cmp.Diff([]int{0, 1}, job.LiveWorkers); diff != "" || !job.LauncherLive || !job.Store {
		t.Errorf("LogJob = %+v: want Workers 0 and 1 live once each, the Launcher live, a store (%s)", job, diff)
	}
}

func TestNotStartedYet(t *testing.T) {
	waiting := apierrors.NewBadRequest(`container "node" in pod "hello-launcher-0-0-x" is waiting to start: ContainerCreating`)
	if !NotStartedYet(waiting) {
		t.Error("a container waiting to start is not recognised")
	}
	if NotStartedYet(apierrors.NewBadRequest("a container name must be specified")) || NotStartedYet(apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "x")) {
		t.Error("other errors must not be waited on")
	}
}

// store is a log store that records the queries it is asked.
type store struct {
	lines   string
	err     error
	queries []logstore.Query
}

func (s *store) Available(context.Context) bool { return true }

func (s *store) Open(_ context.Context, _, _ string, q logstore.Query) (io.ReadCloser, error) {
	s.queries = append(s.queries, q)
	if s.err != nil {
		return nil, s.err
	}
	return io.NopCloser(strings.NewReader(s.lines)), nil
}

func TestOpenStored(t *testing.T) {
	end := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	lines := "t1 one\nt2 two\nt3 three\n"
	cases := map[string]struct {
		read      jobview.LogRead
		win       Window
		end       time.Time
		err       error
		want      string
		wantQuery logstore.Query
		wantErr   string
	}{
		"the launcher, whole": {
			read: jobview.LogRead{Label: "launcher", Role: RoleLauncher, Index: -1}, want: lines,
			wantQuery: logstore.Query{Role: "launcher", Index: -1},
		},
		"a worker's last two lines since a minute": {
			read: jobview.LogRead{Label: "worker-2", Role: RoleWorker, Index: 2}, win: Window{TailLines: ptr.To[int64](2), SinceSeconds: 60},
			want: "t2 two\nt3 three\n", wantQuery: logstore.Query{Role: "worker", Index: 2, SinceSeconds: 60},
		},
		"no lines": {
			read: jobview.LogRead{Label: "worker-0", Role: RoleWorker}, win: Window{TailLines: ptr.To[int64](0)},
			wantQuery: logstore.Query{Role: "worker"},
		},
		"before a live pod's first line": {
			read: jobview.LogRead{Label: "worker-0", Role: RoleWorker}, end: end, want: lines,
			wantQuery: logstore.Query{Role: "worker", End: end},
		},
		"refused": {
			read: jobview.LogRead{Label: "worker-1", Role: RoleWorker, Index: 1}, err: apierrors.NewForbidden(schema.GroupResource{Resource: "trainjobs"}, "j", errors.New("no")),
			wantQuery: logstore.Query{Role: "worker", Index: 1}, wantErr: "the log store refused to show worker-1 of job j",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := &store{lines: lines, err: tc.err}
			rc, err := Reader{Store: s}.OpenStored(context.Background(), "ns", "j", tc.read, tc.win, tc.end)
			if diff := cmp.Diff([]logstore.Query{tc.wantQuery}, s.queries); diff != "" {
				t.Errorf("queries (-want +got):\n%s", diff)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(rc)
			if diff := cmp.Diff(tc.want, string(b)); diff != "" {
				t.Errorf("lines (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := (Reader{}).OpenStored(context.Background(), "ns", "j", jobview.LogRead{Label: "launcher", Role: RoleLauncher}, Window{}, time.Time{}); err == nil || !strings.Contains(err.Error(), "keeps no log store") {
		t.Errorf("no store: err = %v", err)
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// Split sizes its lists before it fills them: grown by append, a job's
// pods (large structs) were copied again at each growth, 6 % of
// mpijob-manager's allocations in bench/scale. A Launcher and 8 Workers
// take the two lists and sort.SliceStable's two allocations for each
// (9 before: the Workers' list grew four times).
func TestSplitAllocatesEachListOnce(t *testing.T) {
	items := []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "j-launcher-0-0", Labels: map[string]string{jobsetv1alpha2.ReplicatedJobNameKey: api.LauncherJob}}}}
	for i := 7; i >= 0; i-- {
		items = append(items, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("j-node-0-%d", i), Labels: map[string]string{
			jobsetv1alpha2.ReplicatedJobNameKey: api.WorkerJob, indexLabel: strconv.Itoa(i)}}})
	}
	var p Pods
	allocs := testing.AllocsPerRun(100, func() { p = Split(items) })
	if len(p.Launchers) != 1 || len(p.Workers) != 8 || p.Workers[0].Name != "j-node-0-0" {
		t.Fatalf("split %d Launchers and %d Workers (first %q), want 1 and 8 from j-node-0-0", len(p.Launchers), len(p.Workers), p.Workers[0].Name)
	}
	if allocs > 6 {
		t.Errorf("%.0f allocations for a Launcher and 8 Workers, want at most 6 (two lists, two sorts)", allocs)
	}
}
