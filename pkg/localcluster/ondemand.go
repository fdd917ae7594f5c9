package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"sigs.k8s.io/yaml"

	"github.com/mpijob/mpijob/pkg/localcluster/images"
)

// SelectImages returns the images named (short names or references), or
// every image with all; an unknown name is an error that lists the known.
func SelectImages(names []string, all bool) ([]Image, error) {
	if all {
		return Images, nil
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("name an image (%s) or use --all", strings.Join(ImageNames(), ", "))
	}
	var out []Image
	for _, n := range names {
		im, ok := ImageNamed(n)
		if !ok {
			return nil, fmt.Errorf("unknown image %q: the images are %s", n, strings.Join(ImageNames(), ", "))
		}
		out = append(out, im)
	}
	return out, nil
}

// EnsureImages builds each of imgs that is missing (saying why) and, when
// the local cluster runs, imports it into every real node, so pods that
// reference it start. It is what a first use of an on-demand image runs.
func EnsureImages(ctx context.Context, opts Options, out io.Writer, imgs []Image, why string) error {
	opts = runningCacheDir(opts)
	c := New(opts, out)
	if _, err := BuildImagesOf(ctx, opts, c.progress, imgs, why); err != nil {
		return err
	}
	for _, im := range imgs {
		if im.GPU {
			tar, _ := im.Tar(opts.images())
			fmt.Fprintf(out, "%s is built (%s): a GPU image, for GPU Workers only, so it is not imported into the local cluster's nodes, which have no GPU. Push it to your registry with `make images REGISTRY=...`.\n", im.Ref, tar)
		}
	}
	if ok, _ := Status(ctx, opts); !ok {
		return nil
	}
	// Both nodes import side by side: an import is mostly unpacking.
	errs := make([]error, opts.RealNodes)
	var wg sync.WaitGroup
	for i := 1; i <= opts.RealNodes; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i-1] = c.importImages(ctx, c.realNode(i))
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Pushed is one image pushed to a registry.
type Pushed struct {
	// Ref is the name the runtimes and config/default use.
	Ref string
	// To is where it went, by digest.
	To string
}

// PushImages builds imgs (and the mpijob-manager and mpijob-dashboard
// images) and pushes each to registry, named by the last part of its
// repository and its tag (ghcr.io/mpijob/openmpi:4.1 → REGISTRY/openmpi:4.1).
// Credentials come from the Docker config, as docker and podman keep them.
func PushImages(ctx context.Context, opts Options, out io.Writer, imgs []Image, registry string, withProject bool) ([]Pushed, error) {
	if err := ValidRegistry(registry); err != nil {
		return nil, err
	}
	p := NewProgress(out)
	tars, err := BuildImagesOf(ctx, opts, p, imgs, "to push to "+registry)
	if err != nil {
		return nil, err
	}
	refs := map[string]string{}
	for i, im := range imgs {
		refs[im.Ref] = tars[i]
	}
	if withProject {
		prefs, ptars, err := BuildProjectImages(ctx, opts, p)
		if err != nil {
			return nil, err
		}
		for i, pi := range projectImages {
			refs[prefs[pi.Repository]] = ptars[i]
		}
	}
	var pushed []Pushed
	for _, ref := range slices.Sorted(maps.Keys(refs)) {
		dst, err := PushTarget(ref, registry)
		if err != nil {
			return nil, err
		}
		done := p.Step("pushing %s to %s", ref, dst)
		tag, err := name.NewTag(dst)
		if err != nil {
			return nil, err
		}
		d, err := pushTar(ctx, refs[ref], tag)
		if err != nil {
			return nil, fmt.Errorf("failed to push %s to %s (log in with `docker login %s` or `podman login`, or check REGISTRY): %w", ref, dst, tag.RegistryStr(), err)
		}
		pushed = append(pushed, Pushed{Ref: ref, To: tag.Context().Name() + "@" + d.String()})
		done()
	}
	return pushed, nil
}

