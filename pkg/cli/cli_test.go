package cli

import (
	"bytes"
	"flag"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/utils/ptr"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/logs"
)

var update = flag.Bool("update", false, "rewrite golden files")

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := "testdata/" + name + ".golden"
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./pkg/cli -update)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s (-want,+got):\n%s", path, diff)
	}
}

var now = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func testJob(ns, name, rt string, workers int32, s *api.Status, age time.Duration) trainer.TrainJob {
	tj := trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(now.Add(-age)),
			Annotations: map[string]string{api.CreatorAnnotation: "dev-a"}},
		Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: rt}, Trainer: &trainer.Trainer{NumNodes: ptr.To(workers), NumProcPerNode: ptr.To[int32](2)}},
	}
	if s != nil {
		raw, _ := s.Encode()
		tj.Annotations[api.StatusAnnotation] = raw
	}
	return tj
}

func tableJobs() []trainer.TrainJob {
	start := metav1.NewTime(now.Add(-90 * time.Second))
	end := metav1.NewTime(now.Add(-30 * time.Second))
	gpu := testJob("team-b", "train", "mpi-openmpi-gpu", 5, &api.Status{Phase: api.PhaseQueued, Reason: "Queued", WorkersTotal: 4, QueuePosition: ptr.To[int32](2)}, 3*time.Minute)
	q := resource.MustParse("8")
	gpu.Spec.Trainer.ResourcesPerNode = &corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": q}}
	return []trainer.TrainJob{
		testJob("team-a", "hello", "mpi-openmpi", 2, &api.Status{Phase: api.PhaseSucceeded, WorkersReady: 2, WorkersTotal: 2, SlotsPerWorker: 2, StartTime: &start, CompletionTime: &end}, 2*time.Minute),
		testJob("team-a", "oom", "mpi-openmpi", 4, &api.Status{Phase: api.PhaseFailed, Reason: "WorkerOOMKilled", WorkersReady: 3, WorkersTotal: 4, StartTime: &start, CompletionTime: &end}, time.Hour),
		gpu,
		testJob("team-a", "no-manager", "mpi-mpich", 3, nil, 26*time.Hour),
	}
}

func TestJobTableGolden(t *testing.T) {
	for name, opts := range map[string]printers.PrintOptions{
		"table":         {},
		"table-wide":    {Wide: true},
		"table-all-ns":  {WithNamespace: true},
		"table-wide-ns": {Wide: true, WithNamespace: true},
	} {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			if err := printers.NewTablePrinter(opts).PrintObj(JobTable(tableJobs(), now), &b); err != nil {
				t.Fatal(err)
			}
			golden(t, name, b.String())
		})
	}
}

func TestLineFilter(t *testing.T) {
	f := &lineFilter{prefix: true}
	var b bytes.Buffer
	f.print(&b, logs.NewLine("worker-1", "2026-11-22T10:00:00Z export HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz0123456789"))
	f.print(&b, logs.NewLine("launcher", "2026-11-22T10:00:01Z plain"))
	want := "[worker-1] export HF_TOKEN=[REDACTED]\n[launcher] plain\n"
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("(-want,+got):\n%s", diff)
	}
	var ts bytes.Buffer
	(&lineFilter{timestamps: true}).print(&ts, logs.NewLine("launcher", "2026-11-22T10:00:01.5Z kept"))
	(&lineFilter{timestamps: true}).print(&ts, logs.NewLine("launcher", "no time here"))
	if diff := cmp.Diff("2026-11-22T10:00:01.5Z kept\nno time here\n", ts.String()); diff != "" {
		t.Errorf("--timestamps (-want,+got):\n%s", diff)
	}
	if f.redacted() != 1 {
		t.Errorf("redacted = %d, want 1", f.redacted())
	}
}

