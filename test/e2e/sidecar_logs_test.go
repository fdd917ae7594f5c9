//go:build e2e

package e2e

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/jobpods"
	"github.com/mpijob/mpijob/pkg/localcluster"
	"github.com/mpijob/mpijob/test/framework"
)

// A pod with a sidecar has two containers, and a log read that names none
// is refused ("a container name must be specified"). Every interface reads
// a job's logs through one reader (pkg/jobpods; the SDK by its vectors),
// which names the node container: dev-a's runtime gives the Launcher a
// log-shipping sidecar, and the CLI, the dashboard and the SDK all show
// the program's output, not the sidecar's.
func TestLogsOfAPodWithASidecar(t *testing.T) {
	t.Parallel()
	c := framework.Get(t)
	ctx := context.Background()
	const ns, user = "team-a", "dev-a"
	name := framework.UniqueName("sidecar")
	rt := &trainer.TrainingRuntime{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       *framework.ShippedRuntime("mpi-openmpi").Spec.DeepCopy(),
	}
	for i := range rt.Spec.Template.Spec.ReplicatedJobs {
		rj := &rt.Spec.Template.Spec.ReplicatedJobs[i]
		if rj.Name != api.LauncherJob {
			continue
		}
		pod := &rj.Template.Spec.Template.Spec
		node := pod.Containers[0]
		pod.Containers = append(pod.Containers, corev1.Container{
			Name: "log-shipper", Image: node.Image, ImagePullPolicy: node.ImagePullPolicy,
			Command:         []string{"sh", "-c", "echo from-the-sidecar"},
			SecurityContext: node.SecurityContext.DeepCopy(),
			Resources:       *node.Resources.DeepCopy(),
		})
	}
	if err := c.As(t, user).Create(ctx, rt); err != nil {
		t.Fatalf("dev-a cannot make a TrainingRuntime in team-a: %v", err)
	}
	job := name + "-job"
	t.Cleanup(func() {
		mpijob(t, user, ns, "delete", job, "--wait=false")
		_ = wait.PollUntilContextTimeout(context.Background(), 2*time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: job}, &trainer.TrainJob{})
			return err != nil, nil
		})
		_ = c.Client.Delete(context.Background(), rt)
	})
	expect(t, mpijob(t, user, ns, "create", job, "--runtime", name, "--workers", "1", "--",
		"sh", "-c", "echo from-the-node-container; sleep 20"), 0, "created")
	c.WaitForStatus(t, ns, job, 4*time.Minute, func(s api.Status) bool { return s.Phase == api.PhaseRunning })
	waitFor(t, time.Minute, "the Launcher's line", func() (bool, string) {
		r := runCLI(t, user, ns, "logs", job)
		return r.code == 0 && strings.Contains(r.out, "from-the-node-container"), r.out + r.errOut
	})

	// The Launcher does have the two containers (or this test proves
	// nothing).
	jp, err := jobpods.ListLive(ctx, c.Client, &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: job}})
	if err != nil || jp.Launcher() == nil {
		t.Fatalf("the Launcher pod: %v", err)
	}
	if n := len(jp.Launcher().Spec.Containers); n != 2 {
		t.Fatalf("the Launcher pod has %d containers, want the node container and the sidecar", n)
	}

	// The CLI, while the pods run.
	r := mpijob(t, user, ns, "logs", job)
	expect(t, r, 0, "from-the-node-container")
	if strings.Contains(r.out, "from-the-sidecar") {
		t.Errorf("kubectl mpijob logs showed the sidecar's output:\n%s", r.out)
	}
	// The dashboard, as dev-a.
	ts, tokens := dashboardServer(t)
	res := call(t, "GET", ts.URL+"/api/jobs/"+ns+"/"+job+"/logs", tokens[user])
	wantAPI(t, res, http.StatusOK, "from-the-node-container")
	if strings.Contains(res.body, "from-the-sidecar") {
		t.Errorf("the dashboard showed the sidecar's output:\n%s", res.body)
	}
	// The SDK, as dev-a, with its own Kubernetes client.
	wd, _ := os.Getwd()
	var opts localcluster.Options
	opts, err = localcluster.DefaultOptions(wd)
	if err != nil {
		t.Fatal(err)
	}
	py := filepath.Join(opts.CacheDir, "sdk-venv", "bin", "python")
	if _, err := os.Stat(py); err != nil {
		t.Skipf("no SDK virtualenv at %s (make sdk-venv): the SDK's read is not checked", py)
	}
	cmd := exec.CommandContext(ctx, py, "-c", `import sys
from mpijob import MPIJobClient
print(MPIJobClient(namespace="team-a", context="dev-a", config_file=sys.argv[1]).get_logs(sys.argv[2]))`, c.Kubeconfig, job)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "from-the-node-container") || strings.Contains(string(out), "from-the-sidecar") {
		t.Errorf("the SDK's get_logs (err %v):\n%s", err, out)
	}
}
