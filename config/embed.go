// Package config holds mpijob's manifests (kustomize trees); Go code that
// needs the shipped runtimes reads them from Runtimes.
package config

import "embed"

// Runtimes are the shipped ClusterTrainingRuntimes (config/runtimes).
//
//go:embed runtimes/*.yaml
var Runtimes embed.FS
