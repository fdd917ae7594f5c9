// Package placement says, before a job is created, whether the cluster can
// place it now: whether its Launcher and Workers fit in what the nodes have
// free (free GPUs named), and where it would stand in its Kueue queue, with
// an estimated start. mpijob's admission webhook says it on a server dry
// run (`kubectl mpijob create --dry-run=server`, the wizard's check), as
// admission warnings: what the user may create decides what they may ask,
// and nodes (which tenants may not read) are read by mpijob-manager only.
//
// Judge is pure; Reader gathers its Input from the manager's caches.
package placement

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/runtimes"
)

// Prefix starts every line Judge says, so a client can tell them from
// other admission warnings.
const Prefix = "Placement: "

// FromWarning reads an API server warning (its code and text): the
// placement line it carries, without Prefix, and whether it is one.
func FromWarning(code int, text string) (string, bool) {
	if code != 299 || !strings.HasPrefix(text, Prefix) {
		return "", false
	}
	return strings.TrimPrefix(text, Prefix), true
}

// NodeFree is what one schedulable node still has free.
type NodeFree struct {
	Name string
	Free corev1.ResourceList
}

// Free is every schedulable (Ready, not cordoned) node's allocatable minus
// the requests of the pods bound to it that have not finished.
func Free(nodes []corev1.Node, pods []corev1.Pod) []NodeFree {
	used := map[string]corev1.ResourceList{}
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		req, _ := runtimes.PodDemand(&p.Spec)
		u := used[p.Spec.NodeName]
		if u == nil {
			u = corev1.ResourceList{}
			used[p.Spec.NodeName] = u
		}
		for k, q := range req {
			cur := u[k]
			cur.Add(q)
			u[k] = cur
		}
		cur := u[corev1.ResourcePods]
		cur.Add(resource.MustParse("1"))
		u[corev1.ResourcePods] = cur
	}
	var out []NodeFree
	for i := range nodes {
		n := &nodes[i]
		if !Schedulable(n) {
			continue
		}
		free := corev1.ResourceList{}
		for k, q := range n.Status.Allocatable {
			f := q.DeepCopy()
			if u, ok := used[n.Name][k]; ok {
				f.Sub(u)
			}
			if f.Sign() < 0 {
				f = resource.Quantity{}
			}
			free[k] = f
		}
		out = append(out, NodeFree{Name: n.Name, Free: free})
	}
	return out
}

