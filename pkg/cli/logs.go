package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"

	"github.com/mpijob/mpijob/pkg/logs"
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
output to the Launcher, and the OpenMPI 4.1 runtimes tag each line with its
rank, [1,RANK]<stdout>:TEXT.

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
  kubectl mpijob logs hello --all -f`,
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
	return cmd
}

// source is one pod's log with its label.
type source struct {
	label string
	pod   corev1.Pod
}

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
	sources, err := l.sources(ctx, cl, tj)
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
		sources, err = l.sources(ctx, cl, tj)
	}
	if err != nil {
		return err
	}
	opts := &corev1.PodLogOptions{Timestamps: true, Follow: l.follow}
	if l.since > 0 {
		opts.SinceSeconds = ptr.To(int64(l.since.Seconds()))
	}
	if l.tail >= 0 {
		opts.TailLines = ptr.To(l.tail)
	}
	prefix := len(sources) > 1
	f := &lineFilter{grep: re, timestamps: l.timestamps, prefix: prefix, ranks: l.ranks}
	if l.follow {
		err = l.followAll(ctx, cl, sources, opts, f)
	} else {
		// Merged while the logs stream in: one line per pod is held.
		var readers []logs.Reader
		for _, s := range sources {
			rc, err := cl.cs.CoreV1().Pods(s.pod.Namespace).GetLogs(s.pod.Name, opts).Stream(ctx)
			if apierrors.IsNotFound(err) && len(sources) > 1 {
				continue // the pod went away meanwhile (Workers end with the job)
			}
			if err != nil {
				return fmt.Errorf("logs of pod %s: %w", s.pod.Name, err)
			}
			defer func() { _ = rc.Close() }()
			readers = append(readers, logs.Reader{Label: s.label, R: rc})
		}
		err = logs.MergeReaders(readers, func(line logs.Line) error {
			f.print(l.Out, line)
			return nil
		})
	}
	if l.ranks != nil && f.printed == 0 {
		fmt.Fprintln(l.ErrOut, f.noRankLines(name, l.rank))
	}
	if l.showRedactions {
		fmt.Fprintf(l.ErrOut, "%d secret(s) redacted\n", f.redacted())
	}
	return err
}

func (l *logsOptions) followAll(ctx context.Context, cl *clients, sources []source, opts *corev1.PodLogOptions, f *lineFilter) error {
	type tagged struct{ label, line string }
	ch := make(chan tagged, 256)
	errs := make(chan error, len(sources))
	var wg sync.WaitGroup
	for _, s := range sources {
		wg.Add(1)
		go func(s source) {
			defer wg.Done()
			rc, err := cl.cs.CoreV1().Pods(s.pod.Namespace).GetLogs(s.pod.Name, opts).Stream(ctx)
			// A container still being created has no log yet: the kubelet
			// says so with an error, which is not a log line. Wait for it.
			for err != nil && notStartedYet(err) {
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Second):
				}
				rc, err = cl.cs.CoreV1().Pods(s.pod.Namespace).GetLogs(s.pod.Name, opts).Stream(ctx)
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
				ch <- tagged{s.label, sc.Text()}
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
	ranks     logs.Selection
	seen      map[int]bool
	printed   int
	mu        sync.Mutex
	redactors map[string]*logs.Redactor
}

// noRankLines says why --rank printed nothing.
func (f *lineFilter) noRankLines(job, spec string) string {
	if len(f.seen) == 0 {
		return fmt.Sprintf("No line of job %s's Launcher log carries a rank: its runtime does not tag the ranks' output "+
			"(the OpenMPI 4.1 runtimes do; with OpenMPI 5 add --output tag to mpirun), or no rank has printed yet.", job)
	}
	seen := make([]int, 0, len(f.seen))
	for r := range f.seen {
		seen = append(seen, r)
	}
	sort.Ints(seen)
	return fmt.Sprintf("No line from rank %s in job %s's log; ranks that printed: %s.", spec, job, rankList(seen))
}

// rankList writes ranks compactly: 0-3,7.
func rankList(rs []int) string {
	var parts []string
	for i := 0; i < len(rs); {
		j := i
		for j+1 < len(rs) && rs[j+1] == rs[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", rs[i], rs[j]))
		} else {
			parts = append(parts, strconv.Itoa(rs[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

func (f *lineFilter) print(w io.Writer, l logs.Line) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.redactors == nil {
		f.redactors = map[string]*logs.Redactor{}
	}
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
	_, _ = io.WriteString(w, b.String())
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

// sources picks the pods whose logs are asked for; an exitError with
// ExitNotFound when they do not exist (yet).
func (l *logsOptions) sources(ctx context.Context, cl *clients, tj *trainer.TrainJob) ([]source, error) {
	name := tj.Name
	launcher, workers, err := cl.pods(ctx, tj)
	if err != nil {
		return nil, err
	}
	var sources []source
	switch {
	case l.all:
		if len(launcher) > 0 {
			sources = append(sources, source{"launcher", launcher[0]})
		}
		for i, w := range workers {
			sources = append(sources, source{fmt.Sprintf("worker-%d", i), w})
		}
	case l.worker >= 0:
		if l.worker >= len(workers) {
			return nil, &exitError{code: ExitNotFound, msg: fmt.Sprintf("--worker %d: job %s has %d Worker pods (0 to %d)", l.worker, name, len(workers), len(workers)-1)}
		}
		sources = append(sources, source{fmt.Sprintf("worker-%d", l.worker), workers[l.worker]})
	default:
		if len(launcher) == 0 {
			s, _ := statusOf(tj)
			return nil, &exitError{code: ExitNotFound, msg: fmt.Sprintf("job %s has no Launcher pod yet (phase %s): try --all, or kubectl mpijob describe %s", name, s.Phase, name)}
		}
		sources = append(sources, source{"launcher", launcher[0]})
	}
	if len(sources) == 0 {
		return nil, &exitError{code: ExitNotFound, msg: fmt.Sprintf("job %s has no pods yet: kubectl mpijob describe %s", name, name)}
	}
	return sources, nil
}

// notStartedYet reports the API server's answer for a container that has
// not started: "container \"node\" in pod \"x\" is waiting to start:
// ContainerCreating".
func notStartedYet(err error) bool {
	return apierrors.IsBadRequest(err) && (strings.Contains(err.Error(), "is waiting to start") || strings.Contains(err.Error(), "PodInitializing"))
}
