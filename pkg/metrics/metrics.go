// Package metrics defines mpijob-manager's Prometheus metrics. The
// diagnosis controller records them when an MPI job changes phase; the
// manager serves them over HTTPS with authentication and authorization.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/mpijob/mpijob/pkg/api"
)

const namespace = "mpijob"

// Buckets for durations from seconds to a day.
var durationBuckets = prometheus.ExponentialBuckets(1, 2.5, 14)

var (
	// JobsCreated counts MPI jobs the manager saw for the first time.
	JobsCreated = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "jobs_created_total", Help: "MPI jobs created, by namespace and runtime.",
	}, []string{"namespace", "runtime"})
	// JobsSucceeded counts MPI jobs that succeeded.
	JobsSucceeded = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "jobs_succeeded_total", Help: "MPI jobs that succeeded, by namespace and runtime.",
	}, []string{"namespace", "runtime"})
	// JobsFailed counts MPI jobs that failed, by diagnosis reason.
	JobsFailed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "jobs_failed_total", Help: "MPI jobs that failed, by namespace, runtime and reason.",
	}, []string{"namespace", "runtime", "reason"})
	// JobDuration is from creation to success or failure.
	JobDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Name: "job_duration_seconds", Help: "Time from creation to the end of an MPI job.", Buckets: durationBuckets,
	}, []string{"namespace", "runtime", "phase"})
	// TimeToStart is from creation to the Launcher running.
	TimeToStart = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Name: "time_to_start_seconds", Help: "Time from creation until the Launcher runs.", Buckets: durationBuckets,
	}, []string{"namespace", "runtime"})
	// SchedulingWait is the time spent Pending, Queued or GangScheduling.
	SchedulingWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Name: "scheduling_wait_seconds", Help: "Time from creation until every Worker is placed on a node.", Buckets: durationBuckets,
	}, []string{"namespace", "runtime"})
	// WorkersReadyToLauncher is from every Worker placed until the Launcher runs.
	WorkersReadyToLauncher = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Name: "launcher_to_workers_ready_seconds", Help: "Time from every Worker placed until all are Ready and the Launcher runs.", Buckets: durationBuckets,
	}, []string{"namespace", "runtime"})
	// KueueVisibilityRequests counts the manager's requests to Kueue's
	// visibility API for queue positions, by outcome ("ok" or "error"; on
	// error the positions are computed from the Workloads).
	KueueVisibilityRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "kueue_visibility_requests_total",
		Help: "Requests to Kueue's visibility API for queue positions, by outcome (ok, error: positions computed from the Workloads instead).",
	}, []string{"outcome"})
	// LauncherLogReads counts the manager's looks at Launchers' logs, by
	// outcome: "read" (a read of the last 200 lines), "shared" (a read made
	// moments before served), "error".
	LauncherLogReads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "launcher_log_reads_total",
		Help: "Looks at Launchers' logs (progress, rank failures, diagnosis), by outcome (read, shared: a read made moments before served, error).",
	}, []string{"outcome"})
)

func init() {
	ctrlmetrics.Registry.MustRegister(JobsCreated, JobsSucceeded, JobsFailed, JobDuration, TimeToStart, SchedulingWait, WorkersReadyToLauncher, KueueVisibilityRequests, LauncherLogReads)
}

// Transition records what a change of an MPI job from prev to next says.
// prev is nil the first time the manager sees the job. created is the
// job's creation time, placed when its Workers were all placed (zero if
// unknown), now the time of the change.
func Transition(ns, runtime string, prev *api.Status, next api.Status, created, placed, now time.Time) {
	if prev == nil {
		JobsCreated.WithLabelValues(ns, runtime).Inc()
	}
	from := api.Phase("")
	if prev != nil {
		from = prev.Phase
	}
	if from == next.Phase {
		return
	}
	waiting := func(p api.Phase) bool {
		return p == "" || p == api.PhasePending || p == api.PhaseQueued || p == api.PhaseGangScheduling || p == api.PhaseSuspended
	}
	if waiting(from) && !waiting(next.Phase) {
		SchedulingWait.WithLabelValues(ns, runtime).Observe(now.Sub(created).Seconds())
	}
	if next.Phase == api.PhaseRunning && from != api.PhaseRunning {
		TimeToStart.WithLabelValues(ns, runtime).Observe(now.Sub(created).Seconds())
		if !placed.IsZero() {
			WorkersReadyToLauncher.WithLabelValues(ns, runtime).Observe(now.Sub(placed).Seconds())
		}
	}
	switch next.Phase {
	case api.PhaseSucceeded:
		JobsSucceeded.WithLabelValues(ns, runtime).Inc()
		JobDuration.WithLabelValues(ns, runtime, string(next.Phase)).Observe(now.Sub(created).Seconds())
	case api.PhaseFailed:
		JobsFailed.WithLabelValues(ns, runtime, next.Reason).Inc()
		JobDuration.WithLabelValues(ns, runtime, string(next.Phase)).Observe(now.Sub(created).Seconds())
	}
}
