package dashboard

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/jobview"
	"github.com/mpijob/mpijob/pkg/logs"
	"github.com/mpijob/mpijob/pkg/logstore"
)

// maxLogBytes caps one pod's log the server sends (the browser keeps less).
const maxLogBytes = 100 << 20

// jobLogs streams a job's log as text/plain, one line per line, secrets
// masked as the CLI does:
//
//	target=launcher (default) | worker-N | all (merged, "[launcher] " and
//	"[worker-N] " prefixes as kubectl mpijob logs --all)
//	follow=1 keeps streaming while the pods run
//	tail=N, sinceSeconds=S limit what is sent
//	timestamps=1 keeps the kubelet's time in front of each line
func (s *Server) jobLogs(w http.ResponseWriter, r *http.Request, c *userClients) {
	ns, name := r.PathValue("ns"), r.PathValue("name")
	q := r.URL.Query()
	target := q.Get("target")
	if target == "" {
		target = "launcher"
	}
	opts := &corev1.PodLogOptions{Container: "node", Follow: q.Get("follow") == "1", Timestamps: true, LimitBytes: ptr.To[int64](maxLogBytes)}
	if v := q.Get("tail"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("tail %q: use a number of lines, 0 or more", v))
			return
		}
		opts.TailLines = &n
	}
	if v := q.Get("sinceSeconds"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("sinceSeconds %q: use a number of seconds, 1 or more", v))
			return
		}
		opts.SinceSeconds = &n
	}
	keepTime := q.Get("timestamps") == "1"
	live, err := c.jobPods(r.Context(), ns, name)
	if err != nil {
		s.apiError(w, err)
		return
	}
	pods := make([]jobview.Pod, 0, len(live))
	for i := range live {
		pods = append(pods, jobview.PodOf(&live[i]))
	}
	var chosen []jobview.Pod
	for _, p := range pods {
		label := labelOf(p)
		if target == "all" || target == label {
			chosen = append(chosen, p)
		}
	}
	if len(chosen) == 0 && s.storedLogs(w, r, c, ns, name, target, pods, opts, keepTime) {
		return
	}
	if len(chosen) == 0 {
		var have []string
		for _, p := range pods {
			have = append(have, labelOf(p))
		}
		msg := fmt.Sprintf("job %s has no pod %q now", name, target)
		if len(have) > 0 {
			msg += ": it has " + strings.Join(have, ", ")
		} else {
			msg += ": it has no pods (not started yet, or finished and cleaned up)"
		}
		writeError(w, http.StatusNotFound, msg)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	flusher, _ := w.(http.Flusher)
	var mu sync.Mutex
	write := func(label, line string) {
		mu.Lock()
		defer mu.Unlock()
		if target == "all" {
			fmt.Fprintf(w, "[%s] ", label)
		}
		_, _ = io.WriteString(w, line+"\n")
		if flusher != nil && opts.Follow {
			flusher.Flush()
		}
	}
	if !opts.Follow && len(chosen) > 1 {
		// Merged by time, as kubectl mpijob logs --all, while the pods'
		// logs stream in: one line per pod is held, never a whole log.
		var readers []logs.Reader
		for _, p := range chosen {
			rc, err := c.cs.CoreV1().Pods(ns).GetLogs(p.Name, opts).Stream(r.Context())
			if err != nil {
				if !apierrors.IsBadRequest(err) {
					s.Log.Info("cannot read a pod's log", "pod", p.Name, "err", err)
				}
				continue
			}
			defer func() { _ = rc.Close() }()
			readers = append(readers, logs.Reader{Label: labelOf(p), R: rc})
		}
		red := map[string]*logs.Redactor{}
		_ = logs.MergeReaders(readers, func(l logs.Line) error {
			if red[l.Label] == nil {
				red[l.Label] = &logs.Redactor{}
			}
			write(l.Label, render(l, red[l.Label], keepTime))
			return r.Context().Err()
		})
		return
	}
	var wg sync.WaitGroup
	for _, p := range chosen {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rc, err := c.cs.CoreV1().Pods(ns).GetLogs(p.Name, opts).Stream(r.Context())
			if err != nil {
				write(labelOf(p), fmt.Sprintf("(no log from %s: %s)", p.Name, reason(err)))
				return
			}
			defer func() { _ = rc.Close() }()
			red := &logs.Redactor{}
			sc := bufio.NewScanner(rc)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				write(labelOf(p), render(logs.NewLine(labelOf(p), sc.Text()), red, keepTime))
			}
		}()
	}
	wg.Wait()
}

