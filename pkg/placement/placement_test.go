package placement

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func node(name string, alloc map[string]string, mods ...func(*corev1.Node)) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
	n.Status.Allocatable = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110")}
	for k, v := range alloc {
		n.Status.Allocatable[corev1.ResourceName(k)] = resource.MustParse(v)
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	for _, m := range mods {
		m(&n)
	}
	return n
}

func gpuTaint(n *corev1.Node) {
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule})
}

// perNode is the shipped runtimes' one Worker per node.
func perNode(p *corev1.PodSpec) {
	p.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
		TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"jobset.sigs.k8s.io/replicatedjob-name": "node"}}}}}}
}

func cordoned(n *corev1.Node) { n.Spec.Unschedulable = true }

func notReady(n *corev1.Node) {
	n.Status.Conditions[0].Status = corev1.ConditionFalse
}

func pod(nodeName string, phase corev1.PodPhase, req map[string]string) corev1.Pod {
	p := corev1.Pod{Spec: corev1.PodSpec{NodeName: nodeName}, Status: corev1.PodStatus{Phase: phase}}
	c := corev1.Container{Name: "node", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{}}}
	for k, v := range req {
		c.Resources.Requests[corev1.ResourceName(k)] = resource.MustParse(v)
	}
	p.Spec.Containers = []corev1.Container{c}
	return p
}

func spec(req map[string]string, mods ...func(*corev1.PodSpec)) *corev1.PodSpec {
	p := pod("", "", req)
	for _, m := range mods {
		m(&p.Spec)
	}
	return &p.Spec
}

