//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/dataconn"
	"github.com/mpijob/mpijob/pkg/localcluster"
	"github.com/mpijob/mpijob/pkg/runtimes"
	"github.com/mpijob/mpijob/test/framework"
)

// What a new user of MPI reaches for first works in a job's pods: mpirun -x
// beside a data connection, every rank on its own Worker under Open MPI 5's
// --oversubscribe, mpicc with mpi.h, torchvision with Horovod (issue 45).

// The CLI's help says to pass --env values to the ranks with mpirun -x. In
// a job with a data connection (whose variables mpijob forwards through
// OMPI_MCA_mca_base_env_list) Open MPI 4's own mpirun refused both; the
// images' mpirun passes both: every rank sees LR and the connection.
func TestMpirunDashXBesideADataConnection(t *testing.T) {
	c := framework.Get(t)
	c.EnsureImages(t, "openmpi5")
	const ns, user = "team-a", "dev-a"
	for _, runtime := range []string{"mpi-openmpi", "mpi-openmpi5"} {
		t.Run(runtime, func(t *testing.T) {
			t.Parallel()
			name := framework.UniqueName("dashx-" + strings.TrimPrefix(runtime, "mpi-"))
			t.Cleanup(func() { mpijob(t, user, ns, "delete", name, "--wait=false") })
			expect(t, mpijob(t, user, ns, "create", name, "--runtime", runtime, "--workers", "2", "--data-connection", localcluster.DataConnectionName,
				"--env", "LR=0.25", "--", "mpirun", "-x", "LR", "sh", "-c",
				`echo "lr=$LR job=$MPIJOB_JOB_NAME key=${AWS_ACCESS_KEY_ID:+set} host=$(hostname)"`), 0)
			if got := c.WaitForTrainJob(t, ns, name, 5*time.Minute, trainer.TrainJobComplete, trainer.TrainJobFailed); got != trainer.TrainJobComplete {
				r := mpijob(t, user, ns, "describe", name)
				t.Fatalf("the job %s: %s", got, r.out)
			}
			logs := mpijob(t, user, ns, "logs", name)
			want := fmt.Sprintf("lr=0.25 job=%s key=set host=%s-node-0-", name, name)
			if n := strings.Count(logs.out, want); n != 2 {
				t.Errorf("%d ranks printed %q, want both ranks (on their Workers):\n%s", n, want, logs.out)
			}
		})
	}
}

// Open MPI 4's own mpirun (MPIJOB_MPIRUN_AS_IS=1 skips the image's) still
// refuses -x beside the forwarded list, as a custom image's does: the
// diagnosis names it and the way out instead of "LauncherFailed".
func TestDashXConflictIsNamed(t *testing.T) {
	t.Parallel()
	c := framework.Get(t)
	const ns, user = "team-a", "dev-a"
	name := framework.UniqueName("dashx-own")
	t.Cleanup(func() { mpijob(t, user, ns, "delete", name, "--wait=false") })
	expect(t, mpijob(t, user, ns, "create", name, "--workers", "1", "--data-connection", localcluster.DataConnectionName,
		"--env", "LR=0.25", "--env", "MPIJOB_MPIRUN_AS_IS=1", "--", "mpirun", "-x", "LR", "-x", "MPIJOB_MPIRUN_AS_IS", "true"), 0)
	st := c.WaitForStatus(t, ns, name, 4*time.Minute, func(s api.Status) bool { return s.Phase == api.PhaseFailed })
	if st.Reason != "EnvForwardConflict" || !strings.Contains(st.Message, "the command passes variables with -x") {
		t.Errorf("diagnosis %s: %s, want EnvForwardConflict", st.Reason, st.Message)
	}
	if !strings.Contains(st.NextStep, "mpijob Open MPI image") {
		t.Errorf("next step %q does not point at the images' mpirun", st.NextStep)
	}
}

