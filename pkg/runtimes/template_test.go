package runtimes

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/mpijob/mpijob/pkg/api"
)

func TestFromTemplate(t *testing.T) {
	tmpl := &trainer.ClusterTrainingRuntime{
		ObjectMeta: metav1.ObjectMeta{Name: "mpi-openmpi", Labels: map[string]string{"trainer.kubeflow.org/framework": "mpi"},
			Annotations: map[string]string{
				api.DescriptionAnnotation: "OpenMPI 4.1", PolicyPrefix + "max-workers": "16",
				"mpijob.dev/mpi-implementation": "OpenMPI", "kubectl.kubernetes.io/last-applied-configuration": "{}"}},
		Spec: trainer.TrainingRuntimeSpec{Template: trainer.JobSetTemplateSpec{Spec: jobsetv1alpha2.JobSetSpec{ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{
			{Name: "launcher", Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "node", Image: "ghcr.io/mpijob/openmpi:4.1"}}}}}}},
			{Name: "node", Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "node", Image: "ghcr.io/mpijob/openmpi:4.1"}, {Name: "sidecar", Image: "busybox"}}}}}}},
		}}}},
	}
	images := func(rt *trainer.ClusterTrainingRuntime) []string {
		var out []string
		for _, rj := range rt.Spec.Template.Spec.ReplicatedJobs {
			for _, c := range rj.Template.Spec.Template.Spec.Containers {
				out = append(out, c.Name+"="+c.Image)
			}
		}
		return out
	}
	cases := map[string]struct {
		in          Template
		annotations map[string]string
		images      []string
		err         *TemplateError
	}{
		"a copy with its own name, description, image and policy": {
			in: Template{Name: "openmpi-small", Description: "OpenMPI for small jobs", Image: "registry.example.com/team/mpi:2",
				Policy: map[string]string{"max-workers": "4", "gang-scheduling-timeout": " "}},
			annotations: map[string]string{api.DescriptionAnnotation: "OpenMPI for small jobs", PolicyPrefix + "max-workers": "4",
				"mpijob.dev/mpi-implementation": "OpenMPI"},
			images: []string{"node=registry.example.com/team/mpi:2", "node=registry.example.com/team/mpi:2", "sidecar=busybox"},
		},
		"no image, no policy: the template's image, no policy": {
			in:          Template{Name: "openmpi-copy"},
			annotations: map[string]string{api.DescriptionAnnotation: "OpenMPI 4.1", "mpijob.dev/mpi-implementation": "OpenMPI"},
			images:      []string{"node=ghcr.io/mpijob/openmpi:4.1", "node=ghcr.io/mpijob/openmpi:4.1", "sidecar=busybox"},
		},
		"a name with capitals": {
			in:  Template{Name: "OpenMPI"},
			err: &TemplateError{"name", `name "OpenMPI": use lower-case letters, digits, '-' and '.', starting and ending with a letter or digit`},
		},
		"no name": {
			in:  Template{},
			err: &TemplateError{"name", `name "": use lower-case letters, digits, '-' and '.', starting and ending with a letter or digit`},
		},
		"an image that is no reference": {
			in:  Template{Name: "x", Image: "Registry/Bad Image"},
			err: &TemplateError{"image", `image "Registry/Bad Image" is not an image reference: use e.g. registry.example.com/team/mpi:1`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := FromTemplate(tmpl, tc.in)
			if tc.err != nil {
				var te *TemplateError
				if !errors.As(err, &te) {
					t.Fatalf("err = %v, want %v", err, tc.err)
				}
				if diff := cmp.Diff(tc.err, te); diff != "" {
					t.Errorf("error (-want,+got):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Name != tc.in.Name || got.Kind != trainer.ClusterTrainingRuntimeKind {
				t.Errorf("name %q kind %q", got.Name, got.Kind)
			}
			if diff := cmp.Diff(tc.annotations, got.Annotations); diff != "" {
				t.Errorf("annotations (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.images, images(got)); diff != "" {
				t.Errorf("images (-want,+got):\n%s", diff)
			}
			if images(tmpl)[0] != "node=ghcr.io/mpijob/openmpi:4.1" {
				t.Errorf("the template was changed")
			}
		})
	}
}
