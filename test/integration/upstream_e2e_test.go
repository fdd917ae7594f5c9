//go:build e2e

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/onsi/ginkgo/v2/types"
	corev1 "k8s.io/api/core/v1"

	// Trainer's e2e suite is run from its module (go test
	// github.com/kubeflow/trainer/v2/test/e2e); these imports keep the
	// packages it needs in go.mod and go.sum.
	_ "github.com/kubeflow/trainer/v2/pkg/util/testing"
	_ "github.com/kubeflow/trainer/v2/test/util"
	_ "github.com/onsi/gomega"

	"github.com/mpijob/mpijob/pkg/localcluster"
	"github.com/mpijob/mpijob/test/framework"
)

// upstreamSuite is Kubeflow Trainer's own e2e suite, as the module
// mpijob builds against ships it.
const upstreamSuite = "github.com/kubeflow/trainer/v2/test/e2e"

// upstreamSkipped are the specs of Trainer's suite that cannot run on the
// local cluster, and why (docs/development.md says the same). Every other
// spec runs and must pass.
var upstreamSkipped = map[string]string{
	"Flux": "needs Flux Framework: the flux-distributed runtime's init container copies Flux " +
		"from ghcr.io/converged-computing/flux-view-ubuntu, and no Debian or PyPI package gives a stand-in",
}

// upstreamEnvironmentFailures are specs that fail because of another
// part of the environment, not mpijob: each is accepted only when its
// failure shows that cause (evidence), and is reported as a skip that
// says so; a failure for any other reason fails the test.
var upstreamEnvironmentFailures = map[string]struct {
	why      string
	evidence *regexp.Regexp
}{
	"RuntimePatches": {
		why: "Kueue v0.19.2's TrainJob webhook appends its own runtime patch (manager kueue.x-k8s.io/manager) " +
			"to every TrainJob it sees, managed by a queue or not (pkg/controller/jobs/trainjob/trainjob_webhook.go, " +
			"Default), so the spec finds one patch more than the job was created with; " +
			"mpijob does not see these jobs (not MPI jobs)",
		evidence: regexp.MustCompile(`(?s)Manager: "kueue\.x-k8s\.io/manager".*to have length`),
	},
}

// upstreamImages are the images upstream's runtimes and specs name that
// can be given a local stand-in under the same name: each is tagged on
// every node from a local image, so the runtime stays as shipped. The
// MPI images' default command is /bin/bash, which exits at once without
// a terminal, as the images of PyTorch and JAX do.
var upstreamImages = map[string]string{
	"docker.io/pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime": localcluster.UserImage,
	"nvcr.io/nvidia/jax:25.10-py3":                             localcluster.UserImage,
	// The "Updating a runtime" specs: a suspended job keeps its
	// runtime's first image.
	"registry.k8s.io/pause:3.9":  localcluster.PauseImage,
	"registry.k8s.io/pause:3.10": localcluster.PauseImage,
}

// upstreamRuntimeImages replace images that upstream's runtimes name
// without a tag (":latest", so the kubelet pulls them every time and a
// tag on the node is not enough): the runtime is installed with the local
// image instead, and nothing else changed.
var upstreamRuntimeImages = map[string]string{
	"ghcr.io/kubeflow/trainer/xgboost-runtime":   localcluster.UserImage,
	"ghcr.io/kubeflow/trainer/deepspeed-runtime": "ghcr.io/mpijob/deepspeed:0.19",
}