// Open MPI 5 mapped --oversubscribe by core, and a Worker's pod sees all of
// its node's cores: all 4 ranks ran on the first Worker. The image's
// mpirun maps it by slot: 2 ranks on each Worker.
func TestOpenMPI5OversubscribeSpreadsOverTheWorkers(t *testing.T) {
	t.Parallel()
	framework.HeavyCPU(t)
	c := framework.Get(t)
	c.EnsureImages(t, "openmpi5")
	const ns, user = "team-a", "dev-a"
	name := framework.UniqueName("oversub")
	t.Cleanup(func() { mpijob(t, user, ns, "delete", name, "--wait=false") })
	expect(t, mpijob(t, user, ns, "create", name, "--runtime", "mpi-openmpi5", "--workers", "2", "--",
		"mpirun", "--oversubscribe", "-np", "4", "sh", "-c", `echo "on $(hostname)"`), 0)
	if got := c.WaitForTrainJob(t, ns, name, 5*time.Minute, trainer.TrainJobComplete, trainer.TrainJobFailed); got != trainer.TrainJobComplete {
		t.Fatalf("the job %s", got)
	}
	logs := mpijob(t, user, ns, "logs", name)
	for i := range 2 {
		host := fmt.Sprintf("on %s-node-0-%d", name, i)
		if n := strings.Count(logs.out, host); n != 2 {
			t.Errorf("%d ranks ran %s, want 2 of the 4:\n%s", n, host, logs.out)
		}
	}
}

// On mpi-mpich a user's plain `mpirun` (Hydra's own) read no hostfile: it
// ran one rank, on the Launcher, and the job Succeeded. It now starts a
// rank per slot of the Workers, tagged; -n and -np are the command's own
// on MPICH and Intel MPI (mpijob-mpiexec refused them: "duplicate setting:
// n"); a hostfile of the command's own is Hydra's as given.
func TestPlainMpirunOnHydraRunsOnTheWorkers(t *testing.T) {
	c := framework.Get(t)
	c.EnsureImages(t, "mpich", "intel")
	const ns, user = "team-a", "dev-a"
	const hello = "from mpi4py import MPI; import socket; print('rank', MPI.COMM_WORLD.Get_rank(), 'of', MPI.COMM_WORLD.Get_size(), 'on', socket.gethostname())"
	for _, f := range []struct {
		name, runtime string
		command       []string
		// want counts the lines per host (W0, W1: the Workers, L: the
		// Launcher) that a part of the log must hold.
		want map[string]int
		part string
	}{
		{"mpirun", "mpi-mpich", []string{"mpirun", "python3", "-c", hello}, map[string]int{"W0": 2, "W1": 2}, "of 4 on"},
		{"mpiexec-n", "mpi-mpich", []string{"mpiexec", "-n", "1", "python3", "-c", hello}, map[string]int{"W0": 1}, "of 1 on"},
		{"own-hosts", "mpi-mpich", []string{"mpirun", "-hosts", "localhost", "-n", "1", "python3", "-c", hello}, map[string]int{"L": 1}, "of 1 on"},
		{"intel-np", "mpi-intel", []string{"mpijob-mpiexec", "-np", "3", "python3", "-c", hello}, map[string]int{"W0": 2, "W1": 1}, "of 3 on"},
	} {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			name := framework.UniqueName("hydra")
			t.Cleanup(func() { mpijob(t, user, ns, "delete", name, "--wait=false") })
			expect(t, mpijob(t, user, ns, append([]string{"create", name, "--runtime", f.runtime, "--workers", "2", "--slots-per-worker", "2", "--"}, f.command...)...), 0)
			if got := c.WaitForTrainJob(t, ns, name, 5*time.Minute, trainer.TrainJobComplete, trainer.TrainJobFailed); got != trainer.TrainJobComplete {
				t.Fatalf("the job %s:\n%s", got, mpijob(t, user, ns, "describe", name).out)
			}
			logs := mpijob(t, user, ns, "logs", name).out
			total := 0
			for host, n := range f.want {
				full := map[string]string{"W0": name + "-node-0-0", "W1": name + "-node-0-1", "L": name + "-launcher-0-0"}[host]
				if got := strings.Count(logs, f.part+" "+full+"\n"); got != n {
					t.Errorf("%d ranks on %s, want %d:\n%s", got, full, n, logs)
				}
				total += n
			}
			if got := strings.Count(logs, f.part+" "); got != total {
				t.Errorf("%d ranks in all, want %d:\n%s", got, total, logs)
			}
		})
	}
}

