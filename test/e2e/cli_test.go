//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/cli"
	"github.com/mpijob/mpijob/pkg/localcluster"
	"github.com/mpijob/mpijob/test/framework"
)

type result struct {
	code        int
	out, errOut string
}

// mpijob runs kubectl-mpijob in-process against the local cluster as user
// (a kubeconfig context) in namespace ns.
func mpijob(t *testing.T, user, ns string, args ...string) result {
	t.Helper()
	r := runCLI(t, user, ns, args...)
	t.Logf("kubectl mpijob %s → exit %d\n%s%s", strings.Join(args, " "), r.code, r.out, r.errOut)
	return r
}

// runCLI runs kubectl-mpijob in-process as user in ns, logging nothing.
func runCLI(t *testing.T, user, ns string, args ...string) result {
	t.Helper()
	c := framework.Get(t)
	var out, errOut bytes.Buffer
	full := append([]string{"--kubeconfig", c.Kubeconfig, "--context", user, "-n", ns}, args...)
	code := cli.Main(full, genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &errOut})
	return result{code: code, out: out.String(), errOut: errOut.String()}
}

func expect(t *testing.T, r result, code int, contains ...string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, code, r.out, r.errOut)
	}
	for _, s := range contains {
		if !strings.Contains(r.out+r.errOut, s) {
			t.Errorf("output lacks %q\nstdout: %s\nstderr: %s", s, r.out, r.errOut)
		}
	}
}

// The lifecycle a user runs from a terminal, as dev-a in team-a (Pod
// Security restricted, Kueue's default queue): create → wait → logs --all
// → describe → clone → delete, on the real nodes.
func TestCLILifecycle(t *testing.T) {
	t.Parallel()
	framework.Get(t)
	name := framework.UniqueName("cli")
	expect(t, mpijob(t, "dev-a", "team-a", "create", name, "--workers", "2", "--slots-per-worker", "2"), 0, "created in namespace team-a")
	t.Cleanup(func() { mpijob(t, "dev-a", "team-a", "delete", name, name+"-b", "--wait=false") })
	expect(t, mpijob(t, "dev-a", "team-a", "wait", name, "--for=Succeeded", "--timeout", "3m"), 0, "is Succeeded")

	logs := mpijob(t, "dev-a", "team-a", "logs", name, "--all")
	expect(t, logs, 0, "allreduce over 4 ranks ok")
	hosts := map[string]bool{}
	for _, m := range regexp.MustCompile(`rank \d of 4 on (\S+)`).FindAllStringSubmatch(logs.out, -1) {
		hosts[m[1]] = true
	}
	if len(hosts) != 2 {
		t.Errorf("ranks ran on %d Workers (%v), want 2", len(hosts), hosts)
	}
	// --follow on a finished Launcher prints its log and returns.
	// (mpirun forwards the ranks' lines in any order, so all 5 are asked for.)
	follow := mpijob(t, "dev-a", "team-a", "logs", name, "--follow", "--tail", "10")
	expect(t, follow, 0, "allreduce over 4 ranks ok")
	// Open MPI itself may add a line under load ("plm:rsh: Warning:
	// setpgid(...) failed"): the program's own lines are counted.
	ours := regexp.MustCompile(`rank \d of 4 on \S+|allreduce over 4 ranks ok`)
	if n := len(ours.FindAllString(follow.out, -1)); n != 5 {
		t.Errorf("logs --follow printed %d of the program's lines, want 5 (4 ranks and the allreduce):\n%s", n, follow.out)
	}
	grep := mpijob(t, "dev-a", "team-a", "logs", name, "--grep", "allreduce")
	expect(t, grep, 0, "allreduce")
	if strings.Contains(grep.out, "rank 0 of 4") {
		t.Errorf("--grep allreduce let through other lines: %s", grep.out)
	}

	expect(t, mpijob(t, "dev-a", "team-a", "describe", name), 0, "Phase:", "Succeeded", "Creator:", "dev-a", "Workers:", "2/2 ready", "Events:")
	expect(t, mpijob(t, "dev-a", "team-a", "describe", name+"x"), cli.ExitNotFound, "did you mean \""+name+"\"")
	expect(t, mpijob(t, "dev-a", "team-a", "get", "-o", "wide"), 0, name, "Succeeded", "dev-a")

	expect(t, mpijob(t, "dev-a", "team-a", "clone", name, name+"-b", "--workers", "1"), 0, "a clone of "+name)
	expect(t, mpijob(t, "dev-a", "team-a", "wait", name+"-b", "--for=Succeeded", "--timeout", "3m"), 0)
	for job, want := range map[string]int32{name: 2, name + "-b": 1} {
		r := mpijob(t, "dev-a", "team-a", "get", job, "-o", "json")
		tj := &trainer.TrainJob{}
		if err := json.Unmarshal([]byte(r.out), tj); err != nil {
			t.Fatalf("get -o json: %v", err)
		}
		if got := *tj.Spec.Trainer.NumNodes; got != want {
			t.Errorf("%s has %d Workers, want %d (a clone must leave the original untouched)", job, got, want)
		}
	}

	expect(t, mpijob(t, "dev-a", "team-a", "delete", name, name+"-b"), 0, "mpijob "+name+" deleted")
	expect(t, mpijob(t, "dev-a", "team-a", "get", name), cli.ExitNotFound)
}

