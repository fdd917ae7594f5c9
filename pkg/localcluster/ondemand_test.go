package localcluster

import (
	"context"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/mpijob/mpijob/pkg/localcluster/images"
)

// Every image has its own short name and its own repository: kustomize's
// images: matches by repository, so two tags of one repository could not be
// pointed at two pushed digests.
func TestImagesHaveDistinctNamesAndRepositories(t *testing.T) {
	names, repos := map[string]bool{}, map[string]bool{}
	for _, im := range Images {
		if names[im.Name] {
			t.Errorf("two images are named %q", im.Name)
		}
		names[im.Name] = true
		tag, err := name.NewTag(im.Ref, name.StrictValidation)
		if err != nil {
			t.Errorf("image %s: %v", im.Name, err)
			continue
		}
		if repos[tag.Context().Name()] {
			t.Errorf("two images share repository %s", tag.Context().Name())
		}
		repos[tag.Context().Name()] = true
		if strings.Contains(im.Ref, "example.com") {
			t.Errorf("image %s is a placeholder: %s", im.Name, im.Ref)
		}
	}
}

func TestSelectImages(t *testing.T) {
	cases := map[string]struct {
		names   []string
		all     bool
		want    []string
		wantErr string
	}{
		"short names":         {names: []string{"openmpi5", "intel"}, want: []string{"openmpi5", "intel"}},
		"a reference":         {names: []string{"ghcr.io/mpijob/mpich:5.0"}, want: []string{"mpich"}},
		"all":                 {all: true, want: ImageNames()},
		"nothing named":       {wantErr: "name an image (openmpi, mpich, openmpi5, openmpi-cuda, intel, intel-tensorflow, horovod, deepspeed) or use --all"},
		"a typo lists images": {names: []string{"openmpi6"}, wantErr: `unknown image "openmpi6": the images are openmpi, mpich, openmpi5, openmpi-cuda, intel, intel-tensorflow, horovod, deepspeed`},
	}
	for n, tc := range cases {
		t.Run(n, func(t *testing.T) {
			got, err := SelectImages(tc.names, tc.all)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, im := range got {
				names = append(names, im.Name)
			}
			if diff := cmp.Diff(tc.want, names); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}

func TestValidRegistryAndPushTarget(t *testing.T) {
	for _, ok := range []string{"quay.io/my-team", "registry.internal:5000/mpi", "localhost:5000", "127.0.0.1:5000/a/b", "quay.io/team/"} {
		if err := ValidRegistry(ok); err != nil {
			t.Errorf("ValidRegistry(%q): %v", ok, err)
		}
	}
	for bad, want := range map[string]string{
		"":                       "is not a registry and path",
		"quay.io/Team":           "is not a registry and path",
		"my-team":                `starts with "my-team", which is not a registry host: give one such as quay.io/my-team`,
		"quay.io/team@sha256:00": "is not a registry and path",
		"quay.io/te am":          "is not a registry and path",
	} {
		err := ValidRegistry(bad)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ValidRegistry(%q) = %v, want an error containing %q", bad, err, want)
		}
	}
	got, err := PushTarget("ghcr.io/mpijob/intel-mpi:2021.18", "registry.internal:5000/mpi/")
	if err != nil || got != "registry.internal:5000/mpi/intel-mpi:2021.18" {
		t.Errorf("PushTarget = %q, %v", got, err)
	}
}

// The overlay `make images REGISTRY=...` writes points every image of
// config/default that was pushed at its registry copy by digest, and
// leaves nothing of config/default on the old names.
func TestRegistryOverlayRewritesEveryRuntimeImage(t *testing.T) {
	root, err := FindRepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	var pushed []Pushed
	for _, im := range Images {
		to, err := PushTarget(im.Ref, "registry.internal:5000/mpi")
		if err != nil {
			t.Fatal(err)
		}
		pushed = append(pushed, Pushed{Ref: im.Ref, To: strings.SplitN(to, ":", 3)[0] + ":" + strings.SplitN(to, ":", 3)[1] + "@" + digest})
	}
	for _, p := range projectImages {
		pushed = append(pushed, Pushed{Ref: p.Repository + ":dev-1", To: "registry.internal:5000/mpi/" + p.Name + "@" + digest})
	}
	dir := t.TempDir()
	base, err := filepath.Rel(dir, filepath.Join(root, "config", "default"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := RegistryOverlay(base, pushed)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build of the overlay: %v\n%s", err, b)
	}
	out, err := res.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "image: ") && !strings.HasPrefix(line, "- image: ") {
			continue
		}
		n++
		img := strings.TrimPrefix(strings.TrimPrefix(line, "- "), "image: ")
		if !strings.HasPrefix(img, "registry.internal:5000/mpi/") || !strings.HasSuffix(img, "@"+digest) {
			t.Errorf("config/default through the overlay still runs %s", img)
		}
	}
	if n < 20 {
		t.Errorf("only %d images in config/default through the overlay", n)
	}
}

// A pod on a real node that refers to an on-demand image its node has not
// imported asks for a build; once the node's marker for the current build
// is there, or on a kwok node, or for an image make dev builds, it does not.
// pod is a pod on node whose init container runs images[0] and whose
// containers run the rest.
func pod(node string, images ...string) *corev1.Pod {
	p := &corev1.Pod{Spec: corev1.PodSpec{NodeName: node}}
	p.Spec.InitContainers = []corev1.Container{{Image: images[0]}}
	for _, im := range images[1:] {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Image: im})
	}
	return p
}

