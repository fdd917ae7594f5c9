// Package toolchain builds the local cluster's pinned binaries (Kubernetes,
// etcd, kwok, CoreDNS, Trainer, JobSet, Kueue, Prometheus, Loki, versitygw,
// ...) from the Go modules under hack/toolchain, each rebuilt only when its
// pins change.
package toolchain

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sync/errgroup"
)

// Module is one pinned Go module under hack/toolchain that builds some of
// the cluster's binaries.
type Module struct {
	// Dir is the folder under hack/toolchain.
	Dir string
	// Packages are built with one `go build -o bin/`; the binary takes the
	// last element of the package path unless Rename says otherwise.
	Packages []string
	// Outputs are the binary names the build must leave in bin/.
	Outputs []string
	// LDFlags are passed to go build.
	LDFlags string
	// Tags are go build tags (comma-separated).
	Tags string
	// Script, when set, builds the outputs instead of go build: a script
	// in the module's folder, given the folder to leave them in (an output
	// may be a folder).
	Script string
	// Later marks what a first job does not need (the metrics, object and
	// log stores): `mpijob-dev up` builds it at low CPU priority beside the
	// rest and starts it once the cluster runs.
	Later bool
	// Soon marks what a first job does not need but the cluster has from
	// its start on every later run (NetworkPolicy enforcement, the fake
	// GPU nodes): when its binary is missing, `mpijob-dev up` builds it at
	// low CPU priority beside the rest and starts it as soon as the
	// cluster runs, before the Later parts; when it is built, Up starts it
	// with the rest.
	Soon bool
}

// Modules are the pinned modules.
func Modules() []Module {
	return []Module{
		{
			Dir: "kubernetes",
			Packages: []string{
				"k8s.io/kubernetes/cmd/kube-apiserver",
				"k8s.io/kubernetes/cmd/kube-controller-manager",
				"k8s.io/kubernetes/cmd/kube-scheduler",
				"k8s.io/kubernetes/cmd/kubelet",
				"k8s.io/kubernetes/cmd/kubectl",
				"k8s.io/kubernetes/cmd/kube-proxy",
			},
			Outputs: []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kubectl", "kube-proxy"},
			LDFlags: "-s -w -X k8s.io/component-base/version.gitVersion=" + KubernetesVersion +
				" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=36",
		},
		{Dir: "etcd", Packages: []string{"."}, Outputs: []string{"etcd"}, LDFlags: "-s -w"},
		{
			Dir:      "controllers",
			Packages: []string{"github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager", "sigs.k8s.io/jobset"},
			Outputs:  []string{"trainer-controller-manager", "jobset"},
			LDFlags:  "-s -w",
		},
		{Dir: "kueue", Packages: []string{"sigs.k8s.io/kueue/cmd/kueue"}, Outputs: []string{"kueue"}, LDFlags: "-s -w"},
		{Dir: "kwok", Packages: []string{"sigs.k8s.io/kwok/cmd/kwok"}, Outputs: []string{"kwok"}, LDFlags: "-s -w", Soon: true},
		{
			Dir:      "kube-router",
			Packages: []string{"github.com/cloudnativelabs/kube-router/v2/cmd/kube-router"},
			Outputs:  []string{"kube-router"},
			LDFlags:  "-s -w",
			Soon:     true,
		},
		// CoreDNS with the plugins the local cluster's Corefile uses
		// (hack/toolchain/coredns/main.go).
		{Dir: "coredns", Packages: []string{"."}, Outputs: []string{"coredns"}, LDFlags: "-s -w"},
		{
			// The metrics store: scrape targets are written by the local
			// cluster (file and static configs), so every cloud service
			// discovery is left out of the build (upstream's remove_all_sd).
			Dir:      "prometheus",
			Packages: []string{"github.com/prometheus/prometheus/cmd/prometheus"},
			Outputs:  []string{"prometheus"},
			LDFlags:  "-s -w -X github.com/prometheus/common/version.Version=" + PrometheusVersion,
			Tags:     "remove_all_sd,enable_kubernetes_sd",
			Later:    true,
		},
		{
			// The S3-compatible object store behind the local cluster's
			// data connections.
			Dir:      "s3",
			Packages: []string{"github.com/versity/versitygw/cmd/versitygw"},
			Outputs:  []string{"versitygw"},
			LDFlags:  "-s -w",
			Later:    true,
		},
		{
			// The model registry jobs' models are registered in: the
			// Kubeflow Model Registry server, built from its Go module with
			// its generated OpenAPI client, and PostgreSQL 17 for it
			// (hack/toolchain/model-registry/build.sh).
			Dir:     "model-registry",
			Script:  "build.sh",
			Outputs: []string{"model-registry", "postgres"},
			Later:   true,
		},
		{
			// The log store the Launcher's and Workers' logs outlive their
			// pods in (pkg/logstore).
			Dir:      "loki",
			Packages: []string{"github.com/grafana/loki/v3/cmd/loki"},
			Outputs:  []string{"loki"},
			LDFlags:  "-s -w -X github.com/grafana/loki/v3/pkg/util/build.Version=" + LokiVersion,
			Later:    true,
		},
	}
}

