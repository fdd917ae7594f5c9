package jobspec

import (
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mpijob/mpijob/config"
	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/dataconn"
)

var update = flag.Bool("update", false, "rewrite the want parts of testdata/vectors")

// vector is one shared test vector: an Input, and either the objects it
// builds or the error it gets. The SDK's tests read the same files.
type vector struct {
	Input Input `json:"input"`
	// BaseNamespace, when set, makes the base runtime a TrainingRuntime of
	// that namespace (runtimes.AsBase) instead of a ClusterTrainingRuntime.
	BaseNamespace string          `json:"base_namespace,omitempty"`
	Want          *wantObjects    `json:"want,omitempty"`
	Error         *Error          `json:"error,omitempty"`
	Raw           json.RawMessage `json:"-"`
}

type wantObjects struct {
	TrainJob        any `json:"trainJob"`
	TrainingRuntime any `json:"trainingRuntime"`
}

func baseRuntime(t *testing.T, name string) *trainer.ClusterTrainingRuntime {
	t.Helper()
	rt, err := config.Runtime(name)
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// generic renders an object as the JSON both Go and Python compare.
func generic(t *testing.T, obj any) any {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if m, ok := out.(map[string]any); ok {
		if md, ok := m["metadata"].(map[string]any); ok {
			delete(md, "creationTimestamp")
		}
		delete(m, "status")
	}
	return out
}

func TestVectors(t *testing.T) {
	files, err := filepath.Glob("testdata/vectors/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no vectors: %v", err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var v vector
			if err := json.Unmarshal(raw, &v); err != nil {
				t.Fatal(err)
			}
			base := baseRuntime(t, v.Input.Runtime)
			base.Namespace = v.BaseNamespace
			job, err := Build(v.Input, base)
			var gotErr *Error
			if err != nil && !errors.As(err, &gotErr) {
				t.Fatalf("Build returned %T %v, want *Error", err, err)
			}
			var got wantObjects
			if job != nil {
				got.TrainJob = generic(t, job.TrainJob)
				if job.Runtime != nil {
					got.TrainingRuntime = generic(t, job.Runtime)
				}
			}
			if *update {
				v.Want, v.Error = nil, gotErr
				if gotErr == nil {
					v.Want = &got
				}
				b, err := json.MarshalIndent(v, "", "  ")
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(f, append(b, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if strings.HasPrefix(name, "error-") != (v.Error != nil) {
				t.Fatalf("vector %s: error vectors are named error-*, and only they have an error", name)
			}
			if diff := cmp.Diff(v.Error, gotErr); diff != "" {
				t.Errorf("error (-want,+got):\n%s", diff)
			}
			if v.Want != nil {
				if diff := cmp.Diff(*v.Want, got); diff != "" {
					t.Errorf("objects (-want,+got):\n%s", diff)
				}
			}
		})
	}
}

// TestInputOfRoundTrip: reading a built job back (clone, the dashboard's
// "Edit and resubmit") and building it again gives the same objects.
func TestInputOfRoundTrip(t *testing.T) {
	files, _ := filepath.Glob("testdata/vectors/*.json")
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		if strings.HasPrefix(name, "error-") {
			continue
		}
		t.Run(name, func(t *testing.T) {
			raw, _ := os.ReadFile(f)
			var v vector
			if err := json.Unmarshal(raw, &v); err != nil {
				t.Fatal(err)
			}
			base := baseRuntime(t, v.Input.Runtime)
			job, err := Build(v.Input, base)
			if err != nil {
				t.Fatal(err)
			}
			in, kept := InputOf(job.TrainJob, job.Runtime, base)
			if len(kept) != 0 {
				t.Errorf("kept patches %+v, want none", kept)
			}
			again, err := Build(in, base)
			if err != nil {
				t.Fatalf("InputOf gave %+v, which does not build: %v", in, err)
			}
			if diff := cmp.Diff(generic(t, job.TrainJob), generic(t, again.TrainJob)); diff != "" {
				t.Errorf("TrainJob (-first,+again):\n%s", diff)
			}
			if diff := cmp.Diff(generic(t, job.Runtime), generic(t, again.Runtime)); diff != "" {
				t.Errorf("runtime (-first,+again):\n%s", diff)
			}
			if again.Runtime != nil && !SameSpec(Normalize(&again.Runtime.Spec, &base.Spec), &base.Spec) {
				t.Errorf("Normalize of a built runtime differs from its base")
			}
		})
	}
}

// Admission holds a per-job runtime to its base: the data connections'
// references and the PVCs the builder adds are set aside, anything else
// still differs.
func TestNormalizeSetsStorageAside(t *testing.T) {
	base := baseRuntime(t, "mpi-openmpi")
	job, err := Build(Input{Name: "digits", Namespace: "team-a", Runtime: "mpi-openmpi", Workers: 2,
		DataConnections: []string{"local-s3", "archive"}, PVCs: []dataconn.PVC{{Claim: "results"}}}, base)
	if err != nil {
		t.Fatal(err)
	}
	if !SameSpec(Normalize(&job.Runtime.Spec, &base.Spec), &base.Spec) {
		t.Error("a runtime with data connections and a PVC does not normalize to its base")
	}
	sneaky := job.Runtime.Spec.DeepCopy()
	for i := range sneaky.Template.Spec.ReplicatedJobs {
		pod := &sneaky.Template.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec
		for c := range pod.Containers {
			pod.Containers[c].Env = append(pod.Containers[c].Env, corev1.EnvVar{Name: "SSH_KEY", ValueFrom: &corev1.EnvVarSource{
				SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "other-job-ssh"}, Key: "ssh-privatekey"}}})
		}
	}
	if SameSpec(Normalize(sneaky, &base.Spec), &base.Spec) {
		t.Error("a runtime with a reference to another Secret's key normalizes to its base")
	}
	hostPath := job.Runtime.Spec.DeepCopy()
	pod := &hostPath.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec
	pod.Volumes = append(pod.Volumes, corev1.Volume{Name: "pvc-root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
	if SameSpec(Normalize(hostPath, &base.Spec), &base.Spec) {
		t.Error("a runtime with a hostPath volume named like a PVC normalizes to its base")
	}
}

// A runtime copied from another job's exported YAML keeps that job's
// artifacts folder: admission refuses it, naming the variable and the value
// the new job needs; Retarget (create -f) makes it the new job's.
func TestExportedRuntimeNamesItsOwnJob(t *testing.T) {
	base := baseRuntime(t, "mpi-openmpi")
	for name, in := range map[string]Input{
		"data connection": {Name: "orig", Namespace: "team-a", Runtime: "mpi-openmpi", Workers: 1, DataConnections: []string{"local-s3"}},
		"PVC":             {Name: "orig", Namespace: "team-a", Runtime: "mpi-openmpi", Workers: 1, PVCs: []dataconn.PVC{{Claim: "scratch"}}},
	} {
		t.Run(name, func(t *testing.T) {
			job, err := Build(in, base)
			if err != nil {
				t.Fatal(err)
			}
			if errs := JobEnvErrors(job.Runtime); len(errs) > 0 {
				t.Fatalf("the builder's own runtime is refused: %v", errs)
			}
			// Renamed by hand everywhere but the variables.
			copied := job.Runtime.DeepCopy()
			copied.Name, copied.Labels[api.JobLabel] = "copy", "copy"
			errs := JobEnvErrors(copied)
			var got []string
			for _, e := range errs {
				got = append(got, e.Error())
			}
			output := "s3://$(AWS_S3_BUCKET)/copy/"
			if len(in.PVCs) > 0 {
				output = "file:///mnt/scratch/copy/"
			}
			for _, want := range []string{
				`MPIJOB_JOB_NAME must name this runtime's job copy, or the job's artifacts would go to another job's: set it to "copy"`,
				`MPIJOB_OUTPUT_URI must name this runtime's job copy, or the job's artifacts would go to another job's: set it to "` + output + `"`,
				`MPIJOB_CHECKPOINT_URI must name this runtime's job copy, or the job's artifacts would go to another job's: set it to "` + output + `checkpoints/"`,
			} {
				if !slices.ContainsFunc(got, func(g string) bool { return strings.Contains(g, want) }) {
					t.Errorf("errors %q lack %q", got, want)
				}
			}
			// Launcher and Worker each carry the three variables.
			if len(errs) != 6 {
				t.Errorf("%d errors, want 6 (three variables on the Launcher and on the Worker): %q", len(errs), got)
			}

			// create -f: only the TrainJob renamed.
			file := &Job{TrainJob: job.TrainJob.DeepCopy(), Runtime: job.Runtime.DeepCopy()}
			file.TrainJob.Name = "copy"
			Retarget(file)
			if file.Runtime.Name != "copy" || file.Runtime.Labels[api.JobLabel] != "copy" || file.TrainJob.Spec.RuntimeRef.Name != "copy" {
				t.Errorf("runtime %s (job %s), ref %s: want all copy", file.Runtime.Name, file.Runtime.Labels[api.JobLabel], file.TrainJob.Spec.RuntimeRef.Name)
			}
			if errs := JobEnvErrors(file.Runtime); len(errs) > 0 {
				t.Errorf("the retargeted runtime is refused: %v", errs)
			}
			want, err := Build(Input{Name: "copy", Namespace: in.Namespace, Runtime: in.Runtime, Workers: 1, DataConnections: in.DataConnections, PVCs: in.PVCs}, base)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want.Runtime, file.Runtime); diff != "" {
				t.Errorf("retargeted runtime differs from one built for the new name (-want,+got):\n%s", diff)
			}
		})
	}
}

