package diagnose

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// CapacityPods selects the pods that hold a node's capacity: bound, and
// neither succeeded nor failed. The manager keeps them in a cache of their
// own (see CapacityPod), so free capacity is counted without a List call.
var CapacityPods = fields.AndSelectors(
	fields.OneTermNotEqualSelector("spec.nodeName", ""),
	fields.OneTermNotEqualSelector("status.phase", string(corev1.PodSucceeded)),
	fields.OneTermNotEqualSelector("status.phase", string(corev1.PodFailed)))

// CapacityPod is a cache transform that keeps of a pod only what free
// capacity needs (its node, its phase and its containers' resources):
// every pod of a big cluster then costs a few hundred bytes.
func CapacityPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{
		TypeMeta: p.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
		},
		Spec:   corev1.PodSpec{NodeName: p.Spec.NodeName},
		Status: corev1.PodStatus{Phase: p.Status.Phase},
	}
	for _, c := range p.Spec.Containers {
		out.Spec.Containers = append(out.Spec.Containers, corev1.Container{Name: c.Name, Resources: c.Resources})
	}
	return out, nil
}

// CapacityNode is a cache transform that drops what a node carries and
// the diagnosis never reads: its image list (often tens of kilobytes) and
// managed fields.
func CapacityNode(obj any) (any, error) {
	if n, ok := obj.(*corev1.Node); ok {
		n.Status.Images = nil
		n.ManagedFields = nil
	}
	return obj, nil
}
