//go:build e2e

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/diagnose"
	"github.com/mpijob/mpijob/test/framework"
)

// newQueue creates a ClusterQueue with gpus nvidia.com/gpu for namespace ns
// only, and a LocalQueue "q" in ns that feeds it; it returns the
// ClusterQueue's name.
func newQueue(t *testing.T, c *framework.Cluster, ns string, gpus int) string {
	t.Helper()
	ctx := context.Background()
	cq := framework.UniqueName("mpi-test-cq")
	docs := []string{fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: %s
spec:
  namespaceSelector:
    matchLabels:
      kubernetes.io/metadata.name: %s
  queueingStrategy: BestEffortFIFO
  resourceGroups:
  - coveredResources: ["cpu", "memory", "nvidia.com/gpu"]
    flavors:
    - name: default-flavor
      resources:
      - {name: cpu, nominalQuota: "100"}
      - {name: memory, nominalQuota: 100Gi}
      - {name: nvidia.com/gpu, nominalQuota: "%d"}
`, cq, ns, gpus), fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  name: q
  namespace: %s
spec:
  clusterQueue: %s
`, ns, cq)}
	for _, d := range docs {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(d), &u.Object); err != nil {
			t.Fatal(err)
		}
		if err := c.Client.Create(ctx, u); err != nil {
			t.Fatalf("create %s %s: %v", u.GetKind(), u.GetName(), err)
		}
		if u.GetKind() == "ClusterQueue" {
			t.Cleanup(func() { _ = c.Client.Delete(context.Background(), u) })
		}
	}
	return cq
}

// With Kueue, an MPI job that does not fit whole waits Queued with no pod
// created, its status names its position; when capacity frees up it starts.
func TestQueuedJobWaitsWholeWithPosition(t *testing.T) {
	c := framework.Get(t)
	ctx := context.Background()
	ns := c.NewNamespace(t, "queue")
	cq := newQueue(t, c, ns, 8)

	// first takes all 8 GPUs (2 Workers, 4 each) and holds them.
	first := framework.MakeTrainJob("first", ns, "mpi-openmpi-gpu").NumNodes(2).GPUsPerWorker(4).OnKwokNodes().HoldOnKwok().Queue("q")
	if err := framework.SubmitW(ctx, c.Client, first); err != nil {
		t.Fatal(err)
	}
	c.WaitForStatus(t, ns, "first", 2*time.Minute, func(s api.Status) bool { return s.Phase == api.PhaseRunning })

	second := framework.MakeTrainJob("second", ns, "mpi-openmpi-gpu").NumNodes(2).GPUsPerWorker(4).OnKwokNodes().Queue("q")
	third := framework.MakeTrainJob("third", ns, "mpi-openmpi-gpu").NumNodes(1).GPUsPerWorker(2).OnKwokNodes().Queue("q")
	if err := framework.SubmitW(ctx, c.Client, second); err != nil {
		t.Fatal(err)
	}
	// Kueue orders a queue by its Workloads' creation times, which have a
	// second's resolution: third comes once second waits in the queue (its
	// Workload exists) and the clock has passed the second it was made in.
	c.WaitForStatus(t, ns, "second", time.Minute, func(s api.Status) bool { return s.Phase == api.PhaseQueued && s.QueuePosition != nil })
	var made time.Time
	wls := &unstructured.UnstructuredList{}
	wls.SetAPIVersion("kueue.x-k8s.io/v1beta2")
	wls.SetKind("WorkloadList")
	if err := c.Client.List(ctx, wls, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, wl := range wls.Items {
		if ts := wl.GetCreationTimestamp().Time; ts.After(made) {
			made = ts // the newest: second's (first's is older)
		}
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return time.Now().Truncate(time.Second).After(made), nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := framework.SubmitW(ctx, c.Client, third); err != nil {
		t.Fatal(err)
	}
	s2 := c.WaitForStatus(t, ns, "second", time.Minute, func(s api.Status) bool {
		return s.Phase == api.PhaseQueued && s.QueuePosition != nil && *s.QueuePosition == 1 && strings.Contains(s.Message, "position 1 of 2")
	})
	s3 := c.WaitForStatus(t, ns, "third", time.Minute, func(s api.Status) bool {
		return s.Phase == api.PhaseQueued && s.QueuePosition != nil && *s.QueuePosition == 2
	})
	if s2.Reason != diagnose.ReasonQueued || !strings.Contains(s2.Message, "nvidia.com/gpu") {
		t.Errorf("second: %s %q, want Queued at position 1 of 2 with Kueue's reason naming nvidia.com/gpu", s2.Reason, s2.Message)
	}
	t.Logf("second: %s", s2.Message)
	t.Logf("third: %s", s3.Message)
	// The positions are Kueue's own: its visibility API, served through
	// the API server's aggregation layer, lists the same order.
	raw, err := c.Clientset.Discovery().RESTClient().Get().
		AbsPath("/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues", cq, "pendingworkloads").DoRaw(ctx)
	if err != nil {
		t.Fatalf("Kueue's visibility API: %v", err)
	}
	var summary struct {
		Items []struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			PositionInClusterQueue int32 `json:"positionInClusterQueue"`
		} `json:"items"`
	}
	if err := json.Unmarshal(raw, &summary); err != nil {
		t.Fatal(err)
	}
	kueueOrder := map[string]int32{}
	for _, it := range summary.Items {
		kueueOrder[it.Metadata.Name] = it.PositionInClusterQueue + 1
	}
	t.Logf("Kueue's pending workloads: %s", raw)
	for _, s := range []struct {
		job string
		pos int32
	}{{"second", *s2.QueuePosition}, {"third", *s3.QueuePosition}} {
		found := false
		for name, p := range kueueOrder {
			if strings.HasPrefix(name, "trainjob-"+s.job+"-") {
				found = true
				if p != s.pos {
					t.Errorf("%s: status says position %d, Kueue's visibility API %d", s.job, s.pos, p)
				}
			}
		}
		if !found {
			t.Errorf("%s: not among Kueue's pending workloads %s", s.job, raw)
		}
	}
	// Never partially started: no pod of a queued job exists.
	for _, name := range []string{"second", "third"} {
		pods := &corev1.PodList{}
		if err := c.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"jobset.sigs.k8s.io/jobset-name": name}); err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) != 0 {
			t.Errorf("queued job %s has %d pods; a queued job must not start partially", name, len(pods.Items))
		}
	}

	// Freeing the GPUs admits the next job whole.
	if err := c.Client.Delete(ctx, first.Obj(), client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	c.WaitForStatus(t, ns, "second", 2*time.Minute, func(s api.Status) bool { return s.Phase == api.PhaseSucceeded })
	c.WaitForStatus(t, ns, "third", 2*time.Minute, func(s api.Status) bool { return s.Phase == api.PhaseSucceeded })
}

