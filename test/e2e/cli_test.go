//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/mpijob/mpijob/pkg/cli"
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
	c := framework.Get(t)
	var out, errOut bytes.Buffer
	full := append([]string{"--kubeconfig", c.Kubeconfig, "--context", user, "-n", ns}, args...)
	code := cli.Main(full, genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &errOut})
	r := result{code: code, out: out.String(), errOut: errOut.String()}
	t.Logf("kubectl mpijob %s → exit %d\n%s%s", strings.Join(args, " "), code, r.out, r.errOut)
	return r
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
	if n := strings.Count(follow.out, "\n"); n != 5 {
		t.Errorf("logs --follow printed %d lines, want 5 (4 ranks and the allreduce)", n)
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
	framework.Get(t)
	expect(t, mpijob(t, "viewer-a", "team-a", "create", "nope", "--workers", "1"), cli.ExitForbidden, "viewer-a", "create", "team-a")
	expect(t, mpijob(t, "dev-b", "team-a", "get"), cli.ExitForbidden, "dev-b", "list", "team-a")
	expect(t, mpijob(t, "viewer-a", "team-a", "get"), 0)
	// team-a's quota is 8 GPUs: 4 Workers × 3 GPUs (+ the Launcher) cannot fit.
	expect(t, mpijob(t, "dev-a", "team-a", "create", "big", "--runtime", "mpi-openmpi-gpu", "--workers", "4", "--gpus", "3"),
		cli.ExitDenied, "nvidia.com/gpu", "quota")
	expect(t, mpijob(t, "dev-a", "team-a", "create", "typo", "--runtime", "mpi-openmpl", "--workers", "1"), cli.ExitNotFound, `did you mean "mpi-openmpi"`)
	expect(t, mpijob(t, "dev-a", "team-a", "create", "cpu", "--workers", "2", "--gpus", "1"), cli.ExitUsage, "runtime mpi-openmpi sets its Workers' resources itself")
}

// `runtimes test` runs a 1 Launcher + 2 Worker job on a runtime and reports
// image pull, SSH key mount and MPI spawn as separate checks; a runtime
// whose image cannot be pulled fails the first check with exit code 6.
func TestCLIRuntimesTest(t *testing.T) {
	c := framework.Get(t)
	ns := c.NewNamespace(t, "cli-rt")
	expect(t, mpijob(t, "admin", ns, "runtimes", "test", "mpi-openmpi", "--timeout", "3m"), 0,
		"image pull", "SSH key mount", "MPI spawn", "PASS")
	broken := c.CopyRuntime(t, "mpi-openmpi", "mpi-test-broken", func(rt *trainer.ClusterTrainingRuntime) {
		for i := range rt.Spec.Template.Spec.ReplicatedJobs {
			spec := &rt.Spec.Template.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec
			spec.Containers[0].Image = "registry.invalid/none:1"
		}
	})
	r := mpijob(t, "admin", ns, "runtimes", "test", broken.Name, "--timeout", "40s")
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
	c := framework.Get(t)
	ns := c.NewNamespace(t, "cli-watch")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out := &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- cli.MainContext(ctx, []string{"--kubeconfig", c.Kubeconfig, "--context", "admin", "-n", ns, "get", "-w"},
			genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: out, ErrOut: &bytes.Buffer{}})
	}()
	time.Sleep(time.Second) // the watch is open
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
