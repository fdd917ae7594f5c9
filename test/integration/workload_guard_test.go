//go:build e2e

package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/test/framework"
)

// A ServiceAccount of another namespace with edit in a tenant's namespace
// is a person to the Workload webhook: it may change spec.active of a
// Workload and nothing else. Before, every ServiceAccount from elsewhere
// skipped the webhook and rewrote what Kueue admitted against the quota
// (podSets[0].count 1 → 50, priority 1,000,000).
func TestWorkloadGuardHoldsForServiceAccountsOfOtherNamespaces(t *testing.T) {
	c := framework.Get(t)
	ctx := context.Background()
	ns := c.NewNamespace(t, "wlguard")
	newQueue(t, c, ns, 8)
	other := c.NewNamespace(t, "elsewhere")
	if err := c.Client.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "bot-edit", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "bot", Namespace: other}},
	}); err != nil {
		t.Fatal(err)
	}
	job := framework.MakeTrainJob("guarded", ns, "mpi-openmpi").NumNodes(1).Suspend().Queue("q").Obj()
	if err := c.Client.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Client.Delete(context.Background(), job) })
	wls := &unstructured.UnstructuredList{}
	wls.SetGroupVersionKind(schema.GroupVersionKind{Group: "kueue.x-k8s.io", Version: "v1beta2", Kind: "WorkloadList"})
	var wl *unstructured.Unstructured
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := c.Client.List(ctx, wls, client.InNamespace(ns)); err != nil {
			return false, err
		}
		for i := range wls.Items {
			for _, o := range wls.Items[i].GetOwnerReferences() {
				if o.Name == job.Name {
					wl = &wls.Items[i]
				}
			}
		}
		return wl != nil, nil
	}); err != nil {
		t.Fatalf("Kueue made no Workload for %s: %v", job.Name, err)
	}
	cfg := rest.CopyConfig(c.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + other + ":bot",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + other, "system:authenticated"}}
	bot, err := client.New(cfg, client.Options{Scheme: framework.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	// The priority is what Kueue's own webhook lets anyone change (the red
	// team's 1,000,000): mpijob's refusal is the only one.
	err = bot.Patch(ctx, wl.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"priority":1000000}}`)))
	if err == nil || !strings.Contains(err.Error(), "spec.priority cannot be changed by system:serviceaccount:"+other+":bot") {
		t.Errorf("a ServiceAccount of namespace %s changed the Workload's priority: %v", other, err)
	}
	// The pod sets: refused (by mpijob's webhook, or by Kueue's, which
	// holds them once the Workload is admitted; they answer side by side).
	if err := bot.Patch(ctx, wl.DeepCopy(), client.RawPatch(types.JSONPatchType, []byte(`[{"op":"replace","path":"/spec/podSets/0/count","value":50}]`))); err == nil {
		t.Errorf("a ServiceAccount of namespace %s changed the Workload's pod count", other)
	}
	// What people may do, it may do too.
	if err := bot.Patch(ctx, wl.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"active":false}}`))); err != nil {
		t.Errorf("the ServiceAccount set spec.active: %v, want allowed", err)
	}
}
