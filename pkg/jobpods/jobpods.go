// Package jobpods is the one reader of an MPI job's pods and logs that
// every verb and interface uses: the CLI's logs, exec, port-forward, top
// and stacks, and the dashboard's logs, progress and stacks. It lists a
// job's pods one way (Split: the Launchers newest first, the Workers by
// index), reads a live log one way (LogOptions: the node container by
// name, so a pod with a sidecar reads the same, with one byte limit), and
// reads the log store's lines of a gone pod one way (OpenStored).
//
// Which logs a request reads, and from where, is jobview.PlanLogs; this
// package carries the plan out. The Python SDK follows the same rules,
// checked by the vectors in testdata (job-pods.json, log-options.json).
package jobpods

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/jobview"
	"github.com/mpijob/mpijob/pkg/logstore"
	"github.com/mpijob/mpijob/pkg/runtimes"
)

// MaxLogBytes is the most of one pod's log a read takes, in every
// interface. The kubelet serves a pod's current log file only, which its
// rotation (containerLogMaxSize, 10 MiB by default) keeps well below
// this: the limit guards the reader, not the log.
const MaxLogBytes = 100 << 20

// indexLabel is the Worker index Kubernetes' indexed Job gives its pods.
const indexLabel = "batch.kubernetes.io/job-completion-index"

// The roles of a plan's reads (jobview.LogRead.Role) and of Running.
const (
	RoleLauncher = "launcher"
	RoleWorker   = "worker"
)

// Pods is a job's pods as read now.
type Pods struct {
	// Launchers are the Launcher pods, newest first (a restarted Launcher
	// leaves the old pod behind for a while).
	Launchers []corev1.Pod
	// Workers are the Worker pods by index; a pod without a readable
	// index comes last.
	Workers []corev1.Pod
}

// List reads the pods of job tj through the manager's cache, with its
// index (runtimes.PodsByJobSet).
func List(ctx context.Context, c client.Reader, tj *trainer.TrainJob, opts ...client.ListOption) (Pods, error) {
	l, err := runtimes.ListJobSetPods(ctx, c, tj.Namespace, tj.Name, opts...)
	if err != nil {
		return Pods{}, err
	}
	return Split(l.Items), nil
}

// ListLive reads the pods of job tj from the API server through c (the
// user's client in the CLI and the dashboard, the manager's live reader),
// in one LIST by label.
func ListLive(ctx context.Context, c client.Reader, tj *trainer.TrainJob, opts ...client.ListOption) (Pods, error) {
	l, err := runtimes.ListJobSetPodsByLabel(ctx, c, tj.Namespace, tj.Name, opts...)
	if err != nil {
		return Pods{}, err
	}
	return Split(l.Items), nil
}

// Split sorts a job's pods into its Launchers (newest first, then by name)
// and Workers (by index, then by name); pods of neither are left out.
// Vectors: testdata/job-pods.json.
func Split(items []corev1.Pod) Pods {
	// Sized first: a pod is a large struct, and slices grown by append
	// copied each one several times (6 % of mpijob-manager's allocations
	// at 200 jobs × 8, a heap profile over bench/scale).
	var launchers, workers int
	for i := range items {
		switch items[i].Labels[jobsetv1alpha2.ReplicatedJobNameKey] {
		case api.LauncherJob:
			launchers++
		case api.WorkerJob:
			workers++
		}
	}
	var p Pods
	if launchers > 0 {
		p.Launchers = make([]corev1.Pod, 0, launchers)
	}
	if workers > 0 {
		p.Workers = make([]corev1.Pod, 0, workers)
	}
	for _, pod := range items {
		switch pod.Labels[jobsetv1alpha2.ReplicatedJobNameKey] {
		case api.LauncherJob:
			p.Launchers = append(p.Launchers, pod)
		case api.WorkerJob:
			p.Workers = append(p.Workers, pod)
		}
	}
	sort.SliceStable(p.Launchers, func(i, j int) bool {
		a, b := p.Launchers[i], p.Launchers[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.After(b.CreationTimestamp.Time)
		}
		return a.Name < b.Name
	})
	sort.SliceStable(p.Workers, func(i, j int) bool {
		a, b := p.Workers[i], p.Workers[j]
		ia, oka := Index(&a)
		ib, okb := Index(&b)
		switch {
		case oka != okb:
			return oka
		case ia != ib:
			return ia < ib
		}
		return a.Name < b.Name
	})
	return p
}

