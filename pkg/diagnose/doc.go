// Package diagnose turns what the cluster says about one MPI job (TrainJob,
// JobSet, Launcher and Worker pods, Events, the Launcher's log, node free
// capacity, queue state) into an api.Status: the phase, and for a job that
// waits or failed a plain-language reason naming the Worker and the next
// step. It is pure: it reads and writes nothing. Diagnose is the rules;
// Decide and Settled (plan.go) say what one round of the diagnosis does
// with a job (what to write and when, the Event, whether to suspend or
// end it); the Needs* questions on an Input (needs.go) say which extra
// reads the rules will look at; Observe says what a Launcher's log holds.
//
// The controller that gathers the inputs and applies the Plan is package
// diagnose/controller; Launchers' logs are read by package launcherlog,
// which the diagnosis and the progress controller share.
package diagnose