// A failing job: wait says how it ended with its own exit code, and
// describe shows the diagnosis with a next step.
func TestCLIFailingJob(t *testing.T) {
	t.Parallel()
	c := framework.Get(t)
	ns := c.NewNamespace(t, "cli-fail")
	expect(t, mpijob(t, "admin", ns, "create", "boom", "--workers", "1", "--", "sh", "-c", "echo password=hunter2; exit 3"), 0)
	expect(t, mpijob(t, "admin", ns, "wait", "boom", "--for=Succeeded", "--timeout", "3m"), cli.ExitOtherPhase, "finished Failed", "Next step:")
	expect(t, mpijob(t, "admin", ns, "describe", "boom"), 0, "Phase:", "Failed", "Reason:", "Next step:")
	logs := mpijob(t, "admin", ns, "logs", "boom", "--show-redactions")
	expect(t, logs, 0, "password=[REDACTED]", "1 secret(s) redacted")
	if strings.Contains(logs.out, "hunter2") {
		t.Errorf("a secret reached the output: %s", logs.out)
	}
}

// Permissions and admission through the CLI: errors name the user, verb
// and namespace, or carry the webhook's words, each with its exit code.
func TestCLIPermissionsAndAdmission(t *testing.T) {
	t.Parallel()
	framework.Get(t)
	expect(t, mpijob(t, "viewer-a", "team-a", "create", "nope", "--workers", "1"), cli.ExitForbidden, "viewer-a", "create", "team-a")
	expect(t, mpijob(t, "dev-b", "team-a", "get"), cli.ExitForbidden, "dev-b", "list", "team-a")
	expect(t, mpijob(t, "viewer-a", "team-a", "get"), 0)
	// team-a's quota is 8 GPUs: 4 Workers × 3 GPUs (+ the Launcher) cannot fit.
	expect(t, mpijob(t, "dev-a", "team-a", "create", "big", "--runtime", "mpi-openmpi-gpu", "--workers", "4", "--gpus", "3"),
		cli.ExitDenied, "nvidia.com/gpu", "quota")
	expect(t, mpijob(t, "dev-a", "team-a", "create", "typo", "--runtime", "mpi-openmpl", "--workers", "1"), cli.ExitNotFound, `did you mean "mpi-openmpi"`)
	noRuntime(t, "team-a", "big")
	expect(t, mpijob(t, "dev-a", "team-a", "create", "cpu", "--workers", "2", "--resource", "gpu=1"), cli.ExitUsage, `--resource gpu "1": no node offers a resource named "gpu": use nvidia.com/gpu or amd.com/gpu`)
	expect(t, mpijob(t, "dev-a", "team-a", "create", "img", "--workers", "2", "--worker-image", "ghcr.io/Team/x:1"), cli.ExitUsage, `--worker-image "ghcr.io/Team/x:1": is not an image reference`)
	expect(t, mpijob(t, "dev-a", "team-a", "create", strings.Repeat("n", 45), "--workers", "1"), cli.ExitUsage, "is 45 characters; use at most 44")
}

