// Package api holds mpijob's own vocabulary, shared by the manager, the CLI,
// the SDK (through its JSON form) and the dashboard: the phases of an MPI
// job, the diagnosis the manager writes, and the label and annotation keys.
//
// Where the diagnosis lives: Trainer V2 caps TrainJob status conditions at 8
// and writes them with a JSON merge patch of the whole list, so a condition
// of ours would be dropped each time Trainer changes one of its own, and
// every write to a TrainJob passes Trainer's and Kueue's webhooks and wakes
// their controllers. The manager therefore keeps its diagnosis as JSON in a
// JobStatus of its own per job (jobstatus.go), applied under its own field
// manager; readers join it into the job's StatusAnnotation, where older
// managers wrote it.
package api
