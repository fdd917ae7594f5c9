package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/jobpods"
	"github.com/mpijob/mpijob/pkg/jobview"
	"github.com/mpijob/mpijob/pkg/logs"
	"github.com/mpijob/mpijob/pkg/logstore"
)

// logsOptions is `kubectl mpijob logs`.
type logsOptions struct {
	*Options
	worker         int
	all, follow    bool
	since          time.Duration
	tail           int64
	grep           string
	rank           string
	timestamps     bool
	showRedactions bool
	source         string

	name      string
	workerSet bool
	re        *regexp.Regexp
	ranks     logs.Selection
}

func newLogsCommand(o *Options) *cobra.Command {
	l := &logsOptions{Options: o}
	cmd := &cobra.Command{
		Use:   "logs NAME",
		Short: "Logs of the Launcher (default), one Worker, or all merged by time",
		Long: `Print the logs of an MPI job: the Launcher's by default, one Worker's with
--worker N, or with --all the Launcher's and every Worker's merged by time,
each line prefixed [launcher] or [worker-N]. With --rank, only what the
selected ranks printed (3, 0-3 or 0,2,5-7): mpirun forwards every rank's
output to the Launcher, and the runtimes tag each line with its rank:
[1,RANK]<stdout>:TEXT on OpenMPI 4.1, [0,RANK]<stdio>:TEXT on MPICH and
Intel MPI (mpijob-mpiexec); with OpenMPI 5 add --output tag to mpirun.

Lines outlive the pods where the cluster keeps a log store (the local
cluster does: config/logstore): once a Worker's or the Launcher's pod is
gone, or the kubelet rotated the beginning of a long log away, the lines
come from the store, and a note on stderr says which. --source pods or
--source store reads only one of them. Reading the store takes the same
right as reading the pods' logs.

Secrets are redacted: PEM blocks; bearer and basic authorization; AWS key
ids and secret keys; GitHub, Hugging Face, Slack, OpenAI and GitLab tokens;
JWTs; credentials in URLs; --password and mysql -p values; and the values
of password=, passphrase:, token=, secret=, api_key= style settings. The
rules are data (pkg/logs/redact-rules.json), shared with the Python SDK.`,
		Example: `  kubectl mpijob logs hello
  kubectl mpijob logs hello --all --grep 'rank [0-9]+'
  kubectl mpijob logs hello --rank 2
  kubectl mpijob logs hello --rank 0-3 --grep loss
  kubectl mpijob logs hello --worker 1 --since 10m --tail 100
  kubectl mpijob logs hello --all -f
  kubectl mpijob logs hello --all --source store`,
		Args:              exactlyOneName("logs"),
		ValidArgsFunction: o.completeJobs,
		RunE: func(cmd *cobra.Command, args []string) error {
			l.Complete(args, cmd.Flags().Changed("worker"))
			if err := l.Validate(); err != nil {
				return err
			}
			return l.Run(cmd.Context())
		},
	}
	cmd.Flags().IntVar(&l.worker, "worker", -1, "the Worker with this index (0-based) instead of the Launcher")
	cmd.Flags().BoolVar(&l.all, "all", false, "the Launcher and every Worker, merged by time")
	cmd.Flags().BoolVarP(&l.follow, "follow", "f", false, "keep printing new lines")
	cmd.Flags().DurationVar(&l.since, "since", 0, "only lines newer than this, e.g. 10m")
	cmd.Flags().Int64Var(&l.tail, "tail", -1, "only the last N lines of each pod")
	cmd.Flags().StringVar(&l.grep, "grep", "", "only lines matching this regular expression")
	cmd.Flags().StringVar(&l.rank, "rank", "", "only what these ranks printed: 3, 0-3 or 0,2,5-7 (from the Launcher's log)")
	cmd.Flags().BoolVar(&l.timestamps, "timestamps", false, "prefix each line with its time")
	cmd.Flags().BoolVar(&l.showRedactions, "show-redactions", false, "say on stderr how many secrets were redacted")
	cmd.Flags().StringVar(&l.source, "source", sourceAuto, "where lines come from: auto (the pods, and the log store for pods that are gone and lines the kubelet rotated away), pods, or store")
	return cmd
}

