// Package runtimes knows how Trainer V2 turns an MPI TrainJob and its
// runtime into pods: how many Workers, and the effective Launcher and
// Worker pod specs (runtime template + the job's resourcesPerNode and
// runtimePatches). Admission, the CLI and the manager share it, so none of
// them guesses the shape differently. It is pure.
package runtimes
