// Command containerfiles writes images/*/Containerfile from the images'
// recipe (pkg/localcluster/images): what `make images` builds is what the
// Containerfiles say.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/mpijob/mpijob/pkg/localcluster/images"
)

func main() {
	for _, im := range images.Images {
		p := filepath.Join("images", im.Dir, "Containerfile")
		if err := os.WriteFile(p, []byte(im.Containerfile()), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println("wrote", p)
	}
}
