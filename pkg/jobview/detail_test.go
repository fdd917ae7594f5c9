package jobview

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/mpijob/mpijob/config"
	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/dataconn"
	"github.com/mpijob/mpijob/pkg/jobspec"
	"github.com/mpijob/mpijob/pkg/progress"
	"github.com/mpijob/mpijob/pkg/runtimes"
)

// built is a job as the builder makes it on mpi-openmpi, with in's
// settings.
func built(t *testing.T, in jobspec.Input) *jobspec.Job {
	t.Helper()
	base, err := config.Runtime("mpi-openmpi")
	if err != nil {
		t.Fatal(err)
	}
	job, err := jobspec.Build(in, base)
	if err != nil {
		t.Fatal(err)
	}
	job.TrainJob.CreationTimestamp = metav1.NewTime(t0)
	return job
}

func TestDetailOf(t *testing.T) {
	now := t0.Add(time.Hour)
	job := built(t, jobspec.Input{
		Name: "cnn", Namespace: "team-a", Runtime: "mpi-openmpi", Workers: 2, SlotsPerWorker: 2,
		Command:            []string{"python3", "/opt/train.py", "--token=hunter2secret"},
		Env:                []corev1.EnvVar{{Name: "EPOCHS", Value: "3"}, {Name: "KEY", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"}}}},
		ResourcesPerWorker: map[string]string{"cpu": "2", "memory": "4Gi"},
		DataConnections:    []string{"bucket"},
		PVCs:               []dataconn.PVC{{Claim: "data"}},
		ConfigMaps:         []dataconn.ConfigMap{{Name: "settings", MountPath: "/mnt/settings"}},
		Description:        "a CNN", Timeout: "1h30m", Retries: 2,
	})
	if job.Runtime == nil {
		t.Fatal("the job has no runtime of its own: the test needs one")
	}
	tj := job.TrainJob
	tj.Spec.RuntimeRef.Kind = ptr.To(trainer.TrainingRuntimeKind)
	seen := metav1.NewTime(now.Add(-20 * time.Minute))
	code := int32(137)
	st := api.Status{Phase: api.PhaseFailed, Reason: "WorkerOOMKilled", Runtime: "mpi-openmpi", WorkersTotal: 2, SlotsPerWorker: 2, ObservedTime: &seen,
		Failed:  []api.FailedPod{{Role: "worker", Index: 1, Reason: "OOMKilled (exit 137)", ExitCode: &code, Signal: 9}},
		Pods:    []api.PodRecord{{Role: "worker", Index: 1, Pod: "cnn-node-0-1", State: "OOMKilled (exit 137)", ExitCode: &code, Signal: 9}},
		History: []api.Transition{{Time: metav1.NewTime(t0), Phase: api.PhasePending, Message: "created"}}}
	enc, err := st.Encode()
	if err != nil {
		t.Fatal(err)
	}
	pct, eta := int32(40), int32(150)
	tj.Annotations[api.StatusAnnotation] = enc
	pr := progress.TrainerStatus{ProgressPercentage: &pct, CurrentEpoch: ptr.To(2.0), TotalEpochs: ptr.To[int64](5),
		EstimatedRemainingSeconds: &eta, EstimatedRemainingTimeSummary: "2 minutes", TrainMetrics: map[string]float64{"loss": 0.123456, "accuracy": 0.9}}
	tj.Annotations[progress.Annotation] = string(must(t, pr))
	ann := map[string]string{runtimes.MaxWorkersAnnotation: "8"}

	d := DetailOf(Known{Job: tj, Runtime: &job.Runtime.Spec, RuntimeAnnotations: ann, Now: now,
		Manager: &api.ManagerState{Running: false, Since: now.Add(-10 * time.Minute)}})

	if !d.Job.Reported || d.Job.Phase != api.PhaseFailed || !d.Job.MPI {
		t.Errorf("job = reported %v, phase %s, MPI %v; want the manager's Failed MPI job", d.Job.Reported, d.Job.Phase, d.Job.MPI)
	}
	want := struct {
		RuntimeKind, RuntimeCopy, ProgressLine, Command string
		Metrics, Conns, Env, Policy                     []string
		PVCs, ConfigMaps                                []Mount
		Settings                                        Settings
		Summary                                         string
		WorkerLimits                                    map[string]string
	}{
		RuntimeKind: trainer.TrainingRuntimeKind, RuntimeCopy: tj.Spec.RuntimeRef.Name,
		ProgressLine: "40% epoch 2/5, about 2 minutes left",
		Command:      "python3 /opt/train.py --token=[REDACTED]",
		Metrics:      []string{"loss 0.1235", "accuracy 0.9"},
		Conns:        []string{"bucket"},
		Env:          []string{"EPOCHS=3", "KEY from Secret s, key k"},
		Policy:       []string{"max workers per job: 8"},
		PVCs:         []Mount{{Name: "data", Path: "/mnt/data"}},
		ConfigMaps:   []Mount{{Name: "settings", Path: "/mnt/settings"}},
		Settings:     Settings{Description: "a CNN", Timeout: "1h30m", TimeoutSeconds: 5400, Retries: 2, GracePeriod: "1m"},
		Summary:      "2 Workers × 2 slots = 4 ranks, 4 CPUs, 8Gi, 0 GPUs",
		WorkerLimits: map[string]string{"cpu": "2", "memory": "4Gi"},
	}
	got := want
	got.RuntimeKind, got.RuntimeCopy, got.ProgressLine, got.Command = d.RuntimeKind, d.RuntimeCopy, d.ProgressLine, d.Command
	got.Metrics, got.Conns, got.Env, got.Policy, got.PVCs, got.ConfigMaps, got.Settings = d.Metrics, d.DataConnections, d.Env, d.Policy, d.PVCs, d.ConfigMaps, d.Settings
	got.Summary, got.WorkerLimits = "", nil
	if d.Resources != nil {
		got.Summary, got.WorkerLimits = d.Resources.Summary, d.Resources.WorkerLimits
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("DetailOf (-want +got):\n%s", diff)
	}
	if !d.Stores() {
		t.Error("a job with a data connection and a PVC stores its artifacts")
	}
	if !strings.Contains(d.StaleNote, "not running") {
		t.Errorf("stale note %q: the manager is not running", d.StaleNote)
	}
	// The Launcher and both Workers, gone: Worker 1 as the status kept it.
	if len(d.History) != 1 || len(d.Pods) != 3 || d.Pods[2].Name != "cnn-node-0-1" || !d.Pods[2].Gone || d.Pods[2].Health != "red" {
		t.Errorf("history %v, pods %+v: want the status's transition and its gone pods", d.History, d.Pods)
	}
	if !strings.Contains(d.YAML, "kind: TrainJob") || strings.Contains(d.YAML, "managedFields") {
		t.Errorf("YAML:\n%s", d.YAML)
	}
	if got := FailedLine(d.Job.Failed[0]); got != "worker-1 (OOMKilled; exit code 137, SIGKILL)" {
		t.Errorf("FailedLine = %q: the exit code once", got)
	}
}

func TestDetailWithoutRuntimeOrStatus(t *testing.T) {
	tj := built(t, jobspec.Input{Name: "pi", Namespace: "team-a", Runtime: "mpi-openmpi", Workers: 3}).TrainJob
	d := DetailOf(Known{Job: tj, RuntimeError: "forbidden", Now: t0, Manager: &api.ManagerState{Running: true}})
	if d.Job.Reported || d.Resources != nil || d.Policy != nil || d.StaleNote != "" || d.RuntimeError != "forbidden" || d.RuntimeCopy != "" {
		t.Errorf("detail = %+v: no status, no runtime read", d)
	}
	if d.RuntimeKind != trainer.ClusterTrainingRuntimeKind || d.Job.WorkersTotal != 3 {
		t.Errorf("kind %s, workers %d", d.RuntimeKind, d.Job.WorkersTotal)
	}
}

func TestFailedLine(t *testing.T) {
	code := int32(1)
	cases := map[string]struct {
		in   api.FailedPod
		want string
	}{
		"a state in words with its exit code": {in: api.FailedPod{Role: "worker", Index: 2, Reason: "Error (exit 1)", ExitCode: &code}, want: "worker-2 (Error; exit code 1)"},
		"the diagnosis's reason":              {in: api.FailedPod{Role: "launcher", Reason: "RankFailed", ExitCode: &code}, want: "launcher (RankFailed; exit code 1)"},
		"a signal without an exit code":       {in: api.FailedPod{Role: "worker", Index: 0, Reason: "Killed", Signal: 15}, want: "worker-0 (Killed; SIGTERM)"},
		"a record from before exit codes":     {in: api.FailedPod{Role: "worker", Index: 1, Reason: "Error (exit 3)"}, want: "worker-1 (Error (exit 3))"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, FailedLine(tc.in)); diff != "" {
				t.Errorf("FailedLine (-want +got):\n%s", diff)
			}
		})
	}
}

func must(t *testing.T, p progress.TrainerStatus) []byte {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
