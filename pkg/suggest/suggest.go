// Package suggest finds the known name closest to a mistyped one, so errors
// about unknown runtimes, jobs and namespaces can say "did you mean …?".
package suggest

import (
	"strings"

	"github.com/agnivade/levenshtein"
)

// Closest returns the candidate nearest to name, or "" when none is close
// enough to be a likely typo (edit distance at most max(2, len(name)/3)).
func Closest(name string, candidates []string) string {
	best, bestD := "", 1<<30
	for _, c := range candidates {
		if d := levenshtein.ComputeDistance(strings.ToLower(name), strings.ToLower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	if best != "" && bestD <= max(2, len(name)/3) {
		return best
	}
	return ""
}
