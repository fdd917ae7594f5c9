package netpol

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func TestBuild(t *testing.T) {
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "team-a", UID: types.UID("u-1")}}
	np := Build(tj)
	sel := metav1.LabelSelector{MatchLabels: map[string]string{"jobset.sigs.k8s.io/jobset-name": "hello"}}
	wantSpec := networkingv1.NetworkPolicySpec{
		PodSelector: sel,
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &sel}}}},
	}
	if diff := cmp.Diff(wantSpec, np.Spec); diff != "" {
		t.Errorf("spec (-want,+got):\n%s", diff)
	}
	wantOwner := []metav1.OwnerReference{{APIVersion: "trainer.kubeflow.org/v1alpha1", Kind: "TrainJob", Name: "hello", UID: "u-1",
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
	if diff := cmp.Diff(wantOwner, np.OwnerReferences); diff != "" {
		t.Errorf("owner (-want,+got):\n%s", diff)
	}
	if np.Name != "hello-mpi" || np.Namespace != "team-a" {
		t.Errorf("name %s/%s, want team-a/hello-mpi", np.Namespace, np.Name)
	}
}

func TestDisabled(t *testing.T) {
	cases := map[string]struct {
		annotations map[string]string
		want        bool
	}{
		"default":      {want: false},
		"disabled":     {annotations: map[string]string{"mpijob.dev/network-policy": "disabled"}, want: true},
		"other values": {annotations: map[string]string{"mpijob.dev/network-policy": "enabled"}, want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Annotations: tc.annotations}}
			if got := Disabled(tj); got != tc.want {
				t.Errorf("Disabled = %v, want %v", got, tc.want)
			}
		})
	}
}
