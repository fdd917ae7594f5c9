package localcluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/localcluster/images"
	"github.com/mpijob/mpijob/pkg/manifests"
)

// ManagerNamespace is where the release install runs mpijob-manager and
// mpijob-dashboard.
const ManagerNamespace = "mpijob-system"

// ManagerDeployment and DashboardDeployment are the release's Deployments.
const (
	ManagerDeployment   = "mpijob-manager"
	DashboardDeployment = "mpijob-dashboard"
)

// projectImage is an image of mpijob's own, built from this checkout: a
// static binary and the CA certificates, nothing else.
type projectImage struct {
	// Name is the binary and the image's last path element.
	Name string
	// Package is what `go build` builds.
	Package string
	// Repository is the image name config/default uses (the tag differs).
	Repository string
}

var projectImages = []projectImage{
	{Name: "mpijob-manager", Package: "./cmd/mpijob-manager", Repository: "ghcr.io/mpijob/mpijob-manager"},
	{Name: "mpijob-dashboard", Package: "./cmd/mpijob-dashboard", Repository: "ghcr.io/mpijob/mpijob-dashboard"},
}

// nonRootUser is the images' user (numeric, for runAsNonRoot).
const nonRootUser = "65532:65532"

// BuildProjectImages builds mpijob-manager and mpijob-dashboard from this
// checkout (the dashboard with the front end `make dashboard` built) as
// OCI image tars with go-containerregistry, and returns, for each image
// repository of config/default, the reference to run instead: the tag is
// dev-<hash of the image's files>, so a rebuild of unchanged code reuses
// the image and a change rolls the Deployment.
func BuildProjectImages(ctx context.Context, opts Options, p *Progress) (map[string]string, []string, error) {
	refs := map[string]string{}
	var tars []string
	for _, im := range projectImages {
		done := p.Step("building image %s from this checkout", im.Repository)
		ref, tar, err := buildProjectImage(ctx, opts, im)
		if err != nil {
			return nil, nil, err
		}
		done()
		refs[im.Repository] = ref
		tars = append(tars, tar)
	}
	return refs, tars, nil
}

// staticGoBuild is how the local cluster builds mpijob's own binaries:
// static (CGO_ENABLED=0) and -trimpath, the images' and the host's
// dashboard alike, as the Makefile builds mpijob-dev, so all of them share
// one set of compiled packages in the Go build cache (a first `make dev`
// compiles them once). env is added to the build's environment.
func staticGoBuild(ctx context.Context, repoRoot, out, pkg, ldflags string, env ...string) *exec.Cmd {
	args := []string{"build", "-trimpath"}
	if ldflags != "" {
		args = append(args, "-ldflags="+ldflags)
	}
	cmd := exec.CommandContext(ctx, "go", append(args, "-o", out, pkg)...)
	cmd.Dir = repoRoot
	cmd.Env = append(append(os.Environ(), "CGO_ENABLED=0"), env...)
	return cmd
}

