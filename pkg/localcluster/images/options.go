package images

// Options says where the images' inputs and outputs are.
type Options struct {
	// RepoRoot is the mpijob repository (images/, examples/).
	RepoRoot string
	// CacheDir keeps the built images (CacheDir/images), keyed by inputs.
	CacheDir string
}

// Progress reports a long step: Step says what starts and returns the
// function that says it ended (localcluster.Progress).
type Progress interface {
	Step(format string, args ...any) func()
}
