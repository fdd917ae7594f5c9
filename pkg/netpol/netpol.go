// Package netpol gives every MPI job a NetworkPolicy that admits ingress to
// its pods only from the same job's pods: the Launcher's SSH to the Workers
// and the ranks' traffic between each other. A TrainJob opts out with the
// annotation mpijob.dev/network-policy: disabled.
package netpol

import (
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/mpijob/mpijob/pkg/api"
)

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
			Labels:    map[string]string{jobsetv1alpha2.JobSetNameKey: tj.Name, "app.kubernetes.io/managed-by": api.FieldManager},
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
