package jobview

import (
	"encoding/json"
	"flag"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mpijob/mpijob/pkg/api"
)

// podVectors are testdata/pods.json, which the SDK's tests load too.
type podVectors struct {
	Vectors []struct {
		Name         string          `json:"name"`
		WorkersTotal int32           `json:"workersTotal"`
		Status       json.RawMessage `json:"status"`
		Live         []struct {
			Role, Name, Phase, Reason, Terminated string
			Index                                 int
			Ready                                 bool
			ExitCode                              int32
		} `json:"live"`
		Pods []struct {
			Role, Name, State, Health string
			Index                     int
			Gone                      bool
		} `json:"pods"`
		Failed []api.FailedPod `json:"failed"`
	} `json:"vectors"`
}

func loadPodVectors(t *testing.T) podVectors {
	return loadVectors[podVectors](t, "testdata/pods.json", func(v podVectors) int { return len(v.Vectors) }, 4)
}

// loadVectors reads a file of shared vectors (testdata/, which the SDK or
// the front end load too) into a T, and fails the test when it holds
// fewer than least of them (count says how many it holds).
func loadVectors[T any](t *testing.T, file string, count func(T) int, least int) T {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if n := count(v); n < least {
		t.Fatalf("%s: %d vectors, want at least %d", file, n, least)
	}
	return v
}

func TestPodVectors(t *testing.T) {
	for _, tc := range loadPodVectors(t).Vectors {
		t.Run(tc.Name, func(t *testing.T) {
			var st api.Status
			if err := json.Unmarshal(tc.Status, &st); err != nil {
				t.Fatal(err)
			}
			var live []corev1.Pod
			for _, l := range tc.Live {
				rj := api.WorkerJob
				if l.Role == "launcher" {
					rj = api.LauncherJob
				}
				p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: l.Name, Labels: map[string]string{
					"jobset.sigs.k8s.io/replicatedjob-name": rj, "batch.kubernetes.io/job-completion-index": strconv.Itoa(l.Index)}},
					Status: corev1.PodStatus{Phase: corev1.PodPhase(l.Phase), Reason: l.Reason}}
				if l.Ready {
					p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
				}
				if l.Terminated != "" {
					p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "node", State: corev1.ContainerState{
						Terminated: &corev1.ContainerStateTerminated{Reason: l.Terminated, ExitCode: l.ExitCode}}}}
				}
				live = append(live, p)
			}
			type view struct {
				Role, Name, State, Health string
				Index                     int
				Gone                      bool
			}
			var got, want []view
			for _, p := range Pods(live, st, tc.WorkersTotal) {
				got = append(got, view{p.Role, p.Name, p.State, p.Health, p.Index, p.Gone})
			}
			for _, p := range tc.Pods {
				want = append(want, view(p))
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Pods (-want,+got):\n%s", diff)
			}

			// The list every interface reads, as JobOf passes it on.
			enc, err := st.Encode()
			if err != nil {
				t.Fatal(err)
			}
			j := JobOf(&trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "pi", Annotations: map[string]string{api.StatusAnnotation: enc}}})
			if diff := cmp.Diff(tc.Failed, j.Failed, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Job.Failed (-want,+got):\n%s", diff)
			}
			// And as the manager computes it from its records and its
			// diagnosis.
			if st.Phase == api.PhaseFailed {
				if diff := cmp.Diff(tc.Failed, api.FailedPods(st.Pods, st.Subject, st.Reason), cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("api.FailedPods (-want,+got):\n%s", diff)
				}
			}
		})
	}
}

// TestSummaryVectors: testdata/summaries.json, which the wizard's Review
// step loads too (createForm.vectors.test.ts).
func TestSummaryVectors(t *testing.T) {
	type vectors struct {
		Vectors []struct {
			Name           string            `json:"name"`
			Workers        int32             `json:"workers"`
			SlotsPerWorker int32             `json:"slotsPerWorker"`
			Worker         map[string]string `json:"worker"`
			Summary        string            `json:"summary"`
		} `json:"vectors"`
	}
	v := loadVectors[vectors](t, "testdata/summaries.json", func(v vectors) int { return len(v.Vectors) }, 8)
	for _, tc := range v.Vectors {
		t.Run(tc.Name, func(t *testing.T) {
			rl := corev1.ResourceList{}
			for k, q := range tc.Worker {
				rl[corev1.ResourceName(k)] = resource.MustParse(q)
			}
			if diff := cmp.Diff(tc.Summary, Summary(tc.Workers, tc.SlotsPerWorker, rl)); diff != "" {
				t.Errorf("Summary (-vector +got):\n%s", diff)
			}
		})
	}
}

// jobVectors are testdata/jobs.json: TrainJobs as read at Now, each with
// the row a list shows of it.
type jobVectors struct {
	Vectors []struct {
		Name     string            `json:"name"`
		Now      time.Time         `json:"now"`
		TrainJob *trainer.TrainJob `json:"trainJob"`
		Row      Row               `json:"row"`
	} `json:"vectors"`
}

func loadJobVectors(t *testing.T) jobVectors {
	return loadVectors[jobVectors](t, "testdata/jobs.json", func(v jobVectors) int { return len(v.Vectors) }, 6)
}