// The diagnosis blamed a rank for the Launcher's own output, and describe
// printed the resource totals as cpu=1000100m,memory=134217738 (issue
// 45): a Python error raised by the Launcher's command outside mpirun is
// the Launcher's, and the totals read as people write them.
func TestLauncherOwnErrorAndTotalsAsWritten(t *testing.T) {
	t.Parallel()
	c := framework.Get(t)
	const ns, user = "team-a", "dev-a"
	name := framework.UniqueName("own")
	t.Cleanup(func() { mpijob(t, user, ns, "delete", name, "--wait=false") })
	expect(t, mpijob(t, user, ns, "create", name, "--workers", "2", "--cpu", "500m", "--memory", "100Mi", "--",
		"python3", "-c", "raise ValueError('launcher side')"), 0)
	s := c.WaitForStatus(t, ns, name, 4*time.Minute, func(s api.Status) bool { return s.Phase.Finished() })
	if s.Phase != api.PhaseFailed || !strings.HasPrefix(s.Message, "The Launcher's own command raised ValueError: launcher side") {
		t.Errorf("%s/%s: %s; want the Launcher's own error", s.Phase, s.Reason, s.Message)
	}
	if strings.Contains(s.Message, "rank 0") || strings.Contains(s.Message, "Worker 0") {
		t.Errorf("a rank is blamed for the Launcher's output: %s", s.Message)
	}
	// 2 Workers × (500m, 100Mi) and the runtime's Launcher (100m, 128Mi).
	d := mpijob(t, user, ns, "describe", name)
	if !regexp.MustCompile(`Total requested\s+cpu=1\.1,memory=328Mi\b`).MatchString(d.out) {
		t.Errorf("the totals do not read as people write them:\n%s", d.out)
	}
}

// Every runtime's image compiles an MPI program with mpicc (gcc and mpi.h)
// and runs it on every rank; Horovod's image has torchvision.
func TestImagesCompileMPIPrograms(t *testing.T) {
	c := framework.Get(t)
	c.EnsureImages(t, "openmpi5", "mpich", "intel", "horovod")
	const ns, user = "team-a", "dev-a"
	const src = `#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
  int rank, size;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  printf("compiled rank %d of %d\n", rank, size);
  MPI_Finalize();
  return 0;
}
`
	// Each rank compiles its own copy: the Workers share no folder.
	build := "cat > /tmp/c.c <<'EOF'\n" + src + "EOF\nmpicc -o /tmp/c /tmp/c.c && exec /tmp/c"
	for _, f := range []struct{ runtime, launch string }{
		{"mpi-openmpi", "mpirun"}, {"mpi-openmpi5", "mpirun"}, {"mpi-mpich", "mpijob-mpiexec"}, {"mpi-intel", "mpijob-mpiexec"}, {"mpi-horovod", "mpirun"},
	} {
		t.Run(f.runtime, func(t *testing.T) {
			t.Parallel()
			name := framework.UniqueName("cc-" + strings.TrimPrefix(f.runtime, "mpi-"))
			t.Cleanup(func() { mpijob(t, user, ns, "delete", name, "--wait=false") })
			cmd := build
			if f.runtime == "mpi-horovod" {
				cmd = `python3 -c "import torchvision; print('torchvision', torchvision.__version__)" && ` + build
			}
			expect(t, mpijob(t, user, ns, "create", name, "--runtime", f.runtime, "--workers", "2", "--", f.launch, "sh", "-c", cmd), 0)
			if got := c.WaitForTrainJob(t, ns, name, 6*time.Minute, trainer.TrainJobComplete, trainer.TrainJobFailed); got != trainer.TrainJobComplete {
				r := mpijob(t, user, ns, "describe", name)
				t.Fatalf("the job %s: %s", got, r.out)
			}
			logs := mpijob(t, user, ns, "logs", name, "--all")
			for r := range 2 {
				if want := fmt.Sprintf("compiled rank %d of 2", r); !strings.Contains(logs.out, want) {
					t.Errorf("no %q in the log:\n%s", want, logs.out)
				}
			}
			if f.runtime == "mpi-horovod" && !regexp.MustCompile(`torchvision \d+\.\d+`).MatchString(logs.out) {
				t.Errorf("torchvision did not import on mpi-horovod:\n%s", logs.out)
			}
		})
	}
}

