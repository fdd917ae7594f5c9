//go:build e2e

package e2e

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/test/framework"
)

// rankLine is mpi-hello's line, after the rank tag mpirun puts before it
// where the runtime asks for one ([1,RANK]<stdout>:, OpenMPI 4.1).
var rankLine = regexp.MustCompile(`(?m)^(?:\[\d+,(\d+)\]<(?:stdout|stdio)>:)?mpi-hello: rank (\d+) of (\d+) on (\S+)$`)

// A real MPI program runs across the two real nodes, for each MPI
// implementation: upstream Trainer V2 turns the TrainJob into a JobSet, the
// Launcher reaches both Workers over SSH, and every rank reports from its
// own host.
func TestMPIAcrossRealNodes(t *testing.T) {
	cases := map[string]struct {
		runtime string
		image   string
		command []string
	}{
		"OpenMPI": {runtime: "mpi-openmpi", image: "openmpi", command: []string{"mpirun", "/usr/local/bin/mpi-hello"}},
		"MPICH":   {runtime: "mpi-mpich", image: "mpich", command: []string{"mpijob-mpiexec", "/usr/local/bin/mpi-hello"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// MPICH's image is built on first use.
			framework.Get(t).EnsureImages(t, tc.image)
			runOnRealNodes(t, tc.runtime, tc.command)
		})
	}
}

func runOnRealNodes(t *testing.T, runtime string, command []string) {
	c := framework.Get(t)
	ns := c.NewNamespace(t, "e2e-"+runtime)
	job := framework.MakeTrainJob("hello", ns, runtime).NumNodes(2).SlotsPerWorker(1).
		Command(command...).Obj()
	if err := c.Client.Create(context.Background(), job); err != nil {
		t.Fatalf("failed to create TrainJob: %v", err)
	}
	// JobSet stops the Workers once the Launcher is done, so see where they
	// run while they run.
	workers := c.WaitForPods(t, ns, "hello", "node", 2, 3*time.Minute)

	if got := c.WaitForTrainJob(t, ns, "hello", 4*time.Minute, trainer.TrainJobComplete, trainer.TrainJobFailed); got != trainer.TrainJobComplete {
		launchers := c.JobPods(t, ns, "hello", "launcher")
		logs := ""
		if len(launchers) > 0 {
			logs = c.PodLog(t, ns, launchers[0].Name)
		}
		t.Fatalf("TrainJob ended %s, want %s; launcher log:\n%s", got, trainer.TrainJobComplete, logs)
	}

	workerNodes := map[string]bool{}
	for _, p := range workers {
		if !strings.HasPrefix(p.Spec.NodeName, "mpijob-node-") {
			t.Errorf("Worker %s ran on %q, want a real node (mpijob-node-N)", p.Name, p.Spec.NodeName)
		}
		workerNodes[p.Spec.NodeName] = true
	}
	if len(workerNodes) != 2 {
		t.Errorf("Workers ran on nodes %v, want 2 different real nodes", workerNodes)
	}

	launchers := c.JobPods(t, ns, "hello", "launcher")
	if len(launchers) != 1 {
		t.Fatalf("got %d Launcher pods, want 1", len(launchers))
	}
	log := c.PodLog(t, ns, launchers[0].Name)
	ranks := rankLine.FindAllStringSubmatch(log, -1)
	if len(ranks) != 2 {
		t.Fatalf("launcher log has %d rank lines, want 2:\n%s", len(ranks), log)
	}
	hosts := map[string]bool{}
	seen := map[string]bool{}
	for _, m := range ranks {
		tag, m := m[1], m[1:]
		if m[2] != "2" {
			t.Errorf("rank %s reports world size %s, want 2", m[1], m[2])
		}
		if runtime == "mpi-openmpi" && tag != m[1] {
			t.Errorf("rank %s's line is tagged with rank %q, want the runtime to tag it [1,%s]<stdout>:", m[1], tag, m[1])
		}
		seen[m[1]] = true
		hosts[m[3]] = true
	}
	if !seen["0"] || !seen["1"] {
		t.Errorf("ranks seen %v, want 0 and 1", seen)
	}
	if len(hosts) != 2 {
		t.Errorf("ranks ran on hosts %v, want 2 distinct hostnames:\n%s", hosts, log)
	}
	for h := range hosts {
		if !strings.Contains(h, "hello-node-") {
			t.Errorf("rank host %q is not a Worker of the job", h)
		}
	}
	if !strings.Contains(log, "allreduce over 2 ranks ok") {
		t.Errorf("launcher log lacks the allreduce check:\n%s", log)
	}

	// mpijob-manager's diagnosis agrees, for CLI, SDK and dashboard to read.
	st := c.WaitForStatus(t, ns, "hello", time.Minute, func(s api.Status) bool { return s.Phase == api.PhaseSucceeded })
	if st.WorkersTotal != 2 || st.SlotsPerWorker != 1 || st.Launcher != api.LauncherSucceeded || st.CompletionTime == nil || st.StartTime == nil {
		t.Errorf("status = %+v, want 2 Workers, 1 slot, Launcher Succeeded, start and completion times", st)
	}
}