// Values of --source.
const (
	sourceAuto  = "auto"
	sourcePods  = "pods"
	sourceStore = "store"
)

// source is one log asked for: a pod's, or, when the pod is gone, the log
// store's lines of its role and index.
type source struct {
	jobview.LogRead
	// pod is the live pod read (nil: gone, the lines come from the store).
	pod *corev1.Pod
}

// gone: no pod; the lines come from the store.
func (s source) gone() bool { return s.pod == nil }

// Complete takes the job's name and whether --worker was given.
func (l *logsOptions) Complete(args []string, workerSet bool) {
	l.name, l.workerSet = args[0], workerSet
}

// Validate checks the flags; no API call.
func (l *logsOptions) Validate() error {
	if l.all && l.workerSet {
		return usageErr("--all and --worker exclude each other")
	}
	if l.workerSet && l.worker < 0 {
		return usageErr("--worker %d: use a Worker index, 0 or more", l.worker)
	}
	if l.grep != "" {
		re, err := regexp.Compile(l.grep)
		if err != nil {
			return usageErr("--grep %q is not a regular expression: %v", l.grep, err)
		}
		l.re = re
	}
	if l.since < 0 {
		return usageErr("--since %s: use a positive duration, e.g. 10m", l.since)
	}
	if l.source == "" {
		l.source = sourceAuto
	}
	switch l.source {
	case sourceAuto, sourcePods, sourceStore:
	default:
		return usageErr("--source %q: use auto, pods or store", l.source)
	}
	if l.source == sourceStore && l.follow {
		return usageErr("--source store reads what is stored and ends: drop --follow")
	}
	if l.rank != "" {
		if l.all || l.workerSet {
			return usageErr("--rank %s: the ranks' output is in the Launcher's log, so --rank goes without --all and --worker", l.rank)
		}
		sel, err := logs.ParseSelection(l.rank)
		if err != nil {
			return usageErr("--rank %q: %v", l.rank, err)
		}
		l.ranks = sel
	}
	return nil
}

