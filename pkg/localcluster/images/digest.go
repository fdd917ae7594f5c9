package images

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// manifestDigests remembers ManifestDigest by tar, its size and its time:
// a tar is read once per process (tars are rewritten, never edited).
var manifestDigests sync.Map

type tarKey struct {
	path string
	size int64
	mod  time.Time
}

// ManifestDigest is the digest of the image manifest that an OCI layout
// tar holds (its index.json's first manifest): the digest a containerd
// that imported the tar lists for the image.
func ManifestDigest(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	key := tarKey{path, st.Size(), st.ModTime()}
	if d, ok := manifestDigests.Load(key); ok {
		return d.(string), nil
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	d, err := indexDigest(f)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	manifestDigests.Store(key, d)
	return d, nil
}

// indexDigest finds index.json in an OCI layout tar (skipping the blobs'
// contents: tar seeks over them in a file) and returns its first
// manifest's digest.
func indexDigest(r io.Reader) (string, error) {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return "", errors.New("no index.json: not an OCI image layout")
		}
		if err != nil {
			return "", err
		}
		if h.Name != "index.json" && h.Name != "./index.json" {
			continue
		}
		var index struct {
			Manifests []struct {
				Digest string `json:"digest"`
			} `json:"manifests"`
		}
		if err := json.NewDecoder(tr).Decode(&index); err != nil {
			return "", fmt.Errorf("index.json: %w", err)
		}
		if len(index.Manifests) == 0 || index.Manifests[0].Digest == "" {
			return "", errors.New("index.json lists no manifest")
		}
		return index.Manifests[0].Digest, nil
	}
}
