// Package e2e holds whole-product tests that run real MPI jobs through
// upstream Trainer V2 and JobSet on the local cluster. Build tag: e2e.
package e2e