// Run prints the logs (and follows them with -f).
func (l *logsOptions) Run(ctx context.Context) error {
	name, re := l.name, l.re
	cl, err := l.clients()
	if err != nil {
		return err
	}
	tj, err := cl.job(ctx, name)
	if err != nil {
		return err
	}
	store := l.storeOf(ctx, cl)
	if l.source == sourceStore && store == nil {
		return &exitError{code: ExitNotFound, msg: "--source store: this cluster keeps no log store (the logs.mpijob.dev API is not served); " +
			"an administrator installs one with config/logstore (docs/admin.md), or read the pods with --source pods"}
	}
	sources, err := l.sources(ctx, cl, tj, store != nil)
	// Right after create, the pods do not exist yet: --follow waits for
	// them (saying so once) until the job starts, finishes or can never
	// start.
	waited := false
	for err != nil && l.follow {
		var exit *exitError
		if !errors.As(err, &exit) || exit.code != ExitNotFound {
			return err
		}
		s, _ := statusOf(tj)
		if s.Phase.Finished() || neverStarts(s) {
			return err
		}
		if !waited {
			fmt.Fprintf(l.ErrOut, "waiting for the pods of job %s (phase %s) ...\n", name, s.Phase)
			waited = true
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(2 * time.Second):
		}
		if tj, err = cl.job(ctx, name); err != nil {
			return err
		}
		sources, err = l.sources(ctx, cl, tj, store != nil)
	}
	if err != nil {
		return err
	}
	// Read as the dashboard and the SDK read (jobpods): the node
	// container by name, the same byte limit.
	rd := jobpods.Reader{CS: cl.cs, Store: store}
	win := jobpods.Window{Follow: l.follow, SinceSeconds: int64(l.since.Seconds())}
	// --tail keeps the last lines shown: with --rank or --grep those are
	// known only once the lines are filtered, so the whole log is read and
	// the tail cut here (followed logs keep kubectl's meaning: the last
	// lines read, then the new ones).
	tail := l.tail
	filtered := (l.ranks != nil || re != nil) && !l.follow
	if tail >= 0 && !filtered {
		win.TailLines = ptr.To(tail)
	}
	if filtered {
		tail = -1
	}
	prefix := len(sources) > 1
	f := &lineFilter{grep: re, timestamps: l.timestamps, prefix: prefix, ranks: l.ranks}
	if filtered && l.tail >= 0 {
		f.keep = int(l.tail)
		f.kept = []string{}
	}
	var live, gone []source
	var unread []string
	for _, s := range sources {
		if s.gone() {
			gone = append(gone, s)
		} else {
			live = append(live, s)
		}
	}
	if l.follow && len(live) > 0 {
		if len(gone) > 0 {
			fmt.Fprintf(l.ErrOut, "Following the live pods only; %s: pod gone, its lines are in the log store (run without -f).\n", labels(gone))
		}
		err = l.followAll(ctx, rd, live, win, f)
	} else {
		if len(gone) > 0 {
			fmt.Fprintf(l.ErrOut, "%s from the log store: %s.\n", linesOf(gone), goneWhy(l.source))
		}
		// Merged while the logs stream in: one line per pod is held.
		var readers []logs.Reader
		var stitched []*stitch
		for _, s := range sources {
			if s.gone() {
				r, err := openStored(ctx, rd, tj.Namespace, name, s, win, time.Time{}, tail)
				if err != nil {
					if len(sources) == 1 {
						return err
					}
					// The live pods' lines are still shown; the read
					// that failed is said, and the exit is not 0.
					fmt.Fprintf(l.ErrOut, "%v\n", err)
					unread = append(unread, s.Label)
					continue
				}
				readers = append(readers, logs.Reader{Label: s.Label, R: r})
				continue
			}
			// Its program never started (a step before it, such as the
			// Launcher's wait for the Workers, failed or still runs): that
			// step's output says why.
			rc, notStarted, err := rd.OpenPod(ctx, s.pod, win)
			if notStarted != nil {
				fmt.Fprintf(l.ErrOut, "%s: its program has not started (%s); the output of its init container %s:\n", s.Label, notStarted.Waiting, notStarted.Container)
			}
			if apierrors.IsNotFound(err) && store != nil && l.source == sourceAuto {
				// The pod went away meanwhile (a stopped job's pods end
				// after their grace period): its lines are in the store.
				r, serr := openStored(ctx, rd, tj.Namespace, name, s, win, time.Time{}, tail)
				if serr == nil {
					readers = append(readers, logs.Reader{Label: s.Label, R: r})
					continue
				}
			}
			if apierrors.IsNotFound(err) && len(sources) > 1 {
				continue // the pod went away meanwhile (Workers end with the job)
			}
			if err != nil {
				return fmt.Errorf("logs of pod %s: %w", s.pod.Name, err)
			}
			defer func() { _ = rc.Close() }()
			var r io.Reader = rc
			// The kubelet serves a pod's current log file only: lines it
			// rotated away come from the store, before the first it serves.
			if store != nil && l.source == sourceAuto && tail < 0 {
				st := &stitch{label: s.Label}
				stitched = append(stitched, st)
				s := s
				r = st.reader(rc, func(end time.Time) (io.Reader, error) {
					return openStored(ctx, rd, tj.Namespace, name, s, win, end, tail)
				})
			}
			readers = append(readers, logs.Reader{Label: s.Label, R: r})
		}
		err = logs.MergeReaders(readers, func(line logs.Line) error {
			f.print(l.Out, line)
			return nil
		})
		f.flush(l.Out)
		for _, st := range stitched {
			if st.stored > 0 && st.first.IsZero() {
				fmt.Fprintf(l.ErrOut, "The %d lines of %s come from the log store: the kubelet serves none of the pod's log now (rotated away, or the pod is stopping).\n",
					st.stored, st.label)
			} else if st.stored > 0 {
				fmt.Fprintf(l.ErrOut, "The first %d lines of %s (before %s) come from the log store: the kubelet rotated them out of the pod's log.\n",
					st.stored, st.label, st.first.Local().Format("15:04:05"))
			}
		}
	}
	if l.ranks != nil && f.printed == 0 {
		fmt.Fprintln(l.ErrOut, f.noRankLines(name, l.rank))
	} else if err == nil && !l.follow && f.received == 0 && len(unread) == 0 {
		// Never silently empty: nothing from the pods nor the store.
		s, _ := statusOf(tj)
		fmt.Fprintln(l.ErrOut, emptyLog(name, live, gone, s.Phase, l.since))
	}
	if l.showRedactions {
		fmt.Fprintf(l.ErrOut, "%d secret(s) redacted\n", f.redacted())
	}
	if err == nil && len(unread) > 0 {
		return &exitError{code: 1, msg: fmt.Sprintf("the log store could not be read for %s (above); the other lines are shown", strings.Join(unread, ", "))}
	}
	return err
}

