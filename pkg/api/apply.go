package api

import (
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// AnnotationOf is the server-side apply object that sets one annotation of
// tj and nothing else (the UID pins it to this TrainJob): applied under a
// field owner of its own, it never touches what other owners set.
func AnnotationOf(tj *trainer.TrainJob, key, value string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(trainer.GroupVersion.String())
	u.SetKind(trainer.TrainJobKind)
	u.SetNamespace(tj.Namespace)
	u.SetName(tj.Name)
	u.SetUID(tj.UID)
	u.SetAnnotations(map[string]string{key: value})
	return u
}
