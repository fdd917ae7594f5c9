package diagnose

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/logs"
)

// ReasonRankFailedOthersWaiting is a running job whose rank failed (raised,
// or timed out in a collective) and went silent, but the job keeps
// running: the other ranks wait for it, forever.
const ReasonRankFailedOthersWaiting = "RankFailedOthersWaiting"

// ReasonRankSilent is a running job, under the runtime's progress check,
// whose rank stopped printing while the other ranks print on: stuck in a
// deadlock, a hung read, or waiting for a peer that never answers.
const ReasonRankSilent = "RankSilent"

// silentRankMinLines is how many lines a rank must have printed to count
// as one that prints (a rank that says hello once and leaves the talking
// to rank 0 is not silent).
const silentRankMinLines = 3

// FindSilentRank reads a running Launcher's log (timestamped, ranks
// tagged) for a rank that printed at least silentRankMinLines lines and
// then nothing for longer than timeout, while another such rank printed
// within timeout. The one silent longest; nil when none.
func FindSilentRank(log string, timeout time.Duration, now time.Time) *api.RankFailure {
	return findSilentRank(parseLines(log), timeout, now)
}

// parseLines splits a Launcher's log into its lines, each with its
// timestamp and text: Observe parses a read once for every finding.
func parseLines(log string) []logs.Line {
	raw := strings.Split(strings.TrimRight(log, "\n"), "\n")
	out := make([]logs.Line, len(raw))
	for i, r := range raw {
		out[i] = logs.NewLine("", r)
	}
	return out
}

func findSilentRank(lines []logs.Line, timeout time.Duration, now time.Time) *api.RankFailure {
	if timeout <= 0 {
		return nil
	}
	type seen struct {
		n    int
		last time.Time
		line string
	}
	byRank := map[int]*seen{}
	for _, l := range lines {
		t, ok := logs.SplitRank(l.Text)
		if !ok || l.Stamp == "" {
			continue
		}
		s := byRank[t.Rank]
		if s == nil {
			s = &seen{}
			byRank[t.Rank] = s
		}
		s.n++
		s.last = l.Time
		if strings.TrimSpace(t.Message) != "" {
			s.line = t.Message
		}
	}
	var silent *int
	alive := false
	for r, s := range byRank {
		if s.n < silentRankMinLines {
			continue
		}
		if now.Sub(s.last) <= timeout {
			alive = true
			continue
		}
		if silent == nil || s.last.Before(byRank[*silent].last) {
			silent = ptr.To(r)
		}
	}
	if silent == nil || !alive {
		return nil
	}
	s := byRank[*silent]
	line, _ := logs.Quoted(s.line)
	return &api.RankFailure{Rank: silent, Error: line, Lines: []string{line}, At: metav1.NewTime(s.last), Silent: true}
}

// RankFailureGrace is how long a job must keep running after a rank's
// error before it is called stuck: mpirun stops a job whose rank exits
// without finalizing MPI within seconds.
const RankFailureGrace = 15 * time.Second

var (
	tracebackStart = "Traceback (most recent call last):"
	// chained exceptions continue a traceback.
	tracebackChain = regexp.MustCompile(`^(During handling of the above exception|The above exception was the direct cause)`)
	// collectiveTimeout: a collective that gave up waiting for a peer.
	collectiveTimeout = regexp.MustCompile(`Watchdog caught collective operation timeout|NCCL communicator was aborted|Timed out waiting \d+ms for (?:send|recv) operation`)
)

// FindRankFailure reads a running Launcher's log (lines led by the
// kubelet's timestamps; ranks' lines tagged where the runtime tags them)
// for the first rank that failed and then printed nothing more: a Python
// traceback that ends in its exception line, or a collective's timeout.
// Without rank tags it only counts a failure that is the log's last
// output. nil when there is none.
func FindRankFailure(log string) *api.RankFailure {
	return findRankFailure(parseLines(log))
}

func findRankFailure(lines []logs.Line) *api.RankFailure {
	type open struct {
		lines []string
		done  bool
		at    time.Time
	}
	byRank := map[int]*open{}
	var order []int
	var failed []*api.RankFailure
	for _, l := range lines {
		rank, text := -1, l.Text
		if t, ok := logs.SplitRank(l.Text); ok {
			rank, text = t.Rank, t.Message
		}
		cur := byRank[rank]
		switch {
		case strings.HasPrefix(strings.TrimSpace(text), tracebackStart):
			if cur == nil {
				order = append(order, rank)
			}
			byRank[rank] = &open{lines: []string{text}}
		case cur != nil && !cur.done:
			cur.lines = append(cur.lines, text)
			if len(cur.lines) > 50 {
				cur.lines = cur.lines[len(cur.lines)-50:]
			}
			trimmed := strings.TrimSpace(text)
			if trimmed != "" && !strings.HasPrefix(text, " ") && !strings.HasPrefix(text, "\t") && !tracebackChain.MatchString(trimmed) {
				cur.done, cur.at = true, l.Time
			}
		case cur != nil && cur.done && strings.TrimSpace(text) != "" && !tracebackChain.MatchString(strings.TrimSpace(text)):
			// The rank printed on after its error: it handled it. (Without
			// rank tags every line counts, so only a traceback that is the
			// log's last output is a failure.)
			delete(byRank, rank)
		case collectiveTimeout.MatchString(text):
			f := &api.RankFailure{Error: strings.TrimSpace(text), Lines: []string{text}, At: metav1.NewTime(l.Time)}
			if rank >= 0 {
				f.Rank = ptr.To(rank)
			}
			failed = append(failed, f)
		}
	}
	for _, rank := range order {
		cur := byRank[rank]
		if cur == nil || !cur.done {
			continue
		}
		f := &api.RankFailure{Error: strings.TrimSpace(cur.lines[len(cur.lines)-1]), Lines: lastN(cur.lines, 6), At: metav1.NewTime(cur.at)}
		if rank >= 0 {
			f.Rank = ptr.To(rank)
		}
		failed = append(failed, f)
	}
	var first *api.RankFailure
	for _, f := range failed {
		if first == nil || f.At.Before(&first.At) {
			first = f
		}
	}
	if first != nil {
		// The failure is written to the TrainJob and quoted by every
		// interface: a secret the program printed is hidden first.
		first.Error, _ = logs.Quoted(first.Error)
		joined, _ := logs.Quoted(strings.Join(first.Lines, "\n"))
		first.Lines = strings.Split(joined, "\n")
	}
	return first
}

