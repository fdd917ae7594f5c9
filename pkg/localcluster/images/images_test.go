package images

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// writeImage must produce an OCI layout tar that names the image for
// containerd and carries the rootfs and config.
func TestWriteImage(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "usr", "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "usr", "bin", "hello"), []byte("#!/bin/sh\necho hi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("hello", filepath.Join(root, "usr", "bin", "hi")); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"proc", "dev"} {
		_ = os.MkdirAll(filepath.Join(root, d, "sub"), 0o755)
		_ = os.WriteFile(filepath.Join(root, d, "sub", "x"), []byte("x"), 0o644)
	}
	out := filepath.Join(t.TempDir(), "img.tar")
	cfg := v1.Config{User: "1000", Cmd: []string{"/bin/sh"}}
	if err := WriteImage(root, out+".layer", "ghcr.io/mpijob/test:1.0", cfg, out); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	untar(t, out, dir)
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatalf("not an OCI layout: %v", err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 {
		t.Fatalf("index has %d manifests, want 1", len(im.Manifests))
	}
	desc := im.Manifests[0]
	wantAnn := map[string]string{"io.containerd.image.name": "ghcr.io/mpijob/test:1.0", "org.opencontainers.image.ref.name": "1.0"}
	if diff := cmp.Diff(wantAnn, desc.Annotations); diff != "" {
		t.Errorf("annotations (-want,+got):\n%s", diff)
	}
	if desc.MediaType != types.OCIManifestSchema1 {
		t.Errorf("manifest media type %s, want %s", desc.MediaType, types.OCIManifestSchema1)
	}
	img, err := idx.Image(desc.Digest)
	if err != nil {
		t.Fatal(err)
	}
	// Every digest, diffID and size in the manifest and config agrees with
	// the bytes written (the layer's are taken while it is written).
	if err := validate.Image(img); err != nil {
		t.Errorf("the image's digests or sizes are wrong: %v", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != "1000" || cf.OS != "linux" || cf.Architecture != "amd64" {
		t.Errorf("config user=%q os=%q arch=%q", cf.Config.User, cf.OS, cf.Architecture)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %d, %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	got := map[string]string{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got[h.Name] = h.Linkname
	}
	for _, want := range []string{"usr/", "usr/bin/", "usr/bin/hello", "proc/", "dev/"} {
		if _, ok := got[want]; !ok {
			t.Errorf("layer lacks %s (has %v)", want, got)
		}
	}
	if got["usr/bin/hi"] != "hello" {
		t.Errorf("symlink usr/bin/hi -> %q, want hello", got["usr/bin/hi"])
	}
	for _, unwanted := range []string{"proc/sub/x", "dev/sub/x", "proc/sub/"} {
		if _, ok := got[unwanted]; ok {
			t.Errorf("layer holds %s: /proc and /dev contents belong to the runtime", unwanted)
		}
	}
}

func untar(t *testing.T, path, dir string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(dir, h.Name)
		if h.Typeflag == tar.TypeDir {
			_ = os.MkdirAll(target, 0o755)
			continue
		}
		_ = os.MkdirAll(filepath.Dir(target), 0o755)
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(target, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// A new build of an image removes its earlier builds, and nothing of the
// other images (openmpi's prune leaves openmpi5 alone).
func TestPruneOldBuilds(t *testing.T) {
	opts := Options{CacheDir: t.TempDir()}
	dir := Dir(opts)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files := []string{"openmpi-aaaaaaaaaaaa.tar", "openmpi-bbbbbbbbbbbb.tar", "openmpi5-cccccccccccc.tar", "openmpi-bbbbbbbbbbbb.tar.tmp"}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	im, _ := ImageNamed("openmpi")
	pruneOldBuilds(opts, im, filepath.Join(dir, "openmpi-bbbbbbbbbbbb.tar"))
	var left []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if diff := cmp.Diff([]string{"openmpi-bbbbbbbbbbbb.tar", "openmpi-bbbbbbbbbbbb.tar.tmp", "openmpi5-cccccccccccc.tar"}, left); diff != "" {
		t.Errorf("left (-want,+got):\n%s", diff)
	}
}

// images/*/Containerfile are the recipe the local build follows, rendered:
// a change to an image's packages, setup, files or environment that is not
// in its Containerfile fails here (`go run ./hack/containerfiles` writes
// them).
func TestContainerfilesAreTheRecipe(t *testing.T) {
	for _, im := range Images {
		t.Run(im.Name, func(t *testing.T) {
			got, err := os.ReadFile(filepath.Join("..", "..", "..", "images", im.Dir, "Containerfile"))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(im.Containerfile(), string(got)); diff != "" {
				t.Errorf("images/%s/Containerfile is not the recipe; run go run ./hack/containerfiles (-recipe +file):\n%s", im.Dir, diff)
			}
			for _, src := range sortedKeys(im.Files) {
				if !strings.Contains(string(got), " "+filepath.Clean(filepath.Join("images", src))+" "+im.Files[src]+"\n") {
					t.Errorf("the Containerfile does not copy %s to %s", src, im.Files[src])
				}
			}
		})
	}
}

// Every path a shipped runtime's containers run from mpijob's own files
// (/opt/mpijob/examples, /usr/local/bin) is in the image that container
// runs, as are the wrappers they call by name.
func TestRuntimeCommandsExistInTheirImages(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "..", "config", "runtimes", "mpi-*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no runtimes: %v", err)
	}
	ours := map[string]bool{"mpijob-mpiexec": true, "mpi-hello": true, "mpi-allreduce-bench": true}
	checked := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var rt trainer.ClusterTrainingRuntime
		if err := yaml.Unmarshal(b, &rt); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, rj := range rt.Spec.Template.Spec.ReplicatedJobs {
			pod := rj.Template.Spec.Template.Spec
			for _, c := range append(append([]corev1.Container{}, pod.InitContainers...), pod.Containers...) {
				im, ok := ImageNamed(c.Image)
				if !ok {
					t.Errorf("%s: %s/%s runs %s, which no recipe builds", rt.Name, rj.Name, c.Name, c.Image)
					continue
				}
				have := map[string]bool{}
				for _, dst := range im.Files {
					have[dst] = true
				}
				for _, p := range cPrograms {
					have["/usr/local/bin/"+p] = true
				}
				for _, arg := range append(append([]string{}, c.Command...), c.Args...) {
					path := arg
					if ours[arg] {
						path = "/usr/local/bin/" + arg
					}
					if !strings.HasPrefix(path, "/opt/mpijob/") && !strings.HasPrefix(path, "/usr/local/bin/") {
						continue
					}
					checked++
					if !have[path] {
						t.Errorf("%s: %s/%s runs %s, which image %s does not have", rt.Name, rj.Name, c.Name, arg, im.Ref)
					}
				}
			}
		}
	}
	if checked == 0 {
		t.Error("no runtime runs a file of mpijob's own: the check checked nothing")
	}
}

// The GPU runtime's Workers run the GPU image (PyTorch's CUDA build with
// NCCL) and its Launcher the CPU image with the same MPI from the same
// Debian release: mpirun on the Launcher starts orted on the Workers, and
// the two must be one OpenMPI.
func TestGPURuntimeRunsTheGPUImageWithTheLaunchersMPI(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "config", "runtimes", "mpi-openmpi-gpu.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rt trainer.ClusterTrainingRuntime
	if err := yaml.Unmarshal(b, &rt); err != nil {
		t.Fatal(err)
	}
	byRole := map[string]Image{}
	for _, rj := range rt.Spec.Template.Spec.ReplicatedJobs {
		for _, c := range rj.Template.Spec.Template.Spec.Containers {
			im, ok := ImageNamed(c.Image)
			if !ok {
				t.Fatalf("%s runs %s, which no recipe builds", rj.Name, c.Image)
			}
			byRole[rj.Name] = im
		}
	}
	worker, launcher := byRole["node"], byRole["launcher"]
	if !worker.GPU || !strings.Contains(worker.Check, "torch.version.cuda") || !strings.Contains(worker.Check, "nccl.version()") {
		t.Errorf("the Workers run %s: GPU %v, check %q; want the GPU image, checked for a CUDA build and NCCL", worker.Ref, worker.GPU, worker.Check)
	}
	if launcher.GPU {
		t.Errorf("the Launcher runs the GPU image %s; it needs no GPU", launcher.Ref)
	}
	if worker.suite() != launcher.suite() || worker.MPICC != launcher.MPICC || !slices.Contains(worker.Packages, "openmpi-bin") || !slices.Contains(launcher.Packages, "openmpi-bin") {
		t.Errorf("Launcher %s (Debian %s, %s) and Workers %s (Debian %s, %s) do not share one OpenMPI",
			launcher.Ref, launcher.suite(), launcher.MPICC, worker.Ref, worker.suite(), worker.MPICC)
	}
	if slices.Contains(worker.Packages, "python3-torch") {
		t.Errorf("the GPU image installs Debian's CPU PyTorch beside the CUDA build: %v", worker.Packages)
	}
}

// Only images marked GPU stay out of the nodes; every GPU image checks
// itself at build time.
func TestGPUImagesCheckThemselves(t *testing.T) {
	gpu := 0
	for _, im := range Images {
		if !im.GPU {
			continue
		}
		gpu++
		if !im.OnDemand {
			t.Errorf("%s is a GPU image that make dev would build", im.Name)
		}
		if im.Check == "" {
			t.Errorf("%s is a GPU image without a check", im.Name)
		}
		if !strings.Contains(im.Containerfile(), im.Check[:20]) {
			t.Errorf("%s's Containerfile does not run its check", im.Name)
		}
	}
	if gpu == 0 {
		t.Error("no GPU image")
	}
}

// A build that would fill the disk is refused before it starts, saying
// what it needs, what is free and what to do; an image with no stated
// need is never refused.
func TestNeedRoom(t *testing.T) {
	cuda, _ := ImageNamed("openmpi-cuda")
	openmpi, _ := ImageNamed("openmpi")
	if cuda.BuildSpace == 0 {
		t.Fatal("the CUDA image states no build space")
	}
	err := needRoom(cuda, "/cache/images", 18<<30)
	var room *NoRoomError
	if !errors.As(err, &room) {
		t.Fatalf("18 GiB free: %v, want a NoRoomError", err)
	}
	for _, want := range []string{"ghcr.io/mpijob/openmpi-cuda:4.1", "20.0 GiB", "/cache/images", "18.0 GiB is free", "make dev-down", "bin/mpijob-dev images openmpi-cuda"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
	if err := needRoom(cuda, "/cache/images", 21<<30); err != nil {
		t.Errorf("21 GiB free: %v", err)
	}
	if err := needRoom(openmpi, "/cache/images", 0); err != nil {
		t.Errorf("an image without a stated need: %v", err)
	}
	if err := roomFor(cuda, t.TempDir()); err != nil {
		var room *NoRoomError
		if !errors.As(err, &room) {
			t.Errorf("roomFor a real folder: %v", err)
		}
	}
}