func TestOnDemandWanted(t *testing.T) {
	root, err := FindRepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{RepoRoot: root, CacheDir: t.TempDir(), RealNodes: 2}
	intel, _ := ImageNamed("intel")
	openmpi, _ := ImageNamed("openmpi")
	names := func(imgs []Image) []string {
		var out []string
		for _, im := range imgs {
			out = append(out, im.Name)
		}
		return out
	}
	if got := names(OnDemandWanted(opts, pod(nodeName(1), intel.Ref, intel.Ref))); !cmp.Equal(got, []string{"intel"}) {
		t.Errorf("a pod with the Intel image on node 1 wants %v, want [intel]", got)
	}
	if got := OnDemandWanted(opts, pod(nodeName(1), openmpi.Ref, openmpi.Ref)); len(got) != 0 {
		t.Errorf("make dev's own image is wanted: %v", names(got))
	}
	if got := OnDemandWanted(opts, pod("kwok-node-0", intel.Ref, intel.Ref)); len(got) != 0 {
		t.Errorf("a kwok pod wants %v", names(got))
	}
	tar, err := intel.Tar(opts.images())
	if err != nil {
		t.Fatal(err)
	}
	store := New(opts, io.Discard).realNode(1).store
	if err := os.MkdirAll(store, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(New(opts, io.Discard).realNode(1).importMarker(tar), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := OnDemandWanted(opts, pod(nodeName(1), intel.Ref, intel.Ref)); len(got) != 0 {
		t.Errorf("node 1 holds the Intel image, still wanted: %v", names(got))
	}
	failing := pod(nodeName(1), intel.Ref, intel.Ref)
	failing.Status.ContainerStatuses = []corev1.ContainerStatus{{Image: intel.Ref, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}}}
	if got := names(OnDemandWanted(opts, failing)); !cmp.Equal(got, []string{"intel"}) {
		t.Errorf("a pod on node 1 that cannot pull the Intel image (deleted under disk pressure) wants %v, want [intel]", got)
	}
	if got := names(OnDemandWanted(opts, pod(nodeName(2), intel.Ref, intel.Ref))); !cmp.Equal(got, []string{"intel"}) {
		t.Errorf("node 2 lacks the Intel image; wanted %v, want [intel]", got)
	}
}

// The GPU image is never built for, nor imported into, the local
// cluster's real nodes (they have no GPU): a pod there that asks for it
// gets a Warning instead, and a pod on a kwok node asks for nothing.
func TestGPUImageStaysOffTheRealNodes(t *testing.T) {
	root, err := FindRepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{RepoRoot: root, CacheDir: t.TempDir(), RealNodes: 2}
	cuda, ok := ImageNamed("openmpi-cuda")
	if !ok || !cuda.GPU {
		t.Fatalf("no GPU image openmpi-cuda: %+v", cuda)
	}
	openmpi, _ := ImageNamed("openmpi")
	onReal := pod(nodeName(1), openmpi.Ref, cuda.Ref, cuda.Ref)
	if got := OnDemandWanted(opts, onReal); len(got) != 0 {
		t.Errorf("a pod on a real node wants the GPU image built: %v", got)
	}
	got := GPUImagesOf(opts, onReal)
	if len(got) != 1 || got[0].Name != "openmpi-cuda" {
		t.Errorf("GPUImagesOf a real node's pod = %v, want [openmpi-cuda] once", got)
	}
	if got := GPUImagesOf(opts, pod("kwok-node-0", cuda.Ref, cuda.Ref)); len(got) != 0 {
		t.Errorf("a pod on a kwok GPU node is told its image is missing: %v", got)
	}
	if got := GPUImagesOf(opts, pod(nodeName(2), openmpi.Ref, openmpi.Ref)); len(got) != 0 {
		t.Errorf("a CPU image is called a GPU image: %v", got)
	}
	msg := gpuImageMessage(cuda)
	for _, want := range []string{cuda.Ref, "no GPU", "--gpus", "mpi-openmpi"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the Warning %q does not say %q", msg, want)
		}
	}

	// Built, it is still not among what the nodes import.
	tar, err := cuda.Tar(opts.images())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(tar), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tar, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tars, err := images.ImageTars(opts.images())
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(tars, tar) {
		t.Errorf("the nodes import the built GPU image: %v", tars)
	}
	openmpiTar, _ := openmpi.Tar(opts.images())
	if !slices.Contains(tars, openmpiTar) {
		t.Errorf("the nodes do not import the OpenMPI image: %v", tars)
	}
}

// pushTar pushes an image tar that writeImage made to a real registry
// server (go-containerregistry's, on loopback), which then serves it by the
// digest pushTar returns, and leaves no unpacked layout behind.
func TestPushTarToARegistry(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "hello"), []byte("hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tarPath := filepath.Join(t.TempDir(), "img.tar")
	if err := images.WriteImage(root, tarPath+".layer", "ghcr.io/mpijob/test:1.0", v1.Config{User: "1000"}, tarPath); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(registry.New())
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	dst, err := PushTarget("ghcr.io/mpijob/test:1.0", host+"/team")
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(dst)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := filepath.Glob(filepath.Join(os.TempDir(), "mpijob-push-*"))
	d, err := pushTar(context.Background(), tarPath, tag)
	if err != nil {
		t.Fatal(err)
	}
	got, err := remote.Image(tag.Context().Digest(d.String()))
	if err != nil {
		t.Fatalf("the registry does not serve %s@%s: %v", tag.Context(), d, err)
	}
	if gd, _ := got.Digest(); gd != d {
		t.Errorf("served digest %s, pushed %s", gd, d)
	}
	after, _ := filepath.Glob(filepath.Join(os.TempDir(), "mpijob-push-*"))
	if len(after) > len(before) {
		t.Errorf("pushTar left its unpacked layout: %v", after)
	}
}