// ValidRegistry checks a REGISTRY value: a host (with an optional port) and
// an optional path, with no tag or digest.
func ValidRegistry(registry string) error {
	bad := fmt.Errorf("REGISTRY %q is not a registry and path: give a host and optional path, for example quay.io/my-team or registry.internal:5000/mpi", registry)
	if registry == "" || strings.ContainsAny(registry, "@ ") {
		return bad
	}
	host := strings.SplitN(registry, "/", 2)[0]
	if !strings.ContainsAny(host, ".:") && host != "localhost" {
		return fmt.Errorf("REGISTRY %q starts with %q, which is not a registry host: give one such as quay.io/%s", registry, host, registry)
	}
	if _, err := name.NewRepository(strings.TrimSuffix(registry, "/")+"/x", name.StrictValidation); err != nil {
		return bad
	}
	return nil
}

// PushTarget is where ref goes in registry: the last part of its
// repository and its tag, under registry.
func PushTarget(ref, registry string) (string, error) {
	t, err := name.NewTag(ref)
	if err != nil {
		return "", err
	}
	repo := t.RepositoryStr()
	if i := strings.LastIndex(repo, "/"); i >= 0 {
		repo = repo[i+1:]
	}
	return strings.TrimSuffix(registry, "/") + "/" + repo + ":" + t.TagStr(), nil
}

// pushTar pushes the one image of an OCI layout tar that writeImage made to
// tag and returns its digest. The layout is unpacked into a temporary
// folder, removed once the push (which reads its blobs lazily) is done.
func pushTar(ctx context.Context, tarPath string, tag name.Tag) (v1.Hash, error) {
	dir, err := os.MkdirTemp("", "mpijob-push-")
	if err != nil {
		return v1.Hash{}, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	if err := images.Run(ctx, "tar", "-xf", tarPath, "-C", dir); err != nil {
		return v1.Hash{}, err
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return v1.Hash{}, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return v1.Hash{}, err
	}
	if len(m.Manifests) != 1 {
		return v1.Hash{}, fmt.Errorf("%s holds %d images, want 1", tarPath, len(m.Manifests))
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := remote.Write(tag, img, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return v1.Hash{}, err
	}
	return img.Digest()
}

// RegistryOverlay is a kustomization over base (a path relative to where it
// is written) that points every pushed image at its registry copy, by
// digest: the one place an administrator changes to install from their own
// registry.
func RegistryOverlay(base string, pushed []Pushed) ([]byte, error) {
	type image struct {
		Name    string `json:"name"`
		NewName string `json:"newName"`
		Digest  string `json:"digest"`
	}
	k := struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Resources  []string `json:"resources"`
		Images     []image  `json:"images"`
	}{APIVersion: "kustomize.config.k8s.io/v1beta1", Kind: "Kustomization", Resources: []string{base}}
	sort.Slice(pushed, func(i, j int) bool { return pushed[i].Ref < pushed[j].Ref })
	for _, p := range pushed {
		from, err := name.NewTag(p.Ref)
		if err != nil {
			return nil, err
		}
		to, err := name.NewDigest(p.To)
		if err != nil {
			return nil, err
		}
		// kustomize matches an image by its name without the tag.
		k.Images = append(k.Images, image{Name: from.Context().Name(), NewName: to.Context().Name(), Digest: to.DigestStr()})
	}
	b, err := yaml.Marshal(k)
	if err != nil {
		return nil, err
	}
	head := "# Written by `make images REGISTRY=...`: mpijob's release (config/default)\n" +
		"# with every image taken from your registry, pinned by digest. Install with\n" +
		"#   kubectl apply --server-side -k " + "<this folder>\n"
	return append([]byte(head), b...), nil
}

// RunOnHost runs args in image ref as a process of the host itself: a
// container on real node 1's containerd with the host's network, as the
// image's user. Benchmarks use it for the same program's figure without the
// pod network in between.
func RunOnHost(ctx context.Context, opts Options, ref string, env []string, args ...string) (string, error) {
	n := New(runningCacheDir(opts), io.Discard).realNode(1)
	id := fmt.Sprintf("mpijob-host-%d", os.Getpid())
	cmdArgs := []string{"--address", n.socket(), "-n", "k8s.io", "run", "--rm", "--net-host"}
	for _, e := range env {
		cmdArgs = append(cmdArgs, "--env", e)
	}
	cmdArgs = append(append(cmdArgs, ref, id), args...)
	out, err := exec.CommandContext(ctx, "ctr", cmdArgs...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ctr run %s %s: %w\n%s", ref, strings.Join(args, " "), err, out)
	}
	return string(out), nil
}