// Schedulable reports whether the scheduler may place new pods on n: it
// is Ready and not cordoned.
func Schedulable(n *corev1.Node) bool {
	if n.Spec.Unschedulable {
		return false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Input is what Judge looks at.
type Input struct {
	// Workers is the number of Worker pods, Worker and Launcher their pod
	// specs (Launcher nil: no Launcher pod to place).
	Workers  int32
	Worker   *corev1.PodSpec
	Launcher *corev1.PodSpec
	// Nodes are the cluster's nodes; Free what the schedulable ones have
	// free (see Free).
	Nodes []corev1.Node
	Free  []NodeFree
	// Queue is the job's Kueue queue; nil when it goes to none.
	Queue *Queue
	// Redacted is set when the reader may not list the cluster's nodes (a
	// tenant): the answer then says whether the job fits, never what the
	// nodes have (no free GPUs of the cluster, no node's allocatable).
	Redacted bool
}

// Queue is where the job would stand in its Kueue queue.
type Queue struct {
	// Name is "namespace/localqueue"; ClusterQueue is empty when the
	// LocalQueue does not exist.
	Name, ClusterQueue string
	// Ahead is how many pending jobs Kueue would take first.
	Ahead int32
	// Estimate is when the job may start, in words ("in about 20m (...)");
	// empty when there is nothing to estimate from.
	Estimate string
}

// Answer is Judge's verdict.
type Answer struct {
	// Fits: the Launcher and every Worker fit in what is free now.
	Fits bool
	// Placed is how many Workers fit now.
	Placed int32
	// Never: no node the Workers may use could take one even if empty.
	Never bool
	// Lines say it, each starting with Prefix.
	Lines []string
}

// Judge places the job's pods, as the scheduler would one at a time, in
// what the nodes have free now: the Launcher first, then each Worker on
// the node it fits that has most of the scarcest resource left. A node is
// one a pod may use when it is schedulable, carries no NoSchedule or
// NoExecute taint the pod does not tolerate (a taint named after a
// resource the pod asks for counts as tolerated, as the API server's
// ExtendedResourceToleration plugin adds that toleration), and matches the
// pod's node selector and required node affinity.
func Judge(in Input) Answer {
	var ans Answer
	say := func(format string, args ...any) {
		ans.Lines = append(ans.Lines, Prefix+fmt.Sprintf(format, args...))
	}
	free := map[string]corev1.ResourceList{}
	for _, n := range in.Free {
		free[n.Name] = n.Free.DeepCopy()
	}
	nodes := map[string]*corev1.Node{}
	for i := range in.Nodes {
		nodes[in.Nodes[i].Name] = &in.Nodes[i]
	}
	worker := demand(in.Worker)
	launcherFits := true
	if in.Launcher != nil {
		launcher := demand(in.Launcher)
		if name := best(launcher, usable(in.Launcher, in.Free, nodes), free); name != "" {
			take(free[name], launcher)
		} else {
			launcherFits = false
		}
	}
	// Which nodes the Workers may use does not change as they are placed:
	// worked out once, not per Worker.
	workerNodes := usable(in.Worker, in.Free, nodes)
	// The shipped runtimes place one Worker per node (a required pod
	// anti-affinity over the node's hostname): a node that took one takes
	// no other.
	perNode := oneWorkerPerNode(in.Worker)
	taken := map[string]bool{}
	for ans.Placed < in.Workers {
		candidates := workerNodes
		if perNode {
			candidates = slices.DeleteFunc(slices.Clone(workerNodes), func(n string) bool { return taken[n] })
		}
		name := best(worker, candidates, free)
		if name == "" {
			break
		}
		take(free[name], worker)
		taken[name] = true
		ans.Placed++
	}
	ans.Fits = launcherFits && ans.Placed == in.Workers
	each := describe(worker)
	switch {
	case len(workerNodes) == 0 && in.Workers > 0:
		ans.Never = true
		say("no node can take a Worker now: every schedulable node carries a taint the Workers do not tolerate or misses their node selector or affinity (%s).", api.Count(len(in.Free), "node", "nodes"))
	case ans.Fits:
		say("fits now: the Launcher and %s (each %s) fit in what the nodes have free.", api.Count(int(in.Workers), "Worker", "Workers"), each)
	default:
		if why := neverFits(worker, workerNodes, nodes, in.Redacted); why != "" {
			ans.Never = true
			say("never fits as the cluster is now: %s", why)
			break
		}
		if able := roomy(worker, workerNodes, nodes); perNode && able < int(in.Workers) {
			ans.Never = true
			say("never fits as the cluster is now: it asks for %s, but the runtime places one Worker per node and only %s can take one: use at most %d Workers (more slots per worker for more ranks).",
				api.Count(int(in.Workers), "Worker", "Workers"), api.Count(able, "node", "nodes"), able)
			break
		}
		workers := fmt.Sprintf("only %d of the %d Workers (each %s) fit", ans.Placed, in.Workers, each)
		if ans.Placed == 0 {
			workers = fmt.Sprintf("none of the %s (each %s) fits", api.Count(int(in.Workers), "Worker", "Workers"), each)
		}
		where := fmt.Sprintf("in what the %s the Workers may use %s free", api.Count(len(workerNodes), "node", "nodes"), api.Agree(len(workerNodes), "has", "have"))
		if others := len(in.Free) - len(workerNodes); others > 0 {
			where += fmt.Sprintf(" (the other %s %s a taint they do not tolerate or %s their node selector)", api.Count(others, "node", "nodes"), api.Agree(others, "carries", "carry"), api.Agree(others, "misses", "miss"))
		}
		what := workers + " " + where
		if !launcherFits {
			what = "the Launcher does not fit in what the nodes have free"
			if ans.Placed < in.Workers {
				what += ", and " + workers + " " + where
			}
		}
		say("does not fit now: %s; the job waits until running pods finish, then its pods start together.", what)
	}
	if line := gpuLine(in, worker, workerNodes); line != "" && !in.Redacted {
		say("%s", line)
	}
	if q := in.Queue; q != nil {
		switch {
		case q.ClusterQueue == "":
			say("Kueue queue %s does not exist, so the job would wait and never start: name an existing LocalQueue (kubectl get localqueues -n %s).", q.Name, strings.SplitN(q.Name, "/", 2)[0])
		case q.Ahead == 0:
			say("Kueue queue %s (ClusterQueue %s): no job waits ahead of this one; Kueue admits it as soon as the ClusterQueue's quota has room.", q.Name, q.ClusterQueue)
		default:
			line := fmt.Sprintf("Kueue queue %s (ClusterQueue %s): %s ahead of this one, so it would be number %d", q.Name, q.ClusterQueue, api.Count(int(q.Ahead), "job waits", "jobs wait"), q.Ahead+1)
			if q.Estimate != "" {
				line += "; estimated start " + q.Estimate
			}
			say("%s.", line)
		}
	}
	return ans
}

// gpuLine says how many GPUs are free on the nodes the Workers may use,
// when the cluster has any or the job asks for some.
func gpuLine(in Input, worker corev1.ResourceList, workerNodes []string) string {
	names := map[corev1.ResourceName]bool{}
	for name := range worker {
		if isGPU(name) {
			names[name] = true
		}
	}
	for _, n := range in.Free {
		for name := range n.Free {
			if isGPU(name) {
				names[name] = true
			}
		}
	}
	if len(names) == 0 {
		return ""
	}
	usableSet := map[string]bool{}
	for _, n := range workerNodes {
		usableSet[n] = true
	}
	var parts []string
	for _, name := range sortedNames(names) {
		var freeAll, freeUsable, alloc resource.Quantity
		holders := 0
		for _, n := range in.Free {
			q, ok := n.Free[name]
			if !ok {
				continue
			}
			freeAll.Add(q)
			if usableSet[n.Name] {
				freeUsable.Add(q)
			}
			if q.Sign() > 0 {
				holders++
			}
		}
		for i := range in.Nodes {
			if q, ok := in.Nodes[i].Status.Allocatable[name]; ok && Schedulable(&in.Nodes[i]) {
				alloc.Add(q)
			}
		}
		part := fmt.Sprintf("%s of %s %s on %s", freeAll.String(), alloc.String(), name, api.Count(holders, "node", "nodes"))
		if _, asks := worker[name]; asks && freeUsable.Cmp(freeAll) != 0 {
			part += fmt.Sprintf(" (%s on the nodes the Workers may use)", freeUsable.String())
		}
		parts = append(parts, part)
	}
	return "free GPUs now: " + strings.Join(parts, "; ") + "."
}

func isGPU(name corev1.ResourceName) bool {
	return strings.HasSuffix(string(name), "/gpu")
}

// demand is what one pod takes of a node: its requests and one pod.
func demand(spec *corev1.PodSpec) corev1.ResourceList {
	if spec == nil {
		return corev1.ResourceList{}
	}
	req, _ := runtimes.PodDemand(spec)
	for k, q := range req {
		if q.IsZero() {
			delete(req, k)
		}
	}
	req[corev1.ResourcePods] = resource.MustParse("1")
	return req
}

// usable lists the schedulable nodes spec may use (taints, node selector,
// required affinity), by name.
func usable(spec *corev1.PodSpec, schedulable []NodeFree, nodes map[string]*corev1.Node) []string {
	if spec == nil {
		return nil
	}
	asks := demand(spec)
	pod := &corev1.Pod{Spec: *spec}
	affinity := nodeaffinity.GetRequiredNodeAffinity(pod)
	var out []string
	for _, nf := range schedulable {
		n := nodes[nf.Name]
		if n == nil {
			continue
		}
		if _, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), n.Spec.Taints, spec.Tolerations, func(t *corev1.Taint) bool {
			if t.Effect != corev1.TaintEffectNoSchedule && t.Effect != corev1.TaintEffectNoExecute {
				return false
			}
			_, asked := asks[corev1.ResourceName(t.Key)]
			return !asked
		}, false); untolerated {
			continue
		}
		if match, err := affinity.Match(n); err != nil || !match {
			continue
		}
		out = append(out, n.Name)
	}
	return out
}