// storedLogs answers a log whose pods are gone from the log store, read
// as the user through logs.mpijob.dev, when the cluster keeps one: the
// Launcher's, a Worker's, or all of them merged as the live ones are. The
// X-Mpijob-Log-Source header says so; false when there is no store (or
// nothing the user may read there), for the caller to say why.
func (s *Server) storedLogs(w http.ResponseWriter, r *http.Request, c *userClients, ns, name, target string, pods []jobview.Pod, opts *corev1.PodLogOptions, keepTime bool) bool {
	store := logstore.NewReader(c.cs)
	if store == nil || !store.Available(r.Context()) {
		return false
	}
	tj := &trainer.TrainJob{}
	if err := c.Get(r.Context(), client.ObjectKey{Namespace: ns, Name: name}, tj); err != nil {
		return false
	}
	// Where the CLI and the SDK read it too (jobview.LogFrom): a finished
	// job's pods, and a running job's Workers that are gone while its
	// Launcher runs; not a job that has not started.
	st, _ := api.StatusOf(tj)
	where := jobview.LogWhere{Role: "launcher", Finished: st.Phase.Finished(), Store: true}
	for _, p := range pods {
		where.LauncherLive = where.LauncherLive || p.Role == "launcher"
	}
	if strings.HasPrefix(target, "worker-") {
		where.Role = "worker"
	}
	if jobview.LogFrom(where) != jobview.LogStore {
		return false
	}
	n := int32(0)
	if tj.Spec.Trainer != nil && tj.Spec.Trainer.NumNodes != nil {
		n = *tj.Spec.Trainer.NumNodes
	}
	var wanted []logstore.Query
	var labels []string
	switch {
	case target == "launcher":
		wanted, labels = []logstore.Query{{Role: "launcher", Index: -1}}, []string{"launcher"}
	case target == "all":
		wanted, labels = []logstore.Query{{Role: "launcher", Index: -1}}, []string{"launcher"}
		for i := 0; i < int(n); i++ {
			wanted = append(wanted, logstore.Query{Role: "worker", Index: i})
			labels = append(labels, fmt.Sprintf("worker-%d", i))
		}
	case strings.HasPrefix(target, "worker-"):
		i, err := strconv.Atoi(strings.TrimPrefix(target, "worker-"))
		if err != nil || i < 0 || int32(i) >= n {
			return false
		}
		wanted, labels = []logstore.Query{{Role: "worker", Index: i}}, []string{target}
	default:
		return false
	}
	var readers []logs.Reader
	for i, q := range wanted {
		if opts.SinceSeconds != nil {
			q.SinceSeconds = *opts.SinceSeconds
		}
		rc, err := store.Open(r.Context(), ns, name, q)
		if err != nil {
			if i == 0 {
				s.apiError(w, err)
				return true
			}
			continue
		}
		defer func() { _ = rc.Close() }()
		var rd io.Reader = rc
		if opts.TailLines != nil {
			lines, err := logstore.Tail(rc, *opts.TailLines)
			if err != nil {
				continue
			}
			rd = strings.NewReader(strings.Join(lines, "\n") + "\n")
		}
		readers = append(readers, logs.Reader{Label: labels[i], R: rd})
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set(logstore.SourceHeader, logstore.SourceStore)
	red := map[string]*logs.Redactor{}
	_ = logs.MergeReaders(readers, func(l logs.Line) error {
		if red[l.Label] == nil {
			red[l.Label] = &logs.Redactor{}
		}
		if target == "all" {
			_, _ = io.WriteString(w, "["+l.Label+"] ")
		}
		_, _ = io.WriteString(w, render(l, red[l.Label], keepTime)+"\n")
		return r.Context().Err()
	})
	return true
}

// podLog reads a pod's log (its first container) as the user, up to 1 MiB.
func (c *userClients) podLog(ctx context.Context, ns, pod string) (string, error) {
	limit := int64(1 << 20)
	b, err := c.cs.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{LimitBytes: &limit}).DoRaw(ctx)
	return string(b), err
}

func render(l logs.Line, red *logs.Redactor, keepTime bool) string {
	text := red.Line(l.Text)
	if keepTime && l.Stamp != "" {
		return l.Stamp + " " + text
	}
	return text
}

// labelOf names a pod as the CLI's merged log does.
func labelOf(p jobview.Pod) string {
	if p.Role == "launcher" {
		return "launcher"
	}
	return fmt.Sprintf("worker-%d", p.Index)
}

func reason(err error) string {
	if st, ok := err.(apierrors.APIStatus); ok {
		return st.Status().Message
	}
	return err.Error()
}
