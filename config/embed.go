// Package config holds mpijob's manifests (kustomize trees); Go code that
// needs the shipped runtimes reads them with Runtime (or from Runtimes).
package config

import (
	"embed"
	"fmt"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"sigs.k8s.io/yaml"
)

// Runtimes are the shipped ClusterTrainingRuntimes (config/runtimes).
//
//go:embed runtimes/*.yaml
var Runtimes embed.FS

// Runtime is the shipped ClusterTrainingRuntime name (config/runtimes),
// decoded strictly.
func Runtime(name string) (*trainer.ClusterTrainingRuntime, error) {
	b, err := Runtimes.ReadFile("runtimes/" + name + ".yaml")
	if err != nil {
		return nil, fmt.Errorf("runtime %s is not shipped: %w", name, err)
	}
	rt := &trainer.ClusterTrainingRuntime{}
	if err := yaml.UnmarshalStrict(b, rt); err != nil {
		return nil, fmt.Errorf("shipped runtime %s: %w", name, err)
	}
	return rt, nil
}

// RuntimeNames are the names of the shipped runtimes, sorted.
func RuntimeNames() []string {
	entries, err := Runtimes.ReadDir("runtimes")
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), ".yaml"); ok && name != "kustomization" {
			out = append(out, name)
		}
	}
	return out
}

// WebhookManifest is config/webhook/manifests.yaml: mpijob's webhook
// configurations and admission policies.
//
//go:embed webhook/manifests.yaml
var WebhookManifest []byte
