package api

// MaxWholeReads is how many jobs a list from metadata (kubectl mpijob get,
// the SDK's list_jobs) reads whole, one by one, when their status cannot
// make their row; with more it lists whole jobs instead.
// testdata/row-from-status.json holds it for the SDK's test too.
const MaxWholeReads = 20

// RowFromStatus is the job's status when it can make the job's list row
// from the job's metadata alone: mpijob-manager wrote it, and it names the
// job's runtime and slots per Worker (0: the manager could not read the
// runtime's shape, and the row would take slots and GPUs from the spec).
// The CLI and the Python SDK (MPIJob.from_metadata) follow this one rule;
// testdata/row-from-status.json holds the vectors both test.
func RowFromStatus(annotations map[string]string) (Status, bool) {
	s, ok, err := ReadStatus(annotations)
	return s, ok && err == nil && s.Runtime != "" && s.SlotsPerWorker >= 1
}
