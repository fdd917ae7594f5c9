// Package launcherlog reads Launchers' logs for mpijob-manager's
// controllers: the one way a Launcher's log is read (ReadLauncherLog) and
// the Observer that the diagnosis and the progress controller share, so a
// running Launcher is read once per round for both. What a read says is
// diagnose.Observe's (pure).
package launcherlog

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/diagnose"
	"github.com/mpijob/mpijob/pkg/metrics"
)

// LogTailLines is how much of a Launcher's log one read takes.
const LogTailLines = 200

// ReadLauncherLog reads a Launcher's log the one way the manager does (the
// progress controller every Interval, the diagnosis of a failed job or of
// one that makes no progress): the last LogTailLines lines of its node
// container, with the kubelet's timestamps. Observe says what they hold.
func ReadLauncherLog(ctx context.Context, cs kubernetes.Interface, p *corev1.Pod) (string, error) {
	b, err := cs.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{
		Container: api.NodeContainer, TailLines: ptr.To[int64](LogTailLines), Timestamps: true,
	}).DoRaw(ctx)
	return string(b), err
}

// Observer reads Launchers' logs for the whole manager: the progress
// controller and the diagnosis share one, and a read serves every reader
// that accepts an observation of its age; the step reports of earlier
// reads are kept with each read's (diagnose.KeepStepReports). The progress controller reads a
// running Launcher every Interval; the diagnosis's look at a running job's
// last line takes that read instead of one of its own, and a failed
// Launcher's log, which no longer changes, is read once for both. Kept
// reads are dropped once older than KeepFor (or past maxObserved of them).
type Observer struct {
	Logs kubernetes.Interface
	// Read reads a Launcher's log (ReadLauncherLog when nil; tests give
	// their own).
	Read func(ctx context.Context, p *corev1.Pod) (string, error)

	mu    sync.Mutex
	kept  map[types.UID]kept
	reads int
}

// kept is one read of a Launcher in one phase.
type kept struct {
	phase   corev1.PodPhase
	at      time.Time
	timeout time.Duration
	obs     diagnose.Observation
	// failed is the error of a read that failed (obs then holds the step
	// reports of the reads before it, nothing else).
	failed error
}

const (
	// KeepFor is how long a read is kept: longer than any reader's
	// maxAge.
	KeepFor = 2 * time.Minute
	// maxObserved bounds the reads kept (one per Launcher).
	maxObserved = 10000
)

// Observe is what p's log says, from a read made no more than maxAge
// before now of p in its current phase with the same progress timeout,
// or from a read made now; tail asks for the lines themselves
// (diagnose.Observation.Tail), which only a reader that needs them keeps.
//
// A read that failed answers the readers that come within maxAge of it
// with its error, as a read that succeeded answers with what it said: a
// Launcher whose node serves no log (a kubelet that is down, or kwok's
// nodes) costs the API server one proxied request a round, not one per
// reader. A reader of the lines (tail) always tries again: a failed
// Launcher's log can lag its pod's end.
func (o *Observer) Observe(ctx context.Context, p *corev1.Pod, progressTimeout, maxAge time.Duration, now time.Time, tail bool) (diagnose.Observation, error) {
	o.mu.Lock()
	k, ok := o.kept[p.UID]
	o.mu.Unlock()
	fresh := ok && k.phase == p.Status.Phase && now.Sub(k.at) <= maxAge
	switch {
	case fresh && k.failed != nil && !tail:
		metrics.LauncherLogReads.WithLabelValues("shared").Inc()
		return diagnose.Observation{}, k.failed
	case fresh && k.failed == nil && k.timeout == progressTimeout && (!tail || k.obs.Tail != ""):
		metrics.LauncherLogReads.WithLabelValues("shared").Inc()
		return k.obs, nil
	}
	read := o.Read
	if read == nil {
		read = func(ctx context.Context, p *corev1.Pod) (string, error) { return ReadLauncherLog(ctx, o.Logs, p) }
	}
	log, err := read(ctx, p)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.reads++
	if err != nil {
		metrics.LauncherLogReads.WithLabelValues("error").Inc()
		// Kept for the next reader, with the step reports of the reads
		// before it (as kept now, under the lock, as a good read takes
		// them below), which the next good read carries on.
		o.keep(p, kept{phase: p.Status.Phase, at: now, timeout: progressTimeout, obs: diagnose.Observation{Steps: o.kept[p.UID].obs.Steps}, failed: err})
		return diagnose.Observation{}, err
	}
	metrics.LauncherLogReads.WithLabelValues("read").Inc()
	obs := diagnose.Observe(log, now, progressTimeout)
	// The step reports of this read follow those kept from earlier reads
	// of the same Launcher: one read holds only the log's last lines,
	// which a job that reports many times a second fills in seconds.
	obs.Steps = diagnose.KeepStepReports(o.kept[p.UID].obs.Steps, obs.Steps, now)
	keep := obs
	if !tail {
		keep.Tail = ""
	}
	o.keep(p, kept{phase: p.Status.Phase, at: now, timeout: progressTimeout, obs: keep})
	return obs, nil
}

// keep keeps k as p's read, dropping the reads older than KeepFor (all
// of them past maxObserved). o.mu is held.
func (o *Observer) keep(p *corev1.Pod, k kept) {
	if o.kept == nil {
		o.kept = map[types.UID]kept{}
	}
	for uid, old := range o.kept {
		if k.at.Sub(old.at) > KeepFor || len(o.kept) >= maxObserved {
			delete(o.kept, uid)
		}
	}
	o.kept[p.UID] = k
}

// Reads is how many times the observer read a log, or tried to.
func (o *Observer) Reads() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.reads
}
