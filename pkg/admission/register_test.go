package admission

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mpijob/mpijob/pkg/api"
)

func TestRegistrationCheck(t *testing.T) {
	const manager = "system:serviceaccount:mpijob-system:mpijob-manager"
	// Who may what: dev-a may write to the registry; the manager may read
	// team-a's Secrets only.
	may := func(_ context.Context, u authenticationv1.UserInfo, a authorizationv1.ResourceAttributes) (bool, error) {
		switch {
		case a.Resource == "services" && a.Subresource == "proxy":
			return u.Username == "dev-a" && a.Namespace == "model-registry" && a.Name == "model-registry" && a.Verb == "create", nil
		case a.Resource == "secrets":
			return u.Username == manager && a.Namespace == "team-a" && a.Verb == "get" && strings.Contains(strings.Join(u.Groups, ","), "system:serviceaccounts:mpijob-system"), nil
		}
		return false, nil
	}
	job := func(ns string, ann map[string]string) *trainer.TrainJob {
		return &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: ns, Annotations: ann}}
	}
	ask := func(v string) map[string]string { return map[string]string{api.RegisterModelAnnotation: v} }
	cases := map[string]struct {
		check *RegistrationCheck
		user  string
		old   *trainer.TrainJob
		tj    *trainer.TrainJob
		want  string // "" when admitted; else a part of the error
	}{
		"no request":                       {user: "dev-b", tj: job("team-b", nil)},
		"dev-a in team-a":                  {user: "dev-a", tj: job("team-a", ask("digits:v1"))},
		"version from the job's name":      {user: "dev-a", tj: job("team-a", ask("digits"))},
		"a bad name":                       {user: "dev-a", tj: job("team-a", ask("my model")), want: `--register-model (model name) "my model"`},
		"a bad version":                    {user: "dev-a", tj: job("team-a", ask("digits:v 1")), want: "--register-model (version)"},
		"a folder for the artifact":        {user: "dev-a", tj: job("team-a", map[string]string{api.RegisterModelAnnotation: "digits", api.RegisterArtifactAnnotation: "out/model.npz"}), want: "name the model file among the job's artifacts"},
		"a user the registry does not let": {user: "dev-b", tj: job("team-a", ask("digits:v1")), want: "you may not register models in the model registry model-registry/model-registry"},
		"a namespace that did not opt in":  {user: "dev-a", tj: job("team-c", ask("digits:v1")), want: "namespace team-c does not let mpijob-manager read its data connections"},
		"no registry on the manager":       {check: &RegistrationCheck{Manager: manager, May: may}, user: "dev-a", tj: job("team-a", ask("digits:v1")), want: "has no model registry"},
		"a nil check refuses":              {check: nil, user: "dev-a", tj: job("team-a", ask("digits:v1")), want: "has no model registry"},
		"unchanged on an update":           {user: "dev-b", old: job("team-a", ask("digits:v1")), tj: job("team-a", ask("digits:v1"))},
		"changed on an update is checked":  {user: "dev-b", old: job("team-a", ask("digits:v1")), tj: job("team-a", ask("digits:v2")), want: "you may not register models"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := tc.check
			if _, set := map[string]bool{"no registry on the manager": true, "a nil check refuses": true}[name]; !set {
				c = &RegistrationCheck{Service: "model-registry/model-registry", Manager: manager, May: may}
			}
			ctx := reqCtx(t, admissionv1.Create, tc.user, nil)
			errs, err := c.Check(ctx, tc.old, tc.tj)
			if err != nil {
				t.Fatal(err)
			}
			got := errs.ToAggregate()
			switch {
			case tc.want == "" && got != nil:
				t.Errorf("refused: %v", got)
			case tc.want != "" && got == nil:
				t.Errorf("admitted, want an error with %q", tc.want)
			case tc.want != "" && !strings.Contains(got.Error(), tc.want):
				t.Errorf("error %q, want it to say %q", got, tc.want)
			}
			if got != nil && !strings.Contains(got.Error(), "kubectl mpijob register train") && tc.want != "" && !strings.Contains(tc.want, "--register-model") && !strings.Contains(tc.want, "artifact") {
				t.Errorf("error %q names no way to register later", got)
			}
		})
	}
}

func TestServiceAccountGroups(t *testing.T) {
	if diff := cmp.Diff([]string{"system:serviceaccounts", "system:serviceaccounts:mpijob-system", "system:authenticated"},
		serviceAccountGroups("system:serviceaccount:mpijob-system:mpijob-manager")); diff != "" {
		t.Error(diff)
	}
	if g := serviceAccountGroups("dev-a"); g != nil {
		t.Errorf("a user's groups: %v, want none", g)
	}
}