// Memory is counted in bytes unless it has a unit: --memory 10 was 10
// bytes, and the Worker hung in FailedMount (the kubelet sizes the SSH key's
// in-memory volume by it) while the diagnosis said "Nothing to do yet".
// The CLI, and admission for a job written by hand, refuse it.
func TestTooLittleMemoryIsRefused(t *testing.T) {
	t.Parallel()
	c := framework.Get(t)
	const ns, user = "team-a", "dev-a"
	name := framework.UniqueName("mem")
	expect(t, mpijob(t, user, ns, "create", name, "--workers", "1", "--memory", "10"), 2,
		`--memory "10": is less than 32Mi, too little for a pod (memory counts bytes unless it has a unit such as Mi or Gi): use e.g. 16Gi or 300Mi`)
	expect(t, mpijob(t, user, ns, "get", name), 3, "not found")

	// The Launcher's resources written by hand: Trainer gives them to the
	// Launcher.
	job := framework.MakeTrainJob(name, ns, "mpi-openmpi").NumNodes(1).Obj()
	job.Spec.Trainer.ResourcesPerNode = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("10")}}
	err := c.As(t, user).Create(context.Background(), job)
	if err == nil {
		_ = c.Client.Delete(context.Background(), job)
		t.Fatal("a TrainJob whose pods get 10 bytes of memory was admitted")
	}
	for _, want := range []string{"spec.trainer.resourcesPerNode", `"10"`, "less than 32Mi"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q lacks %q", err, want)
		}
	}
}

// Every shipped runtime names a hung job: a progress timeout of its own,
// which a job may raise or turn off.
func TestRuntimesHaveAProgressTimeout(t *testing.T) {
	t.Parallel()
	c := framework.Get(t)
	list := &trainer.ClusterTrainingRuntimeList{}
	if err := c.Client.List(context.Background(), list, client.MatchingLabels{api.RuntimeLabel: "true"}); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) < 7 {
		t.Fatalf("%d runtimes of mpijob on the cluster, want the 7 shipped", len(list.Items))
	}
	for _, rt := range list.Items {
		if d := runtimes.ProgressTimeoutOf(rt.Annotations, nil); d <= 0 || d > 30*time.Minute {
			t.Errorf("runtime %s: progress timeout %s, want one of at most 30m", rt.Name, d)
		}
	}
	// "off" for one quiet job is admitted (it was refused as not a duration).
	job := framework.MakeTrainJob(framework.UniqueName("quiet"), "team-a", "mpi-openmpi").NumNodes(1).Suspend().Obj()
	job.Annotations = map[string]string{runtimes.ProgressTimeoutAnnotation: "off"}
	if err := c.As(t, "dev-a").Create(context.Background(), job, client.DryRunAll); err != nil {
		t.Errorf("a job with %s=off: %v", runtimes.ProgressTimeoutAnnotation, err)
	}
}

