//go:build e2e

package integration

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mpijob/mpijob/pkg/legacy"
	"github.com/mpijob/mpijob/pkg/runtimetest"
	"github.com/mpijob/mpijob/test/framework"
)

// Every shipped CPU runtime runs on 2 Workers × 2 slots of the two real
// nodes: its image's mpi-hello, then its reference training workload (the
// digits examples: mpi4py + NumPy, Horovod, DeepSpeed). The ranks really ran
// on the Workers (each rank names its host, each Worker hosts two ranks,
// none ran on the Launcher: upstream Trainer loses this silently for
// OpenMPI 5, kubeflow/trainer#4028) and the workload reaches a test
// accuracy of 0.95, measured by the job. The images that `make dev` does not
// build are built here on first use.
func TestEveryFlavourSpreadsRanksAndTrains(t *testing.T) {
	framework.HeavyCPU(t)
	c := framework.Get(t)
	const digits = "python3 /opt/mpijob/examples/digits_mpi4py.py"
	flavours := []struct{ runtime, image, command string }{
		{"mpi-openmpi", "openmpi", "mpirun /usr/local/bin/mpi-hello && mpirun " + digits},
		{"mpi-mpich", "mpich", "mpijob-mpiexec /usr/local/bin/mpi-hello && mpijob-mpiexec " + digits},
		{"mpi-openmpi5", "openmpi5", "mpirun /usr/local/bin/mpi-hello && mpirun " + digits},
		{"mpi-intel", "intel", "mpijob-mpiexec /usr/local/bin/mpi-hello && mpijob-mpiexec " + digits},
		{"mpi-horovod", "horovod", "mpirun /usr/local/bin/mpi-hello && mpirun python3 /opt/mpijob/examples/digits_horovod.py"},
		{"mpi-deepspeed", "deepspeed", "mpirun /usr/local/bin/mpi-hello && mpirun python3 /opt/mpijob/examples/digits_deepspeed.py"},
	}
	var images []string
	for _, f := range flavours {
		images = append(images, f.image)
	}
	c.EnsureImages(t, images...)
	ns := c.NewNamespace(t, "flavours")
	// Two jobs at a time: four ranks each share the machine's two cores.
	slots := make(chan struct{}, 2)
	for _, f := range flavours {
		t.Run(f.runtime, func(t *testing.T) {
			t.Parallel()
			slots <- struct{}{}
			defer func() { <-slots }()
			name := strings.TrimPrefix(f.runtime, "mpi-")
			job := framework.MakeTrainJob(name, ns, f.runtime).NumNodes(2).SlotsPerWorker(2).Command("bash", "-c", f.command).Obj()
			if err := c.Client.Create(context.Background(), job); err != nil {
				t.Fatal(err)
			}
			end := c.WaitForTrainJob(t, ns, name, 8*time.Minute, "Complete", "Failed")
			launcher := c.JobPods(t, ns, name, "launcher")
			if len(launcher) != 1 {
				t.Fatalf("job %s; want 1 Launcher pod, got %d", end, len(launcher))
			}
			log := c.PodLog(t, ns, launcher[0].Name)
			if end != "Complete" {
				t.Fatalf("%s: the job %s; Launcher log:\n%s", f.runtime, end, log)
			}
			// JobSet removes the Workers once the job completes; their host
			// names are JobSet's: JOB-node-0-INDEX.
			if err := runtimetest.ParsePlacement(log).Check(workerHosts(name, 2), launcher[0].Spec.Hostname, 2); err != nil {
				t.Fatalf("%s: %v\nLauncher log:\n%s", f.runtime, err, log)
			}
			if !strings.Contains(log, "allreduce over 4 ranks ok") {
				t.Errorf("%s: no allreduce result in the Launcher's log:\n%s", f.runtime, log)
			}
			acc, ok := finalAccuracy(log)
			if !ok {
				t.Fatalf("%s: the workload printed no final test accuracy:\n%s", f.runtime, log)
			}
			t.Logf("%s: test accuracy %.4f", f.runtime, acc)
			if acc < 0.95 {
				t.Errorf("%s: test accuracy %.4f, want at least 0.95", f.runtime, acc)
			}
		})
	}
}

// workerHosts are the host names JobSet gives a job's n Workers.
func workerHosts(job string, n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("%s-node-0-%d", job, i))
	}
	return out
}

// finalAccuracy is the accuracy of the examples' last line,
// "test accuracy A on N digits after ...".
func finalAccuracy(log string) (float64, bool) {
	m := finalAccuracyLine.FindAllStringSubmatch(log, -1)
	if len(m) == 0 {
		return 0, false
	}
	v, err := strconv.ParseFloat(m[len(m)-1][1], 64)
	return v, err == nil
}

