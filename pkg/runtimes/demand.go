package runtimes

import (
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// PodDemand is what one pod's containers count against quota: requests
// (a limit without a request counts as the request, as the API server
// defaults it) and limits.
func PodDemand(spec *corev1.PodSpec) (requests, limits corev1.ResourceList) {
	requests, limits = corev1.ResourceList{}, corev1.ResourceList{}
	for _, c := range spec.Containers {
		for name, q := range c.Resources.Limits {
			addTo(limits, name, q)
			if _, ok := c.Resources.Requests[name]; !ok {
				addTo(requests, name, q)
			}
		}
		for name, q := range c.Resources.Requests {
			addTo(requests, name, q)
		}
	}
	return requests, limits
}

func addTo(l corev1.ResourceList, name corev1.ResourceName, q resource.Quantity) {
	cur := l[name]
	cur.Add(q)
	l[name] = cur
}

// GPUsOf says what a pod asks of GPUs, the one wording every interface
// shows: "2" (nvidia.com/gpu), "1 amd.com/gpu" for another resource named
// */gpu, both joined with ", ", and "" for none.
func GPUsOf(spec *corev1.PodSpec) string {
	requests, _ := PodDemand(spec)
	names := make([]string, 0, len(requests))
	for name := range requests {
		names = append(names, string(name))
	}
	sort.Strings(names)
	var parts []string
	for _, name := range names {
		q := requests[corev1.ResourceName(name)]
		if q.IsZero() || !strings.HasSuffix(name, "/gpu") {
			continue
		}
		if name == "nvidia.com/gpu" {
			parts = append([]string{q.String()}, parts...)
		} else {
			parts = append(parts, q.String()+" "+name)
		}
	}
	return strings.Join(parts, ", ")
}