// noRuntime fails the test if a per-job runtime name is left in ns.
func noRuntime(t *testing.T, ns, name string) {
	t.Helper()
	c := framework.Get(t)
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &trainer.TrainingRuntime{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Errorf("TrainingRuntime %s/%s is still there", ns, name)
	}
}

// The first thing a data scientist does: their own image and resources on
// every Worker of the default runtime, from the CLI. The pods run what was
// asked for, the job succeeds on the real nodes, and its per-job runtime
// is owned by the job, kept out of runtimes list and gone after delete.
func TestCLIImageAndResourcesOnEveryWorker(t *testing.T) {
	t.Parallel()
	c := framework.Get(t)
	ctx := context.Background()
	name := framework.UniqueName("own")
	expect(t, mpijob(t, "dev-a", "team-a", "create", name, "--workers", "2", "--slots-per-worker", "1",
		"--image", localcluster.UserImage, "--cpu", "300m", "--memory", "300Mi", "--launcher-cpu", "200m", "--launcher-memory", "256Mi",
		// JobSet stops the Workers once the Launcher is done: stay a moment
		// so their pods can be looked at.
		"--", "sh", "-c", "mpirun /usr/local/bin/mpi-hello && sleep 15"),
		0, "created in namespace team-a")
	t.Cleanup(func() { mpijob(t, "dev-a", "team-a", "delete", name, "--wait=false") })
	expect(t, mpijob(t, "dev-a", "team-a", "wait", name, "--for=Running", "--timeout", "3m"), 0)

	check := func(role string, pod corev1.Pod, cpu, memory string) {
		ct := pod.Spec.Containers[0]
		if ct.Image != localcluster.UserImage {
			t.Errorf("%s %s runs %s, want %s", role, pod.Name, ct.Image, localcluster.UserImage)
		}
		for _, rl := range []corev1.ResourceList{ct.Resources.Requests, ct.Resources.Limits} {
			if q := rl[corev1.ResourceCPU]; q.String() != cpu {
				t.Errorf("%s %s cpu %s, want %s (requests %v, limits %v)", role, pod.Name, q.String(), cpu, ct.Resources.Requests, ct.Resources.Limits)
			}
			if q := rl[corev1.ResourceMemory]; q.String() != memory {
				t.Errorf("%s %s memory %s, want %s", role, pod.Name, q.String(), memory)
			}
		}
	}
	workers := c.JobPods(t, "team-a", name, "node")
	if len(workers) != 2 {
		t.Fatalf("%d Worker pods, want 2", len(workers))
	}
	for _, p := range workers {
		check("Worker", p, "300m", "300Mi")
	}
	for _, p := range c.JobPods(t, "team-a", name, "launcher") {
		check("Launcher", p, "200m", "256Mi")
	}
	expect(t, mpijob(t, "dev-a", "team-a", "wait", name, "--for=Succeeded", "--timeout", "3m"), 0, "is Succeeded")
	expect(t, mpijob(t, "dev-a", "team-a", "logs", name), 0, "allreduce over 2 ranks ok")

	rt := &trainer.TrainingRuntime{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: name}, rt); err != nil {
		t.Fatalf("per-job runtime: %v", err)
	}
	tj := &trainer.TrainJob{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: name}, tj); err != nil {
		t.Fatal(err)
	}
	if len(rt.OwnerReferences) != 1 || rt.OwnerReferences[0].UID != tj.UID {
		t.Errorf("runtime owners %+v, want the TrainJob %s", rt.OwnerReferences, tj.UID)
	}
	list := mpijob(t, "dev-a", "team-a", "runtimes", "list")
	expect(t, list, 0, "mpi-openmpi")
	if strings.Contains(list.out, name) {
		t.Errorf("runtimes list shows the per-job runtime %s:\n%s", name, list.out)
	}
	get := mpijob(t, "dev-a", "team-a", "get", name)
	expect(t, get, 0, "mpi-openmpi")

	expect(t, mpijob(t, "dev-a", "team-a", "delete", name), 0)
	noRuntime(t, "team-a", name)
}