// Stamp hashes everything that decides a module's binaries: its go.mod,
// go.sum and sources, the flags and the Go version.
func (m Module) Stamp(root string) (string, error) {
	dir := filepath.Join(root, "hack", "toolchain", m.Dir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("failed to read toolchain module %s: %w", dir, err)
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s\n", runtime.Version(), m.LDFlags, strings.Join(m.Packages, " "))
	if m.Tags != "" {
		fmt.Fprintf(h, "tags %s\n", m.Tags)
	}
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", n, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// UpToDate reports whether bin holds every output built from the current pins.
func (m Module) UpToDate(root, bin string) (bool, string, error) {
	s, err := m.Stamp(root)
	if err != nil {
		return false, "", err
	}
	// A missing stamp or binary only means "build it".
	got, _ := os.ReadFile(filepath.Join(bin, ".stamp-"+m.Dir))
	if strings.TrimSpace(string(got)) != s {
		return false, s, nil
	}
	for _, o := range m.Outputs {
		if !fileExists(filepath.Join(bin, o)) {
			return false, s, nil
		}
	}
	return true, s, nil
}

// Progress reports a long step: Step says what starts and returns the
// function that says it ended (localcluster.Progress).
type Progress interface {
	Step(format string, args ...any) func()
}

// Build builds every pinned binary that is missing or whose pins changed,
// from the modules under repoRoot/hack/toolchain into bin (BuildPicked with
// every module).
func Build(ctx context.Context, repoRoot, bin string, p Progress) error {
	return BuildPicked(ctx, repoRoot, bin, p, func(Module) bool { return true }, false)
}

// BuildPicked builds the picked modules whose binaries are missing or whose
// pins changed. Modules build side by side, Jobs() at a time: one `go build`
// leaves cores idle while it downloads modules and links, and each module's
// link runs on one core. lowPriority runs the builds under `nice -n 19`, so
// they take only the CPU that other work leaves idle.
func BuildPicked(ctx context.Context, repoRoot, bin string, p Progress, pick func(Module) bool, lowPriority bool) error {
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return err
	}
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(Jobs())
	for _, m := range longestFirst(Modules()) {
		if !pick(m) {
			continue
		}
		ok, stamp, err := m.UpToDate(repoRoot, bin)
		if err != nil {
			return err
		}
		if ok {
			continue
		}
		g.Go(func() error {
			why := "first build takes minutes"
			if lowPriority {
				why = "at low CPU priority, beside the rest; a first job does not need it"
			}
			done := p.Step("building %s from its Go module (%s)", strings.Join(m.Outputs, ", "), why)
			if err := m.build(ctx, repoRoot, bin, lowPriority); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(bin, ".stamp-"+m.Dir), []byte(stamp+"\n"), 0o644); err != nil {
				return err
			}
			done()
			return nil
		})
	}
	return g.Wait()
}

