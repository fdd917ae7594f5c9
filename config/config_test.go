// Package config_test checks that the kustomize trees build and hold what
// the docs say they do.
package config_test

import (
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

func TestDefaultBuilds(t *testing.T) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	res, err := k.Run(filesys.MakeFsOnDisk(), "default")
	if err != nil {
		t.Fatalf("kustomize build config/default: %v", err)
	}
	var got []string
	for _, r := range res.Resources() {
		got = append(got, r.GetKind()+"/"+r.GetName())
	}
	sort.Strings(got)
	want := []string{
		"ClusterRole/mpijob-edit",
		"ClusterRole/mpijob-metrics-reader",
		"ClusterRole/mpijob-runtime-reader",
		"ClusterRole/mpijob-view",
		"ClusterRoleBinding/mpijob-runtime-reader",
		"ClusterTrainingRuntime/mpi-deepspeed",
		"ClusterTrainingRuntime/mpi-horovod",
		"ClusterTrainingRuntime/mpi-intel",
		"ClusterTrainingRuntime/mpi-mpich",
		"ClusterTrainingRuntime/mpi-openmpi",
		"ClusterTrainingRuntime/mpi-openmpi-gpu",
		"ClusterTrainingRuntime/mpi-openmpi5",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("config/default resources (-want,+got):\n%s", diff)
	}
}
