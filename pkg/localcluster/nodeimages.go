package localcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/mpijob/mpijob/pkg/localcluster/images"
)

// importImages imports every image into node n's containerd unless this
// node's content store already holds that exact build. One import runs on
// a node at a time, across processes: the integration and e2e suites both
// ensure images, and two `ctr images tag --force` of one name at once make
// one of them fail (it deletes the name, then creates it).
func (c *Cluster) importImages(ctx context.Context, n realNode) error {
	unlock, err := images.LockFile(filepath.Join(n.store, ".import.lock"))
	if err != nil {
		return err
	}
	defer unlock()
	tars, err := images.ImageTars(c.opts.images())
	if err != nil {
		return err
	}
	refs, err := images.TarRefs(c.opts.images())
	if err != nil {
		return err
	}
	present, err := presentRefs(ctx, n)
	if err != nil {
		return err
	}
	for _, t := range tars {
		if err := c.importTar(ctx, n, t, refs[t], present); err != nil {
			return err
		}
	}
	// The kubelet deletes unused images when the disk is nearly full (seen:
	// the OpenMPI image gone from a node while another image was imported
	// beside it): bring it back before naming it again.
	if present, err = presentRefs(ctx, n); err != nil {
		return err
	}
	for _, t := range tars {
		if _, ok := present[Images[0].Ref]; refs[t] == Images[0].Ref && !ok {
			if err := c.importTar(ctx, n, t, refs[t], present); err != nil {
				return err
			}
		}
	}
	// Earlier builds of an image keep their content while containerd's CRI
	// holds them by ID (sha256:...) after the name moved to the new build:
	// each rebuilt image would stay on the node in full. They go now.
	if present, err = presentRefs(ctx, n); err == nil {
		for _, ref := range danglingIDs(present) {
			_ = images.Run(ctx, "ctr", "--address", n.socket(), "-n", "k8s.io", "images", "rm", ref)
		}
	}
	// A second name for the OpenMPI image stands in for a user's own image
	// (kubectl mpijob create --image UserImage), so tests see an image that
	// differs from the runtime's reach the Launcher and the Workers.
	if err := images.Run(ctx, "ctr", "--address", n.socket(), "-n", "k8s.io", "images", "tag", "--force", Images[0].Ref, UserImage); err != nil {
		return fmt.Errorf("failed to tag %s as %s on %s: %w", Images[0].Ref, UserImage, n.name, err)
	}
	return nil
}

// importTar imports tar (image ref) into node n's containerd unless n
// holds that exact build: its import marker is there and the node's image
// of that name is this tar's (the kubelet deletes unused images under disk
// pressure, and another build of the same name, from an image builder
// started before a recipe changed, can take the name: the marker alone
// would then lie).
func (c *Cluster) importTar(ctx context.Context, n realNode, tar, ref string, present map[string]string) error {
	marker := n.importMarker(tar)
	if fileExists(marker) && (ref == "" || sameBuild(tar, present[ref])) {
		// A store imported before its layers were discarded sheds them
		// once.
		if !fileExists(n.discardMarker(tar)) {
			discardLayers(ctx, n, tar)
		}
		return nil
	}
	done := c.progress.Step("importing %s into %s", filepath.Base(tar), n.name)
	if err := images.Run(ctx, "ctr", "--address", n.socket(), "-n", "k8s.io", "images", "import", "--platform", "linux/amd64", tar); err != nil {
		return fmt.Errorf("failed to import %s into %s: %w", tar, n.name, err)
	}
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		return err
	}
	discardLayers(ctx, n, tar)
	done()
	return nil
}

// discardLayers removes from node n's content store the packed layers of
// the image that tar imported, as containerd's CRI does for the images it
// pulls (discard_unpacked_layers), which `ctr images import` cannot ask
// for: the import keeps each layer twice, packed (a blob) and unpacked
// (the snapshot its containers start from), and only the snapshot is read
// after that. The two nodes' stores were 19 GiB each, 4.8 GiB of it packed
// layers (2026-12-03), and a CI run on a machine left with 4 GiB beside
// them had its nodes tainted with disk pressure: pods stopped starting.
// The image's manifest and config stay, so the kubelet sees the image as
// before. On any failure the layers stay, and the next start tries again.
func discardLayers(ctx context.Context, n realNode, tar string) {
	digest, err := images.ManifestDigest(tar)
	if err != nil {
		return
	}
	manifest, err := exec.CommandContext(ctx, "ctr", "--address", n.socket(), "-n", "k8s.io", "content", "get", digest).Output()
	if err != nil {
		return
	}
	layers, err := manifestLayers(manifest)
	if err != nil {
		return
	}
	if len(layers) > 0 {
		// A layer another image shares and already shed is not found: ctr
		// says so and goes on.
		args := append([]string{"--address", n.socket(), "-n", "k8s.io", "content", "rm"}, layers...)
		_ = exec.CommandContext(ctx, "ctr", args...).Run()
	}
	_ = os.WriteFile(n.discardMarker(tar), nil, 0o644)
}