// `runtimes test` runs a 1 Launcher + 2 Worker job on a runtime and reports
// image pull, SSH key mount, MPI spawn and rank placement as separate
// checks; a runtime whose image cannot be pulled fails the first check with
// exit code 6, one whose ranks all run on the Launcher the last.
func TestCLIRuntimesTest(t *testing.T) {
	t.Parallel()
	framework.HeavyCPU(t)
	c := framework.Get(t)
	ns := c.NewNamespace(t, "cli-rt")
	// Every shipped CPU runtime passes, ranks on the Workers; the images
	// `make dev` does not build are built first.
	c.EnsureImages(t, "mpich", "openmpi5", "intel", "horovod", "deepspeed")
	for _, rt := range []string{"mpi-openmpi", "mpi-mpich", "mpi-openmpi5", "mpi-intel", "mpi-horovod", "mpi-deepspeed"} {
		// 8m, not the 13-20 s a runtime takes on a quiet machine: in a
		// fresh-clone CI rehearsal (2026-11-24) Horovod's test job, right
		// after its image was built and imported beside the integration
		// suite, was still running at 4m.
		r := mpijob(t, "admin", ns, "runtimes", "test", rt, "--timeout", "8m")
		expect(t, r, 0, "image pull", "SSH key mount", "MPI spawn")
		if !regexp.MustCompile(`rank placement\s+PASS\s+2 ranks ran on the job's 2 rank hosts, 1 on each`).MatchString(r.out) {
			t.Errorf("runtimes test %s: no passing rank placement check:\n%s", rt, r.out)
		}
	}
	// OpenMPI 5 without the PRRTE variables runs every rank on the
	// Launcher and exits 0 (kubeflow/trainer#4028): the placement check
	// catches it.
	noHostfile := c.CopyRuntime(t, "mpi-openmpi5", "mpi-test-no-prrte", func(rt *trainer.ClusterTrainingRuntime) {
		for i := range rt.Spec.Template.Spec.ReplicatedJobs {
			spec := &rt.Spec.Template.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec
			for j := range spec.Containers {
				spec.Containers[j].Env = nil
			}
		}
	})
	r := mpijob(t, "admin", ns, "runtimes", "test", noHostfile.Name, "--timeout", "4m")
	expect(t, r, cli.ExitOtherPhase, "MPI spawn", "rank placement", "FAIL", "ranks ran on the Launcher")
	broken := c.CopyRuntime(t, "mpi-openmpi", "mpi-test-broken", func(rt *trainer.ClusterTrainingRuntime) {
		for i := range rt.Spec.Template.Spec.ReplicatedJobs {
			spec := &rt.Spec.Template.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec
			spec.Containers[0].Image = "registry.invalid/none:1"
		}
	})
	r = mpijob(t, "admin", ns, "runtimes", "test", broken.Name, "--timeout", "40s")
	expect(t, r, cli.ExitOtherPhase, "image pull", "FAIL")
	expect(t, mpijob(t, "admin", ns, "runtimes", "describe", "mpi-openmpi"), 0, "Launcher image:", "ghcr.io/mpijob/openmpi:4.1", "Worker command:")
	expect(t, mpijob(t, "admin", ns, "runtimes", "describe", "mpi-openmpl"), cli.ExitNotFound, `did you mean "mpi-openmpi"`)
}

