// Package jobspec is the one job builder: what a user asks for (Input,
// from kubectl mpijob create, the dashboard's wizard or a converted legacy
// MPIJob) becomes the objects of one MPI job (Job). It is pure; callers
// create the objects.
//
// Trainer V2.3 applies a TrainJob's image only to the Launcher and its
// resourcesPerNode only to the Launcher (or to every pod when the Launcher
// hosts ranks); runtimePatches cannot set images or resources
// (kubeflow/trainer#2650, #4030, #3954). A job that sets an image or
// resources therefore gets a TrainingRuntime of its own in its namespace,
// derived from the ClusterTrainingRuntime the user chose: the same spec
// with the images and resources of the Launcher's and Workers' node
// containers changed. Trainer, JobSet, Kueue, quota and admission all read
// that runtime, so what runs is what is accounted. The TrainJob owns it,
// so it goes with the job; mpijob-manager adopts or removes copies a
// client left without an owner.
//
// The Python SDK (sdk/python/mpijob/jobspec.py) mirrors Build; both are
// checked against the vectors in testdata/vectors.
package jobspec