// A job exported as YAML (its TrainJob and its own runtime) and given a new
// name kept the old job's MPIJOB_OUTPUT_URI, so it wrote into the old job's
// artifacts. kubectl create -f of such a copy is refused, naming the
// variable and the value; kubectl mpijob create -f makes the runtime the
// copy's, and the copy's ranks see their own folder.
func TestExportedJobWritesItsOwnArtifacts(t *testing.T) {
	t.Parallel()
	c := framework.Get(t)
	const ns, user = "team-a", "dev-a"
	orig := framework.UniqueName("exp")
	t.Cleanup(func() { mpijob(t, user, ns, "delete", orig, orig+"-a", orig+"-b", "--wait=false") })
	expect(t, mpijob(t, user, ns, "create", orig, "--workers", "1", "--data-connection", localcluster.DataConnectionName, "--",
		"sh", "-c", `echo "output=$MPIJOB_OUTPUT_URI"`), 0)
	runtimeYAML, err := c.Kubectl(t, user, ns, "", "get", "trainingruntime", orig, "-o", "yaml")
	if err != nil {
		t.Fatal(err)
	}
	jobYAML, err := c.Kubectl(t, user, ns, "", "get", "trainjob", orig, "-o", "yaml")
	if err != nil {
		t.Fatal(err)
	}
	// What a user edits: the names (metadata, the runtime's job label and
	// the TrainJob's runtimeRef); what the server set goes.
	copyOf := func(newName string, renameRuntime bool) string {
		var docs []string
		for _, doc := range []string{runtimeYAML, jobYAML} {
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{"uid", "resourceVersion", "creationTimestamp", "generation", "ownerReferences", "managedFields", "finalizers"} {
				unstructured.RemoveNestedField(u.Object, "metadata", f)
			}
			unstructured.RemoveNestedField(u.Object, "status")
			switch {
			case u.GetKind() == "TrainJob":
				u.SetName(newName)
				if renameRuntime {
					if err := unstructured.SetNestedField(u.Object, newName, "spec", "runtimeRef", "name"); err != nil {
						t.Fatal(err)
					}
				}
			case renameRuntime:
				u.SetName(newName)
				labels := u.GetLabels()
				labels[api.JobLabel] = newName
				u.SetLabels(labels)
			}
			b, err := yaml.Marshal(u.Object)
			if err != nil {
				t.Fatal(err)
			}
			docs = append(docs, string(b))
		}
		return strings.Join(docs, "---\n")
	}

	t.Run("kubectl create -f is refused, naming the variable", func(t *testing.T) {
		out, err := c.Kubectl(t, user, ns, copyOf(orig+"-a", true), "create", "-f", "-")
		if err == nil {
			t.Fatalf("the copy was created with the original's artifacts folder:\n%s", out)
		}
		for _, want := range []string{"MPIJOB_OUTPUT_URI must name this runtime's job " + orig + "-a", `"s3://$(AWS_S3_BUCKET)/` + orig + `-a/"`} {
			if !strings.Contains(out, want) {
				t.Errorf("the refusal lacks %q:\n%s", want, out)
			}
		}
	})

	t.Run("kubectl mpijob create -f runs it with its own folder", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "job.yaml")
		if err := os.WriteFile(file, []byte(copyOf(orig+"-b", false)), 0o600); err != nil {
			t.Fatal(err)
		}
		expect(t, mpijob(t, user, ns, "create", "-f", file), 0, orig+"-b")
		rt := &trainer.TrainingRuntime{}
		if err := c.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: orig + "-b"}, rt); err != nil {
			t.Fatalf("the copy's own runtime: %v", err)
		}
		if got := rt.Labels[api.JobLabel]; got != orig+"-b" {
			t.Errorf("the copy's runtime belongs to job %q", got)
		}
		if got := c.WaitForTrainJob(t, ns, orig+"-b", 4*time.Minute, trainer.TrainJobComplete, trainer.TrainJobFailed); got != trainer.TrainJobComplete {
			t.Fatalf("the copy %s", got)
		}
		keys := connectionOf(t, ns)
		expect(t, mpijob(t, user, ns, "logs", orig+"-b"), 0, "output=s3://"+keys[dataconn.Bucket]+"/"+orig+"-b/")
	})
}

// A ConfigMap of the namespace mounted read-only on the Launcher and every
// Worker (admission refused any volume but a PVC): each rank reads the
// training config, describe shows it, and a missing one is named before
// anything is created.
func TestConfigMapMountedOnEveryRank(t *testing.T) {
	t.Parallel()
	c := framework.Get(t)
	const ns, user = "team-a", "dev-a"
	cm := framework.UniqueName("train-config")
	if out, err := c.Kubectl(t, user, ns, "", "create", "configmap", cm, "--from-literal=lr=0.125", "--from-literal=epochs=3"); err != nil {
		t.Fatalf("kubectl create configmap: %v\n%s", err, out)
	}
	t.Cleanup(func() { _, _ = c.Kubectl(t, user, ns, "", "delete", "configmap", cm, "--wait=false") })
	name := framework.UniqueName("cm")
	t.Cleanup(func() { mpijob(t, user, ns, "delete", name, "--wait=false") })
	expect(t, mpijob(t, user, ns, "create", name, "--workers", "2", "--config-map", cm, "--config-map", cm+"-missing:/mnt/other"), 2,
		fmt.Sprintf(`--config-map %q: no such ConfigMap in namespace team-a: create it first`, cm+"-missing"))
	expect(t, mpijob(t, user, ns, "create", name, "--workers", "2", "--config-map", cm+":/etc/train"), 2,
		`would hide /etc, which the MPI runtime needs: use a path under /mnt`)
	expect(t, mpijob(t, user, ns, "create", name, "--workers", "2", "--config-map", cm, "--",
		"mpirun", "sh", "-c", `echo "lr=$(cat /config/`+cm+`/lr) epochs=$(cat /config/`+cm+`/epochs) on $(hostname)"; touch /config/`+cm+`/x 2>/dev/null || echo read-only`), 0)
	if got := c.WaitForTrainJob(t, ns, name, 5*time.Minute, trainer.TrainJobComplete, trainer.TrainJobFailed); got != trainer.TrainJobComplete {
		r := mpijob(t, user, ns, "describe", name)
		t.Fatalf("the job %s: %s", got, r.out)
	}
	logs := mpijob(t, user, ns, "logs", name)
	for i := range 2 {
		if want := fmt.Sprintf("lr=0.125 epochs=3 on %s-node-0-%d", name, i); !strings.Contains(logs.out, want) {
			t.Errorf("no %q in the log:\n%s", want, logs.out)
		}
	}
	if n := strings.Count(logs.out, "read-only"); n != 2 {
		t.Errorf("%d ranks found the ConfigMap read-only, want 2:\n%s", n, logs.out)
	}
	expect(t, mpijob(t, user, ns, "describe", name), 0, "ConfigMaps", cm+" at /config/"+cm+" (read-only)")
}

