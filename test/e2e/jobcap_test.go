//go:build e2e

package e2e

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/test/framework"
)

// An administrator caps the active MPI jobs of a namespace
// (mpijob.dev/max-active-jobs on the Namespace): one more is refused at
// create (and at a server dry run) with the numbers and the jobs; once one
// is gone, the next is taken. The jobs wait on the simulated nodes, so
// they cost the real ones nothing.
func TestActiveJobCapPerNamespace(t *testing.T) {
	t.Parallel()
	c := framework.Get(t)
	ns := c.NewNamespace(t, "cap")
	nso := &corev1.Namespace{}
	if err := c.Client.Get(context.Background(), client.ObjectKey{Name: ns}, nso); err != nil {
		t.Fatal(err)
	}
	nso.Annotations = map[string]string{api.MaxActiveJobsAnnotation: "2"}
	if err := c.Client.Update(context.Background(), nso); err != nil {
		t.Fatal(err)
	}
	onKwok := []string{"--workers", "1", "--node-selector", "type=kwok", "--toleration", "nvidia.com/gpu:NoSchedule", "--", "mpirun", "sleep", "300"}
	for _, name := range []string{"first", "second"} {
		expect(t, mpijob(t, "admin", ns, append([]string{"create", name}, onKwok...)...), 0)
	}
	want := "namespace " + ns + " allows at most 2 active MPI jobs (annotation mpijob.dev/max-active-jobs on the namespace), and 2 are active (first, second)"
	expect(t, mpijob(t, "admin", ns, append([]string{"create", "third", "--dry-run=server"}, onKwok...)...), 5, want)
	expect(t, mpijob(t, "admin", ns, append([]string{"create", "third"}, onKwok...)...), 5, want, "delete one")
	expect(t, mpijob(t, "admin", ns, "delete", "first"), 0)
	expect(t, mpijob(t, "admin", ns, append([]string{"create", "third"}, onKwok...)...), 0)
	expect(t, mpijob(t, "admin", ns, "delete", "second", "third", "--wait=false"), 0)
}
