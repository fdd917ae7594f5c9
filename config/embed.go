// Package config holds mpijob's manifests (kustomize trees); Go code that
// needs the shipped runtimes reads them with Runtime (or from Runtimes).
package config

import (
	"embed"
	"fmt"

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