// Kubeflow Trainer's own e2e suite passes against the local cluster with
// mpijob installed: upstream's runtimes as Trainer ships them (images
// swapped for local ones, listed above), the specs unmodified, run from
// Trainer's module. A spec that fails here fails this test, by its name.
func TestUpstreamTrainerE2E(t *testing.T) {
	framework.HeavyCPU(t)
	c := framework.Get(t)
	if os.Getenv("MPIJOB_KUBECONFIG") != "" {
		t.Skip("tags stand-in images on the local cluster's nodes; MPIJOB_KUBECONFIG points elsewhere")
	}
	c.EnsureImages(t, "deepspeed")
	opts, err := localcluster.DefaultOptions(framework.Dir(t))
	if err != nil {
		t.Fatal(err)
	}
	for ref, local := range upstreamImages {
		if err := localcluster.TagImage(context.Background(), opts, local, ref); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"torch_distributed", "jax_distributed", "xgboost_distributed", "deepspeed_distributed"} {
		rt := trainerRuntime(t, "manifests/base/runtimes/"+f+".yaml")
		for i := range rt.Spec.Template.Spec.ReplicatedJobs {
			pod := &rt.Spec.Template.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec
			for _, cs := range [][]corev1.Container{pod.InitContainers, pod.Containers} {
				for k := range cs {
					if local, ok := upstreamRuntimeImages[cs[k].Image]; ok {
						cs[k].Image = local
					}
				}
			}
		}
		ensureClusterRuntime(t, c, rt)
	}

	var skip []string
	for s := range upstreamSkipped {
		skip = append(skip, regexp.QuoteMeta(s))
	}
	report := filepath.Join(t.TempDir(), "report.json")
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "test", "-count=1", "-timeout", "40m", upstreamSuite, "-args",
		"-ginkgo.skip="+strings.Join(skip, "|"), "-ginkgo.json-report="+report, "-ginkgo.no-color")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig)
	out, runErr := cmd.CombinedOutput()
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatalf("Trainer's suite wrote no report (%v): %v\n%s", runErr, err, out)
	}
	var reports []types.Report
	if err := json.Unmarshal(b, &reports); err != nil {
		t.Fatalf("reading Trainer's report: %v", err)
	}
	ran := 0
	for _, r := range reports {
		for _, s := range r.SpecReports {
			if s.LeafNodeType != types.NodeTypeIt {
				if s.State.Is(types.SpecStateFailureStates) {
					t.Errorf("%s %s: %s", s.LeafNodeType, s.State, s.Failure.Message)
				}
				continue
			}
			name := s.FullText()
			t.Run(name, func(t *testing.T) {
				switch {
				case s.State == types.SpecStatePassed:
					ran++
					t.Logf("passed in %s", s.RunTime.Round(time.Second))
				case s.State == types.SpecStateSkipped:
					t.Skip(skipReason(name))
				case environmentFailure(name, s.Failure.Message) != "":
					t.Skipf("fails for the environment's reason, not mpijob's: %s", environmentFailure(name, s.Failure.Message))
				default:
					t.Fatalf("%s after %s at %s:\n%s\n%s", s.State, s.RunTime.Round(time.Second),
						s.Failure.Location, s.Failure.Message, s.CapturedGinkgoWriterOutput)
				}
			})
		}
	}
	if ran == 0 {
		t.Fatalf("no spec of Trainer's suite passed (%v):\n%s", runErr, out)
	}
	// The suite itself fails on the specs accepted above; any other
	// failure of it (a spec not reported, a panic) was reported by the
	// subtests or ends here.
	if runErr != nil && len(reports) == 0 {
		t.Fatalf("Trainer's suite: %v\n%s", runErr, out)
	}
}

// skipReason is why a spec of upstream's suite does not run here.
func skipReason(spec string) string {
	for s, why := range upstreamSkipped {
		if strings.Contains(spec, s) {
			return fmt.Sprintf("not run on the local cluster: %s", why)
		}
	}
	return "skipped by Trainer's suite"
}

// environmentFailure is why spec fails for the environment's reason, when
// its failure message shows that reason; empty otherwise.
func environmentFailure(spec, message string) string {
	for s, f := range upstreamEnvironmentFailures {
		if strings.Contains(spec, s) && f.evidence.MatchString(message) {
			return f.why
		}
	}
	return ""
}
