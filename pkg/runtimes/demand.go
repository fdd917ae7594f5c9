package runtimes

import (
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
