//go:build e2e

package integration

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/jobstatus"
	"github.com/mpijob/mpijob/test/framework"
)

// The all-or-nothing gate: 100 one-Worker, one-GPU jobs created at once by
// 20 clients as dev-a, in a tenant set up as team-a is (its ResourceQuota,
// LimitRange and ClusterQueue, copied from the live team-a so the shipped
// configuration is what is tested, and a LocalQueue "default"), where the
// quota (8 GPUs) lets 8 run. The creates are not refused (they queue), Kueue
// admits whole jobs only up to the ClusterQueue, which matches the
// ResourceQuota: at most 8 run, the rest wait Queued, and no job is left
// with some pods and not the others (the deadlock of admitting more than
// the quota holds). Its own namespace keeps team-a's GPUs free for the
// tests that run beside it.
func TestQuotaBurstAdmitsWhole(t *testing.T) {
	// 100 creates at once keep the control plane's cores busy (load 48 on
	// the two-core machine during make test-e2e): the burst takes its turn
	// with the trainings instead of running beside one, which was more than
	// the machine held (the API server did not answer for 45 s and
	// mpijob-manager lost its Lease).
	framework.HeavyCPU(t)
	c := framework.Get(t)
	ctx := context.Background()
	devA := c.As(t, "dev-a")
	const jobs, clients = 100, 20
	ns := c.NewNamespace(t, "burst")
	gpuQuota := tenantLike(t, c, "team-a", ns)
	burst := framework.UniqueName("burst")
	const burstLabel = "mpijob.dev/test-burst"
	t.Cleanup(func() {
		_ = c.Client.DeleteAllOf(context.Background(), &trainer.TrainJob{}, client.InNamespace(ns), client.MatchingLabels{burstLabel: burst})
	})

	var mu sync.Mutex
	var failures []string
	var wg sync.WaitGroup
	for w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < jobs; i += clients {
				job := framework.MakeTrainJob(fmt.Sprintf("%s-%03d", burst, i), ns, "mpi-openmpi-gpu").
					NumNodes(1).OnKwokNodes().HoldOnKwok().Obj()
				job.Labels = map[string]string{burstLabel: burst}
				if err := devA.Create(ctx, job); err != nil {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("%s: %v", job.Name, err))
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if len(failures) > 0 {
		sort.Strings(failures)
		t.Fatalf("%d of %d creates failed, want none (a queued job waits for quota in use); first: %s", len(failures), jobs, failures[0])
	}

	// Settle: every job Running or Queued, and the count steady for 10 s.
	var phases map[string]api.Phase
	var running, queued, steadySince int
	lastRunning := -1
	err := wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		list := &trainer.TrainJobList{}
		if err := c.Client.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{burstLabel: burst}); err != nil {
			return false, nil //nolint:nilerr // keep polling
		}
		if err := jobstatus.List(ctx, c.Client, list.Items, client.InNamespace(ns)); err != nil {
			return false, nil //nolint:nilerr // keep polling
		}
		phases = map[string]api.Phase{}
		running, queued = 0, 0
		for _, tj := range list.Items {
			s, _, _ := api.ReadStatus(tj.Annotations)
			phases[tj.Name] = s.Phase
			switch s.Phase {
			case api.PhaseRunning:
				running++
			case api.PhaseQueued:
				queued++
			}
		}
		if running+queued != jobs || running == 0 {
			steadySince, lastRunning = 0, -1
			return false, nil
		}
		if running != lastRunning {
			steadySince, lastRunning = 0, running
			return false, nil
		}
		steadySince++
		return steadySince >= 10, nil
	})
	if err != nil {
		t.Fatalf("after 5m: %d Running, %d Queued of %d (phases: %v)", running, queued, jobs, countPhases(phases))
	}
	t.Logf("%d jobs: %d Running, %d Queued", jobs, running, queued)
	if int64(running) > gpuQuota {
		t.Errorf("%d jobs Running with one GPU each, the quota is %d", running, gpuQuota)
	}

	// Pods: a job has all of its pods (Launcher + Worker) or none.
	pods := &corev1.PodList{}
	if err := c.Client.List(ctx, pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	perJob := map[string]int{}
	for _, p := range pods.Items {
		if name := p.Labels["jobset.sigs.k8s.io/jobset-name"]; strings.HasPrefix(name, burst+"-") && p.DeletionTimestamp == nil {
			perJob[name]++
		}
	}
	withPods := 0
	for name, n := range perJob {
		withPods++
		if n != 2 {
			t.Errorf("job %s has %d pods, want 2 (Launcher and Worker) or none", name, n)
		}
		if phases[name] != api.PhaseRunning {
			t.Errorf("job %s has pods but is %s", name, phases[name])
		}
	}
	if withPods != running {
		t.Errorf("%d jobs have pods, %d are Running", withPods, running)
	}
	// No pod of theirs was refused by the ResourceQuota.
	events := &corev1.EventList{}
	if err := c.Client.List(ctx, events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if strings.HasPrefix(e.InvolvedObject.Name, burst+"-") && e.Reason == "FailedCreate" && strings.Contains(e.Message, "exceeded quota") {
			t.Errorf("a pod of the burst was refused by the quota: %s: %s", e.InvolvedObject.Name, e.Message)
		}
	}
}

