package localcluster

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseImageList(t *testing.T) {
	cases := map[string]struct {
		out  string
		want map[string]string
	}{
		"ctr's columns, the header skipped": {
			out: "REF                      TYPE                                       DIGEST                  SIZE      PLATFORMS   LABELS\n" +
				"ghcr.io/mpijob/mpich:5.0 application/vnd.oci.image.manifest.v1+json sha256:edefed30cf1e 330.7 MiB linux/amd64 io.cri-containerd.image=managed\n" +
				"sha256:3c1b0b1cd5b4      application/vnd.oci.image.manifest.v1+json sha256:3c1b0b1cd5b4 1.2 MiB   linux/amd64 -\n",
			want: map[string]string{"ghcr.io/mpijob/mpich:5.0": "sha256:edefed30cf1e", "sha256:3c1b0b1cd5b4": "sha256:3c1b0b1cd5b4"},
		},
		"no images":                   {out: "REF TYPE DIGEST SIZE PLATFORMS LABELS\n", want: map[string]string{}},
		"a line that is not an image": {out: "REF TYPE DIGEST SIZE PLATFORMS LABELS\nwarning: something\n", want: map[string]string{}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, parseImageList(tc.out)); diff != "" {
				t.Errorf("parseImageList (-want,+got):\n%s", diff)
			}
		})
	}
}

// A node's image of the same name from another build is not this tar's:
// sameBuild says so, and says nothing against a tar it cannot read.
func TestSameBuild(t *testing.T) {
	if sameBuild("/nonexistent.tar", "") {
		t.Error("no image on the node counts as the same build")
	}
	if !sameBuild("/nonexistent.tar", "sha256:aa") {
		t.Error("an unreadable tar must leave the decision to the marker")
	}
}

// The IDs no name holds are an image's earlier builds; an ID whose image
// still has a name stays.
func TestDanglingIDs(t *testing.T) {
	present := map[string]string{
		"ghcr.io/mpijob/mpich:5.0":   "sha256:new",
		"sha256:idnew":               "sha256:new",
		"sha256:idold":               "sha256:old",
		"sha256:idolder":             "sha256:older",
		"registry.k8s.io/pause:3.10": "sha256:pause",
	}
	if diff := cmp.Diff([]string{"sha256:idold", "sha256:idolder"}, danglingIDs(present)); diff != "" {
		t.Errorf("danglingIDs (-want,+got):\n%s", diff)
	}
	if got := danglingIDs(map[string]string{}); got != nil {
		t.Errorf("no images: %v", got)
	}
}

// The packed layers shed after an import are the manifest's layers, and
// only those: its config (which the kubelet reads) stays, and an index
// names no layer of its own.
func TestManifestLayers(t *testing.T) {
	cases := map[string]struct {
		manifest string
		want     []string
		err      bool
	}{
		"an OCI manifest": {
			manifest: `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",` +
				`"config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:cfg","size":10},` +
				`"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:l1","size":1},` +
				`{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:l2","size":2}]}`,
			want: []string{"sha256:l1", "sha256:l2"},
		},
		"an index": {manifest: `{"schemaVersion":2,"manifests":[{"digest":"sha256:m1"}]}`},
		"a digest of another algorithm or a flag-like value is not passed on": {manifest: `{"layers":[{"digest":"--all"},{"digest":"sha512:x"},{"digest":"sha256:ok"}]}`, want: []string{"sha256:ok"}},
		"not JSON": {manifest: "ctr: content digest sha256:x: not found", err: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := manifestLayers([]byte(tc.manifest))
			if (err != nil) != tc.err {
				t.Fatalf("error %v, want an error: %v", err, tc.err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("manifestLayers (-want,+got):\n%s", diff)
			}
		})
	}
}
