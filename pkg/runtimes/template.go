package runtimes

import (
	"fmt"
	"maps"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/mpijob/mpijob/pkg/api"
)

// Template is a new ClusterTrainingRuntime made from another one: its
// shape, with a name, a description, an image and a policy of its own.
type Template struct {
	Name        string
	Description string
	// Image replaces the Launcher's and the Workers' image ("": the
	// template's).
	Image string
	// Policy is policy.mpijob.dev/KEY: VALUE by KEY; it replaces the
	// template's policy. Empty values are left out.
	Policy map[string]string
}

// TemplateError names the input of a Template that is wrong ("name",
// "image") and how to put it right.
type TemplateError struct{ Field, Message string }

func (e *TemplateError) Error() string { return e.Message }

// FromTemplate builds t from the runtime tmpl. It checks the name and the
// image; the policy is checked by mpijob's runtime webhook when the
// runtime is created.
func FromTemplate(tmpl *trainer.ClusterTrainingRuntime, t Template) (*trainer.ClusterTrainingRuntime, error) {
	if errs := validation.IsDNS1123Subdomain(t.Name); t.Name == "" || len(errs) > 0 {
		return nil, &TemplateError{"name", fmt.Sprintf("name %q: use lower-case letters, digits, '-' and '.', starting and ending with a letter or digit", t.Name)}
	}
	if t.Image != "" {
		if _, err := name.ParseReference(t.Image); err != nil {
			return nil, &TemplateError{"image", fmt.Sprintf("image %q is not an image reference: use e.g. registry.example.com/team/mpi:1", t.Image)}
		}
	}
	rt := &trainer.ClusterTrainingRuntime{Spec: *tmpl.Spec.DeepCopy()}
	rt.APIVersion, rt.Kind = trainer.GroupVersion.String(), trainer.ClusterTrainingRuntimeKind
	rt.Name, rt.Labels = t.Name, maps.Clone(tmpl.Labels)
	rt.Annotations = map[string]string{}
	for k, v := range tmpl.Annotations {
		if !strings.HasPrefix(k, PolicyPrefix) && k != "kubectl.kubernetes.io/last-applied-configuration" {
			rt.Annotations[k] = v
		}
	}
	if t.Description != "" {
		rt.Annotations[api.DescriptionAnnotation] = t.Description
	}
	for k, v := range t.Policy {
		if v = strings.TrimSpace(v); v != "" {
			rt.Annotations[PolicyPrefix+k] = v
		}
	}
	if t.Image != "" {
		for i := range rt.Spec.Template.Spec.ReplicatedJobs {
			pod := &rt.Spec.Template.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec
			for j := range pod.Containers {
				if pod.Containers[j].Name == "node" {
					pod.Containers[j].Image = t.Image
				}
			}
		}
	}
	return rt, nil
}
