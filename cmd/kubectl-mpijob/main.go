// Command kubectl-mpijob manages MPI jobs (TrainJobs on MPI runtimes) from
// a terminal: `kubectl mpijob`, `oc mpijob` or standalone.
package main

import (
	"os"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/mpijob/mpijob/pkg/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}))
}
