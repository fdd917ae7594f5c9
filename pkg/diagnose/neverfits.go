package diagnose

import (
	"fmt"
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

// neverFits says when no node of the cluster could take a waiting Worker
// even with every other pod gone: each node carries a taint the Worker does
// not tolerate, misses a label its node selector or required affinity asks
// for, or has less of a resource allocatable than one Worker requests (or
// none at all: an unknown resource name). It looks at what the nodes are,
// never at what is free, so waiting for capacity is never called hopeless.
func neverFits(in Input) (message string, next []api.Step, ok bool) {
	var waiting *corev1.Pod
	for _, p := range sortedByIndex(in.Workers) {
		if p.Spec.NodeName == "" && p.DeletionTimestamp == nil {
			waiting = p
			break
		}
	}
	if waiting == nil || len(in.AllNodes) == 0 {
		return "", nil, false
	}
	requests, _ := runtimes.PodDemand(&waiting.Spec)
	affinity := nodeaffinity.GetRequiredNodeAffinity(waiting)
	taints := map[string]int{}
	// resourceTaints: taints named after a resource their node offers
	// (nvidia.com/gpu:NoSchedule on GPU nodes), which the API server's
	// ExtendedResourceToleration lets pods asking for it tolerate.
	resourceTaints := map[string]corev1.ResourceName{}
	var unmatched int
	short := map[corev1.ResourceName]int{}
	// offered: the most of each resource any node has; largest: the most
	// among the nodes that pass the taints and the selector.
	offered := map[corev1.ResourceName]resource.Quantity{}
	largest := map[corev1.ResourceName]resource.Quantity{}
	for i := range in.AllNodes {
		n := &in.AllNodes[i]
		for name, q := range n.Status.Allocatable {
			if l, ok := offered[name]; !ok || q.Cmp(l) > 0 {
				offered[name] = q
			}
		}
		if t, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), n.Spec.Taints, waiting.Spec.Tolerations, func(t *corev1.Taint) bool {
			return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
		}, false); untolerated {
			taints[taintString(t)]++
			if _, offers := n.Status.Allocatable[corev1.ResourceName(t.Key)]; offers && strings.Contains(t.Key, "/") {
				resourceTaints[taintString(t)] = corev1.ResourceName(t.Key)
			}
			continue
		}
		if match, err := affinity.Match(n); err != nil || !match {
			unmatched++
			continue
		}
		for name, q := range n.Status.Allocatable {
			if l, ok := largest[name]; !ok || q.Cmp(l) > 0 {
				largest[name] = q
			}
		}
		fits := true
		for name, want := range requests {
			if want.IsZero() {
				continue
			}
			if have, ok := n.Status.Allocatable[name]; !ok || have.Cmp(want) < 0 {
				short[name]++
				fits = false
				break
			}
		}
		if fits {
			return "", nil, false
		}
	}
	var why []string
	var steps []api.Step
	for _, t := range sortedKeys(taints) {
		why = append(why, fmt.Sprintf("%s %s taint %s, which the Workers do not tolerate", api.Count(taints[t], "node", "nodes"), api.Agree(taints[t], "carries", "carry"), t))
		if r, ok := resourceTaints[t]; ok {
			steps = append(steps, step(fmt.Sprintf("The nodes with taint %s are kept for pods that ask for %s (those are given the toleration): if the Workers need it, ask for it (--gpus N, or resources per Worker); otherwise they run elsewhere.", t, r)))
			continue
		}
		steps = append(steps, stepf("If the Workers belong on the nodes with taint "+t+", use a runtime that tolerates it (`%s`) or add the toleration in the job's runtimePatches.", cli("runtimes list")))
	}
	if unmatched > 0 {
		sel := selectorString(waiting)
		why = append(why, fmt.Sprintf("%s %s match the Workers' %s", api.Count(unmatched, "node", "nodes"), api.Agree(unmatched, "does not", "do not"), sel))
		steps = append(steps, step(fmt.Sprintf("Fix the Workers' %s: no node that could take them has it (ask an administrator which node labels exist).", sel)))
	}
	for _, name := range sortedKeys(short) {
		want := requests[name]
		switch l, o := largest[name], offered[name]; {
		case o.IsZero():
			why = append(why, fmt.Sprintf("no node offers %s at all, and one Worker asks for %s", name, want.String()))
			// A misspelt resource is the likeliest cause of all.
			steps = append([]api.Step{step(fmt.Sprintf("Check the resource name %s (GPUs are nvidia.com/gpu or amd.com/gpu), or remove it from the job.", name))}, steps...)
		case l.IsZero():
			why = append(why, fmt.Sprintf("%s %s no %s", api.Count(short[name], "node", "nodes"), api.Agree(short[name], "has", "have"), name))
		default:
			why = append(why, fmt.Sprintf("%s %s less than the %s %s one Worker asks for (the largest has %s)", api.Count(short[name], "node", "nodes"), api.Agree(short[name], "has", "have"), want.String(), name, l.String()))
			steps = append(steps, step(fmt.Sprintf("Ask for at most %s %s per Worker (use more Workers instead): no node the Workers may use has more.", l.String(), name)))
		}
	}
	steps = append(steps, stepf("Delete this job and resubmit it changed (`%s`): while it waits it holds what its placed pods and its queue admission hold.", cli("clone")))
	return fmt.Sprintf("The job can never start: no node could take a Worker even if the cluster were empty: %s.", strings.Join(why, "; ")), ranked(steps...), true
}

func taintString(t corev1.Taint) string {
	if t.Value == "" {
		return fmt.Sprintf("%s:%s", t.Key, t.Effect)
	}
	return fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect)
}

// selectorString names what a pod asks of its node's labels.
func selectorString(p *corev1.Pod) string {
	var parts []string
	for _, k := range sortedKeys(p.Spec.NodeSelector) {
		parts = append(parts, k+"="+p.Spec.NodeSelector[k])
	}
	switch {
	case len(parts) > 0 && p.Spec.Affinity != nil && p.Spec.Affinity.NodeAffinity != nil && p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil:
		return "node selector " + strings.Join(parts, ",") + " and required node affinity"
	case len(parts) > 0:
		return "node selector " + strings.Join(parts, ",")
	default:
		return "required node affinity"
	}
}

func sortedKeys[V any, K ~string](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys
}
