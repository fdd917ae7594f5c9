// Command kubectl-mpijob manages MPI jobs (TrainJobs on MPI runtimes) from
// a terminal: `kubectl mpijob`, `oc mpijob` or standalone.
package main

import (
	"log/slog"
	"os"

	"github.com/go-logr/logr"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/mpijob/mpijob/pkg/cli"
)

func main() {
	// controller-runtime's client logs through its own logger: errors
	// only, to stderr. Unset, a command that ran half a minute (logs -f,
	// wait) could print a goroutine's stack ("log.SetLogger(...) was never
	// called").
	ctrllog.SetLogger(logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	os.Exit(cli.Main(os.Args[1:], genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}))
}
