package admission

import (
	"context"
	"fmt"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// ServiceAccountCheck admits a job whose own runtime gives its pods a
// ServiceAccount (--service-account: a token in every rank) only when the
// ServiceAccount exists and the requesting user may create its tokens:
// what reading its token takes anyway. Anyone who may create TrainJobs
// could otherwise run a program as any ServiceAccount of the namespace
// through Trainer, which creates the pods.
type ServiceAccountCheck struct {
	// Live reads ServiceAccounts from the API server.
	Live client.Reader
	// Reviews creates SubjectAccessReviews.
	Reviews client.Client
	// MayUse reports whether user may create tokens of ServiceAccount sa
	// in namespace (a SubjectAccessReview when nil).
	MayUse func(ctx context.Context, user authenticationv1.UserInfo, namespace, sa string) (bool, error)
}

// CheckAccounts returns the errors of ServiceAccounts sas that tj's pods
// would name or get a token of (fromPatches: through tj's runtime patches,
// else through its runtime, which --service-account writes); a nil check
// refuses any.
func (c *ServiceAccountCheck) CheckAccounts(ctx context.Context, tj *trainer.TrainJob, sas []string, fromPatches bool) (field.ErrorList, error) {
	if len(sas) == 0 {
		return nil, nil
	}
	path := field.NewPath("spec", "runtimeRef", "name")
	source, without := "--service-account %s", "leave --service-account out (no token)"
	if fromPatches {
		path = field.NewPath("spec", "runtimePatches")
		source, without = "a runtime patch gives the pods ServiceAccount %s or its token", "take the ServiceAccount and its token volume out of the job's runtimePatches"
	}
	if c == nil {
		return field.ErrorList{field.Forbidden(path, fmt.Sprintf("the job's runtime gives its pods ServiceAccount %s, and this cluster's mpijob-manager checks no ServiceAccount", sas[0]))}, nil
	}
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return nil, err
	}
	may := c.MayUse
	if may == nil {
		may = c.subjectAccessReview
	}
	var errs field.ErrorList
	for _, sa := range sas {
		if err := c.Live.Get(ctx, client.ObjectKey{Namespace: tj.Namespace, Name: sa}, &corev1.ServiceAccount{}); err != nil {
			if !apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("failed to read ServiceAccount %s: %w", sa, err)
			}
			errs = append(errs, field.Forbidden(path, fmt.Sprintf(source+": namespace %s has no ServiceAccount %s (kubectl get serviceaccounts -n %s)", sa, tj.Namespace, sa, tj.Namespace)))
			continue
		}
		ok, err := may(ctx, req.UserInfo, tj.Namespace, sa)
		if err != nil {
			return nil, fmt.Errorf("failed to check whether %s may use ServiceAccount %s: %w", req.UserInfo.Username, sa, err)
		}
		if !ok {
			errs = append(errs, field.Forbidden(path, fmt.Sprintf(
				source+": %s may not create tokens of ServiceAccount %s in %s, so may not give its token to a job's ranks: ask an administrator for create on serviceaccounts/token (resourceNames: [%s]), or %s",
				sa, req.UserInfo.Username, sa, tj.Namespace, sa, without)))
		}
	}
	return errs, nil
}

func (c *ServiceAccountCheck) subjectAccessReview(ctx context.Context, user authenticationv1.UserInfo, namespace, sa string) (bool, error) {
	return userMay(ctx, c.Reviews, user, authorizationv1.ResourceAttributes{
		Namespace: namespace, Verb: "create", Resource: "serviceaccounts", Subresource: "token", Name: sa,
	})
}
