package admission

import (
	"context"
	"fmt"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/jobspec"
)

// RuntimeCopier gives a TrainJob created from another job's YAML a
// runtime of its own. A job with a per-job runtime (a data connection, its
// own images or resources) exported with `kubectl get trainjob X -o yaml`,
// renamed and created again with plain `kubectl create -f` names X's
// runtime, and each job needs its own: its artifacts and checkpoint place
// are named after the job. kubectl mpijob create -f and the SDK copy the
// runtime themselves; for every other client the mutating webhook does it,
// once the user may create TrainingRuntimes in the namespace (what they
// would need to make the copy themselves): the copy is X's runtime made
// the new job's (jobspec.CopyRuntime), created by the manager before the
// job, and adopted by it (pkg/perjob) once the job exists. The validating
// webhook then judges the copy as it judges any per-job runtime.
type RuntimeCopier struct {
	// Client creates the copy (the manager's own rights).
	Client client.Client
	// Live reads runtimes from the API server.
	Live client.Reader
	// Cache is the manager's cache: the copy is awaited there before the
	// job goes on to the validating webhooks (Trainer's reads its own
	// cache, which the same watch event fills).
	Cache client.Reader
	// MayCreate reports whether user may create TrainingRuntimes in
	// namespace (a SubjectAccessReview when nil).
	MayCreate func(ctx context.Context, user authenticationv1.UserInfo, namespace string) (bool, error)
}

// copySettle is how long a new copy is awaited in the manager's cache.
const copySettle = 2 * time.Second

// Copy gives tj, on a create, a copy of the per-job runtime of the other
// job its runtimeRef names, and points the job at it. It changes nothing
// on a server dry run (the validating webhook then judges the runtime the
// copy would be made from), when the runtime is no other job's per-job
// runtime, or when the user may not create runtimes.
func (c *RuntimeCopier) Copy(ctx context.Context, req admission.Request, tj *trainer.TrainJob) error {
	ref := tj.Spec.RuntimeRef
	if ptr.Deref(ref.Kind, "") != trainer.TrainingRuntimeKind || ref.Name == tj.Name || tj.Name == "" {
		return nil
	}
	src := &trainer.TrainingRuntime{}
	key := client.ObjectKey{Namespace: tj.Namespace, Name: ref.Name}
	// Every job on a namespaced runtime comes here (a tenant's PyTorch
	// runtime too): the cache answers most, the API server one made a
	// moment ago.
	var err error = apierrors.NewNotFound(trainer.GroupVersion.WithResource("trainingruntimes").GroupResource(), ref.Name)
	if c.Cache != nil {
		err = c.Cache.Get(ctx, key, src)
	}
	if apierrors.IsNotFound(err) {
		err = c.Live.Get(ctx, key, src)
	}
	if err != nil {
		// A missing runtime is the validating webhooks' to answer.
		return client.IgnoreNotFound(err)
	}
	if !jobspec.IsDerived(src.Labels) || src.Labels[api.JobLabel] == tj.Name || ptr.Deref(req.DryRun, false) {
		return nil
	}
	may := c.MayCreate
	if may == nil {
		may = c.subjectAccessReview
	}
	allowed, err := may(ctx, req.UserInfo, tj.Namespace)
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("failed to check whether %s may create TrainingRuntimes in %s: %w", req.UserInfo.Username, tj.Namespace, err))
	}
	if !allowed {
		// The validating webhook refuses the other job's runtime, naming it.
		return nil
	}
	job := &jobspec.Job{TrainJob: tj}
	if !jobspec.CopyRuntime(job, src) {
		return nil
	}
	rt := job.Runtime
	if rt.Annotations == nil {
		rt.Annotations = map[string]string{}
	}
	rt.Annotations[api.CopiedFromAnnotation] = src.Labels[api.JobLabel]
	switch err := c.Client.Create(ctx, rt); {
	case apierrors.IsAlreadyExists(err):
		got := &trainer.TrainingRuntime{}
		if err := c.Live.Get(ctx, client.ObjectKeyFromObject(rt), got); err != nil {
			return apierrors.NewInternalError(fmt.Errorf("failed to read TrainingRuntime %s: %w", rt.Name, err))
		}
		if !jobspec.IsDerived(got.Labels) || got.Labels[api.JobLabel] != tj.Name || len(got.OwnerReferences) > 0 {
			return invalid(tj, field.ErrorList{field.Duplicate(field.NewPath("metadata", "name"), fmt.Sprintf(
				"%s: this job needs a TrainingRuntime of its own named %s, a copy of job %s's, and one of that name already exists that is not this job's: name the job differently", tj.Name, tj.Name, src.Labels[api.JobLabel]))})
		}
		// A copy made for a create of this job that did not go through
		// (within pkg/perjob's grace): it is this job's.
	case err != nil:
		return apierrors.NewInternalError(fmt.Errorf("failed to create TrainingRuntime %s, the job's copy of %s: %w", rt.Name, src.Name, err))
	}
	if c.Cache != nil {
		// Trainer's webhook reads the runtime from its own cache: give the
		// watch event the moment it takes to arrive.
		_ = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, copySettle, true, func(ctx context.Context) (bool, error) {
			return c.Cache.Get(ctx, client.ObjectKeyFromObject(rt), &trainer.TrainingRuntime{}) == nil, nil
		})
	}
	return nil
}

// subjectAccessReview asks the API server whether user may create
// TrainingRuntimes in namespace.
func (c *RuntimeCopier) subjectAccessReview(ctx context.Context, user authenticationv1.UserInfo, namespace string) (bool, error) {
	return userMay(ctx, c.Client, user, authorizationv1.ResourceAttributes{
		Namespace: namespace, Verb: "create", Group: trainer.GroupVersion.Group, Resource: "trainingruntimes",
	})
}

// userMay asks the API server (a SubjectAccessReview) whether user may do
// what attrs say.
func userMay(ctx context.Context, cl client.Client, user authenticationv1.UserInfo, attrs authorizationv1.ResourceAttributes) (bool, error) {
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extra, ResourceAttributes: &attrs,
	}}
	if err := cl.Create(ctx, sar); err != nil {
		return false, err
	}
	return sar.Status.Allowed, nil
}
