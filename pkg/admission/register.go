package admission

import (
	"context"
	"fmt"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/registry"
)

// RegistrationRole is the ClusterRole an administrator binds to
// mpijob-manager's ServiceAccount in a namespace whose jobs may register
// their model when they succeed (--register-model): it reads the job's
// data connection there to find the model file. The manager reads no
// namespace's Secrets otherwise (config/rbac/manager).
const RegistrationRole = "mpijob-model-registration"

// RegistrationCheck admits a job that asks mpijob-manager to register its
// model once it succeeds (api.RegisterModelAnnotation) only when the
// request is one the manager can carry out as the user would: a well-formed
// NAME[:VERSION], a registry configured on the manager, a user who may
// write to that registry (the SubjectAccessReview its gateway makes:
// create on services/proxy of its Service), and a namespace that lets the
// manager read its data connections. The manager registers with its own
// token later, so nobody gets through mpijob what the registry would not
// let them write directly.
type RegistrationCheck struct {
	// Service is the registry's Service, NAMESPACE/NAME ("" when the
	// manager has no registry: every such job is refused).
	Service string
	// Reviews creates SubjectAccessReviews.
	Reviews client.Client
	// Manager is the user mpijob-manager acts as.
	Manager string
	// May reports whether user may do attrs (a SubjectAccessReview when nil).
	May func(ctx context.Context, user authenticationv1.UserInfo, attrs authorizationv1.ResourceAttributes) (bool, error)
}

// Check returns the errors of tj's registration request; nil when it asks
// none, or when the request is unchanged from old (nil on a create).
func (c *RegistrationCheck) Check(ctx context.Context, old, tj *trainer.TrainJob) (field.ErrorList, error) {
	want, asked := tj.Annotations[api.RegisterModelAnnotation]
	if !asked {
		return nil, nil
	}
	if old != nil && old.Annotations[api.RegisterModelAnnotation] == want && old.Annotations[api.RegisterArtifactAnnotation] == tj.Annotations[api.RegisterArtifactAnnotation] {
		return nil, nil
	}
	path := annotationPath(api.RegisterModelAnnotation)
	ref, err := registry.ParseRef("--register-model", want, tj.Name)
	if err != nil {
		return field.ErrorList{field.Invalid(path, want, err.Error())}, nil
	}
	later := fmt.Sprintf("or leave --register-model out and register the model once the job succeeds: %s", api.RegisterCommand(tj.Name, ref.Name, ref.Version, "")+" --registry NAMESPACE/SERVICE")
	if a := tj.Annotations[api.RegisterArtifactAnnotation]; a != "" && (strings.Contains(a, "/") || !registry.IsModelFile(a)) {
		return field.ErrorList{field.Invalid(annotationPath(api.RegisterArtifactAnnotation), a,
			"name the model file among the job's artifacts, e.g. model.onnx (a file name with a model format's extension, no folder)")}, nil
	}
	if c == nil || c.Service == "" {
		return field.ErrorList{field.Forbidden(path, "this cluster's mpijob-manager has no model registry to register models in (an administrator sets its --model-registry, docs/admin.md); "+later)}, nil
	}
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return nil, err
	}
	may := c.May
	if may == nil {
		may = func(ctx context.Context, user authenticationv1.UserInfo, attrs authorizationv1.ResourceAttributes) (bool, error) {
			return userMay(ctx, c.Reviews, user, attrs)
		}
	}
	ns, svc, err := registry.SplitService("--model-registry", c.Service)
	if err != nil {
		return nil, err
	}
	ok, err := may(ctx, req.UserInfo, authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Resource: "services", Subresource: "proxy", Name: svc})
	if err != nil {
		return nil, fmt.Errorf("failed to check your access to the model registry %s: %w", c.Service, err)
	}
	if !ok {
		return field.ErrorList{field.Forbidden(path, fmt.Sprintf(
			"you may not register models in the model registry %s (create on services/proxy of Service %s in namespace %s): ask the registry's administrator for access (OpenShift AI: Settings, Model registry settings, Manage permissions), %s",
			c.Service, svc, ns, later))}, nil
	}
	manager := authenticationv1.UserInfo{Username: c.Manager, Groups: serviceAccountGroups(c.Manager)}
	ok, err = may(ctx, manager, authorizationv1.ResourceAttributes{Namespace: tj.Namespace, Verb: "get", Resource: "secrets"})
	if err != nil {
		return nil, fmt.Errorf("failed to check mpijob-manager's access to namespace %s: %w", tj.Namespace, err)
	}
	if !ok {
		return field.ErrorList{field.Forbidden(path, fmt.Sprintf(
			"namespace %s does not let mpijob-manager read its data connections, which registering the model on success needs: an administrator binds ClusterRole %s to %s in namespace %s (docs/admin.md, \"Model registry\"), %s",
			tj.Namespace, RegistrationRole, c.Manager, tj.Namespace, later))}, nil
	}
	return nil, nil
}

// serviceAccountGroups are the groups the API server gives a
// ServiceAccount's user (system:serviceaccount:NS:NAME); none for another user.
func serviceAccountGroups(user string) []string {
	parts := strings.Split(user, ":")
	if len(parts) != 4 || parts[0] != "system" || parts[1] != "serviceaccount" {
		return nil
	}
	return []string{"system:serviceaccounts", "system:serviceaccounts:" + parts[2], "system:authenticated"}
}
