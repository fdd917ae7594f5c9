package diagnose

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/logs"
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
	// Tail is the lines read without their timestamps: what the
	// diagnosis's rules read a failed job's MPI errors from.
	Tail string

	log string
}

// Observe reads the facts of log (ReadLauncherLog's lines) at now; a
// progress timeout of 0 looks for no silent rank.
func Observe(log string, now time.Time, progressTimeout time.Duration) Observation {
	o := Observation{log: log, RankFailure: FindRankFailure(log), Silent: FindSilentRank(log, progressTimeout, now)}
	if p, ok := progress.Last(log); ok {
		o.Progress = &p
	}
	lines := strings.Split(strings.TrimRight(log, "\n"), "\n")
	texts := make([]string, 0, len(lines))
	for _, raw := range lines {
		texts = append(texts, logs.NewLine("", raw).Text)
	}
	if log != "" {
		if last := logs.NewLine("", lines[len(lines)-1]); last.Stamp != "" {
			o.LastLine, o.LastAt = last.Text, ptr.To(last.Time)
		}
		o.Tail = strings.Join(texts, "\n") + "\n"
	}
	return o
}

// PrintedSince says whether rank printed a line after since in the lines
// read: a silent rank that prints again was only slow.
func (o Observation) PrintedSince(rank int, since time.Time) bool {
	return PrintedSince(o.log, rank, since)
}
