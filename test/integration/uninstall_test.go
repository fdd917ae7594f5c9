//go:build e2e

package integration

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/localcluster"
	"github.com/mpijob/mpijob/test/framework"
)

// `kubectl delete -k config/default` removes mpijob cleanly: the manager,
// its webhooks, roles and runtimes go; a running TrainJob keeps running on
// the same pods, keeps its NetworkPolicy and completes (Trainer and JobSet
// run it). A per-job runtime whose job is deleted meanwhile stays
// Terminating (only the manager releases it, as the docs say); installing
// mpijob again (make dev-reload: config/default with this checkout's
// images) releases it, and new jobs get a status again. It runs last: it
// takes mpijob away from the whole cluster for a minute.
func TestManagerDownUninstallAndReinstall(t *testing.T) {
	c := framework.Get(t)
	if os.Getenv("MPIJOB_KUBECONFIG") != "" {
		t.Skip("uninstalls mpijob from the local cluster; MPIJOB_KUBECONFIG points elsewhere")
	}
	ctx := context.Background()
	wd, _ := os.Getwd()
	opts, err := localcluster.DefaultOptions(wd)
	if err != nil {
		t.Fatal(err)
	}
	ns := c.NewNamespace(t, "uninstall")
	running := framework.MakeTrainJob("running", ns, "mpi-openmpi").NumNodes(2).
		Command("sh", "-c", "sleep 25; mpirun /usr/local/bin/mpi-hello")
	perJob := framework.MakeTrainJob("own-image", ns, "mpi-openmpi").NumNodes(1).OnKwokNodes().HoldOnKwok().LauncherImage(localcluster.UserImage)
	for _, w := range []*framework.TrainJobWrapper{running, perJob} {
		if err := framework.SubmitW(ctx, c.Client, w); err != nil {
			t.Fatal(err)
		}
	}
	c.WaitForStatus(t, ns, "running", 2*time.Minute, func(s api.Status) bool { return s.Phase == api.PhaseRunning })
	c.WaitForStatus(t, ns, "own-image", 2*time.Minute, func(s api.Status) bool { return s.Phase == api.PhaseRunning })
	podsBefore := podUIDs(t, c, ns, "running")
	rtName := perJob.Runtime().Name

	reinstalled := false
	reinstall := func() {
		if reinstalled {
			return
		}
		reinstalled = true
		start := time.Now()
		if err := localcluster.Reload(ctx, opts, io.Discard); err != nil {
			t.Fatalf("reinstall (make dev-reload): %v", err)
		}
		t.Logf("reinstalled config/default in %s", time.Since(start).Round(100*time.Millisecond))
		waitManagerReady(t, c)
	}
	t.Cleanup(reinstall)

	// As a user would: kubectl, no namespace flag (config/default names
	// its own), waiting until everything is gone; the log store's read API
	// first (docs/admin.md, Uninstalling), or its APIService would point
	// at a manager that is gone.
	cmd := exec.Command(opts.Kubectl(), "--kubeconfig", c.Kubeconfig, "--context", "admin", "delete", "-k", filepath.Join(opts.RepoRoot, "config", "logstore"), "--ignore-not-found")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kubectl delete -k config/logstore --ignore-not-found: %v\n%s", err, out)
	}
	start := time.Now()
	cmd = exec.Command(opts.Kubectl(), "--kubeconfig", c.Kubeconfig, "--context", "admin", "delete", "-k", filepath.Join(opts.RepoRoot, "config", "default"), "--ignore-not-found")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kubectl delete -k config/default --ignore-not-found: %v\n%s", err, out)
	}
	t.Logf("kubectl delete -k config/default returned after %s", time.Since(start).Round(100*time.Millisecond))
	if pods, err := localcluster.ManagerPods(ctx, c.Client); err != nil || len(pods) != 0 {
		t.Errorf("after the uninstall: %d mpijob-manager pods (%v), want none", len(pods), err)
	}
	for _, obj := range []client.Object{
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "mpijob-validating-webhook-configuration"}},
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "mpijob-mutating-webhook-configuration"}},
		// The manager-down policy goes too: left behind, it would refuse
		// every MPI job for want of mpijob-manager.
		&admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: api.ManagerRunningPolicy}},
		&admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: api.ManagerRunningPolicy}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: localcluster.ManagerNamespace}},
		&trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "mpi-openmpi"}},
	} {
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); !apierrors.IsNotFound(err) {
			t.Errorf("%T %s is still there after the uninstall (err %v)", obj, obj.GetName(), err)
		}
	}
	// The running job is untouched: same pods, its NetworkPolicy kept, and
	// Trainer completes it.
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "running-mpi"}, &networkingv1.NetworkPolicy{}); err != nil {
		t.Errorf("the running job lost its NetworkPolicy with the uninstall: %v", err)
	}
	time.Sleep(3 * time.Second)
	if after := podUIDs(t, c, ns, "running"); !equalSets(podsBefore, after) {
		t.Errorf("the running job's pods changed with the uninstall: %v → %v", podsBefore, after)
	}
	var done *trainer.TrainJob
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		tj := &trainer.TrainJob{}
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "running"}, tj); err != nil {
			return false, nil //nolint:nilerr // keep polling
		}
		done = tj
		return meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobComplete) ||
			meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobFailed), nil
	}); err != nil {
		t.Fatalf("the job running at the uninstall did not finish within 2 minutes: %+v", done.Status.Conditions)
	}
	if !meta.IsStatusConditionTrue(done.Status.Conditions, trainer.TrainJobComplete) {
		t.Errorf("the job running at the uninstall ended %+v, want Complete", done.Status.Conditions)
	}

	// A job deleted while mpijob is away leaves its per-job runtime
	// Terminating, held by the finalizer only the manager removes.
	if err := c.Client.Delete(ctx, perJob.Obj(), client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	rt := &trainer.TrainingRuntime{}
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "own-image"}, &trainer.TrainJob{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Fatal("the per-job runtime's job is not gone a minute after its delete")
	}
	// The garbage collector deletes it once its owner is gone.
	_ = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: rtName}, rt)
		return err != nil || rt.DeletionTimestamp != nil, nil //nolint:nilerr // gone counts as done
	})
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: rtName}, rt); err != nil || rt.DeletionTimestamp == nil {
		t.Errorf("per-job runtime %s after its job was deleted without mpijob: err %v, deleting %v; want it Terminating (docs/admin.md)", rtName, err, rt.DeletionTimestamp)
	}

	reinstall()
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: rtName}, &trainer.TrainingRuntime{})), nil
	}); err != nil {
		t.Errorf("the reinstalled manager did not release the per-job runtime %s within a minute", rtName)
	}
	again := framework.MakeTrainJob("again", ns, "mpi-openmpi").NumNodes(2).OnKwokNodes()
	if err := framework.SubmitW(ctx, c.Client, again); err != nil {
		t.Fatalf("create after the reinstall: %v", err)
	}
	if s := c.WaitForStatus(t, ns, "again", 2*time.Minute, func(s api.Status) bool { return s.Phase.Finished() }); s.Phase != api.PhaseSucceeded {
		t.Errorf("a job after the reinstall ended %s (%s), want Succeeded", s.Phase, s.Message)
	}
}

// podUIDs are the UIDs of a job's pods.
func podUIDs(t *testing.T, c *framework.Cluster, ns, job string) map[string]bool {
	t.Helper()
	l := &corev1.PodList{}
	if err := c.Client.List(context.Background(), l, client.InNamespace(ns), client.MatchingLabels{"jobset.sigs.k8s.io/jobset-name": job}); err != nil {
		t.Fatal(err)
	}
	uids := map[string]bool{}
	for _, p := range l.Items {
		uids[p.Name+"/"+string(p.UID)] = true
	}
	return uids
}

func equalSets(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}