// An export of a job with a per-job runtime, renamed, runs again as a job
// of its own: the TrainJob alone (kubectl get trainjob X -o yaml) gets a
// copy of X's runtime with its own artifacts and checkpoint place, and
// what the cluster wrote on X (status, identity, Kueue's patch) is left out.
func TestExportRenamedGetsItsOwnRuntime(t *testing.T) {
	base := baseRuntime(t, "mpi-openmpi")
	orig, err := Build(Input{Name: "orig", Namespace: "team-a", Runtime: base.Name, Workers: 2, DataConnections: []string{"local-s3"}, Queue: "default"}, base)
	if err != nil {
		t.Fatal(err)
	}
	exported := orig.TrainJob.DeepCopy()
	exported.Name, exported.ResourceVersion, exported.UID = "copy", "123", "uid-1"
	exported.Spec.RuntimePatches = append(exported.Spec.RuntimePatches, trainer.RuntimePatch{Manager: KueuePatchManager})
	exported.Status.Conditions = []metav1.Condition{{Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue}}
	Exported(exported)
	if exported.ResourceVersion != "" || exported.UID != "" || len(exported.Spec.RuntimePatches) != 0 || len(exported.Status.Conditions) != 0 {
		t.Errorf("Exported kept what the cluster wrote: %+v", exported)
	}
	job := &Job{TrainJob: exported}
	if !CopyRuntime(job, orig.Runtime) {
		t.Fatal("CopyRuntime made no runtime for a renamed export")
	}
	if job.Runtime.Name != "copy" || job.TrainJob.Spec.RuntimeRef.Name != "copy" || job.Runtime.Labels[api.JobLabel] != "copy" {
		t.Errorf("the copy's runtime %s (job label %s), referred as %s; want copy", job.Runtime.Name, job.Runtime.Labels[api.JobLabel], job.TrainJob.Spec.RuntimeRef.Name)
	}
	if errs := JobEnvErrors(job.Runtime); len(errs) > 0 {
		t.Errorf("the copied runtime still names the original job: %v", errs)
	}
	_, worker := nodeContainers(&job.Runtime.Spec)
	for _, e := range worker.Env {
		if e.Name == dataconn.CheckpointEnv && e.Value != "s3://$(AWS_S3_BUCKET)/copy/checkpoints/" {
			t.Errorf("the copy's checkpoint place is %s, want its own", e.Value)
		}
	}
	if CopyRuntime(&Job{TrainJob: orig.TrainJob.DeepCopy()}, orig.Runtime) {
		t.Error("a job's own runtime was copied again")
	}
}
