package diagnose

import (
	"strings"
	"time"

	"k8s.io/utils/ptr"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/logs"
	"github.com/mpijob/mpijob/pkg/progress"
)

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