// A 64-Worker GPU job lands every Worker on the kwok GPU nodes (the real
// nodes have no nvidia.com/gpu) and completes.
func TestGPUWorkersOnKwokNodes(t *testing.T) {
	t.Parallel()
	c := framework.Get(t)
	ns := c.NewNamespace(t, "e2e-kwok")
	const workers = 64
	// Every Worker has the runtime's 1 nvidia.com/gpu; the Launcher has none.
	job := framework.MakeTrainJob("gpu64", ns, "mpi-openmpi-gpu").NumNodes(workers).OnKwokNodes().
		Command("mpirun", "/usr/local/bin/mpi-hello").Obj()
	if err := c.Client.Create(context.Background(), job); err != nil {
		t.Fatalf("failed to create TrainJob: %v", err)
	}
	// kwok runs the Workers in moments and they go with the finished job,
	// so every Worker pod is recorded while the job runs, with the last
	// state seen of each.
	seen := map[string]corev1.Pod{}
	stop := make(chan struct{})
	recorded := make(chan struct{})
	go func() {
		defer close(recorded)
		for {
			list := &corev1.PodList{}
			_ = c.Client.List(context.Background(), list, client.InNamespace(ns), client.MatchingLabels{
				jobsetv1alpha2.JobSetNameKey: "gpu64", jobsetv1alpha2.ReplicatedJobNameKey: "node"})
			for _, p := range list.Items {
				if old, ok := seen[p.Name]; !ok || old.Status.Phase != corev1.PodSucceeded {
					seen[p.Name] = p
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	got := c.WaitForTrainJob(t, ns, "gpu64", 4*time.Minute, trainer.TrainJobComplete, trainer.TrainJobFailed)
	close(stop)
	<-recorded
	if got != trainer.TrainJobComplete {
		t.Fatalf("TrainJob ended %s, want %s", got, trainer.TrainJobComplete)
	}

	pods := make([]corev1.Pod, 0, len(seen))
	for _, p := range seen {
		pods = append(pods, p)
	}
	if len(pods) != workers {
		t.Fatalf("got %d Worker pods, want %d", len(pods), workers)
	}
	one := resource.MustParse("1")
	nodes := map[string]bool{}
	for _, p := range pods {
		if !strings.HasPrefix(p.Spec.NodeName, "kwok-gpu-") {
			t.Errorf("Worker %s landed on %q, want a kwok GPU node", p.Name, p.Spec.NodeName)
		}
		nodes[p.Spec.NodeName] = true
		if p.Status.Phase == corev1.PodFailed {
			t.Errorf("Worker %s failed", p.Name)
		}
		got := p.Spec.Containers[0].Resources.Requests[corev1.ResourceName("nvidia.com/gpu")]
		if got.Cmp(one) != 0 {
			t.Errorf("Worker %s requests %s nvidia.com/gpu, want 1", p.Name, got.String())
		}
	}
	// 64 GPUs cannot fit on fewer than 8 nodes of 8.
	if len(nodes) < 8 {
		t.Errorf("Workers used %d kwok nodes, want at least 8 for 64 GPUs", len(nodes))
	}
	launcher := c.JobPods(t, ns, "gpu64", "launcher")
	if len(launcher) != 1 || !strings.HasPrefix(launcher[0].Spec.NodeName, "kwok-gpu-") {
		t.Errorf("want one Launcher on a kwok node, got %d", len(launcher))
	}
}

// The kwok GPU nodes are tainted nvidia.com/gpu:NoSchedule as real GPU
// clusters are, and the API server's ExtendedResourceToleration gives the
// toleration to pods that ask for GPUs: a tenant's GPU job places its
// Workers there with no toleration written, and its CPU Launcher stays on a
// real node.
func TestGPUJobNeedsNoTolerationFromTheUser(t *testing.T) {
	t.Parallel()
	c := framework.Get(t)
	name := framework.UniqueName("big")
	expect(t, mpijob(t, "dev-a", "team-a", "create", name, "--runtime", "mpi-openmpi-gpu", "--workers", "2", "--gpus", "2", "--", "sleep", "600"), 0, "created in namespace team-a")
	t.Cleanup(func() { mpijob(t, "dev-a", "team-a", "delete", name, "--wait=false") })
	c.WaitForPods(t, "team-a", name, "node", 2, 2*time.Minute)
	var workers []corev1.Pod
	deadline := time.Now().Add(2 * time.Minute)
	for {
		workers = c.JobPods(t, "team-a", name, "node")
		placed := 0
		for _, p := range workers {
			if p.Spec.NodeName != "" {
				placed++
			}
		}
		if placed == 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	for _, p := range workers {
		if !strings.HasPrefix(p.Spec.NodeName, "kwok-gpu-") {
			t.Errorf("Worker %s placed on %q, want a GPU node", p.Name, p.Spec.NodeName)
		}
		if !tolerates(p.Spec.Tolerations, "nvidia.com/gpu") {
			t.Errorf("Worker %s has no toleration of nvidia.com/gpu: %v", p.Name, p.Spec.Tolerations)
		}
	}
	r := mpijob(t, "dev-a", "team-a", "get", name, "-o", "yaml")
	if strings.Contains(r.out, "tolerations") {
		t.Errorf("the job carries a toleration the user did not write:\n%s", r.out)
	}
	for _, p := range c.WaitForPods(t, "team-a", name, "launcher", 1, 2*time.Minute) {
		if p.Spec.NodeName != "" && !strings.HasPrefix(p.Spec.NodeName, "mpijob-node-") {
			t.Errorf("the CPU Launcher %s was placed on %q, want a real node", p.Name, p.Spec.NodeName)
		}
		if tolerates(p.Spec.Tolerations, "nvidia.com/gpu") {
			t.Errorf("the CPU Launcher %s tolerates the GPU taint", p.Name)
		}
	}
}

func tolerates(tols []corev1.Toleration, key string) bool {
	for _, t := range tols {
		if t.Key == key && t.Effect == corev1.TaintEffectNoSchedule {
			return true
		}
	}
	return false
}