func countPhases(phases map[string]api.Phase) map[api.Phase]int {
	out := map[api.Phase]int{}
	for _, p := range phases {
		out[p]++
	}
	return out
}

// tenantLike sets namespace ns up as tenant is: a copy of its ResourceQuota
// and LimitRange, of its ClusterQueue (for ns only), a LocalQueue "default"
// feeding it, and dev-a as editor. It checks the invariant the gate rests
// on, the tenant's ClusterQueue quota equal to its ResourceQuota for every
// resource both name, and returns the GPU quota.
func tenantLike(t *testing.T, c *framework.Cluster, tenant, ns string) int64 {
	t.Helper()
	ctx := context.Background()
	rq := &corev1.ResourceQuota{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: tenant, Name: "team-quota"}, rq); err != nil {
		t.Fatal(err)
	}
	cq := &unstructured.Unstructured{}
	cq.SetAPIVersion("kueue.x-k8s.io/v1beta2")
	cq.SetKind("ClusterQueue")
	if err := c.Client.Get(ctx, client.ObjectKey{Name: tenant}, cq); err != nil {
		t.Fatalf("%s's ClusterQueue: %v", tenant, err)
	}
	groups, _, _ := unstructured.NestedSlice(cq.Object, "spec", "resourceGroups")
	for _, g := range groups {
		flavors, _, _ := unstructured.NestedSlice(g.(map[string]any), "flavors")
		for _, f := range flavors {
			res, _, _ := unstructured.NestedSlice(f.(map[string]any), "resources")
			for _, r := range res {
				m := r.(map[string]any)
				name, _ := m["name"].(string)
				hard, ok := rq.Spec.Hard[corev1.ResourceName("requests."+name)]
				if !ok {
					continue
				}
				if nominal := resource.MustParse(fmt.Sprint(m["nominalQuota"])); nominal.Cmp(hard) != 0 {
					t.Errorf("ClusterQueue %s has %s %s, ResourceQuota %s/team-quota %s: Kueue would admit what the quota refuses", tenant, name, nominal.String(), tenant, hard.String())
				}
			}
		}
	}
	for key := range rq.Spec.Hard {
		if strings.HasPrefix(string(key), "limits.") || key == corev1.ResourcePods {
			t.Errorf("ResourceQuota %s/team-quota limits %s, which Kueue does not count", tenant, key)
		}
	}

	own := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "team-quota", Namespace: ns}, Spec: rq.Spec}
	lr := &corev1.LimitRange{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: tenant, Name: "defaults"}, lr); err != nil {
		t.Fatal(err)
	}
	ownLR := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "defaults", Namespace: ns}, Spec: lr.Spec}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "dev-a-edit", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "dev-a"}},
	}
	ownCQ := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
		"metadata": map[string]any{"name": ns},
		"spec":     cq.Object["spec"],
	}}
	_ = unstructured.SetNestedStringMap(ownCQ.Object, map[string]string{"kubernetes.io/metadata.name": ns}, "spec", "namespaceSelector", "matchLabels")
	// Out of the tenants' cohort: its burst of pending workloads is not
	// scheduled with team-a's and team-b's, which the tests beside it use.
	unstructured.RemoveNestedField(ownCQ.Object, "spec", "cohortName")
	unstructured.RemoveNestedField(ownCQ.Object, "spec", "cohort")
	// Without a cohort there is nothing to borrow from or lend to: Kueue
	// refuses the limits then.
	groups, _, _ = unstructured.NestedSlice(ownCQ.Object, "spec", "resourceGroups")
	for _, g := range groups {
		flavors, _, _ := unstructured.NestedSlice(g.(map[string]any), "flavors")
		for _, f := range flavors {
			res, _, _ := unstructured.NestedSlice(f.(map[string]any), "resources")
			for _, r := range res {
				delete(r.(map[string]any), "borrowingLimit")
				delete(r.(map[string]any), "lendingLimit")
			}
			_ = unstructured.SetNestedSlice(f.(map[string]any), res, "resources")
		}
		_ = unstructured.SetNestedSlice(g.(map[string]any), flavors, "flavors")
	}
	_ = unstructured.SetNestedSlice(ownCQ.Object, groups, "spec", "resourceGroups")
	lq := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
		"metadata": map[string]any{"name": "default", "namespace": ns},
		"spec":     map[string]any{"clusterQueue": ns},
	}}
	for _, o := range []client.Object{own, ownLR, rb, ownCQ, lq} {
		if err := c.Client.Create(ctx, o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
	t.Cleanup(func() { _ = c.Client.Delete(context.Background(), ownCQ) })
	// Kueue defaults the queue of new jobs only once it knows the
	// LocalQueue; wait for it to be active.
	err := wait.PollUntilContextTimeout(ctx, 300*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(lq), lq); err != nil {
			return false, nil //nolint:nilerr // keep polling
		}
		conds, _, _ := unstructured.NestedSlice(lq.Object, "status", "conditions")
		for _, cd := range conds {
			m := cd.(map[string]any)
			if m["type"] == "Active" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("LocalQueue %s/default is not active after 30s", ns)
	}
	gpus := rq.Spec.Hard["requests.nvidia.com/gpu"]
	return gpus.Value()
}
