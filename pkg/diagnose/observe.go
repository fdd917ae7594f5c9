package diagnose

import (
	"context"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/logs"
	"github.com/mpijob/mpijob/pkg/metrics"
	"github.com/mpijob/mpijob/pkg/progress"
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

// Observation is what one read of a Launcher's log says: the facts every
// reader in the manager takes from it.
type Observation struct {
	// Progress is the last progress report (nil: none in the lines read).
	Progress *progress.Point
	// Resumed is the last report that says the program resumed from a
	// checkpoint (nil: none in the lines read).
	Resumed *progress.Point
	// RankFailure is a rank that failed (a traceback, an MPI abort) while
	// the job runs on; nil when none did.
	RankFailure *api.RankFailure
	// Silent is a rank that printed nothing for the progress timeout
	// while the others print on; nil when none is (or no timeout is set).
	Silent *api.RankFailure
	// LastLine is the last line and LastAt its time (nil: no line, or no
	// readable time).
	LastLine string
	LastAt   *time.Time
	// Steps are the progress reports with the ranks' step times, oldest
	// first (FindSlowRank reads them).
	Steps []StepReport
	// Tail is the lines read without their timestamps: what the
	// diagnosis's rules read a failed job's MPI errors from. An
	// Observer keeps it only for a reader that asks for it.
	Tail string

	// printed is when each rank last printed in the lines read.
	printed map[int]time.Time
}

// Observe reads the facts of log (ReadLauncherLog's lines) at now; a
// progress timeout of 0 looks for no silent rank.
func Observe(log string, now time.Time, progressTimeout time.Duration) Observation {
	lines := parseLines(log)
	o := Observation{RankFailure: findRankFailure(lines), Silent: findSilentRank(lines, progressTimeout, now), printed: map[int]time.Time{}}
	texts := make([]string, 0, len(lines))
	// Every progress report, with its line's time (zero without one).
	var points []progress.Point
	for _, l := range lines {
		texts = append(texts, l.Text)
		if t, ok := logs.SplitRank(l.Text); ok && l.Stamp != "" && l.Time.After(o.printed[t.Rank]) {
			o.printed[t.Rank] = l.Time
		}
		if !strings.Contains(l.Text, progress.Prefix) {
			continue
		}
		if r, ok := progress.Parse(l.Text); ok {
			p := progress.Point{Report: r}
			if l.Stamp != "" {
				p.Time = l.Time
			}
			points = append(points, p)
		}
	}
	if log != "" {
		if last := lines[len(lines)-1]; last.Stamp != "" {
			o.LastLine, o.LastAt = last.Text, ptr.To(last.Time)
		}
		o.Tail = strings.Join(texts, "\n") + "\n"
	}
	// The last report (progress.Last's, from the same lines), the last
	// that says the program resumed, and those with the ranks' step times.
	if n := len(points); n > 0 {
		last := points[n-1]
		o.Progress = &last
	}
	for i := len(points) - 1; i >= 0; i-- {
		if points[i].Resumed != nil {
			resumed := points[i]
			o.Resumed = &resumed
			break
		}
	}
	o.Steps = stepReports(points)
	return o
}

// PrintedSince says whether rank printed a line after since in the lines
// read (timestamped, rank-tagged): a silent rank that prints again was only
// slow. A rank with no line in the lines read is not known to have
// printed: its lines may have scrolled out while the others printed on,
// which says nothing of it.
func (o Observation) PrintedSince(rank int, since time.Time) bool {
	return o.printed[rank].After(since)
}

// Observer reads Launchers' logs for the whole manager: the progress
// controller and the diagnosis share one, and a read serves every reader
// that accepts an observation of its age. The progress controller reads a
// running Launcher every Interval; the diagnosis's look at a running job's
// last line takes that read instead of one of its own, and a failed
// Launcher's log, which no longer changes, is read once for both. Kept
// reads are dropped once older than keepFor (or past maxObserved of them).
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
	obs     Observation
}

const (
	// keepFor is how long a read is kept: longer than any reader's
	// maxAge.
	keepFor = 2 * time.Minute
	// maxObserved bounds the reads kept (one per Launcher).
	maxObserved = 10000
)

// Observe is what p's log says, from a read made no more than maxAge
// before now of p in its current phase with the same progress timeout,
// or from a read made now; tail asks for the lines themselves
// (Observation.Tail), which only a reader that needs them keeps.
func (o *Observer) Observe(ctx context.Context, p *corev1.Pod, progressTimeout, maxAge time.Duration, now time.Time, tail bool) (Observation, error) {
	o.mu.Lock()
	k, ok := o.kept[p.UID]
	o.mu.Unlock()
	if ok && k.phase == p.Status.Phase && k.timeout == progressTimeout && now.Sub(k.at) <= maxAge && (!tail || k.obs.Tail != "") {
		metrics.LauncherLogReads.WithLabelValues("shared").Inc()
		return k.obs, nil
	}
	read := o.Read
	if read == nil {
		read = func(ctx context.Context, p *corev1.Pod) (string, error) { return ReadLauncherLog(ctx, o.Logs, p) }
	}
	log, err := read(ctx, p)
	if err != nil {
		metrics.LauncherLogReads.WithLabelValues("error").Inc()
		return Observation{}, err
	}
	metrics.LauncherLogReads.WithLabelValues("read").Inc()
	obs := Observe(log, now, progressTimeout)
	keep := obs
	if !tail {
		keep.Tail = ""
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.reads++
	if o.kept == nil {
		o.kept = map[types.UID]kept{}
	}
	for uid, k := range o.kept {
		if now.Sub(k.at) > keepFor || len(o.kept) >= maxObserved {
			delete(o.kept, uid)
		}
	}
	o.kept[p.UID] = kept{phase: p.Status.Phase, at: now, timeout: progressTimeout, obs: keep}
	return obs, nil
}

// Reads is how many times the observer read a log.
func (o *Observer) Reads() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.reads
}
