//go:build e2e

package integration

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/api"
	clicmd "github.com/mpijob/mpijob/pkg/cli"
	"github.com/mpijob/mpijob/pkg/diagnose"
	"github.com/mpijob/mpijob/pkg/jobstatus"
	"github.com/mpijob/mpijob/test/framework"
)

// A runtime's first test on a cluster whose nodes lack its image (as on a
// fresh cluster, or after the kubelet's image garbage collection) waits
// for the local cluster's image builder instead of failing the pull: the
// job says ImageBuilding meanwhile, and the test passes. It runs alone
// (TestAlone*: after the other tests, see the Makefile) because it takes
// an image away from the nodes that other tests use.
func TestAloneRuntimeTestWaitsForItsImage(t *testing.T) {
	c := framework.Get(t)
	c.EnsureImages(t, "mpich")
	ns := c.NewNamespace(t, "firstuse")
	c.ForgetImage(t, "ghcr.io/mpijob/mpich:5.0")

	// The diagnosis of the test's job, while it waits.
	seen := make(chan api.Status, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		_ = wait.PollUntilContextCancel(ctx, 300*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			l := &trainer.TrainJobList{}
			if err := c.Client.List(ctx, l, client.InNamespace(ns)); err != nil {
				return false, nil //nolint:nilerr // poll on
			}
			if err := jobstatus.List(ctx, c.Client, l.Items, client.InNamespace(ns)); err != nil {
				return false, nil //nolint:nilerr // poll on
			}
			for i := range l.Items {
				if s, ok, _ := api.ReadStatus(l.Items[i].Annotations); ok && s.Reason == diagnose.ReasonImageBuilding {
					seen <- s
					return true, nil
				}
			}
			return false, nil
		})
	}()
	var out bytes.Buffer
	code := clicmd.Main([]string{"--kubeconfig", c.Kubeconfig, "--context", "admin", "-n", ns, "runtimes", "test", "mpi-mpich", "--timeout", "4m"},
		genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &out})
	t.Logf("kubectl mpijob runtimes test mpi-mpich → exit %d\n%s", code, out.String())
	if code != 0 || !strings.Contains(out.String(), "image pull") || strings.Contains(out.String(), "FAIL") {
		t.Errorf("the first test of mpi-mpich without its image on the nodes: exit %d, want every check passed", code)
	}
	select {
	case s := <-seen:
		if !strings.Contains(s.Message, `image "ghcr.io/mpijob/mpich:5.0" for its first use`) {
			t.Errorf("ImageBuilding message: %q", s.Message)
		}
	case <-time.After(5 * time.Second):
		t.Errorf("the job never said ImageBuilding while the nodes lacked its image")
	}
}
