// Package controller keeps the mpijob Status of every MPI TrainJob: one
// round per job is gather → decide → apply. gather (controller.go) reads
// the job's JobSet and pods from the manager's cache, then only what the
// job's Input says the rules need (diagnose.Input.Needs*): Events, shared
// by namespace and reason among jobs (events.go), the Launcher's log
// through the Observer shared with the progress controller
// (package launcherlog), node capacity, queue positions. decide is
// diagnose.Decide (pure). apply writes the status annotation first, then
// the transition's Event and metrics, then suspends or ends the job when
// the Plan says so.
//
// What wakes it (SetupWithManager): a TrainJob's create, delete and any
// change but its own status annotation and the progress annotation
// (wake.TrainJobChanged); any change of the job's JobSet or of a pod of
// that JobSet. Each job is looked at again when its Plan says so (Kueue's
// queue positions are read then, from one shared snapshot).
package controller