// emptyLog says why a read found no line at all, and where else to look.
func emptyLog(job string, live, gone []source, phase api.Phase, since time.Duration) string {
	window := ""
	if since > 0 {
		window = " in the last " + since.String()
	}
	var why string
	switch {
	case len(gone) > 0 && len(live) == 0:
		why = fmt.Sprintf("No line of job %s%s: its pods are gone and the log store holds nothing of %s. "+
			"The job may have stopped before its programs printed, or the store has not received the last lines yet (it gets them within seconds: run this again)",
			job, window, labels(gone))
	case len(gone) > 0:
		why = fmt.Sprintf("No line of job %s%s: %s printed nothing yet, and the log store holds nothing of %s", job, window, labels(live), labels(gone))
	default:
		why = fmt.Sprintf("No line of job %s%s: %s printed nothing yet", job, window, labels(live))
	}
	return fmt.Sprintf("%s (phase %s). What happened to it: kubectl mpijob describe %s; its Events: kubectl mpijob events %s.", why, phase, job, job)
}

// storeOf is the log store's reader when the cluster serves one and
// --source allows it; nil otherwise.
func (l *logsOptions) storeOf(ctx context.Context, cl *clients) logstore.Reader {
	if l.source == sourcePods || cl.store == nil || !cl.store.Available(ctx) {
		return nil
	}
	return cl.store
}

// openStored streams what the store keeps of a source (jobpods), with
// --since applied, keeping the last tail lines (all when tail < 0); end,
// when given, bounds it.
func openStored(ctx context.Context, rd jobpods.Reader, ns, job string, s source, win jobpods.Window, end time.Time, tail int64) (io.Reader, error) {
	win.TailLines = nil
	if tail >= 0 && end.IsZero() {
		win.TailLines = ptr.To(tail)
	}
	rc, err := rd.OpenStored(ctx, ns, job, s.LogRead, win, end)
	if err != nil {
		return nil, err
	}
	return closeAtEOF{rc}, nil
}

// closeAtEOF closes a stream once it is read to its end.
type closeAtEOF struct{ rc io.ReadCloser }

func (c closeAtEOF) Read(p []byte) (int, error) {
	n, err := c.rc.Read(p)
	if err != nil {
		_ = c.rc.Close()
	}
	return n, err
}

// stitch puts the store's lines of a pod that come before the first
// line the kubelet still serves ahead of the live ones.
type stitch struct {
	label  string
	stored int
	first  time.Time
}

