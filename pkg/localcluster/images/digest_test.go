package images

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func ociTar(t *testing.T, files map[string]string, order ...string) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, name := range order {
		body := files[name]
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestManifestDigest(t *testing.T) {
	blob := strings.Repeat("x", 1<<20)
	cases := map[string]struct {
		files   map[string]string
		order   []string
		want    string
		wantErr string
	}{
		"index.json after the blobs": {
			files: map[string]string{"blobs/sha256/aa": blob, "oci-layout": `{"imageLayoutVersion":"1.0.0"}`,
				"index.json": `{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:26e7bc","size":407}]}`},
			order: []string{"blobs/sha256/aa", "oci-layout", "index.json"},
			want:  "sha256:26e7bc",
		},
		"a tar without an index": {
			files: map[string]string{"blobs/sha256/aa": blob}, order: []string{"blobs/sha256/aa"},
			wantErr: "no index.json: not an OCI image layout",
		},
		"an index without a manifest": {
			files: map[string]string{"index.json": `{"schemaVersion":2,"manifests":[]}`}, order: []string{"index.json"},
			wantErr: "index.json lists no manifest",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "im.tar")
			if err := os.WriteFile(path, ociTar(t, tc.files, tc.order...), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := ManifestDigest(path)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ManifestDigest = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