func TestJobFlagsApply(t *testing.T) {
	separate := &trainer.TrainingRuntimeSpec{MLPolicy: &trainer.MLPolicy{MLPolicySource: trainer.MLPolicySource{MPI: &trainer.MPIMLPolicySource{RunLauncherAsNode: ptr.To(false)}}}}
	asNode := &trainer.TrainingRuntimeSpec{MLPolicy: &trainer.MLPolicy{MLPolicySource: trainer.MLPolicySource{MPI: &trainer.MPIMLPolicySource{RunLauncherAsNode: ptr.To(true)}}}}
	cases := map[string]struct {
		f       jobFlags
		set     []string
		rt      *trainer.TrainingRuntimeSpec
		wantErr string
		check   func(t *testing.T, tj *trainer.TrainJob)
	}{
		"workers on a separate-Launcher runtime": {f: jobFlags{workers: 3}, set: []string{"workers"}, rt: separate,
			check: func(t *testing.T, tj *trainer.TrainJob) {
				if *tj.Spec.Trainer.NumNodes != 3 {
					t.Errorf("numNodes = %d, want 3", *tj.Spec.Trainer.NumNodes)
				}
			}},
		"workers where the Launcher hosts ranks count it": {f: jobFlags{workers: 3, gpus: 8}, set: []string{"workers", "gpus"}, rt: asNode,
			check: func(t *testing.T, tj *trainer.TrainJob) {
				if *tj.Spec.Trainer.NumNodes != 4 {
					t.Errorf("numNodes = %d, want 4 (Launcher + 3 Workers)", *tj.Spec.Trainer.NumNodes)
				}
				if q := tj.Spec.Trainer.ResourcesPerNode.Limits["nvidia.com/gpu"]; q.Value() != 8 {
					t.Errorf("GPU limit = %s, want 8", q.String())
				}
			}},
		"zero workers": {f: jobFlags{workers: 0}, set: []string{"workers"}, rt: separate, wantErr: "--workers 0"},
		"zero slots":   {f: jobFlags{slots: 0}, set: []string{"slots-per-worker"}, rt: separate, wantErr: "--slots-per-worker 0"},
		"bad memory":   {f: jobFlags{memory: "lots"}, set: []string{"memory"}, rt: asNode, wantErr: `--memory "lots" is not a positive quantity`},
		"worker resources need rank-hosting Launcher": {f: jobFlags{gpus: 2}, set: []string{"gpus"}, rt: separate, wantErr: "runtime mpi-x sets its Workers' resources itself"},
		"launcher resources on a separate Launcher": {f: jobFlags{launcherMe: "2Gi"}, set: []string{"launcher-memory"}, rt: separate,
			check: func(t *testing.T, tj *trainer.TrainJob) {
				if q := tj.Spec.Trainer.ResourcesPerNode.Limits[corev1.ResourceMemory]; q.String() != "2Gi" {
					t.Errorf("Launcher memory limit = %s", q.String())
				}
			}},
		"launcher resources where it is a rank host": {f: jobFlags{launcherCPU: "1"}, set: []string{"launcher-cpu"}, rt: asNode, wantErr: "the Launcher is a rank host"},
		"env without =": {f: jobFlags{env: []string{"NOPE"}}, set: []string{"env"}, rt: separate, wantErr: `--env "NOPE": use KEY=VALUE`},
		"bad selector":  {f: jobFlags{nodeSelector: []string{"gpu"}}, set: []string{"node-selector"}, rt: separate, wantErr: `--node-selector "gpu"`},
		"selector and queue": {f: jobFlags{nodeSelector: []string{"zone=a"}, queue: "default", env: []string{"A=1", "A=2"}}, set: []string{"node-selector", "queue", "env"}, rt: separate,
			check: func(t *testing.T, tj *trainer.TrainJob) {
				if tj.Labels["kueue.x-k8s.io/queue-name"] != "default" {
					t.Errorf("queue label = %v", tj.Labels)
				}
				if len(tj.Spec.RuntimePatches) != 1 || len(tj.Spec.RuntimePatches[0].TrainingRuntimeSpec.Template.Spec.ReplicatedJobs) != 2 {
					t.Fatalf("want one patch for launcher and node, got %+v", tj.Spec.RuntimePatches)
				}
				if diff := cmp.Diff([]corev1.EnvVar{{Name: "A", Value: "2"}}, tj.Spec.Trainer.Env); diff != "" {
					t.Errorf("env (-want,+got):\n%s", diff)
				}
			}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tj := &trainer.TrainJob{}
			err := tc.f.apply(tj, tc.rt, "mpi-x", func(n string) bool { return contains(tc.set, n) })
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, tj)
		})
	}
}

func TestClone(t *testing.T) {
	src := testJob("team-a", "hello", "mpi-openmpi", 2, &api.Status{Phase: api.PhaseSucceeded}, time.Minute)
	src.Spec.Suspend = ptr.To(true)
	src.Spec.RuntimePatches = []trainer.RuntimePatch{{Manager: "kueue.x-k8s.io/manager"}, {Manager: patchManager}}
	got := Clone(&src, "hello-2")
	if got.Name != "hello-2" || got.Namespace != "team-a" || got.Annotations != nil || got.Spec.Suspend != nil {
		t.Errorf("clone kept what the cluster wrote: %+v", got.ObjectMeta)
	}
	if len(got.Spec.RuntimePatches) != 1 || got.Spec.RuntimePatches[0].Manager != patchManager {
		t.Errorf("patches = %+v, want only kubectl-mpijob's", got.Spec.RuntimePatches)
	}
	if src.Annotations[api.StatusAnnotation] == "" {
		t.Error("the original was changed")
	}
}

func TestExitCodes(t *testing.T) {
	root := NewRootCommand(genericTestStreams())
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"wait"}, ExitUsage, "wait takes one job NAME"},
		{[]string{"convert"}, ExitUsage, "-f is required"},
		{[]string{"convert", "-f", "../legacy/testdata/malformed-v1.yaml"}, ExitUsage, `apiVersion: is "kubeflow.org/v1"`},
		{[]string{"nosuchverb"}, ExitUsage, "unknown command"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			root = NewRootCommand(genericTestStreams())
			root.SetArgs(tc.args)
			err := root.Execute()
			code, msg := explain(err, root)
			if code != tc.code || !strings.Contains(msg, tc.msg) {
				t.Errorf("exit %d %q, want %d containing %q", code, msg, tc.code, tc.msg)
			}
		})
	}
}

// docs/cli.md is generated from the commands: it must match them.
func TestReferenceIsCurrent(t *testing.T) {
	got, err := Reference(NewRootCommand(genericTestStreams()))
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("docs/cli.md is stale: run `make docs` (-file,+commands):\n%s", diff)
	}
}
