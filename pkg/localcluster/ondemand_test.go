package localcluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
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
		"a reference":         {names: []string{"ghcr.io/mpijob/mpich:4.0"}, want: []string{"mpich"}},
		"all":                 {all: true, want: ImageNames()},
		"nothing named":       {wantErr: "name an image (openmpi, mpich, openmpi5, intel, horovod, deepspeed) or use --all"},
		"a typo lists images": {names: []string{"openmpi6"}, wantErr: `unknown image "openmpi6": the images are openmpi, mpich, openmpi5, intel, horovod, deepspeed`},
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