// syncBuffer is a bytes.Buffer safe to read while the CLI writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// get -w prints the table, then a row for every change of a job: a job
// created while it watches shows up and reaches Succeeded.
func TestCLIGetWatch(t *testing.T) {
	t.Parallel()
	c := framework.Get(t)
	ns := c.NewNamespace(t, "cli-watch")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, errOut := &syncBuffer{}, &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- cli.MainContext(ctx, []string{"--kubeconfig", c.Kubeconfig, "--context", "admin", "-n", ns, "get", "-w"},
			genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: out, ErrOut: errOut})
	}()
	// It says so once it has listed the (empty) namespace: the watch
	// starts where that list ended, so the job created next shows up.
	if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		return strings.Contains(errOut.String(), "No MPI jobs in namespace "+ns+" yet; watching for them"), nil
	}); err != nil {
		t.Fatalf("get -w on an empty namespace never said it watches: %q", errOut.String())
	}
	expect(t, mpijob(t, "admin", ns, "create", "watched", "--workers", "1"), 0)
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(context.Context) (bool, error) {
		return regexp.MustCompile(`(?m)^watched\s+mpi-openmpi\s+Succeeded\s+1/1`).MatchString(out.String()), nil
	})
	cancel()
	code := <-done
	if err != nil {
		t.Fatalf("get -w never showed watched Succeeded:\n%s", out.String())
	}
	if code != cli.ExitOK {
		t.Errorf("get -w ended with exit %d, want 0 when stopped", code)
	}
	if n := strings.Count(out.String(), "watched "); n < 2 {
		t.Errorf("get -w printed %d rows for the job, want one per change (at least 2):\n%s", n, out.String())
	}
}

// Events belong to a job by exact names: job X does not show the events
// of job X-4 (clone's own example name), from the CLI or the dashboard.
func TestEventsOfASimilarlyNamedJobStayApart(t *testing.T) {
	t.Parallel()
	framework.Get(t)
	name := framework.UniqueName("evt")
	other := name + "-4"
	for _, n := range []string{name, other} {
		expect(t, mpijob(t, "dev-a", "team-a", "create", n, "--workers", "1"), 0, "created")
	}
	t.Cleanup(func() { mpijob(t, "dev-a", "team-a", "delete", name, other, "--wait=false") })
	for _, n := range []string{name, other} {
		expect(t, mpijob(t, "dev-a", "team-a", "wait", n, "--for=Succeeded", "--timeout", "3m"), 0)
	}
	// Judged by the OBJECT column: a message may name another object (a
	// Workload's hash can even start with "4").
	objects := func(out string) (mine, others int) {
		kinds := map[string]string{"trainjob": "TrainJob", "jobset": "JobSet", "job": "Job", "pod": "Pod", "workload": "Workload", "networkpolicy": "NetworkPolicy"}
		for _, line := range strings.Split(out, "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 4 {
				continue
			}
			kind, obj, _ := strings.Cut(f[3], "/")
			switch {
			case api.IsJobObject(other, kinds[kind], obj):
				others++
			case api.IsJobObject(name, kinds[kind], obj):
				mine++
			}
		}
		return mine, others
	}
	evs := mpijob(t, "dev-a", "team-a", "events", name)
	expect(t, evs, 0, name)
	if mine, others := objects(evs.out); mine == 0 || others > 0 {
		t.Errorf("events of %s: %d of its own objects, %d of %s's:\n%s", name, mine, others, other, evs.out)
	}
	if ofName, ofOther := objects(mpijob(t, "dev-a", "team-a", "events", other).out); ofOther == 0 || ofName > 0 {
		t.Errorf("events of %s: %d of its own objects, %d of %s's", other, ofOther, ofName, name)
	}
}