func buildProjectImage(ctx context.Context, opts Options, im projectImage) (string, string, error) {
	// A work folder of this build's own, and the tar written aside and
	// renamed: two builds of one image at once (two make targets) never
	// mix their files, and an interrupted one leaves no torn tar under
	// the name a later build takes as done.
	if err := os.MkdirAll(filepath.Join(images.Dir(opts.images()), "work"), 0o755); err != nil {
		return "", "", err
	}
	work, err := os.MkdirTemp(filepath.Join(images.Dir(opts.images()), "work"), im.Name+"-")
	if err != nil {
		return "", "", err
	}
	rootfs := filepath.Join(work, "rootfs")
	if err := os.MkdirAll(filepath.Join(rootfs, "etc", "ssl", "certs"), 0o755); err != nil {
		return "", "", err
	}
	defer func() { _ = os.RemoveAll(work); _ = os.Remove(work + "-layer.tar") }()
	bin := filepath.Join(rootfs, im.Name)
	cmd := staticGoBuild(ctx, opts.RepoRoot, bin, im.Package, "-s -w", "GOOS=linux", "GOARCH=amd64")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("failed to build %s (static): %w\n%s", im.Name, err, out)
	}
	if err := images.CopyFile(images.CACertificates, filepath.Join(rootfs, images.CACertificates), 0o644); err != nil {
		return "", "", fmt.Errorf("failed to copy %s into image %s (Debian package ca-certificates): %w", images.CACertificates, im.Name, err)
	}
	passwd := "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	if err := os.WriteFile(filepath.Join(rootfs, "etc", "passwd"), []byte(passwd), 0o644); err != nil {
		return "", "", err
	}
	h := sha256.New()
	for _, f := range []string{bin, filepath.Join(rootfs, images.CACertificates), filepath.Join(rootfs, "etc", "passwd")} {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", "", err
		}
		h.Write(b)
	}
	hash := hex.EncodeToString(h.Sum(nil))[:12]
	ref := im.Repository + ":dev-" + hash
	dir := filepath.Join(images.Dir(opts.images()), "project")
	out := filepath.Join(dir, im.Name+"-"+hash+".tar")
	if _, err := os.Stat(out); err == nil {
		return ref, out, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	// Only the newest build of each image is kept.
	old, _ := filepath.Glob(filepath.Join(dir, im.Name+"-*.tar"))
	for _, o := range old {
		_ = os.Remove(o)
	}
	cfg := v1.Config{
		Entrypoint: []string{"/" + im.Name},
		User:       nonRootUser,
		Env:        []string{"PATH=/", "SSL_CERT_FILE=" + images.CACertificates},
		Labels:     map[string]string{"org.opencontainers.image.source": "mpijob " + im.Package},
	}
	tmp := fmt.Sprintf("%s.%d.tmp", out, os.Getpid())
	if err := images.WriteImage(rootfs, work+"-layer.tar", ref, cfg, tmp); err != nil {
		_ = os.Remove(tmp)
		return "", "", fmt.Errorf("failed to write image %s: %w", ref, err)
	}
	if err := os.Rename(tmp, out); err != nil {
		return "", "", err
	}
	return ref, out, nil
}

// importProjectImages imports the project's image tars (in the order of
// projectImages, named by refs) into every real node's containerd, each
// tar once per node's content store.
func (c *Cluster) importProjectImages(ctx context.Context, tars []string, refs map[string]string) error {
	for i := 1; i <= c.opts.RealNodes; i++ {
		n := c.realNode(i)
		present, err := presentRefs(ctx, n)
		if err != nil {
			return err
		}
		for k, t := range tars {
			if err := c.importTar(ctx, n, t, refs[projectImages[k].Repository], present); err != nil {
				return err
			}
		}
	}
	return nil
}

// installRelease installs mpijob as a user does, `kubectl apply
// --server-side -k config/default`, with the images just built, and waits
// until both manager replicas serve the webhooks with their own
// certificate and the dashboard answers.
func (c *Cluster) installRelease(ctx context.Context, refs map[string]string) error {
	cl, err := c.newClient()
	if err != nil {
		return err
	}
	objs, err := manifests.Kustomize(filepath.Join(c.opts.RepoRoot, "config", "default"))
	if err != nil {
		return err
	}
	if n, err := manifests.SetImages(objs, refs); err != nil {
		return err
	} else if n != len(refs) {
		return fmt.Errorf("config/default: %d of the %d images built here are used by its Deployments", n, len(refs))
	}
	// The log store's read API (the local cluster runs the store), and the
	// Secret that names the store, before the manager's pods start.
	logAPI, err := manifests.Kustomize(filepath.Join(c.opts.RepoRoot, "config", "logstore"))
	if err != nil {
		return err
	}
	objs = append(objs, logAPI...)
	// What the local cluster adds to the release in mpijob-system (the
	// manager's NetworkPolicy): applied with it, so a reinstall after
	// `kubectl delete -k config/default` (which takes the namespace) has
	// it again.
	local, err := manifests.ParseFiles(filepath.Join(c.opts.RepoRoot, "config", "dev", "release"))
	if err != nil {
		return err
	}
	objs = append(objs, local...)
	if err := c.writeLogStoreSecret(ctx); err != nil {
		return fmt.Errorf("the log store's Secret: %w", err)
	}
	// The runtimes come last, once the manager serves the webhook that
	// validates them: a reinstall over webhook configurations left behind
	// (their Service has no endpoints yet) would be refused otherwise.
	var runtimes, rest []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "ClusterTrainingRuntime" {
			runtimes = append(runtimes, o)
		} else {
			rest = append(rest, o)
		}
	}
	if err := manifests.Apply(ctx, cl, fieldOwner, rest); err != nil {
		return err
	}
	if err := c.waitRelease(ctx, cl); err != nil {
		return err
	}
	return manifests.Apply(ctx, cl, fieldOwner, runtimes)
}