// Index is a Worker pod's index, from its indexed Job's label.
func Index(p *corev1.Pod) (int, bool) {
	s := p.Labels[indexLabel]
	i, err := strconv.Atoi(s)
	if err != nil || i < 0 || strconv.Itoa(i) != s {
		return 0, false
	}
	return i, true
}

// Launcher is the newest Launcher pod (nil: none).
func (p Pods) Launcher() *corev1.Pod {
	if len(p.Launchers) == 0 {
		return nil
	}
	return &p.Launchers[0]
}

// Worker is Worker i's pod (nil: none); of two with one index (a pod that
// stops while its replacement starts), the running one.
func (p Pods) Worker(i int) *corev1.Pod {
	var found *corev1.Pod
	for k := range p.Workers {
		w := &p.Workers[k]
		if idx, ok := Index(w); !ok || idx != i {
			continue
		}
		if found == nil || (found.Status.Phase != corev1.PodRunning && w.Status.Phase == corev1.PodRunning) {
			found = w
		}
	}
	return found
}

// Running is the running pod of a role ("launcher" or "worker") and Worker
// index: the pod exec, port-forward and stacks reach.
func (p Pods) Running(role string, index int) *corev1.Pod {
	if role == RoleLauncher {
		for i := range p.Launchers {
			if p.Launchers[i].Status.Phase == corev1.PodRunning {
				return &p.Launchers[i]
			}
		}
		return nil
	}
	if pod := p.Worker(index); pod != nil && pod.Status.Phase == corev1.PodRunning {
		return pod
	}
	return nil
}

// Empty reports a job with no pod now.
func (p Pods) Empty() bool { return len(p.Launchers) == 0 && len(p.Workers) == 0 }

// LogJob is what jobview.PlanLogs needs of job tj (status st) with these
// pods; store says whether the user may read a log store.
func (p Pods) LogJob(tj *trainer.TrainJob, st api.Status, store bool) jobview.LogJob {
	job := jobview.LogJobOf(tj, st)
	job.LauncherLive, job.Store = len(p.Launchers) > 0, store
	seen := map[int]bool{}
	for k := range p.Workers {
		if i, ok := Index(&p.Workers[k]); ok && !seen[i] {
			seen[i] = true
			job.LiveWorkers = append(job.LiveWorkers, i)
		}
	}
	return job
}

// PodOf is the pod a plan's read takes its log from (nil for the store's
// reads, and for a pod gone since the plan).
func (p Pods) PodOf(r jobview.LogRead) *corev1.Pod {
	if r.From != jobview.LogPod {
		return nil
	}
	if r.Role == RoleLauncher {
		return p.Launcher()
	}
	return p.Worker(r.Index)
}

// Window is the part of a log a read takes.
type Window struct {
	// TailLines keeps the last lines (nil: all).
	TailLines *int64 `json:"tailLines,omitempty"`
	// SinceSeconds keeps the lines of the last seconds (0: all).
	SinceSeconds int64 `json:"sinceSeconds,omitempty"`
	// Follow streams new lines while the container runs.
	Follow bool `json:"follow,omitempty"`
}

// LogOptions are the options of every read of a pod's live log: the node
// container by name (a pod with a sidecar has more than one), the
// kubelet's timestamps (the merge and the store's stitching order lines
// by them), MaxLogBytes, and w. Vectors: testdata/log-options.json.
func LogOptions(w Window) *corev1.PodLogOptions {
	o := &corev1.PodLogOptions{Container: api.NodeContainer, Timestamps: true, Follow: w.Follow, LimitBytes: ptr.To[int64](MaxLogBytes)}
	if w.TailLines != nil && *w.TailLines >= 0 {
		o.TailLines = ptr.To(*w.TailLines)
	}
	if w.SinceSeconds > 0 {
		o.SinceSeconds = ptr.To(w.SinceSeconds)
	}
	return o
}

// Reader opens a job's logs as whoever its clients act for.
type Reader struct {
	// CS reads the pods' logs.
	CS kubernetes.Interface
	// Store is the log store (nil: none, or not asked for).
	Store logstore.Reader
}

// NotStarted is a pod whose program has not started: OpenPod read its
// last init container instead (the Launcher's wait for the Workers, a
// data connection's download), whose output says why.
type NotStarted struct {
	// Container is the init container read; Waiting the program
	// container's reason ("PodInitializing").
	Container, Waiting string
}

