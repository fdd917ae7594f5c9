//go:build race

package diagnose

// raceEnabled: the tests run under the race detector, whose sync.Pool
// drops a share of what is put back (so a pooled buffer is made again).
const raceEnabled = true
