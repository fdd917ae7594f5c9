package manifests

import (
	"bytes"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Kustomize builds a kustomization folder as `kubectl apply -k` does, in
// kustomize's install order (namespaces and RBAC first, webhook
// configurations last, so nothing is refused by a webhook whose server is
// not installed yet).
func Kustomize(dir string) ([]*unstructured.Unstructured, error) {
	opts := krusty.MakeDefaultOptions()
	opts.Reorder = krusty.ReorderOptionLegacy // kubectl's and `kustomize build`'s default
	res, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	// Through YAML, so numbers are JSON numbers (int64, float64) as in
	// every other unstructured object.
	y, err := res.AsYaml()
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	return Parse(bytes.NewReader(y), "kustomize build "+dir)
}

// SetImages replaces the image of every container (and init container)
// of the Deployments in objs whose image repository is a key of images by
// that key's value, as `kustomize edit set image` does. It returns how
// many it replaced.
func SetImages(objs []*unstructured.Unstructured, images map[string]string) (int, error) {
	n := 0
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		for _, field := range []string{"containers", "initContainers"} {
			cs, found, err := unstructured.NestedSlice(o.Object, "spec", "template", "spec", field)
			if err != nil {
				return n, fmt.Errorf("the Deployment %s: %w", objectName(o), err)
			}
			if !found {
				continue
			}
			for i, c := range cs {
				m, ok := c.(map[string]any)
				if !ok {
					continue
				}
				img, _ := m["image"].(string)
				if ref, ok := images[repository(img)]; ok {
					m["image"] = ref
					cs[i] = m
					n++
				}
			}
			if err := unstructured.SetNestedSlice(o.Object, cs, "spec", "template", "spec", field); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// repository is an image reference without its tag or digest.
func repository(ref string) string {
	if i := strings.Index(ref, "@"); i >= 0 {
		ref = ref[:i]
	}
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		ref = ref[:i]
	}
	return ref
}
