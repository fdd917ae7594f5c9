package localcluster

import (
	"context"

	"github.com/mpijob/mpijob/pkg/localcluster/images"
)

// The MPI images: what they are and how they are built is package images;
// the cluster installs what building needs, and imports the images into its
// nodes (nodeimages.go).

// Image is an MPI image the local cluster builds (images.Image).
type Image = images.Image

// Images are the MPI images, by name (images.Images).
var Images = images.Images

// UserImage is the local cluster's stand-in for a user's own image.
const UserImage = images.UserImage

// ImageNamed and ImageNames find the MPI images.
var (
	ImageNamed = images.ImageNamed
	ImageNames = images.ImageNames
)

func (o Options) images() images.Options {
	return images.Options{RepoRoot: o.RepoRoot, CacheDir: o.CacheDir}
}

// BuildImages builds the pause image and every base image that is missing.
func BuildImages(ctx context.Context, opts Options, p *Progress) error {
	_, err := BuildImagesOf(ctx, opts, p, images.Base(), "")
	return err
}

// BuildImagesOf builds the pause image and each of imgs that is missing,
// saying why (when why is set), and returns their tars in order. debootstrap
// and the C compiler come from Debian packages: a fresh machine gets them
// here too, not only on `up`.
func BuildImagesOf(ctx context.Context, opts Options, p *Progress, imgs []Image, why string) ([]string, error) {
	if err := installPackages(ctx, p); err != nil {
		return nil, err
	}
	return images.BuildImagesOf(ctx, opts.images(), p, imgs, why)
}