// manifestLayers lists the layer digests of an OCI or Docker image
// manifest (none for an index, whose images have manifests of their own).
func manifestLayers(manifest []byte) ([]string, error) {
	var m struct {
		Layers []struct {
			Digest string `json:"digest"`
		} `json:"layers"`
	}
	if err := json.Unmarshal(manifest, &m); err != nil {
		return nil, err
	}
	var out []string
	for _, l := range m.Layers {
		if strings.HasPrefix(l.Digest, "sha256:") {
			out = append(out, l.Digest)
		}
	}
	return out, nil
}

// discardMarker is the file that says node n shed the packed layers of
// this build (tar).
func (n realNode) discardMarker(tar string) string {
	return filepath.Join(n.store, ".layers-discarded-"+filepath.Base(tar))
}

// importMarker is the file that says node n imported this build (tar).
func (n realNode) importMarker(tar string) string {
	return filepath.Join(n.store, ".imported-"+filepath.Base(tar))
}

// presentRefs lists the image names node n's containerd holds, each with
// the digest of what it names (its manifest's).
func presentRefs(ctx context.Context, n realNode) (map[string]string, error) {
	out, err := exec.CommandContext(ctx, "ctr", "--address", n.socket(), "-n", "k8s.io", "images", "ls").Output()
	if err != nil {
		return nil, fmt.Errorf("failed to list the images of %s: %w", n.name, err)
	}
	return parseImageList(string(out)), nil
}

// parseImageList reads `ctr images ls`: REF TYPE DIGEST SIZE PLATFORMS
// LABELS, a header line first.
func parseImageList(out string) map[string]string {
	present := map[string]string{}
	for i, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if i == 0 || len(f) < 3 || !strings.HasPrefix(f[2], "sha256:") {
			continue
		}
		present[f[0]] = f[2]
	}
	return present
}

// danglingIDs are the image IDs (refs "sha256:...") of present whose
// manifest no name holds: earlier builds of a rebuilt image. Sorted.
func danglingIDs(present map[string]string) []string {
	named := map[string]bool{}
	for ref, digest := range present {
		if !strings.HasPrefix(ref, "sha256:") {
			named[digest] = true
		}
	}
	var out []string
	for ref, digest := range present {
		if strings.HasPrefix(ref, "sha256:") && !named[digest] {
			out = append(out, ref)
		}
	}
	sort.Strings(out)
	return out
}

// sameBuild says whether digest (of a node's image) is the manifest that
// tar, an OCI layout, imports; false when digest is empty (no such image).
// A tar that cannot be read counts as the same: the marker decides.
func sameBuild(tar, digest string) bool {
	if digest == "" {
		return false
	}
	want, err := images.ManifestDigest(tar)
	return err != nil || want == digest
}

// ForgetImage removes image ref from every real node's containerd, as the
// kubelet's image garbage collection does under disk pressure: the next
// pod that needs it fails its pull, and the image builder imports it again
// (tests of the image builder use it).
func ForgetImage(ctx context.Context, opts Options, ref string) error {
	return onRealNodes(opts, func(n realNode) error {
		if err := images.Run(ctx, "ctr", "--address", n.socket(), "-n", "k8s.io", "images", "rm", ref); err != nil {
			return fmt.Errorf("failed to remove %s from %s: %w", ref, n.name, err)
		}
		return nil
	})
}

// onRealNodes calls fn for each real node of the running local cluster,
// stopping at the first error.
func onRealNodes(opts Options, fn func(realNode) error) error {
	opts = runningCacheDir(opts)
	c := New(opts, io.Discard)
	for i := 1; i <= opts.RealNodes; i++ {
		if err := fn(c.realNode(i)); err != nil {
			return err
		}
	}
	return nil
}

// TagImage gives image src a second name, ref, on every real node, as a
// registry holding it under that name would: tests that run upstream's
// specs give their images a local stand-in this way.
func TagImage(ctx context.Context, opts Options, src, ref string) error {
	return onRealNodes(opts, func(n realNode) error {
		// The lock importImages takes: two tags of one name at once fail.
		unlock, err := images.LockFile(filepath.Join(n.store, ".import.lock"))
		if err != nil {
			return err
		}
		defer unlock()
		if err := images.Run(ctx, "ctr", "--address", n.socket(), "-n", "k8s.io", "images", "tag", "--force", src, ref); err != nil {
			return fmt.Errorf("failed to tag %s as %s on %s: %w", src, ref, n.name, err)
		}
		return nil
	})
}