// best is the node among candidates where want fits and most of the
// scarcest wanted resource stays free ("" when none).
func best(want corev1.ResourceList, candidates []string, free map[string]corev1.ResourceList) string {
	scarce := scarcest(want)
	pick, left := "", resource.Quantity{}
	for _, name := range candidates {
		if !fits(free[name], want) {
			continue
		}
		rest := free[name][scarce].DeepCopy()
		rest.Sub(want[scarce])
		if pick == "" || rest.Cmp(left) > 0 {
			pick, left = name, rest
		}
	}
	return pick
}

// scarcest is the resource the placement is led by: a GPU if the pod asks
// for one, then CPU, then memory, then pods.
func scarcest(want corev1.ResourceList) corev1.ResourceName {
	for _, name := range sortedNames(want) {
		if isGPU(name) {
			return name
		}
	}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := want[name]; ok {
			return name
		}
	}
	return corev1.ResourcePods
}

func fits(free, want corev1.ResourceList) bool {
	for name, q := range want {
		have, ok := free[name]
		if !ok || have.Cmp(q) < 0 {
			return false
		}
	}
	return true
}

func take(free, want corev1.ResourceList) {
	for name, q := range want {
		f := free[name]
		f.Sub(q)
		free[name] = f
	}
}

// oneWorkerPerNode reports a Worker pod that may not share a node with
// another Worker of its job: a required pod anti-affinity over the node's
// hostname (what the shipped runtimes set).
func oneWorkerPerNode(spec *corev1.PodSpec) bool {
	if spec == nil || spec.Affinity == nil || spec.Affinity.PodAntiAffinity == nil {
		return false
	}
	for _, term := range spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		if term.TopologyKey == corev1.LabelHostname {
			return true
		}
	}
	return false
}