// cluster: two GPU nodes of 4 GPUs (tainted, as GPU nodes usually are)
// and one CPU node.
func cluster(mods ...func(*corev1.Node)) []corev1.Node {
	return []corev1.Node{
		node("cpu-0", map[string]string{"cpu": "8", "memory": "32Gi"}),
		node("gpu-0", map[string]string{"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "4"}, append([]func(*corev1.Node){gpuTaint}, mods...)...),
		node("gpu-1", map[string]string{"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "4"}, gpuTaint),
	}
}

func TestJudge(t *testing.T) {
	launcher := spec(map[string]string{"cpu": "1", "memory": "1Gi"})
	cases := map[string]struct {
		nodes   []corev1.Node
		pods    []corev1.Pod
		workers int32
		worker  *corev1.PodSpec
		queue   *Queue
		// redacted: the reader may not list nodes.
		redacted bool
		want     Answer
	}{
		"GPU Workers fit on the free GPUs": {
			nodes: cluster(), workers: 2, worker: spec(map[string]string{"nvidia.com/gpu": "2", "cpu": "2"}),
			want: Answer{Fits: true, Placed: 2, Lines: []string{
				"Placement: fits now: the Launcher and 2 Workers (each 2 nvidia.com/gpu, 2 cpu) fit in what the nodes have free.",
				"Placement: free GPUs now: 8 of 8 nvidia.com/gpu on 2 nodes.",
			}},
		},
		"GPUs held by running pods are not free; finished pods hold none": {
			nodes: cluster(), workers: 3, worker: spec(map[string]string{"nvidia.com/gpu": "2"}),
			pods: []corev1.Pod{
				pod("gpu-0", corev1.PodRunning, map[string]string{"nvidia.com/gpu": "3"}),
				pod("gpu-1", corev1.PodPending, map[string]string{"nvidia.com/gpu": "1"}),
				pod("gpu-1", corev1.PodSucceeded, map[string]string{"nvidia.com/gpu": "4"}),
			},
			want: Answer{Placed: 1, Lines: []string{
				"Placement: does not fit now: only 1 of the 3 Workers (each 2 nvidia.com/gpu) fit in what the 3 nodes the Workers may use have free; the job waits until running pods finish, then its pods start together.",
				"Placement: free GPUs now: 4 of 8 nvidia.com/gpu on 2 nodes.",
			}},
		},
		"a Worker larger than any node never fits, and says the largest": {
			nodes: cluster(), workers: 1, worker: spec(map[string]string{"nvidia.com/gpu": "8"}),
			want: Answer{Never: true, Lines: []string{
				"Placement: never fits as the cluster is now: a Worker asks for 8 nvidia.com/gpu, and no node it may use has that much allocatable even with nothing else running (the most one has: 4): ask for less per Worker and use more Workers.",
				"Placement: free GPUs now: 8 of 8 nvidia.com/gpu on 2 nodes.",
			}},
		},
		"for a tenant, the same without what the nodes have": {
			nodes: cluster(), workers: 1, worker: spec(map[string]string{"nvidia.com/gpu": "8"}), redacted: true,
			want: Answer{Never: true, Lines: []string{
				"Placement: never fits as the cluster is now: a Worker asks for 8 nvidia.com/gpu, and no node it may use has that much allocatable even with nothing else running: ask for less per Worker and use more Workers.",
			}},
		},
		"one Worker per node: two fit on two nodes": {
			nodes: cluster(), workers: 2, worker: spec(map[string]string{"nvidia.com/gpu": "1"}, perNode),
			want: Answer{Fits: true, Placed: 2, Lines: []string{
				"Placement: fits now: the Launcher and 2 Workers (each 1 nvidia.com/gpu) fit in what the nodes have free.",
				"Placement: free GPUs now: 8 of 8 nvidia.com/gpu on 2 nodes.",
			}},
		},
		"one Worker per node: three never fit on the two nodes that take one, however free": {
			nodes: cluster(), workers: 3, worker: spec(map[string]string{"nvidia.com/gpu": "1"}, perNode),
			want: Answer{Never: true, Placed: 2, Lines: []string{
				"Placement: never fits as the cluster is now: it asks for 3 Workers, but the runtime places one Worker per node and only 2 nodes can take one: use at most 2 Workers (more slots per worker for more ranks).",
				"Placement: free GPUs now: 8 of 8 nvidia.com/gpu on 2 nodes.",
			}},
		},
		"a misspelt resource is offered by no node": {
			nodes: cluster(), workers: 1, worker: spec(map[string]string{"nvidia.com/gpus": "1"}),
			want: Answer{Never: true, Lines: []string{
				"Placement: never fits as the cluster is now: a Worker asks for 1 nvidia.com/gpus, and no node it may use offers nvidia.com/gpus at all: check the resource name (GPUs are nvidia.com/gpu or amd.com/gpu).",
				"Placement: free GPUs now: 8 of 8 nvidia.com/gpu on 2 nodes.",
			}},
		},
		"cordoned and not-ready nodes are not free capacity": {
			nodes: cluster(cordoned), workers: 2, worker: spec(map[string]string{"nvidia.com/gpu": "4"}),
			want: Answer{Placed: 1, Lines: []string{
				"Placement: does not fit now: only 1 of the 2 Workers (each 4 nvidia.com/gpu) fit in what the 2 nodes the Workers may use have free; the job waits until running pods finish, then its pods start together.",
				"Placement: free GPUs now: 4 of 4 nvidia.com/gpu on 1 node.",
			}},
		},
		"a node selector no schedulable node matches": {
			nodes: cluster(notReady), workers: 1,
			worker: spec(map[string]string{"cpu": "1"}, func(p *corev1.PodSpec) { p.NodeSelector = map[string]string{"kubernetes.io/hostname": "gpu-0"} }),
			want: Answer{Never: true, Lines: []string{
				"Placement: no node can take a Worker now: every schedulable node carries a taint the Workers do not tolerate or misses their node selector or affinity (2 nodes).",
				"Placement: free GPUs now: 4 of 4 nvidia.com/gpu on 1 node.",
			}},
		},
		"CPU Workers stay off the GPU nodes' taint; a toleration lets them on": {
			nodes: cluster(), workers: 3, worker: spec(map[string]string{"cpu": "4"}),
			want: Answer{Placed: 1, Lines: []string{
				"Placement: does not fit now: only 1 of the 3 Workers (each 4 cpu) fit in what the 1 node the Workers may use has free (the other 2 nodes carry a taint they do not tolerate or miss their node selector); the job waits until running pods finish, then its pods start together.",
				"Placement: free GPUs now: 8 of 8 nvidia.com/gpu on 2 nodes.",
			}},
		},
		"with the toleration the same Workers fit": {
			nodes: cluster(), workers: 3,
			worker: spec(map[string]string{"cpu": "4"}, func(p *corev1.PodSpec) {
				p.Tolerations = []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}}
			}),
			want: Answer{Fits: true, Placed: 3, Lines: []string{
				"Placement: fits now: the Launcher and 3 Workers (each 4 cpu) fit in what the nodes have free.",
				"Placement: free GPUs now: 8 of 8 nvidia.com/gpu on 2 nodes.",
			}},
		},
		"the Launcher counts too": {
			nodes:   []corev1.Node{node("small", map[string]string{"cpu": "2", "memory": "4Gi"})},
			workers: 2, worker: spec(map[string]string{"cpu": "1"}),
			want: Answer{Placed: 1, Lines: []string{
				"Placement: does not fit now: only 1 of the 2 Workers (each 1 cpu) fit in what the 1 node the Workers may use has free; the job waits until running pods finish, then its pods start together.",
			}},
		},
		"a Launcher that does not fit is said": {
			nodes:   []corev1.Node{node("small", map[string]string{"cpu": "4", "memory": "512Mi"})},
			workers: 2, worker: spec(map[string]string{"cpu": "1"}),
			want: Answer{Placed: 2, Lines: []string{
				"Placement: does not fit now: the Launcher does not fit in what the nodes have free; the job waits until running pods finish, then its pods start together.",
			}},
		},
		"no Worker fits": {
			nodes: cluster(), workers: 2, worker: spec(map[string]string{"cpu": "6"}),
			pods: []corev1.Pod{pod("cpu-0", corev1.PodRunning, map[string]string{"cpu": "4"})},
			want: Answer{Lines: []string{
				"Placement: does not fit now: none of the 2 Workers (each 6 cpu) fits in what the 1 node the Workers may use has free (the other 2 nodes carry a taint they do not tolerate or miss their node selector); the job waits until running pods finish, then its pods start together.",
				"Placement: free GPUs now: 8 of 8 nvidia.com/gpu on 2 nodes.",
			}},
		},
		"Kueue: jobs ahead and an estimate": {
			nodes: cluster(), workers: 1, worker: spec(map[string]string{"cpu": "1"}),
			queue: &Queue{Name: "team-a/user-queue", ClusterQueue: "cluster-queue", Ahead: 2, Estimate: "in about 15m (position 3 × 5m)"},
			want: Answer{Fits: true, Placed: 1, Lines: []string{
				"Placement: fits now: the Launcher and 1 Worker (each 1 cpu) fit in what the nodes have free.",
				"Placement: free GPUs now: 8 of 8 nvidia.com/gpu on 2 nodes.",
				"Placement: Kueue queue team-a/user-queue (ClusterQueue cluster-queue): 2 jobs wait ahead of this one, so it would be number 3; estimated start in about 15m (position 3 × 5m).",
			}},
		},
		"Kueue: nothing ahead": {
			nodes: []corev1.Node{node("cpu-0", map[string]string{"cpu": "8", "memory": "8Gi"})}, workers: 1, worker: spec(map[string]string{"cpu": "1"}),
			queue: &Queue{Name: "team-a/user-queue", ClusterQueue: "cluster-queue"},
			want: Answer{Fits: true, Placed: 1, Lines: []string{
				"Placement: fits now: the Launcher and 1 Worker (each 1 cpu) fit in what the nodes have free.",
				"Placement: Kueue queue team-a/user-queue (ClusterQueue cluster-queue): no job waits ahead of this one; Kueue admits it as soon as the ClusterQueue's quota has room.",
			}},
		},
		"Kueue: a LocalQueue that does not exist": {
			nodes: []corev1.Node{node("cpu-0", map[string]string{"cpu": "8", "memory": "8Gi"})}, workers: 1, worker: spec(map[string]string{"cpu": "1"}),
			queue: &Queue{Name: "team-a/typo"},
			want: Answer{Fits: true, Placed: 1, Lines: []string{
				"Placement: fits now: the Launcher and 1 Worker (each 1 cpu) fit in what the nodes have free.",
				"Placement: Kueue queue team-a/typo does not exist, so the job would wait and never start: name an existing LocalQueue (kubectl get localqueues -n team-a).",
			}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Judge(Input{Workers: tc.workers, Worker: tc.worker, Launcher: launcher, Nodes: tc.nodes, Free: Free(tc.nodes, tc.pods), Queue: tc.queue, Redacted: tc.redacted})
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Judge (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFree(t *testing.T) {
	nodes := cluster(cordoned)
	got := Free(nodes, []corev1.Pod{
		pod("gpu-1", corev1.PodRunning, map[string]string{"nvidia.com/gpu": "3", "cpu": "20"}),
		pod("", corev1.PodPending, map[string]string{"cpu": "1"}),
	})
	want := map[string]map[string]string{
		"cpu-0": {"cpu": "8", "memory": "32Gi", "pods": "110"},
		// More used than allocatable (a static pod, a resize) is nothing free.
		"gpu-1": {"cpu": "0", "memory": "64Gi", "nvidia.com/gpu": "1", "pods": "109"},
	}
	gotM := map[string]map[string]string{}
	for _, n := range got {
		gotM[n.Name] = map[string]string{}
		for k, q := range n.Free {
			gotM[n.Name][string(k)] = q.String()
		}
	}
	if diff := cmp.Diff(want, gotM); diff != "" {
		t.Errorf("Free (-want +got):\n%s", diff)
	}
}

func TestFromWarning(t *testing.T) {
	type read struct {
		Line string
		OK   bool
	}
	cases := map[string]struct {
		code int
		text string
		want read
	}{
		"a placement line":          {299, "Placement: fits now.", read{"fits now.", true}},
		"another admission warning": {299, "spec.trainer: no memory limit", read{}},
		"not the API server's code": {199, "Placement: fits now.", read{}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			line, ok := FromWarning(tc.code, tc.text)
			if diff := cmp.Diff(tc.want, read{line, ok}); diff != "" {
				t.Errorf("FromWarning (-want +got):\n%s", diff)
			}
		})
	}
}
