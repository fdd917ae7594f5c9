package api

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The apply object carries the job's identity and the one annotation only:
// a spec or another annotation in it would be owned by the applier.
func TestAnnotationOfSetsOnlyTheAnnotation(t *testing.T) {
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "ns", UID: "u-1",
		Annotations: map[string]string{"other": "x"}, Labels: map[string]string{"l": "v"}}}
	got := AnnotationOf(tj, StatusAnnotation, "{}").Object
	want := map[string]any{
		"apiVersion": trainer.GroupVersion.String(), "kind": trainer.TrainJobKind,
		"metadata": map[string]any{"name": "j", "namespace": "ns", "uid": "u-1", "annotations": map[string]any{StatusAnnotation: "{}"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("AnnotationOf (-want,+got):\n%s", diff)
	}
}
