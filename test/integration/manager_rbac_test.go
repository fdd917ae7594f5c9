//go:build e2e

package integration

import (
	"context"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mpijob/mpijob/test/framework"
)

// mpijob-manager's ServiceAccount (which the local cluster's manager runs
// as) has what the manager needs and nothing it must not have.
func TestManagerLeastPrivilege(t *testing.T) {
	c := framework.Get(t)
	const sa = "system:serviceaccount:mpijob-system:mpijob-manager"
	cases := map[string]struct {
		attrs authorizationv1.ResourceAttributes
		want  bool
	}{
		"patch TrainJobs (status annotation)":               {authorizationv1.ResourceAttributes{Group: "trainer.kubeflow.org", Resource: "trainjobs", Verb: "patch", Namespace: "team-a"}, true},
		"read a Launcher's log":                             {authorizationv1.ResourceAttributes{Resource: "pods", Subresource: "log", Verb: "get", Namespace: "team-a"}, true},
		"apply NetworkPolicies":                             {authorizationv1.ResourceAttributes{Group: "networking.k8s.io", Resource: "networkpolicies", Verb: "patch", Namespace: "team-a"}, true},
		"pods/exec where a namespace allows it (stacks)":    {authorizationv1.ResourceAttributes{Resource: "pods", Subresource: "exec", Verb: "create", Namespace: "team-a"}, true},
		"no pods/exec elsewhere":                            {authorizationv1.ResourceAttributes{Resource: "pods", Subresource: "exec", Verb: "create", Namespace: "kube-system"}, false},
		"no pods/exec in a namespace that did not allow it": {authorizationv1.ResourceAttributes{Resource: "pods", Subresource: "exec", Verb: "create", Namespace: "default"}, false},
		"no Secrets anywhere":                               {authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "get"}, false},
		"Secrets where a namespace allows registration":     {authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "get", Namespace: "team-a"}, true},
		"no Secrets in a namespace that did not allow it":   {authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "get", Namespace: "default"}, false},
		"no Secrets listed where registration is allowed":   {authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "list", Namespace: "team-a"}, false},
		"cannot delete TrainJobs":                           {authorizationv1.ResourceAttributes{Group: "trainer.kubeflow.org", Resource: "trainjobs", Verb: "delete", Namespace: "team-a"}, false},
		"cannot create pods":                                {authorizationv1.ResourceAttributes{Resource: "pods", Verb: "create", Namespace: "team-a"}, false},
		"cannot change runtimes":                            {authorizationv1.ResourceAttributes{Group: "trainer.kubeflow.org", Resource: "clustertrainingruntimes", Verb: "update"}, false},
		"leases only in its namespace":                      {authorizationv1.ResourceAttributes{Group: "coordination.k8s.io", Resource: "leases", Verb: "update", Namespace: "team-a"}, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			attrs := tc.attrs
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User: sa, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:mpijob-system", "system:authenticated"},
				ResourceAttributes: &attrs,
			}}
			got, err := c.Clientset.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), sar, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got.Status.Allowed != tc.want {
				t.Errorf("allowed = %v, want %v (%s)", got.Status.Allowed, tc.want, got.Status.Reason)
			}
		})
	}
}
