package diagnose

import (
	"slices"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/mpijob/mpijob/pkg/api"
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

// TrimPod is the manager's one cache transform for pods: a JobSet's pod
// keeps what the diagnosis reads (TrimJobSetPod), any other pod only what
// free capacity counts (CapacityPod). One cache of every pod then serves
// both, instead of a JobSet's pods held twice (4,500 of them at 500 jobs ×
// 8 Workers).
func TrimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	if _, ok := p.Labels[jobsetv1alpha2.JobSetNameKey]; ok {
		return TrimJobSetPod(p)
	}
	return CapacityPod(p)
}

// KeptPodLabels are the labels of a JobSet's pod that the manager reads
// (its job, its role, its Worker index); the cache keeps no other label,
// and of its annotations only the index (an older Job controller's place
// for it). JobSet, the Job controller and Kueue put about 19 labels and 14
// annotations on every pod, most of a cached pod's memory. A reader of
// another label must add it here.
var KeptPodLabels = []string{jobsetv1alpha2.JobSetNameKey, jobsetv1alpha2.ReplicatedJobNameKey, completionIndexLabel}

// KeptPodAnnotations are the annotations of a JobSet's pod the cache may
// keep: the Worker index, read only where its label is missing.
var KeptPodAnnotations = []string{completionIndexLabel}

// TrimJobSetPod is a cache transform for the pods of JobSets: it drops
// what no reader of the manager's cache uses: managed fields, labels and
// annotations other than KeptPodLabels, the containers' environment,
// mounts, ports, security contexts and probes other than readiness, every
// volume but PersistentVolumeClaims (which the diagnosis names when they
// are unbound), the pod's affinity other than to nodes, and from the
// status the resources the kubelet reports back (the pod's and each
// container's, the same as the spec's unless resized in place), mount and
// user reports, container and image IDs, and the lists of IPs (the first
// IP stays). Images, commands, the spec's resources, the readiness probe,
// scheduling constraints, conditions and container states stay; what
// Workers repeat is held once (limits written as the requests share their
// map, the index annotation goes where the label has it, and containers,
// owner, affinity, node selector, tolerations, conditions and container
// states equal to another cached pod's are that pod's: shareRepeats).
// BenchmarkCachedPod measures real Workers in jobs of 8: 32.2 kB as sent,
// 5.5 kB trimmed with copies of their own, 2.5 kB cached (12.4 kB before
// the status's resources and the rest were dropped, 6.6 kB before the
// first repeats were held once).
func TrimJobSetPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	trimJobSetPod(p)
	shareRepeats(p)
	return p, nil
}

// trimJobSetPod drops from p what no reader uses (TrimJobSetPod without
// sharing the repeats with other pods).
func trimJobSetPod(p *corev1.Pod) {
	p.ManagedFields = nil
	p.Labels = only(p.Labels, KeptPodLabels...)
	// The index annotation is read only where the label is missing.
	if _, ok := p.Labels[completionIndexLabel]; ok {
		p.Annotations = nil
	} else {
		p.Annotations = only(p.Annotations, KeptPodAnnotations...)
	}
	trimContainers(p.Spec.InitContainers)
	trimContainers(p.Spec.Containers)
	var claims []corev1.Volume
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			claims = append(claims, corev1.Volume{Name: v.Name, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: v.PersistentVolumeClaim}})
		}
	}
	p.Spec.Volumes = claims
	p.Spec.SecurityContext = nil
	if a := p.Spec.Affinity; a != nil {
		p.Spec.Affinity = nil
		if a.NodeAffinity != nil {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: a.NodeAffinity}
		}
	}
	p.Status.Resources, p.Status.AllocatedResources = nil, nil
	p.Status.PodIPs, p.Status.HostIPs = nil, nil
	trimContainerStatuses(p.Status.InitContainerStatuses)
	trimContainerStatuses(p.Status.ContainerStatuses)
	trimContainerStatuses(p.Status.EphemeralContainerStatuses)
}

// only is a new map of m's keys among keys (nil when it has none).
func only(m map[string]string, keys ...string) map[string]string {
	var out map[string]string
	for _, k := range keys {
		if v, ok := m[k]; ok {
			if out == nil {
				out = make(map[string]string, len(keys))
			}
			out[k] = v
		}
	}
	return out
}

func trimContainers(cs []corev1.Container) {
	for i := range cs {
		cs[i].Env, cs[i].EnvFrom, cs[i].VolumeMounts, cs[i].VolumeDevices = nil, nil, nil, nil
		cs[i].Ports, cs[i].SecurityContext, cs[i].LivenessProbe, cs[i].StartupProbe, cs[i].Lifecycle = nil, nil, nil, nil, nil
		// Limits written as the requests (a Guaranteed pod's, every
		// Worker of the shipped runtimes) are held once: a map of
		// quantities is about 850 bytes. Readers get copies (the
		// cache's DeepCopy) or must not change them.
		if r := &cs[i].Resources; sameQuantities(r.Limits, r.Requests) {
			r.Limits = r.Requests
		}
	}
}

// sameQuantities reports whether a and b have the same resources, each
// written the same way (so a message shows the limit as it was given).
func sameQuantities(a, b corev1.ResourceList) bool {
	if len(a) != len(b) || len(a) == 0 {
		return false
	}
	for k, q := range a {
		o, ok := b[k]
		if !ok || q.String() != o.String() {
			return false
		}
	}
	return true
}

func trimContainerStatuses(cs []corev1.ContainerStatus) {
	for i := range cs {
		cs[i].Resources, cs[i].AllocatedResources, cs[i].AllocatedResourcesStatus = nil, nil, nil
		cs[i].VolumeMounts, cs[i].User = nil, nil
		cs[i].ContainerID, cs[i].ImageID = "", ""
	}
}

// KeptTrainJobAnnotations are the annotations of a TrainJob that the
// manager reads (its own bookkeeping; admission keeps tenants from
// writing most of them); KeptTrainJobAnnotationPrefixes those of whole
// families (runtime policy on a job, OpenShift AI's progress). The cache
// keeps no other: a tenant's annotations are the tenant's to write, any
// size, and 700 jobs with 240 KB of them each once filled the manager's
// memory limit. A reader of another annotation must add it here.
var (
	KeptTrainJobAnnotations = []string{
		api.StatusAnnotation, api.CreatorAnnotation, api.RankFailureAnnotation, api.ResumedAnnotation, api.StacksAnnotation,
		api.EndedByAnnotation, api.SuspendedByAnnotation, api.NetworkPolicyAnnotation, api.CopiedFromAnnotation,
		api.RegisterModelAnnotation, api.RegisterArtifactAnnotation, api.ModelRegistrationAnnotation,
	}
	KeptTrainJobAnnotationPrefixes = []string{"policy.mpijob.dev/", "trainer.opendatahub.io/"}
)

// TrimTrainJob is a cache transform for TrainJobs: it drops managed fields
// and every annotation the manager does not read (KeptTrainJobAnnotations).
// The manager writes TrainJobs only by server-side apply and patches, so
// nothing it drops here is ever written back.
func TrimTrainJob(obj any) (any, error) {
	tj, ok := obj.(*trainer.TrainJob)
	if !ok {
		return obj, nil
	}
	tj.ManagedFields = nil
	for k := range tj.Annotations {
		if !keptTrainJobAnnotation(k) {
			delete(tj.Annotations, k)
		}
	}
	return tj, nil
}

func keptTrainJobAnnotation(key string) bool {
	if slices.Contains(KeptTrainJobAnnotations, key) {
		return true
	}
	for _, p := range KeptTrainJobAnnotationPrefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}
