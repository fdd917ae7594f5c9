// Package stack switches the running local cluster between the full
// release install and the bare engine (Trainer, JobSet and Kueue with
// mpijob's admission webhooks and manager removed), so benchmarks can
// measure both on one cluster in one run.
package stack

import (
	"context"
	"fmt"
	"strings"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/jobstatus"
	"github.com/mpijob/mpijob/pkg/localcluster"
)

// webhookKinds are mpijob's admission configurations.
var webhookKinds = []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}

// Saved is what Bare removed, for Restore.
type Saved struct {
	// webhooks are the removed objects: webhook configurations and the
	// log API's APIService.
	webhooks     []*unstructured.Unstructured
	webhooksOnly bool
}

// logAPIService is the log store's read API, which mpijob-manager serves:
// while no replica answers it, API discovery fails and every namespace's
// deletion waits, so bare removes it with the manager.
const logAPIService = "v1alpha1.logs.mpijob.dev"

// Bare removes mpijob's webhook configurations, the binding of its
// manager-down policy and, unless webhooksOnly,
// the log store's APIService (where installed) and scales mpijob-manager
// to no replicas.
func Bare(ctx context.Context, cl client.Client, webhooksOnly bool) (*Saved, error) {
	s := &Saved{webhooksOnly: webhooksOnly}
	for _, k := range webhookKinds {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("admissionregistration.k8s.io/v1")
		u.SetKind(k)
		name := "mpijob-" + strings.ToLower(strings.TrimSuffix(k, "WebhookConfiguration")) + "-webhook-configuration"
		if err := cl.Get(ctx, client.ObjectKey{Name: name}, u); err != nil {
			return s, err
		}
		s.webhooks = append(s.webhooks, u)
		if err := cl.Delete(ctx, u); err != nil {
			return s, err
		}
	}
	// The policy that refuses MPI jobs while no manager replica is ready
	// (its binding, which Restore puts back): the bare engine admits them.
	binding := &unstructured.Unstructured{}
	binding.SetAPIVersion("admissionregistration.k8s.io/v1")
	binding.SetKind("ValidatingAdmissionPolicyBinding")
	switch err := cl.Get(ctx, client.ObjectKey{Name: api.ManagerRunningPolicy}, binding); {
	case err == nil:
		s.webhooks = append(s.webhooks, binding)
		if err := cl.Delete(ctx, binding); err != nil {
			return s, err
		}
	case !apierrors.IsNotFound(err):
		return s, err
	}
	if webhooksOnly {
		return s, nil
	}
	svc := &unstructured.Unstructured{}
	svc.SetAPIVersion("apiregistration.k8s.io/v1")
	svc.SetKind("APIService")
	switch err := cl.Get(ctx, client.ObjectKey{Name: logAPIService}, svc); {
	case err == nil:
		s.webhooks = append(s.webhooks, svc)
		if err := cl.Delete(ctx, svc); err != nil {
			return s, err
		}
	case !apierrors.IsNotFound(err):
		return s, err
	}
	return s, localcluster.ScaleManager(ctx, cl, 0, 3*time.Minute)
}

// Restore puts back what Bare removed and returns once mpijob's webhooks
// answer and, unless only they were removed, its controllers write
// statuses again (a restarted manager first looks at every job once: what
// is measured after Restore is a running manager, not its start). probe
// is built into namespace ns to check.
func (s *Saved) Restore(ctx context.Context, cl client.Client, ns string, probe func(ns, name string) *trainer.TrainJob) error {
	if s == nil {
		return nil
	}
	if !s.webhooksOnly {
		if err := localcluster.ScaleManager(ctx, cl, 2, 3*time.Minute); err != nil {
			return err
		}
	}
	for _, saved := range s.webhooks {
		u := saved.DeepCopy()
		u.SetResourceVersion("")
		u.SetUID("")
		u.SetManagedFields(nil)
		if err := cl.Create(ctx, u); client.IgnoreAlreadyExists(err) != nil {
			return err
		}
		if err := keepOwners(ctx, cl, saved); err != nil {
			return err
		}
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return cl.Create(ctx, probe(ns, "probe"), client.DryRunAll) == nil, nil
	}); err != nil {
		return fmt.Errorf("mpijob's webhooks do not answer: %w", err)
	}
	if s.webhooksOnly {
		return nil
	}
	p := probe(ns, "probe")
	p.Spec.Suspend = ptr.To(true)
	if err := cl.Create(ctx, p); err != nil {
		return err
	}
	defer func() {
		_ = cl.Delete(context.Background(), p, client.PropagationPolicy(metav1.DeletePropagationBackground))
	}()
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		cur := &trainer.TrainJob{}
		if err := cl.Get(ctx, client.ObjectKeyFromObject(p), cur); err != nil {
			return false, err
		}
		if err := jobstatus.Get(ctx, cl, cur); err != nil {
			return false, err
		}
		_, ok := cur.Annotations[api.StatusAnnotation]
		return ok, nil
	}); err != nil {
		return fmt.Errorf("the restarted mpijob-manager wrote no status: %w", err)
	}
	return nil
}

// keepOwners gives a restored object back the field owners it had when
// Bare saved it: a create makes this program the owner of every field,
// so the installer's next server-side apply (`mpijob-dev reload`, as
// mpijob-dev) could not remove a field the new release drops (seen: a
// webhook match condition renamed in config/webhook stayed beside the new
// one). An update that sets managedFields replaces them.
func keepOwners(ctx context.Context, cl client.Client, saved *unstructured.Unstructured) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &unstructured.Unstructured{}
		cur.SetGroupVersionKind(saved.GroupVersionKind())
		if err := cl.Get(ctx, client.ObjectKeyFromObject(saved), cur); err != nil {
			return err
		}
		cur.SetManagedFields(saved.GetManagedFields())
		return cl.Update(ctx, cur)
	})
}
