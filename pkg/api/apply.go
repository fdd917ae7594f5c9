package api

import (
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// AnnotationOf is the server-side apply object that sets one annotation of
// tj and nothing else (the UID pins it to this TrainJob): applied under a
// field owner of its own, it never touches what other owners set.
func AnnotationOf(tj *trainer.TrainJob, key, value string) *unstructured.Unstructured {
	u := ApplyObjectOf(tj)
	u.SetAnnotations(map[string]string{key: value})
	return u
}

// ApplyObjectOf is a server-side apply object for tj that sets nothing
// yet: its kind, name and UID (which pins it to this TrainJob), for the
// caller to add the one thing it owns.
func ApplyObjectOf(tj *trainer.TrainJob) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(trainer.GroupVersion.String())
	u.SetKind(trainer.TrainJobKind)
	u.SetNamespace(tj.Namespace)
	u.SetName(tj.Name)
	u.SetUID(tj.UID)
	return u
}