// waitRelease waits for the rollout of both Deployments and for the
// manager's CA in its webhook configurations.
func (c *Cluster) waitRelease(ctx context.Context, cl client.Client) error {
	for _, name := range []string{ManagerDeployment, DashboardDeployment} {
		if err := WaitRollout(ctx, cl, ManagerNamespace, name, 3*time.Minute); err != nil {
			return fmt.Errorf("%w (kubectl -n %s describe deployment %s; kubectl -n %s logs deploy/%s)", err, ManagerNamespace, name, ManagerNamespace, name)
		}
	}
	err := c.waitFor(ctx, "", 60*time.Second, func(ctx context.Context) bool {
		m := &admissionregistrationv1.MutatingWebhookConfiguration{}
		v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if cl.Get(ctx, client.ObjectKey{Name: "mpijob-mutating-webhook-configuration"}, m) != nil ||
			cl.Get(ctx, client.ObjectKey{Name: "mpijob-validating-webhook-configuration"}, v) != nil {
			return false
		}
		for _, h := range m.Webhooks {
			if len(h.ClientConfig.CABundle) == 0 {
				return false
			}
		}
		for _, h := range v.Webhooks {
			if len(h.ClientConfig.CABundle) == 0 {
				return false
			}
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("mpijob-manager did not write its CA into mpijob's webhook configurations within 60s (kubectl -n %s logs deploy/%s): %w", ManagerNamespace, ManagerDeployment, err)
	}
	return nil
}

// loadRunning connects c to the running cluster (for Reload).
func (c *Cluster) loadRunning() error {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.opts.KubeconfigPath())
	if err != nil {
		return fmt.Errorf("the local cluster's kubeconfig is unreadable: %w", err)
	}
	c.restCfg = cfg
	return nil
}

// WaitRollout waits until Deployment ns/name runs its current template on
// every replica, all Ready, and no old pod is left.
func WaitRollout(ctx context.Context, cl client.Client, ns, name string, timeout time.Duration) error {
	last := "not found"
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		d := &appsv1.Deployment{}
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
			return false, nil //nolint:nilerr // not there yet: keep polling
		}
		want := ptr.Deref(d.Spec.Replicas, 1)
		s := d.Status
		last = fmt.Sprintf("%d of %d replicas updated, %d ready, %d in all", s.UpdatedReplicas, want, s.ReadyReplicas, s.Replicas)
		return s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == want && s.ReadyReplicas == want &&
			s.AvailableReplicas == want && s.Replicas == want, nil
	})
	if err != nil {
		why := ""
		d := &appsv1.Deployment{}
		if cl.Get(context.WithoutCancel(ctx), client.ObjectKey{Namespace: ns, Name: name}, d) == nil && d.Spec.Selector != nil {
			pods := &corev1.PodList{}
			if cl.List(context.WithoutCancel(ctx), pods, client.InNamespace(ns), client.MatchingLabels(d.Spec.Selector.MatchLabels)) == nil {
				why = notReadyWhy(pods.Items)
			}
		}
		return fmt.Errorf("the Deployment %s/%s did not roll out in %s: %s%s", ns, name, timeout, last, why)
	}
	return nil
}

// notReadyWhy says, for the first pod that is not Ready, what holds it:
// the scheduler's message (a node's disk pressure, say) or its
// container's waiting or terminated reason.
func notReadyWhy(pods []corev1.Pod) string {
	for _, p := range pods {
		ready := false
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				ready = true
			}
		}
		if ready {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
				return fmt.Sprintf("; pod %s is not scheduled: %s", p.Name, c.Message)
			}
		}
		for _, cs := range p.Status.ContainerStatuses {
			switch {
			case cs.State.Waiting != nil:
				return fmt.Sprintf("; pod %s container %s is waiting: %s %s", p.Name, cs.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message)
			case cs.State.Terminated != nil:
				return fmt.Sprintf("; pod %s container %s ended: %s (exit %d), see kubectl -n %s logs %s", p.Name, cs.Name, cs.State.Terminated.Reason, cs.State.Terminated.ExitCode, p.Namespace, p.Name)
			case cs.RestartCount > 0:
				return fmt.Sprintf("; pod %s container %s restarted %d times, see kubectl -n %s logs %s --previous", p.Name, cs.Name, cs.RestartCount, p.Namespace, p.Name)
			}
		}
		return fmt.Sprintf("; pod %s is %s and not Ready", p.Name, p.Status.Phase)
	}
	return ""
}

