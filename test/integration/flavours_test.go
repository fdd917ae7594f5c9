//go:build e2e

package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mpijob/mpijob/pkg/legacy"
	"github.com/mpijob/mpijob/pkg/runtimetest"
	"github.com/mpijob/mpijob/test/framework"
)

// Every shipped CPU runtime runs its image's mpi-hello on 2 Workers × 2
// slots of the two real nodes, and the ranks really ran on the Workers: each
// rank names its host, each Worker hosts two ranks and none ran on the
// Launcher (upstream Trainer loses this silently for OpenMPI 5,
// kubeflow/trainer#4028). The images that `make dev` does not build are
// built here on first use.
func TestEveryFlavourSpreadsRanksOverWorkers(t *testing.T) {
	c := framework.Get(t)
	flavours := []struct{ runtime, image string }{
		{"mpi-openmpi", "openmpi"},
		{"mpi-mpich", "mpich"},
		{"mpi-openmpi5", "openmpi5"},
		{"mpi-intel", "intel"},
	}
	var images []string
	for _, f := range flavours {
		images = append(images, f.image)
	}
	c.EnsureImages(t, images...)
	ns := c.NewNamespace(t, "flavours")
	for _, f := range flavours {
		t.Run(f.runtime, func(t *testing.T) {
			t.Parallel()
			name := strings.TrimPrefix(f.runtime, "mpi-")
			job := framework.MakeTrainJob(name, ns, f.runtime).NumNodes(2).SlotsPerWorker(2).Obj()
			if err := c.Client.Create(context.Background(), job); err != nil {
				t.Fatal(err)
			}
			c.WaitForTrainJob(t, ns, name, 4*time.Minute, "Complete")
			launcher := c.JobPods(t, ns, name, "launcher")
			workers := c.JobPods(t, ns, name, "node")
			if len(launcher) != 1 || len(workers) != 2 {
				t.Fatalf("want 1 Launcher and 2 Worker pods, got %d and %d", len(launcher), len(workers))
			}
			log := c.PodLog(t, ns, launcher[0].Name)
			hosts := []string{workers[0].Spec.Hostname, workers[1].Spec.Hostname}
			if workers[0].Spec.NodeName == workers[1].Spec.NodeName {
				t.Errorf("both Workers ran on node %s; the runtime spreads them over nodes", workers[0].Spec.NodeName)
			}
			if err := runtimetest.ParsePlacement(log).Check(hosts, launcher[0].Spec.Hostname, 2); err != nil {
				t.Fatalf("%s: %v\nLauncher log:\n%s", f.runtime, err, log)
			}
			if !strings.Contains(log, "allreduce over 4 ranks ok") {
				t.Errorf("%s: no allreduce result in the Launcher's log:\n%s", f.runtime, log)
			}
		})
	}
}

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
// (one more Worker stands in for the Launcher's ranks) and run: every rank
// of the legacy job's 2 Workers + Launcher lands on one of the 3 Workers.
func TestLegacyLauncherAsWorkerConvertsAndRuns(t *testing.T) {
	c := framework.Get(t)
	c.EnsureImages(t, "mpich", "intel")
	ns := c.NewNamespace(t, "legacy-law")
	for _, f := range []struct{ impl, image string }{
		{"MPICH", "ghcr.io/mpijob/mpich:4.0"},
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
      replicas: 2
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
			c.WaitForTrainJob(t, ns, name, 4*time.Minute, "Complete")
			launcher := c.JobPods(t, ns, name, "launcher")
			workers := c.JobPods(t, ns, name, "node")
			if len(launcher) != 1 || len(workers) != 3 {
				t.Fatalf("want 1 Launcher and 3 Workers (2 + one for the Launcher's ranks), got %d and %d", len(launcher), len(workers))
			}
			var hosts []string
			for _, w := range workers {
				hosts = append(hosts, w.Spec.Hostname)
			}
			log := c.PodLog(t, ns, launcher[0].Name)
			if err := runtimetest.ParsePlacement(log).Check(hosts, launcher[0].Spec.Hostname, 1); err != nil {
				t.Fatalf("%s: %v\nLauncher log:\n%s", f.impl, err, log)
			}
		})
	}
}