// Open MPI 5 printed "PRTE has lost communication with a remote daemon",
// stopped the ranks and exited 0: the job showed Succeeded. Here the one
// rank runs on Worker 0 and Worker 1 is deleted mid-run: the job fails.
func TestOpenMPI5LostDaemonFailsTheJob(t *testing.T) {
	t.Parallel()
	c := framework.Get(t)
	c.EnsureImages(t, "openmpi5")
	const ns, user = "team-a", "dev-a"
	name := framework.UniqueName("lost")
	t.Cleanup(func() { mpijob(t, user, ns, "delete", name, "--wait=false") })
	expect(t, mpijob(t, user, ns, "create", name, "--runtime", "mpi-openmpi5", "--workers", "2", "--",
		"mpirun", "-np", "1", "sh", "-c", `i=0; while [ $i -lt 90 ]; do echo "tick $i"; i=$((i+1)); sleep 1; done`), 0)
	ctx := context.Background()
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 4*time.Minute, true, func(context.Context) (bool, error) {
		return strings.Contains(runCLI(t, user, ns, "logs", name).out, "tick 3"), nil
	})
	if err != nil {
		t.Fatalf("the rank never printed: %v", err)
	}
	pods := &corev1.PodList{}
	if err := c.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{
		"jobset.sigs.k8s.io/jobset-name": name, "jobset.sigs.k8s.io/replicatedjob-name": api.WorkerJob, "batch.kubernetes.io/job-completion-index": "1"}); err != nil || len(pods.Items) != 1 {
		t.Fatalf("Worker 1's pod: %d found, %v", len(pods.Items), err)
	}
	if err := c.Client.Delete(ctx, &pods.Items[0]); err != nil {
		t.Fatal(err)
	}
	if got := c.WaitForTrainJob(t, ns, name, 3*time.Minute, trainer.TrainJobComplete, trainer.TrainJobFailed); got != trainer.TrainJobFailed {
		t.Fatalf("the job whose Worker was lost mid-run is %s, want Failed", got)
	}
	// PRTE itself exits 1 when it notices the loss while the rank still
	// runs; when it exits 0, the images' mpirun says so and exits 1.
	logs := mpijob(t, user, ns, "logs", name)
	expect(t, logs, 0, "PRTE has lost communication with a remote daemon")
	if strings.Contains(logs.out, "tick 89") {
		t.Errorf("the rank finished although its job lost a Worker:\n%s", logs.out)
	}
}

// No token where none is needed: the shipped runtimes mount no
// ServiceAccount token into the Launcher or the Workers (no MPI program
// talks to the Kubernetes API), so a rank has none to reach it with.
func TestNoServiceAccountTokenInTheRanks(t *testing.T) {
	t.Parallel()
	c := framework.Get(t)
	const ns, user = "team-a", "dev-a"
	name := framework.UniqueName("notoken")
	t.Cleanup(func() { mpijob(t, user, ns, "delete", name, "--wait=false") })
	const probe = `for f in /var/run/secrets/kubernetes.io/serviceaccount/token /run/secrets/kubernetes.io/serviceaccount/token; do test -e $f && echo "TOKEN $f"; done; echo "probed on $(hostname)"`
	expect(t, mpijob(t, user, ns, "create", name, "--workers", "2", "--slots-per-worker", "1", "--",
		"sh", "-c", probe+"; mpirun -np 2 sh -c '"+probe+"'"), 0)
	if got := c.WaitForTrainJob(t, ns, name, 4*time.Minute, trainer.TrainJobComplete, trainer.TrainJobFailed); got != trainer.TrainJobComplete {
		t.Fatalf("the job ended %s:\n%s", got, mpijob(t, user, ns, "describe", name).out)
	}
	logs := mpijob(t, user, ns, "logs", name)
	if n := strings.Count(logs.out, "probed on"); n != 3 {
		t.Fatalf("%d probes ran, want 3 (the Launcher and two ranks): the test proves nothing\n%s", n, logs.out)
	}
	if strings.Contains(logs.out, "TOKEN ") {
		t.Errorf("a ServiceAccount token is mounted in the job's pods:\n%s", logs.out)
	}
}