// runningCacheDir is opts with the cache folder the running cluster was
// started with (its nodes' stores live there), when one runs: a shell with
// another MPIJOB_CACHE_DIR still finds them.
func runningCacheDir(opts Options) Options {
	if st, err := readState(opts); err == nil && st.CacheDir != "" {
		opts.CacheDir = st.CacheDir
	}
	return opts
}

// Reload is the developer's inner loop on a running local cluster: it
// rebuilds the mpijob-manager and mpijob-dashboard images from this
// checkout, imports them into the nodes and applies config/default again
// with them, so both Deployments roll to the new code (one replica at a
// time: the webhooks stay served) without restarting the cluster or
// touching its jobs. Unchanged code keeps its image and nothing rolls. The
// host dashboard at DashboardURL is rebuilt and restarted.
func Reload(ctx context.Context, opts Options, out io.Writer) error {
	if ok, msg := Status(ctx, opts); !ok {
		return fmt.Errorf("%s", msg)
	}
	opts = runningCacheDir(opts)
	c := New(opts, out)
	if err := c.loadRunning(); err != nil {
		return err
	}
	refs, tars, err := BuildProjectImages(ctx, opts, c.progress)
	if err != nil {
		return err
	}
	done := c.progress.Step("importing %s into the nodes", strings.Join(sortedValues(refs), ", "))
	if err := c.importProjectImages(ctx, tars, refs); err != nil {
		return err
	}
	done()
	done = c.progress.Step("applying config/default and rolling mpijob-manager and mpijob-dashboard")
	if err := c.installRelease(ctx, refs); err != nil {
		return err
	}
	// A reinstall (after `kubectl delete -k config/default`) makes a new
	// CA; the rules of config/monitoring may have changed too.
	if err := c.reloadPrometheus(ctx); err != nil {
		return err
	}
	done()
	// The dashboard people open (DashboardURL) is a host process: it is
	// rebuilt and restarted too, or it would keep serving the old code.
	done = c.progress.Step("restarting the dashboard at %s with this checkout", DashboardURL)
	stopPidFiles(opts.runDir(), 5*time.Second, func(name string) bool { return name == "mpijob-dashboard" })
	if err := c.startDashboard(ctx); err != nil {
		return err
	}
	done()
	return nil
}

// RestartImageBuilder restarts the running cluster's image builder as this
// executable (`mpijob-dev reload`, after Reload): one started before a
// recipe changed builds and imports the old recipe's images when a pod
// asks for one (seen: an MPICH image without the checkout's mpirun, under
// the same name).
func RestartImageBuilder(ctx context.Context, opts Options, out io.Writer) error {
	if ok, msg := Status(ctx, opts); !ok {
		return fmt.Errorf("%s", msg)
	}
	opts = runningCacheDir(opts)
	c := New(opts, out)
	done := c.progress.Step("restarting the image builder with this checkout's image recipes")
	stopPidFiles(opts.runDir(), 5*time.Second, func(name string) bool { return name == imageBuilderProcess })
	if err := c.startImageBuilder(); err != nil {
		return err
	}
	done()
	// The log collector decides whose lines a pod's are: the checkout's
	// rule, not the one it started with. It keeps its read offsets in its
	// positions file, so no line is read twice or lost.
	if fileExists(filepath.Join(opts.runDir(), logCollectorProcess+".pid")) {
		done = c.progress.Step("restarting the log collector with this checkout")
		// Time to send what it read and save its offsets.
		stopPidFiles(opts.runDir(), 10*time.Second, func(name string) bool { return name == logCollectorProcess })
		self, err := os.Executable()
		if err != nil {
			return err
		}
		if err := c.startProcess(logCollectorProcess, self, []string{logCollectorProcess}, []string{"MPIJOB_CACHE_DIR=" + opts.CacheDir}); err != nil {
			return err
		}
		if err := c.waitFor(ctx, logCollectorProcess, 60*time.Second, func(ctx context.Context) bool {
			return httpOK(ctx, LogStoreURL+"/ready")
		}); err != nil {
			return err
		}
		done()
	}
	// The model registry's gateway decides who gets through: the
	// checkout's rule.
	if fileExists(filepath.Join(opts.runDir(), RegistryGatewayProcess+".pid")) {
		done = c.progress.Step("restarting the model registry's gateway with this checkout")
		stopPidFiles(opts.runDir(), 5*time.Second, func(name string) bool { return name == RegistryGatewayProcess })
		if err := c.startRegistryServer(ctx); err != nil {
			return err
		}
		done()
	}
	return nil
}

func sortedValues(m map[string]string) []string {
	var vs []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		vs = append(vs, m[k])
	}
	return vs
}