func (st *stitch) reader(live io.Reader, before func(end time.Time) (io.Reader, error)) io.Reader {
	br := bufio.NewReaderSize(live, 64<<10)
	first, err := br.ReadString('\n')
	if first == "" {
		if err != nil && !errors.Is(err, io.EOF) {
			return io.MultiReader(strings.NewReader(first), errReader{err})
		}
		// The kubelet serves nothing (its log was rotated away, or the
		// container is being removed): what the store holds is all.
		old, serr := before(time.Time{})
		if serr != nil {
			return strings.NewReader("")
		}
		return &counting{r: old, n: &st.stored}
	}
	line := logs.NewLine(st.label, strings.TrimSuffix(first, "\n"))
	if line.Stamp == "" {
		return io.MultiReader(strings.NewReader(first), br)
	}
	st.first = line.Time
	old, err := before(line.Time)
	if err != nil {
		// The live log still reads; say what the store said once.
		return io.MultiReader(strings.NewReader(line.Time.Format(time.RFC3339Nano)+" [mpijob] the log store could not be read: "+err.Error()+"\n"), strings.NewReader(first), br)
	}
	return io.MultiReader(&counting{r: old, n: &st.stored}, strings.NewReader(first), br)
}

// counting counts the lines read through it.
type counting struct {
	r io.Reader
	n *int
}

func (c *counting) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	*c.n += bytes.Count(p[:n], []byte{'\n'})
	return n, err
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// labels lists sources' labels: "worker-0, worker-1".
func labels(ss []source) string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Label)
	}
	return strings.Join(out, ", ")
}

// linesOf says whose lines come from the store.
func linesOf(ss []source) string {
	return "Lines of " + labels(ss) + " come"
}

func goneWhy(source string) string {
	if source == sourceStore {
		return "asked with --source store"
	}
	return "the pod is gone (JobSet removes a finished job's pods)"
}

func (l *logsOptions) followAll(ctx context.Context, rd jobpods.Reader, sources []source, win jobpods.Window, f *lineFilter) error {
	type tagged struct{ label, line string }
	ch := make(chan tagged, 256)
	errs := make(chan error, len(sources))
	var wg sync.WaitGroup
	for _, s := range sources {
		wg.Add(1)
		go func(s source) {
			defer wg.Done()
			rc, err := rd.StreamPod(ctx, s.pod, win)
			// A container still being created has no log yet: the kubelet
			// says so with an error, which is not a log line. Wait for it.
			for err != nil && jobpods.NotStartedYet(err) {
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Second):
				}
				rc, err = rd.StreamPod(ctx, s.pod, win)
			}
			if apierrors.IsNotFound(err) && len(sources) > 1 {
				return // the pod went away meanwhile (Workers end with the job)
			}
			if err != nil {
				errs <- fmt.Errorf("logs of pod %s: %w", s.pod.Name, err)
				return
			}
			defer func() { _ = rc.Close() }()
			sc := bufio.NewScanner(rc)
			sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
			for sc.Scan() {
				ch <- tagged{s.Label, sc.Text()}
			}
		}(s)
	}
	go func() { wg.Wait(); close(ch) }()
	for t := range ch {
		f.print(l.Out, logs.NewLine(t.label, t.line))
	}
	close(errs)
	return <-errs
}

// lineFilter strips the time (unless asked to keep it), redacts secrets,
// applies --grep and prefixes the pod's label.
type lineFilter struct {
	grep       *regexp.Regexp
	timestamps bool
	prefix     bool
	// ranks keeps only these ranks' lines; seen and printed count.
	ranks   logs.Selection
	seen    map[int]bool
	printed int
	// received counts every line read, before any filter.
	received int
	// keep > 0 holds the last keep lines shown in kept until flush
	// (--tail with --rank or --grep).
	keep      int
	kept      []string
	mu        sync.Mutex
	redactors map[string]*logs.Redactor
}

// noRankLines says why --rank printed nothing.
func (f *lineFilter) noRankLines(job, spec string) string {
	if len(f.seen) == 0 {
		return fmt.Sprintf("No line of job %s's Launcher log carries a rank: its runtime does not tag the ranks' output "+
			"(the OpenMPI 4.1, MPICH and Intel MPI runtimes do; with OpenMPI 5 add --output tag to mpirun), or no rank has printed yet.", job)
	}
	seen := make([]int, 0, len(f.seen))
	for r := range f.seen {
		seen = append(seen, r)
	}
	sort.Ints(seen)
	return fmt.Sprintf("No line from rank %s in job %s's log; ranks that printed: %s.", spec, job, logs.RanksText(seen))
}

