// Package manifests reads Kubernetes YAML (one or many documents) into
// unstructured objects and applies them with server-side apply under one
// field owner.
package manifests

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Parse decodes every non-empty YAML or JSON document in r. Each object must
// name its apiVersion and kind; source labels errors.
func Parse(r io.Reader, source string) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bufio.NewReader(r), 4096)
	var objs []*unstructured.Unstructured
	for doc := 1; ; doc++ {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("%s: document %d is not valid YAML: %w", source, doc, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if u.GetAPIVersion() == "" || u.GetKind() == "" {
			return nil, fmt.Errorf("%s: document %d has no apiVersion or kind: every object needs both", source, doc)
		}
		objs = append(objs, u)
	}
}

// ParseFiles parses each file, or every *.yaml file of a folder (not
// kustomization.yaml), in name order.
func ParseFiles(paths ...string) ([]*unstructured.Unstructured, error) {
	var all []*unstructured.Unstructured
	for _, p := range paths {
		files := []string{p}
		if st, err := os.Stat(p); err != nil {
			return nil, err
		} else if st.IsDir() {
			files = nil
			entries, err := os.ReadDir(p)
			if err != nil {
				return nil, err
			}
			for _, e := range entries {
				if !e.IsDir() && strings.HasSuffix(e.Name(), ".yaml") && e.Name() != "kustomization.yaml" {
					files = append(files, filepath.Join(p, e.Name()))
				}
			}
			sort.Strings(files)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				return nil, err
			}
			objs, err := Parse(bytes.NewReader(b), f)
			if err != nil {
				return nil, err
			}
			all = append(all, objs...)
		}
	}
	return all, nil
}

// Apply server-side applies every object under owner, forcing ownership of
// the fields it sets.
func Apply(ctx context.Context, c client.Client, owner string, objs []*unstructured.Unstructured) error {
	for _, u := range InstallOrder(objs) {
		u = u.DeepCopy()
		u.SetManagedFields(nil)
		u.SetResourceVersion("")
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(owner), client.ForceOwnership); err != nil {
			return fmt.Errorf("failed to apply %s %s: %w", u.GetKind(), objectName(u), err)
		}
	}
	return nil
}

// InstallOrder returns objs with Namespaces and CustomResourceDefinitions
// first, so that what lives in them can be applied next; the rest keep
// their order.
func InstallOrder(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	out := append([]*unstructured.Unstructured(nil), objs...)
	first := func(u *unstructured.Unstructured) bool {
		return u.GetKind() == "Namespace" || u.GetKind() == "CustomResourceDefinition"
	}
	sort.SliceStable(out, func(i, j int) bool { return first(out[i]) && !first(out[j]) })
	return out
}

func objectName(u *unstructured.Unstructured) string {
	if u.GetNamespace() != "" {
		return u.GetNamespace() + "/" + u.GetName()
	}
	return u.GetName()
}