// A job that needs the API names a ServiceAccount: only a user who may
// create that ServiceAccount's tokens may give it to a job (Kubernetes'
// edit role may; a user who may only run MPI jobs may not), and then the
// Launcher and every rank have its token.
func TestServiceAccountForAJobThatAsks(t *testing.T) {
	t.Parallel()
	c := framework.Get(t)
	const ns = "team-a"
	ctx := context.Background()
	sa := strings.ToLower(framework.UniqueName("trainer"))
	runner := "jobs-only-" + sa // may create MPI jobs (mpijob-edit), not tokens
	create := func(o client.Object) {
		t.Helper()
		if err := c.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Client.Delete(context.Background(), o) })
	}
	create(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns}})
	create(&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: runner, Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "mpijob-edit"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: runner}}})
	as := func(args ...string) result {
		return mpijob(t, "admin", ns, append([]string{"--as", runner}, args...)...)
	}

	name := framework.UniqueName("token")
	t.Cleanup(func() { mpijob(t, "admin", ns, "delete", name, "--wait=false") })
	const probe = `test -s /var/run/secrets/kubernetes.io/serviceaccount/token && echo "TOKEN on $(hostname)"; echo "probed on $(hostname)"`
	args := []string{"create", name, "--workers", "2", "--slots-per-worker", "1", "--service-account", sa, "--",
		"sh", "-c", probe + "; mpirun -np 2 sh -c '" + probe + "'"}
	expect(t, as("create", name, "--workers", "1", "--service-account", "no-such-sa", "--", "mpirun", "hostname"),
		5, "--service-account no-such-sa", "has no ServiceAccount no-such-sa")
	expect(t, as(args...), 5, "--service-account "+sa, "may not create tokens of ServiceAccount "+sa)
	// Nor through a runtime patch of a plain TrainJob: a projected token
	// volume of the namespace's default ServiceAccount is refused too.
	patched := framework.MakeTrainJob(framework.UniqueName("projected"), ns, "mpi-openmpi").NumNodes(1).PatchWorkers(trainer.PodSpecPatch{
		Volumes: []corev1.Volume{{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}}}}}},
	})
	runnerClient, err := client.New(func() *rest.Config {
		cfg := rest.CopyConfig(c.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: runner}
		return cfg
	}(), client.Options{Scheme: c.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	if err := runnerClient.Create(ctx, patched.Obj(), client.DryRunAll); err == nil || !strings.Contains(err.Error(), "may not create tokens of ServiceAccount default") {
		t.Errorf("a runtime patch mounting the default ServiceAccount's token, by a user who may not create its tokens: %v, want refused", err)
	}

	// An administrator lets the runner use it.
	create(&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: sa + "-token", Namespace: ns},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, Verbs: []string{"create"}, ResourceNames: []string{sa}}}})
	create(&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: sa + "-token", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: sa + "-token"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: runner}}})
	waitFor(t, 30*time.Second, "the runner's create of a job with the ServiceAccount", func() (bool, string) {
		r := as(args...)
		return r.code == 0, r.out + r.errOut
	})
	if got := c.WaitForTrainJob(t, ns, name, 4*time.Minute, trainer.TrainJobComplete, trainer.TrainJobFailed); got != trainer.TrainJobComplete {
		t.Fatalf("the job ended %s:\n%s", got, mpijob(t, "admin", ns, "describe", name).out)
	}
	logs := mpijob(t, "admin", ns, "logs", name).out
	if n, tokens := strings.Count(logs, "probed on"), strings.Count(logs, "TOKEN on"); n != 3 || tokens != 3 {
		t.Errorf("%d probes found %d tokens, want 3 and 3 (the Launcher and two ranks):\n%s", n, tokens, logs)
	}
	pods := &corev1.PodList{}
	if err := c.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"jobset.sigs.k8s.io/jobset-name": name}); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.ServiceAccountName != sa {
			t.Errorf("pod %s runs as ServiceAccount %q, want %s", p.Name, p.Spec.ServiceAccountName, sa)
		}
	}
}