// TestRowVectors: testdata/jobs.json, a TrainJob and the row a list shows
// of it (get's cells), which the SDK's MPIJob.row returns too.
func TestRowVectors(t *testing.T) {
	v := loadJobVectors(t)
	for _, tc := range v.Vectors {
		t.Run(tc.Name, func(t *testing.T) {
			if diff := cmp.Diff(tc.Row, RowOf(JobOf(tc.TrainJob), tc.Now)); diff != "" {
				t.Errorf("RowOf (-vector +got):\n%s", diff)
			}
		})
	}
}

var updateDetails = flag.Bool("update", false, "rewrite testdata/details.json from DetailOf")

// detailVector is one case of testdata/details.json: a TrainJob of
// jobs.json (by its name) read while the manager was as Manager says, and
// the parts of its Detail that the SDK shows too (its MPIJob and JobStatus,
// tests/test_jobview_vectors.py).
type detailVector struct {
	Job     string            `json:"job"`
	Manager *api.ManagerState `json:"manager,omitempty"`
	Detail  sharedDetail      `json:"detail"`
}

type sharedDetail struct {
	StaleNote    string           `json:"staleNote"`
	History      []api.Transition `json:"history"`
	ProgressLine string           `json:"progressLine"`
	Metrics      []string         `json:"metrics"`
	ResumedLine  string           `json:"resumedLine,omitempty"`
	AttemptsLine string           `json:"attemptsLine,omitempty"`
}

// TestDetailVectors: testdata/details.json, the job page's stale note,
// history, progress line and metrics of jobs.json's TrainJobs, which the
// SDK computes from the same TrainJobs (go test -run TestDetailVectors
// -update ./pkg/jobview writes them from DetailOf; the cases, which job
// under which manager, are the file's).
func TestDetailVectors(t *testing.T) {
	type details struct {
		Vectors []detailVector `json:"vectors"`
	}
	js := loadJobVectors(t)
	ds := loadVectors[details](t, "testdata/details.json", func(v details) int { return len(v.Vectors) }, 5)
	byName := map[string]int{}
	for i, j := range js.Vectors {
		byName[j.Name] = i
	}
	for i, tc := range ds.Vectors {
		j, ok := byName[tc.Job]
		if !ok {
			t.Fatalf("details.json names %q, which jobs.json does not have", tc.Job)
		}
		in := js.Vectors[j]
		d := DetailOf(Known{Job: in.TrainJob, Manager: tc.Manager, Now: in.Now})
		got := sharedDetail{StaleNote: d.StaleNote, History: d.History, ProgressLine: d.ProgressLine, Metrics: d.Metrics,
			ResumedLine: d.ResumedLine, AttemptsLine: d.AttemptsLine}
		if *updateDetails {
			ds.Vectors[i].Detail = got
			continue
		}
		if diff := cmp.Diff(tc.Detail, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s, manager %+v: DetailOf (-vector +got):\n%s", tc.Job, tc.Manager, diff)
		}
	}
	if *updateDetails {
		b, err := json.MarshalIndent(ds, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("testdata/details.json", append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The file must exercise each part, or a part could drift unseen.
	seen := map[string]bool{}
	for _, tc := range ds.Vectors {
		seen["staleNote"] = seen["staleNote"] || tc.Detail.StaleNote != ""
		seen["history"] = seen["history"] || len(tc.Detail.History) > 0
		seen["progressLine"] = seen["progressLine"] || tc.Detail.ProgressLine != ""
		seen["metrics"] = seen["metrics"] || len(tc.Detail.Metrics) > 0
		seen["resumedLine"] = seen["resumedLine"] || tc.Detail.ResumedLine != ""
		seen["attemptsLine"] = seen["attemptsLine"] || tc.Detail.AttemptsLine != ""
	}
	for _, part := range []string{"staleNote", "history", "progressLine", "metrics", "resumedLine", "attemptsLine"} {
		if !seen[part] {
			t.Errorf("no vector of details.json shows a %s", part)
		}
	}
}

// The MPI rule, from the vectors the SDK reads too.
func TestFrameworkVectors(t *testing.T) {
	var file struct {
		Runtimes Frameworks `json:"runtimes"`
		Vectors  []struct {
			Name string `json:"name"`
			Job  struct {
				Name        string            `json:"name"`
				Namespace   string            `json:"namespace"`
				Labels      map[string]string `json:"labels"`
				RuntimeKind string            `json:"runtimeKind"`
				RuntimeName string            `json:"runtimeName"`
			} `json:"job"`
			Framework string `json:"framework"`
		} `json:"vectors"`
	}
	b, err := os.ReadFile("testdata/frameworks.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Vectors) < 10 {
		t.Fatalf("%d vectors read", len(file.Vectors))
	}
	seen := map[string]bool{}
	for _, v := range file.Vectors {
		seen[v.Framework] = true
		t.Run(v.Name, func(t *testing.T) {
			j := JobRef{Name: v.Job.Name, Namespace: v.Job.Namespace, Labels: v.Job.Labels, RuntimeKind: v.Job.RuntimeKind, RuntimeName: v.Job.RuntimeName}
			if got := FrameworkOf(j, file.Runtimes); got != v.Framework {
				t.Errorf("FrameworkOf = %q, want %q", got, v.Framework)
			}
			if got := IsMPIJob(j, file.Runtimes); got != (v.Framework == FrameworkMPI) {
				t.Errorf("IsMPIJob = %v", got)
			}
		})
	}
	if !seen[FrameworkMPI] || !seen["torch"] || !seen[FrameworkUnknown] {
		t.Errorf("the vectors cover %v: want mpi, torch and unknown", seen)
	}
}