// Quota can shrink (or be used up by others) between admission and pod
// creation: the job then waits with the quota's numbers in its status.
func TestQuotaExceededAfterAdmission(t *testing.T) {
	c := framework.Get(t)
	ctx := context.Background()
	ns := c.NewNamespace(t, "quota-later")
	gpus := func(n int64) corev1.ResourceList {
		return corev1.ResourceList{"requests.nvidia.com/gpu": *resource.NewQuantity(n, resource.DecimalSI)}
	}
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "gpus", Namespace: ns}, Spec: corev1.ResourceQuotaSpec{Hard: gpus(8)}}
	if err := c.Client.Create(ctx, quota); err != nil {
		t.Fatal(err)
	}
	// Admitted: 2 Workers × 4 GPUs fit a quota of 8.
	w := framework.MakeTrainJob("late", ns, "mpi-openmpi-gpu").NumNodes(2).GPUsPerWorker(4).OnKwokNodes().HoldOnKwok().Suspend()
	job := w.Obj()
	if err := framework.SubmitW(ctx, c.Client, w); err != nil {
		t.Fatalf("a job that fits the quota must be admitted: %v", err)
	}
	// The administrator halves the quota; then the job resumes.
	if err := c.Client.Patch(ctx, quota, client.RawPatch(client.Merge.Type(), []byte(`{"spec":{"hard":{"requests.nvidia.com/gpu":"4"}}}`))); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.Patch(ctx, job, client.RawPatch(client.Merge.Type(), []byte(`{"spec":{"suspend":false}}`))); err != nil {
		t.Fatal(err)
	}
	s := c.WaitForStatus(t, ns, "late", 2*time.Minute, func(s api.Status) bool { return s.Reason == diagnose.ReasonQuotaExceeded })
	if s.Phase.Finished() || !strings.Contains(s.Message, "nvidia.com/gpu") || !strings.Contains(s.Message, "gpus") || s.NextStep == "" {
		t.Errorf("status %s %q (next: %q), want a waiting job naming quota gpus and nvidia.com/gpu with a next step", s.Phase, s.Message, s.NextStep)
	}
	t.Logf("%s: %s Next: %s", s.Reason, s.Message, s.NextStep)
}