var finalAccuracyLine = regexp.MustCompile(`test accuracy ([0-9.]+) on \d+ digits after`)

// MPICH over TCP must not hang in MPI_Finalize: one job runs mpi-hello 20
// times across 2 Workers × 2 slots, each run bounded at 60 s.
func TestMPICHRunsTwentyTimesWithoutHang(t *testing.T) {
	c := framework.Get(t)
	ns := c.NewNamespace(t, "mpich20")
	script := `ok=0
for i in $(seq 20); do
  if timeout 60 mpijob-mpiexec /usr/local/bin/mpi-hello > /tmp/run.log 2>&1 && grep -q "allreduce over 4 ranks ok" /tmp/run.log; then
    ok=$((ok+1))
  else
    echo "run $i failed or hung:"; cat /tmp/run.log
  fi
done
echo "mpich runs ok: $ok of 20"`
	job := framework.MakeTrainJob("mpich20", ns, "mpi-mpich").NumNodes(2).SlotsPerWorker(2).Command("bash", "-c", script).Obj()
	if err := c.Client.Create(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	c.WaitForTrainJob(t, ns, "mpich20", 15*time.Minute, "Complete")
	launcher := c.JobPods(t, ns, "mpich20", "launcher")
	if len(launcher) != 1 {
		t.Fatalf("want 1 Launcher pod, got %d", len(launcher))
	}
	log := c.PodLog(t, ns, launcher[0].Name)
	if !strings.Contains(log, fmt.Sprintf("mpich runs ok: %d of 20", 20)) {
		t.Fatalf("MPICH did not run 20 of 20 times:\n%s", log)
	}
}

// Legacy MPIJobs with runLauncherAsWorker on MPICH and Intel MPI convert
// (one more Worker stands in for the Launcher's ranks) and run: the ranks
// of the legacy job's Worker + Launcher land on the 2 Workers, one per node.
func TestLegacyLauncherAsWorkerConvertsAndRuns(t *testing.T) {
	c := framework.Get(t)
	c.EnsureImages(t, "mpich", "intel")
	ns := c.NewNamespace(t, "legacy-law")
	for _, f := range []struct{ impl, image string }{
		{"MPICH", "ghcr.io/mpijob/mpich:5.0"},
		{"Intel", "ghcr.io/mpijob/intel-mpi:2021.18"},
	} {
		t.Run(f.impl, func(t *testing.T) {
			t.Parallel()
			name := "law-" + strings.ToLower(f.impl)
			manifest := strings.NewReplacer("NAME", name, "IMPL", f.impl, "IMAGE", f.image).Replace(`apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata:
  name: NAME
spec:
  mpiImplementation: IMPL
  runLauncherAsWorker: true
  slotsPerWorker: 1
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        spec:
          containers:
          - name: launcher
            image: IMAGE
            command: ["mpijob-mpiexec", "/usr/local/bin/mpi-hello"]
    Worker:
      replicas: 1
      template:
        spec:
          containers:
          - name: worker
            image: IMAGE
`)
			res, err := legacy.Convert([]byte(manifest))
			if err != nil {
				t.Fatalf("convert %s with runLauncherAsWorker: %v", f.impl, err)
			}
			res.TrainJob.Namespace = ns
			if res.Runtime != nil {
				res.Runtime.Namespace = ns
			}
			if err := framework.Submit(context.Background(), c.Client, res.TrainJob, res.Runtime); err != nil {
				t.Fatal(err)
			}
			if end := c.WaitForTrainJob(t, ns, name, 4*time.Minute, "Complete", "Failed"); end != "Complete" {
				t.Fatalf("the converted %s job %s:\n%s", f.impl, end, c.PodLog(t, ns, c.JobPods(t, ns, name, "launcher")[0].Name))
			}
			if n := *res.TrainJob.Spec.Trainer.NumNodes; n != 2 {
				t.Fatalf("converted to %d Workers, want 2 (1 + one for the Launcher's ranks)", n)
			}
			launcher := c.JobPods(t, ns, name, "launcher")
			if len(launcher) != 1 {
				t.Fatalf("want 1 Launcher pod, got %d", len(launcher))
			}
			log := c.PodLog(t, ns, launcher[0].Name)
			if err := runtimetest.ParsePlacement(log).Check(workerHosts(name, 2), launcher[0].Spec.Hostname, 1); err != nil {
				t.Fatalf("%s: %v\nLauncher log:\n%s", f.impl, err, log)
			}
		})
	}
}