func lastN(lines []string, n int) []string {
	var out []string
	for _, l := range lines {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out
}

// rankFailedOthersWaiting explains a running job whose rank failed while
// the others wait for it (the manager read it from the Launcher's log).
func rankFailedOthersWaiting(in Input) (message string, next []api.Step, who *api.PodRef, ok bool) {
	if in.TrainJob == nil {
		return "", nil, nil, false
	}
	f, err := api.ReadRankFailure(in.TrainJob.Annotations)
	if err != nil || f == nil || f.Silent {
		return "", nil, nil, false
	}
	rank, read := "A rank", stepf("Read the ranks' output (`%s`) for the error.", cli("logs"))
	if f.Rank != nil {
		r := fmt.Sprint(*f.Rank)
		rank, who = fmt.Sprintf("Rank %s (%s)", r, rankWorker(in, r)), rankRef(in, r)
		read = stepf("Read rank "+r+"'s output (`%s`) for the whole error.", cli("logs", "--rank", r))
	}
	msg := fmt.Sprintf("%s failed at %s with %q and printed nothing since, but the job keeps running: the other ranks are waiting for it in a collective and will wait for as long as the job runs.",
		rank, f.At.UTC().Format(time.RFC3339), trimMessage(f.Error, 200))
	if len(f.Lines) > 1 {
		trimmed := make([]string, 0, len(f.Lines))
		for _, l := range f.Lines {
			trimmed = append(trimmed, strings.TrimSpace(l))
		}
		msg += " Its last lines: " + strings.TrimSuffix(trimMessage(strings.Join(trimmed, " | "), 400), ".") + "."
	}
	mpi4py := step("Run Python programs as `python -m mpi4py script.py` (mpirun python -m mpi4py ...): one rank's uncaught exception then aborts every rank, and the job fails with the error instead of hanging.")
	stop := stepf("Delete the job (`%s`) or "+suspendAdvice(in)+": it holds its Workers while the other ranks wait.", cli("delete"))
	if l := runningMPILimit(append([]string{f.Error}, f.Lines...)...); l != nil {
		// An MPI feature the pods shape: its fix comes first.
		msg += " " + capitalize(l.what) + "."
		return msg, ranked(append(append([]api.Step(nil), l.steps...), stop, mpi4py)...), who, true
	}
	return msg, ranked(mpi4py, stop, read), who, true
}

// rankSilent explains a running job whose rank went silent while the
// others print on (the manager read it from the Launcher's log).
func rankSilent(in Input) (message string, next []api.Step, who *api.PodRef, ok bool) {
	if in.TrainJob == nil {
		return "", nil, nil, false
	}
	f, err := api.ReadRankFailure(in.TrainJob.Annotations)
	if err != nil || f == nil || !f.Silent || f.Rank == nil {
		return "", nil, nil, false
	}
	r := fmt.Sprint(*f.Rank)
	// When, not for how long: a duration would rewrite the status at every
	// look (launcherSilent).
	since := f.At.UTC().Format(time.RFC3339)
	msg := fmt.Sprintf("Rank %s (%s) has printed nothing since %s while the other ranks print on (the runtime's progress check allows %s): it may be stuck in a deadlock, a hung read or a wait for a peer. Its last line: %q.",
		r, rankWorker(in, r), since, in.ProgressTimeout, trimMessage(f.Error, 200))
	return msg, ranked(
		stepf("Read what rank "+r+" printed last (`%s`) and see where every rank waits now (kubectl mpijob stacks on the job: each rank's stack, identical ones grouped).", cli("logs", "--rank", r)),
		stepf("Delete the job (`%s`) or "+suspendAdvice(in)+": it holds its Workers while rank "+r+" is stuck.", cli("delete")),
		step("If the rank is only quiet (it works without printing), have every rank print its progress, or raise the runtime's policy.mpijob.dev/progress-timeout.")), rankRef(in, r), true
}

// suspendAdvice says how to suspend the job: through its Kueue Workload
// (spec.active) when Kueue manages it, which would set spec.suspend back
// within seconds and start the job again; spec.suspend otherwise.
func suspendAdvice(in Input) string {
	if in.Queue != nil && in.Queue.Workload != "" {
		return fmt.Sprintf("suspend it through its Kueue Workload, which Kueue honours (`kubectl patch workload %s --type merge -p '{\"spec\":{\"active\":false}}'`, or Suspend in the dashboard; Kueue sets spec.suspend back)", in.Queue.Workload)
	}
	return fmt.Sprintf("suspend it (`kubectl patch trainjob %s --type merge -p '{\"spec\":{\"suspend\":true}}'`, or Suspend in the dashboard)", in.TrainJob.Name)
}