// A GPU job with a per-job runtime (mpi-openmpi-gpu, 2 GPUs per Worker) is
// accounted alike everywhere: Kueue's Workload pod sets, admission's quota
// pre-flight, the ResourceQuota's usage and the pods all say 2 Workers × 2
// GPUs and a Launcher without any.
func TestGPUJobAccountedAlikeByKueueQuotaAndPods(t *testing.T) {
	c := framework.Get(t)
	ctx := context.Background()
	ns := c.NewNamespace(t, "gpu-acct")
	newQueue(t, c, ns, 4)
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "gpus", Namespace: ns}, Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
		"requests.nvidia.com/gpu": resource.MustParse("4"),
	}}}
	if err := c.Client.Create(ctx, quota); err != nil {
		t.Fatal(err)
	}

	// The pre-flight refuses one Worker too many with the numbers...
	tooBig := framework.MakeTrainJob("too-big", ns, "mpi-openmpi-gpu").NumNodes(3).GPUsPerWorker(2).OnKwokNodes().Queue("q")
	err := framework.SubmitW(ctx, c.Client, tooBig)
	if err == nil || !strings.Contains(err.Error(), "requested 6 nvidia.com/gpu (3 workers × 2), quota 4") {
		t.Fatalf("3 Workers × 2 GPUs on a quota of 4: got %v, want the pre-flight's numbers", err)
	}
	// ... and admits the exact fit.
	fit := framework.MakeTrainJob("fit", ns, "mpi-openmpi-gpu").NumNodes(2).GPUsPerWorker(2).OnKwokNodes().HoldOnKwok().Queue("q")
	if err := framework.SubmitW(ctx, c.Client, fit); err != nil {
		t.Fatalf("2 Workers × 2 GPUs on a quota of 4 must be admitted: %v", err)
	}
	c.WaitForStatus(t, ns, "fit", 2*time.Minute, func(s api.Status) bool { return s.Phase == api.PhaseRunning })

	// Kueue's Workload: its pod sets ask for what the pods ask for.
	wls := &unstructured.UnstructuredList{}
	wls.SetAPIVersion("kueue.x-k8s.io/v1beta2")
	wls.SetKind("WorkloadList")
	if err := c.Client.List(ctx, wls, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(wls.Items) != 1 {
		t.Fatalf("%d Workloads in %s, want 1 (the job's)", len(wls.Items), ns)
	}
	podSets, _, _ := unstructured.NestedSlice(wls.Items[0].Object, "spec", "podSets")
	got := map[string]string{}
	total := resource.Quantity{}
	for _, ps := range podSets {
		m := ps.(map[string]any)
		count, _, _ := unstructured.NestedInt64(m, "count")
		containers, _, _ := unstructured.NestedSlice(m, "template", "spec", "containers")
		gpus := resource.Quantity{}
		for _, ct := range containers {
			if v, ok, _ := unstructured.NestedString(ct.(map[string]any), "resources", "requests", "nvidia.com/gpu"); ok {
				gpus.Add(resource.MustParse(v))
			}
		}
		got[m["name"].(string)] = fmt.Sprintf("%d×%s", count, gpus.String())
		for range count {
			total.Add(gpus)
		}
	}
	if want := map[string]string{"node": "2×2", "launcher": "1×0"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Workload pod sets (count×GPUs): %v, want %v", got, want)
	}
	// The pods and the ResourceQuota's usage.
	podGPUs := resource.Quantity{}
	for _, p := range append(c.JobPods(t, ns, "fit", "node"), c.JobPods(t, ns, "fit", "launcher")...) {
		q := p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"]
		podGPUs.Add(q)
	}
	rq := &corev1.ResourceQuota{}
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(quota), rq); err != nil {
		t.Fatal(err)
	}
	used := rq.Status.Used["requests.nvidia.com/gpu"]
	if total.Value() != 4 || podGPUs.Value() != 4 || used.Value() != 4 {
		t.Errorf("GPUs: Workload %s, pods %s, ResourceQuota used %s; want 4 each", total.String(), podGPUs.String(), used.String())
	}
}
