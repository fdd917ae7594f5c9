// Package runtimes knows how Trainer V2 turns an MPI TrainJob and its
// runtime into pods: how many Workers, and the effective Launcher and
// Worker pod specs (runtime template + the job's resourcesPerNode and
// runtimePatches), a pod's resource demand (PodDemand), the runtime policy
// administrators set with policy.mpijob.dev/* annotations (ParsePolicy),
// and the lookup of the runtime a TrainJob references (RuntimeLookup, the
// one part that reads the cluster). Admission, the diagnosis, the
// NetworkPolicy controller, the CLI and the dashboard share it, so none of
// them guesses the shape or the policy differently.
package runtimes
