package runtimes

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
)

// PodsByJobSet is the manager's cache index of pods by their JobSet's name
// (the jobset.sigs.k8s.io/jobset-name label). A label selector makes the
// cache look at every pod of the namespace: 4,500 pods for each of 500
// jobs' lookups in one namespace (bench/scale).
const PodsByJobSet = "mpijob.dev/jobset-name"

// IndexByJobSet is the index function of PodsByJobSet and JobsByJobSet:
// an object's JobSet, from its jobset.sigs.k8s.io/jobset-name label.
func IndexByJobSet(o client.Object) []string {
	if v, ok := o.GetLabels()[jobsetv1alpha2.JobSetNameKey]; ok {
		return []string{v}
	}
	return nil
}

// JobsByJobSet is the manager's cache index of Jobs (batch/v1, held as
// metadata) by their JobSet's name, for JobSetPods: its label selector
// looked at every Job of the namespace for each lookup of a job's pods,
// 11 % of mpijob-manager's CPU at 200 jobs × 8 Workers in one namespace
// (a CPU profile of the leader over bench/scale, docs/development.md).
// It shares PodsByJobSet's name and index function: an index belongs to
// the informer of its kind.
const JobsByJobSet = PodsByJobSet

// JobMetadata is the object JobsByJobSet is set on: a Job as the manager's
// cache holds it, metadata only.
func JobMetadata() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(batchv1.SchemeGroupVersion.WithKind("Job"))
	return m
}

// ListJobSetPods lists the pods of JobSet name in namespace ns: through
// the PodsByJobSet index where c is a cache that has it, else by label
// (a cache without the index). A client of the API server calls
// ListJobSetPodsByLabel instead. opts go to both lists: a caller that
// only reads passes client.UnsafeDisableDeepCopy, and a cache then hands
// out its own objects instead of a deep copy of each (the diagnosis
// listed a job's pods at every round: the largest part of the manager's
// allocations, bench/scale). Such a caller must not change anything the
// pods point to (maps, slices, pointers); a cache without the option
// gives copies as before.
func ListJobSetPods(ctx context.Context, c client.Reader, ns, name string, opts ...client.ListOption) (*corev1.PodList, error) {
	l := &corev1.PodList{}
	if err := c.List(ctx, l, append([]client.ListOption{client.InNamespace(ns), client.MatchingFields{PodsByJobSet: name}}, opts...)...); err == nil {
		return l, nil
	}
	return ListJobSetPodsByLabel(ctx, c, ns, name, opts...)
}

// ListJobSetPodsByLabel lists the pods of JobSet name in namespace ns by
// their label: for a client of the API server, which has no PodsByJobSet
// index and refuses it as a field selector (400). ListJobSetPods on such a
// client made that refused LIST first, every time: the API server counted
// 424 refused in one bench/scale run, from the diagnosis's stacks of
// stuck jobs.
func ListJobSetPodsByLabel(ctx context.Context, c client.Reader, ns, name string, opts ...client.ListOption) (*corev1.PodList, error) {
	l := &corev1.PodList{}
	if err := c.List(ctx, l, append([]client.ListOption{client.InNamespace(ns), client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: name}}, opts...)...); err != nil {
		return nil, err
	}
	return l, nil
}

// JobSetPods keeps the pods of pods that JobSet js made: each pod's
// controller is a Job (batch/v1) that js controls, by UID. A pod anyone
// who may create pods in the namespace can make with the JobSet's labels
// is not the job's, and nothing the manager writes about the job (its
// status, progress, rank failure) may come from it. Nor does a pod whose
// Job is gone, even while it stops: its owner can no longer be checked,
// and a pod made with a made-up owner (which the garbage collector then
// deletes, slowly with a long grace period) looks just the same.
//
// The Jobs are read as metadata only (the manager's cache holds their
// names, UIDs and owners). Residual: a tenant who may create Jobs could
// give one a controller reference to js; JobSet itself would then count
// that Job as its own too.
func JobSetPods(ctx context.Context, c client.Reader, js *jobsetv1alpha2.JobSet, pods []corev1.Pod) ([]corev1.Pod, error) {
	if js == nil {
		return nil, nil
	}
	list := func(by client.ListOption) (*metav1.PartialObjectMetadataList, error) {
		jobs := &metav1.PartialObjectMetadataList{}
		jobs.SetGroupVersionKind(batchv1.SchemeGroupVersion.WithKind("JobList"))
		// Only read (OwnedByJobSet): the cache's own objects, not copies.
		return jobs, c.List(ctx, jobs, client.InNamespace(js.Namespace), by, client.UnsafeDisableDeepCopy)
	}
	// Through the JobsByJobSet index where c is a cache that has it (the
	// manager's), else by label.
	jobs, err := list(client.MatchingFields{JobsByJobSet: js.Name})
	if err != nil {
		if jobs, err = list(client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: js.Name}); err != nil {
			return nil, fmt.Errorf("failed to list the Jobs of JobSet %s/%s: %w", js.Namespace, js.Name, err)
		}
	}
	return OwnedByJobSet(pods, jobs.Items, js), nil
}

// OwnedByJobSet is JobSetPods's rule, given the Jobs that carry js's name.
// Where every pod is js's (a job's pods nearly always are), the result is
// pods itself: the diagnosis asked for it at every round, and a list of
// copies of a job's pods was 2 % of the leader's allocations (bench/scale,
// 2026-12-03). Otherwise it is a new list.
func OwnedByJobSet(pods []corev1.Pod, jobs []metav1.PartialObjectMetadata, js *jobsetv1alpha2.JobSet) []corev1.Pod {
	byName := make(map[string]*metav1.PartialObjectMetadata, len(jobs))
	for i := range jobs {
		if owner := metav1.GetControllerOfNoCopy(&jobs[i]); owner != nil && owner.UID == js.UID && owner.Kind == "JobSet" {
			byName[jobs[i].Name] = &jobs[i]
		}
	}
	owned := func(p *corev1.Pod) bool {
		ref := metav1.GetControllerOfNoCopy(p)
		if ref == nil || ref.Kind != "Job" || ref.APIVersion != batchv1.SchemeGroupVersion.String() {
			return false
		}
		j, ok := byName[ref.Name]
		return ok && j.UID == ref.UID
	}
	for i := range pods {
		if owned(&pods[i]) {
			continue
		}
		// The first pod that is not js's: the ones before it, then the
		// rest that are.
		out := make([]corev1.Pod, i, len(pods)-1)
		copy(out, pods[:i])
		for j := i + 1; j < len(pods); j++ {
			if owned(&pods[j]) {
				out = append(out, pods[j])
			}
		}
		return out
	}
	return pods
}