// The Workers' sshd answers the readiness probe every second; its log must
// not fill with the probe's closed connections, and MPI still works.
func TestWorkerLogsCarryNoProbeNoise(t *testing.T) {
	t.Parallel()
	c := framework.Get(t)
	name := framework.UniqueName("quiet")
	expect(t, mpijob(t, "dev-a", "team-a", "create", name, "--workers", "2", "--",
		"sh", "-c", "sleep 8; mpirun /usr/local/bin/mpi-hello"), 0)
	t.Cleanup(func() { mpijob(t, "dev-a", "team-a", "delete", name, "--wait=false") })
	// Read the Workers' logs while they run (JobSet stops them once the
	// Launcher is done): by then the probe has run several times.
	var logs string
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := c.Clientset.CoreV1().Pods("team-a").List(ctx, metav1.ListOptions{LabelSelector: "jobset.sigs.k8s.io/jobset-name=" + name + ",jobset.sigs.k8s.io/replicatedjob-name=node"})
		if err != nil {
			return false, err
		}
		if len(pods.Items) != 2 {
			return false, nil
		}
		logs = ""
		for _, p := range pods.Items {
			if p.Status.StartTime == nil || time.Since(p.Status.StartTime.Time) < 6*time.Second || p.Status.Phase != "Running" {
				return false, nil
			}
			b, err := c.Clientset.CoreV1().Pods("team-a").GetLogs(p.Name, &corev1.PodLogOptions{Container: "node"}).DoRaw(ctx)
			if err != nil {
				return false, fmt.Errorf("log of %s: %w", p.Name, err)
			}
			logs += string(b)
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the Workers did not run for 6 s: %v", err)
	}
	if strings.Contains(logs, "kex_exchange_identification") || strings.Contains(logs, "Connection closed") {
		t.Errorf("Worker logs carry the readiness probe's connections:\n%s", logs)
	}
	expect(t, mpijob(t, "dev-a", "team-a", "wait", name, "--for=Succeeded", "--timeout", "3m"), 0)
	expect(t, mpijob(t, "dev-a", "team-a", "logs", name), 0, "allreduce over 2 ranks ok")
}

// kubectl completes "kubectl mpijob ..." through the shipped
// kubectl_complete-mpijob helper: verbs, and runtimes from the cluster.
func TestCompletionThroughKubectl(t *testing.T) {
	t.Parallel()
	c := framework.Get(t)
	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "kubectl-mpijob"), "../../cmd/kubectl-mpijob")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	helper, err := os.ReadFile("../../cmd/kubectl-mpijob/kubectl_complete-mpijob")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kubectl_complete-mpijob"), helper, 0o755); err != nil {
		t.Fatal(err)
	}
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		wd, _ := os.Getwd()
		opts, oerr := localcluster.DefaultOptions(wd)
		if oerr != nil {
			t.Fatal(oerr)
		}
		kubectl = opts.Kubectl()
	}
	complete := func(args ...string) string {
		cmd := exec.Command(kubectl, append([]string{"__complete", "mpijob"}, args...)...)
		cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"), "KUBECONFIG="+c.Kubeconfig)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl __complete mpijob %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	if out := complete(""); !strings.Contains(out, "create") || !strings.Contains(out, "logs") || !strings.Contains(out, "version") {
		t.Errorf("verbs not completed:\n%s", out)
	}
	if out := complete("create", "x", "--runtime", "mpi-open"); !strings.Contains(out, "mpi-openmpi") {
		t.Errorf("runtimes not completed from the cluster:\n%s", out)
	}
}

// Output formats as kubectl's: a client dry run honours -o json, and get
// -o name works on a list.
func TestCLIOutputFormats(t *testing.T) {
	t.Parallel()
	framework.Get(t)
	r := mpijob(t, "dev-a", "team-a", "create", "fmt-check", "--workers", "1", "--dry-run=client", "-o", "json")
	expect(t, r, 0)
	var obj map[string]any
	if err := json.Unmarshal([]byte(r.out), &obj); err != nil || obj["kind"] != "TrainJob" || obj["apiVersion"] != "trainer.kubeflow.org/v1alpha1" {
		t.Errorf("--dry-run=client -o json printed %q (%v), want a TrainJob in JSON", r.out, err)
	}
	name := framework.UniqueName("fmt")
	expect(t, mpijob(t, "dev-a", "team-a", "create", name, "--workers", "1", "--", "sleep", "30"), 0)
	t.Cleanup(func() { mpijob(t, "dev-a", "team-a", "delete", name, "--wait=false") })
	expect(t, mpijob(t, "dev-a", "team-a", "get", "-o", "name"), 0, "trainjob.trainer.kubeflow.org/"+name)
}