// longestFirst orders the modules so the longest builds start first
// (Kubernetes, then Loki and Prometheus) and the short ones fill in beside.
func longestFirst(ms []Module) []Module {
	rank := map[string]int{"kubernetes": 0, "loki": 1, "prometheus": 2}
	out := append([]Module(nil), ms...)
	sort.SliceStable(out, func(i, j int) bool {
		ri, ok := rank[out[i].Dir]
		if !ok {
			ri = len(rank)
		}
		rj, ok := rank[out[j].Dir]
		if !ok {
			rj = len(rank)
		}
		return ri < rj
	})
	return out
}

// Jobs is how many modules build at once: MPIJOB_BUILD_JOBS, else 2 (each
// link of Kubernetes or Loki takes up to about 3 GiB of memory).
func Jobs() int {
	if n, err := strconv.Atoi(os.Getenv("MPIJOB_BUILD_JOBS")); err == nil && n > 0 {
		return n
	}
	return 2
}

// gcFlags skip the compiler's debug information (DWARF) in every package:
// each module links with -s -w, which drops it from the binary anyway, so
// making it was wasted work. It takes 9-13 % off a cold build's CPU (from
// an empty build cache, one run each: kwok 150 → 131 s, Trainer and JobSet
// 185 → 169 s; the binaries' code is the same). It is left out of Stamp: a
// binary built before it does the same, so warm caches are not rebuilt.
const gcFlags = "all=-dwarf=false"

func (m Module) build(ctx context.Context, repoRoot, bin string, lowPriority bool) error {
	tmp := filepath.Join(bin, ".tmp-"+m.Dir)
	_ = os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	if m.Script != "" {
		return m.runScript(ctx, repoRoot, bin, tmp, lowPriority)
	}
	args := []string{"build", "-buildvcs=false", "-gcflags", gcFlags, "-ldflags", m.LDFlags, "-o", tmp + "/"}
	if m.Tags != "" {
		args = append(args, "-tags", m.Tags)
	}
	args = append(args, m.Packages...)
	cmd := exec.CommandContext(ctx, "go", args...)
	if lowPriority {
		// The compiler and linker processes go runs inherit the niceness.
		cmd = exec.CommandContext(ctx, "nice", append([]string{"-n", "19", "go"}, args...)...)
	}
	cmd.Dir = filepath.Join(repoRoot, "hack", "toolchain", m.Dir)
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("failed to build %s (go %s in %s): %w\n%s", strings.Join(m.Outputs, ", "), strings.Join(args, " "), cmd.Dir, err, out)
	}
	for _, o := range m.Outputs {
		src := filepath.Join(tmp, o)
		if m.Dir == "etcd" {
			src = filepath.Join(tmp, "etcd")
		}
		if _, err := os.Stat(src); err != nil {
			// A single package built with -o dir/ is named after its folder.
			matches, _ := filepath.Glob(filepath.Join(tmp, "*"))
			if len(matches) == 1 {
				src = matches[0]
			} else {
				return fmt.Errorf("build of %s left no %s in %s", m.Dir, o, tmp)
			}
		}
		if err := os.Rename(src, filepath.Join(bin, o)); err != nil {
			return err
		}
	}
	return nil
}

// runScript builds m's outputs with its script into tmp, then moves each
// into bin, replacing what was there.
func (m Module) runScript(ctx context.Context, repoRoot, bin, tmp string, lowPriority bool) error {
	script := filepath.Join(repoRoot, "hack", "toolchain", m.Dir, m.Script)
	cmd := exec.CommandContext(ctx, "bash", script, tmp)
	if lowPriority {
		cmd = exec.CommandContext(ctx, "nice", "-n", "19", "bash", script, tmp)
	}
	cmd.Dir = filepath.Join(repoRoot, "hack", "toolchain", m.Dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("failed to build %s (%s): %w\n%s", strings.Join(m.Outputs, ", "), script, err, out)
	}
	for _, o := range m.Outputs {
		dst := filepath.Join(bin, o)
		if err := os.RemoveAll(dst); err != nil {
			return err
		}
		if err := os.Rename(filepath.Join(tmp, o), dst); err != nil {
			return fmt.Errorf("build of %s left no %s: %w", m.Dir, o, err)
		}
	}
	return nil
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
