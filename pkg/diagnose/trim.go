package diagnose

import (
	corev1 "k8s.io/api/core/v1"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
)

// The manager's cache keeps every MPI job's JobSet and pods for as long as
// the job lives. The transforms below keep of them what the manager's
// readers use (the diagnosis, the webhook's earlier pods, progress, the
// log API): a reader that needs a field they drop must keep it here first,
// or read the object from the API server. Every diagnosis test holds them
// to that: diagnoseBoth diagnoses its input as it is and as trimmed.

// TrimJobSet is a cache transform for JobSets: the diagnosis reads their
// status, their owner and each replicated Job's name, replicas and
// parallelism (the Worker count), never the pod template, which is most of
// a JobSet's size (and is read from the job's pods themselves).
func TrimJobSet(obj any) (any, error) {
	js, ok := obj.(*jobsetv1alpha2.JobSet)
	if !ok {
		return obj, nil
	}
	js.ManagedFields = nil
	for i := range js.Spec.ReplicatedJobs {
		js.Spec.ReplicatedJobs[i].Template.Spec.Template = corev1.PodTemplateSpec{}
	}
	return js, nil
}

// TrimJobSetPod is a cache transform for the pods of JobSets: it drops
// what no reader of the manager's cache uses (managed fields, the
// containers' environment and mounts, and every volume but
// PersistentVolumeClaims, which the diagnosis names when they are unbound).
// Images, commands, resources, probes, scheduling constraints and the whole
// status stay.
func TrimJobSetPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	p.ManagedFields = nil
	trimContainers(p.Spec.InitContainers)
	trimContainers(p.Spec.Containers)
	var claims []corev1.Volume
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			claims = append(claims, corev1.Volume{Name: v.Name, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: v.PersistentVolumeClaim}})
		}
	}
	p.Spec.Volumes = claims
	return p, nil
}

func trimContainers(cs []corev1.Container) {
	for i := range cs {
		cs[i].Env, cs[i].EnvFrom, cs[i].VolumeMounts, cs[i].VolumeDevices = nil, nil, nil, nil
	}
}
