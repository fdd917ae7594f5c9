package jobview

import (
	"encoding/json"
	"os"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
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
	t.Helper()
	raw, err := os.ReadFile("testdata/pods.json")
	if err != nil {
		t.Fatal(err)
	}
	var v podVectors
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Vectors) < 4 {
		t.Fatalf("%d vectors", len(v.Vectors))
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
