package jobview

// LogSource is where one Launcher's or Worker's log is read.
type LogSource string

const (
	// LogNone is nowhere: the pod is not there and the store has nothing
	// of it, or there is no store.
	LogNone LogSource = "none"
	// LogPod is the pod's own log, from the kubelet.
	LogPod LogSource = "pod"
	// LogStore is the log store's lines (config/logstore): the pod is
	// gone, or the store was asked for.
	LogStore LogSource = "store"
)

// LogWhere is what decides where a log is read.
type LogWhere struct {
	// Role is launcher or worker.
	Role string `json:"role"`
	// PodLive: the job has this Launcher's or Worker's pod now.
	PodLive bool `json:"podLive"`
	// LauncherLive: the job has its Launcher pod now.
	LauncherLive bool `json:"launcherLive"`
	// Finished: the job Succeeded or Failed.
	Finished bool `json:"finished"`
	// Store: the cluster keeps a log store the user may read.
	Store bool `json:"store"`
	// StoreOnly: the user asked for the store's lines (--source store).
	StoreOnly bool `json:"storeOnly"`
}

// LogFrom says where a Launcher's or Worker's log is read, the same in the
// CLI, the dashboard and the SDK (vectors: testdata/log-sources.json): its
// pod while the job has it; else the store for a job that ran, that is one
// that finished, or a Worker gone while its Launcher still runs. A job
// that never started has nothing in the store.
func LogFrom(w LogWhere) LogSource {
	if w.PodLive && !w.StoreOnly {
		return LogPod
	}
	if !w.Store {
		return LogNone
	}
	if w.Finished || w.StoreOnly || (w.Role == "worker" && w.LauncherLive) {
		return LogStore
	}
	return LogNone
}