// logs -f right after create waits for the pods and prints the Launcher's
// output; no kubelet error is printed as a log line.
func TestLogsFollowRightAfterCreate(t *testing.T) {
	t.Parallel()
	framework.Get(t)
	name := framework.UniqueName("follow")
	expect(t, mpijob(t, "dev-a", "team-a", "create", name, "--workers", "1", "--", "sh", "-c", "sleep 2; echo hello from the launcher"), 0)
	t.Cleanup(func() { mpijob(t, "dev-a", "team-a", "delete", name, "--wait=false") })
	r := mpijob(t, "dev-a", "team-a", "logs", name, "-f")
	expect(t, r, 0, "hello from the launcher")
	if strings.Contains(r.out, "waiting to start") || strings.Contains(r.out, "ContainerCreating") {
		t.Errorf("a kubelet error was printed as a log line:\n%s", r.out)
	}
}

// --env-from-secret: the Launcher reads the Secret's key, the job holds
// only the reference, describe names where the value comes from; a
// secret-looking --env value is taken with a warning that names the flag.
func TestCLIEnvFromSecret(t *testing.T) {
	t.Parallel()
	c := framework.Get(t)
	ctx := context.Background()
	ns := c.NewNamespace(t, "cli-secret")
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: ns}, StringData: map[string]string{"token": "s3cr3t-value-42"}}
	if err := c.Client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	expect(t, mpijob(t, "admin", ns, "create", "envsec", "--workers", "1", "--env-from-secret", "TOKEN=api:token",
		"--", "sh", "-c", `test "$TOKEN" = s3cr3t-value-42 && echo token-ok`), 0, "created")
	expect(t, mpijob(t, "admin", ns, "wait", "envsec", "--for=Succeeded", "--timeout", "3m"), 0)
	expect(t, mpijob(t, "admin", ns, "logs", "envsec"), 0, "token-ok")
	got := mpijob(t, "admin", ns, "get", "envsec", "-o", "json")
	tj := &trainer.TrainJob{}
	if err := json.Unmarshal([]byte(got.out), tj); err != nil {
		t.Fatal(err)
	}
	want := []corev1.EnvVar{{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "api"}, Key: "token"}}}}
	if diff := cmp.Diff(want, tj.Spec.Trainer.Env); diff != "" {
		t.Errorf("the job should hold the Secret's reference, not its value (-want,+got):\n%s", diff)
	}
	expect(t, mpijob(t, "admin", ns, "describe", "envsec"), 0, "TOKEN from Secret api, key token")
	expect(t, mpijob(t, "admin", ns, "create", "envsec-bad", "--workers", "1", "--env-from-secret", "TOKEN"), cli.ExitUsage, `--env-from-secret "TOKEN": use KEY=SECRET`)
	expect(t, mpijob(t, "admin", ns, "create", "envplain", "--workers", "1", "--dry-run=server", "--env", "DB_PASSWORD=hunter2hunter2"), 0,
		"Warning: --env DB_PASSWORD: the value looks like a secret", "--env-from-secret DB_PASSWORD=SECRET:KEY")
}

