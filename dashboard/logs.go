package dashboard

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/jobpods"
	"github.com/mpijob/mpijob/pkg/jobstatus"
	"github.com/mpijob/mpijob/pkg/jobview"
	"github.com/mpijob/mpijob/pkg/logs"
	"github.com/mpijob/mpijob/pkg/logstore"
)

// jobLogs streams a job's log as text/plain, one line per line, secrets
// masked as the CLI does:
//
//	target=launcher (default) | worker-N | all (merged, "[launcher] " and
//	"[worker-N] " prefixes as kubectl mpijob logs --all)
//	follow=1 keeps streaming while the pods run
//	tail=N, sinceSeconds=S limit what is sent
//	timestamps=1 keeps the kubelet's time in front of each line
//
// The pods and logs are read as the CLI and the SDK read them
// (jobpods): the node container, jobpods.MaxLogBytes of each pod.
func (s *Server) jobLogs(w http.ResponseWriter, r *http.Request, c *userClients) {
	ns, name := r.PathValue("ns"), r.PathValue("name")
	q := r.URL.Query()
	target := q.Get("target")
	if target == "" {
		target = "launcher"
	}
	win := jobpods.Window{Follow: q.Get("follow") == "1"}
	if v := q.Get("tail"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("tail %q: use a number of lines, 0 or more", v))
			return
		}
		win.TailLines = &n
	}
	if v := q.Get("sinceSeconds"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("sinceSeconds %q: use a number of seconds, 1 or more", v))
			return
		}
		win.SinceSeconds = n
	}
	keepTime := q.Get("timestamps") == "1"
	tj := &trainer.TrainJob{}
	if err := c.Get(r.Context(), client.ObjectKey{Namespace: ns, Name: name}, tj); err != nil {
		s.apiError(w, err)
		return
	}
	if err := jobstatus.Get(r.Context(), c, tj); err != nil {
		s.apiError(w, err)
		return
	}
	jp, err := jobpods.ListLive(r.Context(), c, tj)
	if err != nil {
		s.apiError(w, err)
		return
	}
	st, _ := api.StatusOf(tj)
	// Which logs, and where each one is read: the plan the CLI and the SDK
	// execute too (jobview.PlanLogs). The store is asked whether it is
	// there only when a log would come from it.
	req := jobview.LogRequest{Target: target}
	job := jp.LogJob(tj, st, true)
	plan := jobview.PlanLogs(req, job)
	rd := jobpods.Reader{CS: c.cs}
	if slices.ContainsFunc(plan.Reads, func(rd jobview.LogRead) bool { return rd.From == jobview.LogStore }) {
		if rd.Store = logstore.NewReader(c.cs); rd.Store == nil || !rd.Store.Available(r.Context()) {
			rd.Store, job.Store = nil, false
			plan = jobview.PlanLogs(req, job)
		}
	}
	switch plan.Missing {
	case "":
	case jobview.MissingBadTarget:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("target %q: use launcher, worker-N or all", target))
		return
	case jobview.MissingWorkerOutOfRange:
		writeError(w, http.StatusNotFound, fmt.Sprintf("job %s has no %s: it has %d Workers (worker-0 to worker-%d)", name, target, plan.Workers, plan.Workers-1))
		return
	default:
		var have []string
		for _, p := range append(slices.Clone(jp.Launchers), jp.Workers...) {
			have = append(have, labelOf(jobview.PodOf(&p)))
		}
		slices.Sort(have)
		have = slices.Compact(have)
		msg := fmt.Sprintf("job %s has no pod %q now", name, target)
		if len(have) > 0 {
			msg += ": it has " + strings.Join(have, ", ")
		} else {
			msg += ": it has no pods (not started yet, or finished and cleaned up)"
		}
		writeError(w, http.StatusNotFound, msg)
		return
	}
	var fromPods, fromStore []jobview.LogRead
	for _, read := range plan.Reads {
		if read.From == jobview.LogStore {
			fromStore = append(fromStore, read)
		} else {
			fromPods = append(fromPods, read)
		}
	}
	// The stored lines of the gone pods: read whole (a store cannot be
	// followed).
	var stored []logs.Reader
	for _, read := range fromStore {
		rc, err := rd.OpenStored(r.Context(), ns, name, read, win, time.Time{})
		if err != nil {
			if len(fromPods) == 0 && len(stored) == 0 {
				s.apiError(w, err)
				return
			}
			s.Log.Info("cannot read a gone pod's lines from the log store", "job", name, "log", read.Label, "err", err)
			continue
		}
		defer func() { _ = rc.Close() }()
		stored = append(stored, logs.Reader{Label: read.Label, R: rc})
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	switch {
	case len(fromStore) > 0 && len(fromPods) == 0:
		w.Header().Set(logstore.SourceHeader, logstore.SourceStore)
	case len(fromStore) > 0:
		// Some pods are gone: the page says whose lines the store gave.
		var gone []string
		for _, read := range fromStore {
			gone = append(gone, read.Label)
		}
		w.Header().Set(storedHeader, strings.Join(gone, ","))
	}
	flusher, _ := w.(http.Flusher)
	var mu sync.Mutex
	write := func(label, line string) {
		mu.Lock()
		defer mu.Unlock()
		if target == "all" {
			fmt.Fprintf(w, "[%s] ", label)
		}
		_, _ = io.WriteString(w, line+"\n")
		if flusher != nil && win.Follow {
			flusher.Flush()
		}
	}
	mergeInto := func(readers []logs.Reader) {
		red := map[string]*logs.Redactor{}
		_ = logs.MergeReaders(readers, func(l logs.Line) error {
			if red[l.Label] == nil {
				red[l.Label] = &logs.Redactor{}
			}
			write(l.Label, render(l, red[l.Label], keepTime))
			return r.Context().Err()
		})
	}
	if !win.Follow {
		// Merged by time, as kubectl mpijob logs --all, the pods' logs
		// and the store's lines alike, while they stream in: one line per
		// log is held, never a whole log.
		readers := stored
		for _, read := range fromPods {
			p := jp.PodOf(read)
			if p == nil {
				continue
			}
			rc, _, err := rd.OpenPod(r.Context(), p, win)
			if err != nil {
				if !apierrors.IsBadRequest(err) {
					s.Log.Info("cannot read a pod's log", "pod", p.Name, "err", err)
				}
				continue
			}
			defer func() { _ = rc.Close() }()
			readers = append(readers, logs.Reader{Label: read.Label, R: rc})
		}
		mergeInto(readers)
		return
	}
	// Followed: the gone pods' stored lines first (they ended before the
	// live ones), then each live pod's log as it comes.
	mergeInto(stored)
	var wg sync.WaitGroup
	for _, read := range fromPods {
		p := jp.PodOf(read)
		if p == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rc, _, err := rd.OpenPod(r.Context(), p, win)
			if err != nil {
				write(read.Label, fmt.Sprintf("(no log from %s: %s)", p.Name, reason(err)))
				return
			}
			defer func() { _ = rc.Close() }()
			red := &logs.Redactor{}
			sc := bufio.NewScanner(rc)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				write(read.Label, render(logs.NewLine(read.Label, sc.Text()), red, keepTime))
			}
		}()
	}
	wg.Wait()
}

// storedHeader names the logs of an answer that the log store gave, the
// others being their pods' (X-Mpijob-Log-Source says an answer is the
// store's alone).
const storedHeader = "X-Mpijob-Log-Stored"

func render(l logs.Line, red *logs.Redactor, keepTime bool) string {
	text := red.Line(l.Text)
	if keepTime && l.Stamp != "" {
		return l.Stamp + " " + text
	}
	return text
}

// labelOf names a pod as the CLI's merged log does.
func labelOf(p jobview.Pod) string { return jobview.PodLabel(p.Role, p.Index) }

func reason(err error) string {
	if st, ok := err.(apierrors.APIStatus); ok {
		return st.Status().Message
	}
	return err.Error()
}