// roomy counts the nodes among usableNodes whose allocatable takes one
// Worker with nothing else running.
func roomy(want corev1.ResourceList, usableNodes []string, nodes map[string]*corev1.Node) int {
	n := 0
	for _, name := range usableNodes {
		if fits(nodes[name].Status.Allocatable, want) {
			n++
		}
	}
	return n
}

// neverFits says when one Worker asks for more of a resource than any
// node it may use has allocatable ("" when every resource fits some node).
func neverFits(want corev1.ResourceList, usableNodes []string, nodes map[string]*corev1.Node, redacted bool) string {
	for _, name := range sortedNames(want) {
		if name == corev1.ResourcePods {
			continue
		}
		var top resource.Quantity
		topNode := ""
		for _, n := range usableNodes {
			if q, ok := nodes[n].Status.Allocatable[name]; ok && (topNode == "" || q.Cmp(top) > 0) {
				top, topNode = q, n
			}
		}
		q := want[name]
		switch {
		case topNode == "":
			return fmt.Sprintf("a Worker asks for %s %s, and no node it may use offers %s at all: check the resource name (GPUs are nvidia.com/gpu or amd.com/gpu).", q.String(), name, name)
		case top.Cmp(q) < 0:
			// Never the node's name, and not even the amount for a reader
			// who may not list the cluster's nodes.
			if redacted {
				return fmt.Sprintf("a Worker asks for %s %s, and no node it may use has that much allocatable even with nothing else running: ask for less per Worker and use more Workers.", q.String(), name)
			}
			return fmt.Sprintf("a Worker asks for %s %s, and no node it may use has that much allocatable even with nothing else running (the most one has: %s): ask for less per Worker and use more Workers.", q.String(), name, top.String())
		}
	}
	return ""
}

// describe is one pod's requests in words ("1 nvidia.com/gpu, 2 cpu,
// 4Gi memory"); "no resources requested" when it asks for none.
func describe(want corev1.ResourceList) string {
	var parts []string
	for _, name := range sortedNames(want) {
		if name == corev1.ResourcePods {
			continue
		}
		q := want[name]
		parts = append(parts, q.String()+" "+string(name))
	}
	if len(parts) == 0 {
		return "no resources requested"
	}
	return strings.Join(parts, ", ")
}

// sortedNames orders resource names GPUs first, then cpu, memory and the
// rest by name.
func sortedNames[V any](m map[corev1.ResourceName]V) []corev1.ResourceName {
	rank := func(n corev1.ResourceName) int {
		switch {
		case isGPU(n):
			return 0
		case n == corev1.ResourceCPU:
			return 1
		case n == corev1.ResourceMemory:
			return 2
		}
		return 3
	}
	out := make([]corev1.ResourceName, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool {
		if rank(out[i]) != rank(out[j]) {
			return rank(out[i]) < rank(out[j])
		}
		return out[i] < out[j]
	})
	return out
}