// delete --grace-period reaches the pods: a Launcher that ignores SIGTERM
// (a shell as PID 1) gets the seconds asked for, not its own 30.
func TestCLIDeleteGracePeriodReachesThePods(t *testing.T) {
	t.Parallel()
	c := framework.Get(t)
	ctx := context.Background()
	ns := c.NewNamespace(t, "cli-grace")
	expect(t, mpijob(t, "admin", ns, "create", "stubborn", "--workers", "1", "--", "sh", "-c", `trap "" TERM; sleep 600`), 0)
	expect(t, mpijob(t, "admin", ns, "wait", "stubborn", "--for=Running", "--timeout", "3m"), 0)
	expect(t, mpijob(t, "admin", ns, "delete", "stubborn", "--grace-period", "-5"), cli.ExitUsage, "--grace-period -5")
	var launcher corev1.Pod
	for _, p := range c.JobPods(t, ns, "stubborn", "launcher") {
		launcher = p
	}
	expect(t, mpijob(t, "admin", ns, "delete", "stubborn", "--grace-period", "2", "--wait=false"), 0, "deleted")
	cur := &corev1.Pod{}
	err := c.Client.Get(ctx, client.ObjectKeyFromObject(&launcher), cur)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		t.Fatal(err)
	case cur.DeletionGracePeriodSeconds == nil || *cur.DeletionGracePeriodSeconds > 2:
		t.Errorf("the Launcher pod is deleted with a grace period of %v s, want at most 2", cur.DeletionGracePeriodSeconds)
	}
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods := &corev1.PodList{}
		err := c.Client.List(ctx, pods, client.InNamespace(ns))
		return err == nil && len(pods.Items) == 0, err
	}); err != nil {
		t.Errorf("the job's pods are not gone: %v", err)
	}
}

// exec reaches the Launcher, a Worker or the Worker that hosts a rank of a
// running job, returns the command's exit code, and port-forward reaches a
// port on the Launcher; another tenant reaches neither.
func TestExecAndPortForward(t *testing.T) {
	t.Parallel()
	c := framework.Get(t)
	const ns, user = "team-a", "dev-a"
	name := framework.UniqueName("inside")
	t.Cleanup(func() { mpijob(t, user, ns, "delete", name, "--wait=false") })
	// The Launcher serves a file on port 8000 while its 2 Workers x 2 slots sleep.
	expect(t, mpijob(t, user, ns, "create", name, "--workers", "2", "--slots-per-worker", "2", "--",
		"sh", "-c", "cd /tmp && echo served-by-the-launcher > hello.txt && exec python3 -m http.server 8000"), 0, "created")
	c.WaitForStatus(t, ns, name, 4*time.Minute, func(s api.Status) bool { return s.Phase == api.PhaseRunning && s.WorkersReady == 2 })

	r := mpijob(t, user, ns, "exec", name, "--rank", "3", "--", "hostname")
	expect(t, r, 0, "rank 3 runs on Worker 1")
	if !strings.HasPrefix(strings.TrimSpace(r.out), name+"-node-0-1") {
		t.Errorf("exec --rank 3 ran on %q, want Worker 1 (%s-node-0-1)", strings.TrimSpace(r.out), name)
	}
	r = mpijob(t, user, ns, "exec", name, "--", "cat", "/tmp/hello.txt")
	expect(t, r, 0, "the Launcher", "served-by-the-launcher")
	expect(t, mpijob(t, user, ns, "exec", name, "--worker", "0", "--", "sh", "-c", "exit 7"), 7)
	expect(t, mpijob(t, user, ns, "exec", name, "--rank", "4", "--", "hostname"), 3, "--rank 4: the job has 4 ranks (0 to 3")
	expect(t, mpijob(t, "dev-b", ns, "exec", name, "--", "hostname"), 4)

	// port-forward until the test ends it.
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	port := 18000 + time.Now().Nanosecond()%1000
	done := make(chan result, 1)
	go func() {
		var out, errOut bytes.Buffer
		code := cli.MainContext(ctx, []string{"--kubeconfig", c.Kubeconfig, "--context", user, "-n", ns, "port-forward", name, fmt.Sprintf("%d:8000", port)},
			genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &errOut})
		done <- result{code: code, out: out.String(), errOut: errOut.String()}
	}()
	waitFor(t, 30*time.Second, "the Launcher's file through port-forward", func() (bool, string) {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/hello.txt", port))
		if err != nil {
			return false, err.Error()
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		return strings.Contains(string(b), "served-by-the-launcher"), string(b)
	})
	cancel()
	select {
	case r := <-done:
		if r.code != 0 {
			t.Errorf("port-forward ended with exit %d: %s", r.code, r.errOut)
		}
	case <-time.After(30 * time.Second):
		t.Error("port-forward did not end when interrupted")
	}
}
