// Package diagnose turns what the cluster says about one MPI job (TrainJob,
// JobSet, Launcher and Worker pods, Events, the Launcher's log, node free
// capacity, queue state) into an api.Status: the phase, and for a job that
// waits or failed a plain-language reason naming the Worker and the next
// step. It is pure: the manager's controller gathers the inputs and writes
// the result.
package diagnose