func (f *lineFilter) print(w io.Writer, l logs.Line) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.redactors == nil {
		f.redactors = map[string]*logs.Redactor{}
	}
	f.received++
	r := f.redactors[l.Label]
	if r == nil {
		r = &logs.Redactor{}
		f.redactors[l.Label] = r
	}
	if f.ranks != nil {
		t, ok := logs.SplitRank(l.Text)
		if !ok {
			return
		}
		if f.seen == nil {
			f.seen = map[int]bool{}
		}
		f.seen[t.Rank] = true
		if !f.ranks[t.Rank] {
			return
		}
	}
	text := r.Line(logs.Shown(l.Text))
	if f.grep != nil && !f.grep.MatchString(text) {
		return
	}
	f.printed++
	var b strings.Builder
	if f.timestamps && l.Stamp != "" {
		b.WriteString(l.Stamp + " ")
	}
	if f.prefix {
		b.WriteString("[" + l.Label + "] ")
	}
	b.WriteString(text)
	b.WriteByte('\n')
	if f.kept != nil {
		if f.keep == 0 {
			return
		}
		f.kept = append(f.kept, b.String())
		if len(f.kept) > f.keep {
			f.kept = f.kept[1:]
		}
		return
	}
	_, _ = io.WriteString(w, b.String())
}

// flush writes the lines held for --tail.
func (f *lineFilter) flush(w io.Writer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, line := range f.kept {
		_, _ = io.WriteString(w, line)
	}
	f.kept = f.kept[:0]
}

func (f *lineFilter) redacted() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, r := range f.redactors {
		n += r.Count
	}
	return n
}

// sources picks the logs asked for: each pod's, or with a log store the
// store's for a pod that is gone; an exitError with ExitNotFound when
// there is neither (yet).
func (l *logsOptions) sources(ctx context.Context, cl *clients, tj *trainer.TrainJob, stored bool) ([]source, error) {
	name := tj.Name
	jp, err := jobpods.ListLive(ctx, cl, tj)
	if err != nil {
		return nil, err
	}
	s, _ := statusOf(tj)
	job := jp.LogJob(tj, s, stored)
	req := jobview.LogRequest{Target: "launcher", StoreOnly: l.source == sourceStore}
	switch {
	case l.all:
		req.Target = "all"
	case l.worker >= 0:
		req.Target = fmt.Sprintf("worker-%d", l.worker)
	}
	// Which logs, and where each one is read: the one plan the dashboard
	// and the SDK follow too (jobview.PlanLogs).
	plan := jobview.PlanLogs(req, job)
	switch plan.Missing {
	case jobview.MissingWorkerOutOfRange:
		return nil, &exitError{code: ExitNotFound, msg: fmt.Sprintf("--worker %d: job %s has %d Workers (0 to %d)", l.worker, name, plan.Workers, plan.Workers-1)}
	case jobview.MissingWorker:
		return nil, &exitError{code: ExitNotFound, msg: fmt.Sprintf("--worker %d: job %s has no pod for Worker %d (phase %s)%s", l.worker, name, l.worker, s.Phase, noStoreHint(stored))}
	case jobview.MissingLauncher:
		return nil, &exitError{code: ExitNotFound, msg: fmt.Sprintf("job %s has no Launcher pod (phase %s)%s: try --all, or kubectl mpijob describe %s", name, s.Phase, noStoreHint(stored), name)}
	case jobview.MissingAll, jobview.MissingBadTarget:
		return nil, &exitError{code: ExitNotFound, msg: fmt.Sprintf("job %s has no pods yet: kubectl mpijob describe %s", name, name)}
	}
	sources := make([]source, 0, len(plan.Reads))
	for _, r := range plan.Reads {
		sources = append(sources, source{LogRead: r, pod: jp.PodOf(r)})
	}
	return sources, nil
}

// noStoreHint says why a gone pod's lines are not shown.
func noStoreHint(stored bool) string {
	if stored {
		return ""
	}
	return ", and this cluster keeps no log store to read once pods are gone"
}
