// Package netpol gives every MPI job a NetworkPolicy that admits ingress to
// its pods only from the same job's pods: the Launcher's SSH to the Workers
// and the ranks' traffic between each other. A TrainJob opts out with the
// annotation mpijob.dev/network-policy: disabled. An administrator may give
// a namespace one policy for all its MPI jobs instead (the Namespace's
// annotation mpijob.dev/network-policy-scope: namespace): each job's pods
// then admit the pods of every MPI job of that namespace.
package netpol

import (
	"slices"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/mpijob/mpijob/pkg/api"
)

// ManagedByLabel on a policy names who made it: api.FieldManager on every
// policy mpijob-manager makes, and only such a shared policy it deletes.
const ManagedByLabel = "app.kubernetes.io/managed-by"

// Suffix names a job's policy: "<job>-mpi".
const Suffix = api.NetworkPolicySuffix

// Disabled reports whether the TrainJob opted out of its NetworkPolicy.
func Disabled(tj *trainer.TrainJob) bool {
	return tj.Annotations[api.NetworkPolicyAnnotation] == "disabled"
}

// Name is the name of tj's NetworkPolicy.
func Name(tj *trainer.TrainJob) string { return tj.Name + Suffix }

// Build returns the NetworkPolicy of an MPI TrainJob, owned by it so it
// goes away with the job.
func Build(tj *trainer.TrainJob) *networkingv1.NetworkPolicy {
	sameJob := metav1.LabelSelector{MatchLabels: map[string]string{jobsetv1alpha2.JobSetNameKey: tj.Name}}
	return &networkingv1.NetworkPolicy{
		TypeMeta: metav1.TypeMeta{APIVersion: networkingv1.SchemeGroupVersion.String(), Kind: "NetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      Name(tj),
			Namespace: tj.Namespace,
			Labels:    map[string]string{jobsetv1alpha2.JobSetNameKey: tj.Name, ManagedByLabel: api.FieldManager},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind,
				Name: tj.Name, UID: tj.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: sameJob,
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{{PodSelector: &sameJob}},
			}},
		},
	}
}

// Scopes of api.NetworkPolicyScopeAnnotation.
const (
	ScopeJob       = "job"
	ScopeNamespace = "namespace"
)

// NamespaceScoped reports whether ns's MPI jobs share one policy. Any
// value but "namespace" (none, "job", a typo) keeps a policy per job: the
// stricter isolation is what a mistake falls back to.
func NamespaceScoped(ns *corev1.Namespace) bool {
	return ns != nil && ns.Annotations[api.NetworkPolicyScopeAnnotation] == ScopeNamespace
}

// BuildNamespace returns the one NetworkPolicy of a namespace whose MPI
// jobs share one (jobs: their names). It selects the pods of those jobs by
// their JobSet's name and admits ingress to them only from the same pods.
// Nil when there is no job to guard: a selector needs a value.
func BuildNamespace(namespace string, jobs []string) *networkingv1.NetworkPolicy {
	if len(jobs) == 0 {
		return nil
	}
	names := slices.Clone(jobs)
	slices.Sort(names)
	names = slices.Compact(names)
	theJobs := metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: jobsetv1alpha2.JobSetNameKey, Operator: metav1.LabelSelectorOpIn, Values: names,
	}}}
	return &networkingv1.NetworkPolicy{
		TypeMeta: metav1.TypeMeta{APIVersion: networkingv1.SchemeGroupVersion.String(), Kind: "NetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      api.NamespaceNetworkPolicy,
			Namespace: namespace,
			Labels:    map[string]string{ManagedByLabel: api.FieldManager},
		},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: theJobs,
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{{PodSelector: &theJobs}},
			}},
		},
	}
}

// Guards reports whether policy np selects the pods of job (a per-job
// policy of that job, or a namespace's that lists it).
func Guards(np *networkingv1.NetworkPolicy, job string) bool {
	if job == "" {
		return false
	}
	if np.Spec.PodSelector.MatchLabels[jobsetv1alpha2.JobSetNameKey] == job {
		return true
	}
	for _, r := range np.Spec.PodSelector.MatchExpressions {
		if r.Key == jobsetv1alpha2.JobSetNameKey && r.Operator == metav1.LabelSelectorOpIn && slices.Contains(r.Values, job) {
			return true
		}
	}
	return false
}