// OpenPod streams pod's log (LogOptions(w)). When its program has not
// started, it streams the log of the init container that ran last and
// says so with a NotStarted.
func (r Reader) OpenPod(ctx context.Context, pod *corev1.Pod, w Window) (io.ReadCloser, *NotStarted, error) {
	opts := LogOptions(w)
	rc, err := r.StreamPod(ctx, pod, w)
	if err == nil || !NotStartedYet(err) {
		return rc, nil, err
	}
	statuses := pod.Status.InitContainerStatuses
	for i := len(statuses) - 1; i >= 0; i-- {
		cs := statuses[i]
		if cs.State.Running == nil && cs.State.Terminated == nil {
			continue
		}
		o := opts.DeepCopy()
		o.Container = cs.Name
		irc, ierr := r.CS.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, o).Stream(ctx)
		if ierr != nil {
			return nil, nil, err
		}
		return irc, &NotStarted{Container: cs.Name, Waiting: waitingReason(pod)}, nil
	}
	return nil, nil, err
}

// StreamPod streams pod's log (LogOptions(w)) as it is: an error for a
// program that has not started (NotStartedYet), which a follower waits
// out.
func (r Reader) StreamPod(ctx context.Context, pod *corev1.Pod, w Window) (io.ReadCloser, error) {
	return r.CS.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, LogOptions(w)).Stream(ctx)
}

// NotStartedYet reports the API server's answer for a container that has
// not started: "container \"node\" in pod \"x\" is waiting to start:
// PodInitializing".
func NotStartedYet(err error) bool {
	return apierrors.IsBadRequest(err) && (strings.Contains(err.Error(), "is waiting to start") || strings.Contains(err.Error(), "PodInitializing"))
}

// waitingReason is why the pod's program container waits.
func waitingReason(pod *corev1.Pod) string {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.State.Waiting != nil && cs.State.Waiting.Reason != "" {
			return cs.State.Waiting.Reason
		}
	}
	return "waiting"
}

// ReadPod reads the whole log of pod ns/name (LogOptions(w), no follow)
// into a string: for the readers that parse it (the progress history, a
// runtime check's trial).
func (r Reader) ReadPod(ctx context.Context, ns, name string, w Window) (string, error) {
	w.Follow = false
	b, err := r.CS.CoreV1().Pods(ns).GetLogs(name, LogOptions(w)).DoRaw(ctx)
	return string(b), err
}

// Log reads the whole log of pod ns/name: ReadPod with no window, in the
// shape runtimetest.Options.Log takes.
func (r Reader) Log(ctx context.Context, ns, name string) (string, error) {
	return r.ReadPod(ctx, ns, name, Window{})
}

// OpenStored streams what the log store keeps of a read's Launcher or
// Worker in job ns/job: w's SinceSeconds and TailLines, and before end
// when end is set (the lines the kubelet rotated out of a live pod's
// log). Errors name whose lines could not be read.
func (r Reader) OpenStored(ctx context.Context, ns, job string, rd jobview.LogRead, w Window, end time.Time) (io.ReadCloser, error) {
	if r.Store == nil {
		return nil, fmt.Errorf("reading %s of job %s: this cluster keeps no log store", rd.Label, job)
	}
	q := logstore.Query{Role: rd.Role, Index: rd.Index, SinceSeconds: w.SinceSeconds, End: end}
	if rd.Role == RoleLauncher {
		q.Role, q.Index = api.LauncherJob, -1
	}
	rc, err := r.Store.Open(ctx, ns, job, q)
	if err != nil {
		if apierrors.IsForbidden(err) {
			return nil, fmt.Errorf("the log store refused to show %s of job %s: %w", rd.Label, job, err)
		}
		return nil, fmt.Errorf("reading %s of job %s from the log store: %w", rd.Label, job, err)
	}
	if w.TailLines == nil || *w.TailLines < 0 {
		return rc, nil
	}
	defer func() { _ = rc.Close() }()
	lines, err := logstore.Tail(rc, *w.TailLines)
	if err != nil {
		return nil, fmt.Errorf("reading %s of job %s from the log store: %w", rd.Label, job, err)
	}
	text := strings.Join(lines, "\n")
	if len(lines) > 0 {
		text += "\n"
	}
	return io.NopCloser(strings.NewReader(text)), nil
}
