package artifacts

import (
	"fmt"
	"strings"
	"unicode"
)

// ReaderMountRoot is where a reader pod mounts the claim it reads: a
// folder of its own, on no program's search path, whatever path the
// job's pods mounted it at. The job's own files (a claim mounted at
// /usr/local/bin by the job, say) can then never stand in for the
// programs the reader runs, which it calls by absolute path.
const ReaderMountRoot = "/mpijob-artifacts"

// ReaderMount is where a reader pod mounts claim.
func ReaderMount(claim string) string { return ReaderMountRoot + "/" + claim }

// NameProblem says why an artifact's name (a path relative to the job's
// folder, '/' between folders, as a store lists it) cannot be written
// under a download folder; "" when it can. Names are the job's to choose,
// so one that climbs out ("../x"), starts at the root, hides in a folder
// named "." or "", or carries control characters or a backslash is
// skipped, never written (the other files still are). Rule and vectors
// are shared with the SDK (testdata/names.json).
func NameProblem(name string) string {
	if name == "" {
		return "is empty"
	}
	for _, r := range name {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return fmt.Sprintf("has the control character %U", r)
		}
		if unicode.Is(unicode.Cf, r) {
			// Invisible: U+202E turns what follows around on screen.
			return fmt.Sprintf("has the invisible format character %U", r)
		}
		if r == '\\' {
			return "has a backslash"
		}
	}
	if strings.HasPrefix(name, "/") {
		return "starts at the root (/)"
	}
	for _, part := range strings.Split(name, "/") {
		switch part {
		case "..":
			return "climbs out of the job's folder (..)"
		case ".", "":
			return "has an empty or '.' folder"
		}
		if strings.HasPrefix(part, ".") {
			// .git/config, .bashrc: a hidden file changes what tools run
			// in the folder do.
			return "is hidden (a file or folder starting with '.', such as .git or .bashrc, changes what tools in the folder do)"
		}
	}
	return ""
}
