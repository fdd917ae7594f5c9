package api

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PodState says a pod's state in words, as describe and the dashboard
// show it: a waiting container's reason, a terminated one's reason and
// exit code, the scheduler's reason while Pending, or the phase.
func PodState(p *corev1.Pod) string {
	if p.Status.Reason != "" {
		// Evicted, NodeLost, ...: the pod's own reason says more than its
		// containers' last state.
		return p.Status.Reason
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.State.Waiting != nil && c.State.Waiting.Reason != "" {
			return c.State.Waiting.Reason
		}
		if t := c.State.Terminated; t != nil {
			return fmt.Sprintf("%s (exit %d)", t.Reason, t.ExitCode)
		}
	}
	if p.Status.Phase == corev1.PodPending {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
				return "Pending: " + c.Reason
			}
		}
	}
	return string(p.Status.Phase)
}

// PodExit is how the container PodState is of ended: its exit code and
// the signal that ended it (0: none), or nil when it has not ended.
func PodExit(p *corev1.Pod) (code *int32, signal int32) {
	if p.Status.Reason != "" {
		return nil, 0
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.State.Waiting != nil && c.State.Waiting.Reason != "" {
			return nil, 0
		}
		if t := c.State.Terminated; t != nil {
			code, signal := t.ExitCode, t.Signal
			if signal == 0 && code > 128 && code < 160 {
				// A shell's and the container runtime's convention:
				// 128 + the signal.
				signal = code - 128
			}
			return &code, signal
		}
	}
	return nil, 0
}

// Failed tells a pod that ended badly: a non-zero exit, a kill or an
// eviction (a record without an exit code, or written before it had one,
// by its state in words).
func (r PodRecord) Failed() bool {
	if r.ExitCode != nil {
		return *r.ExitCode != 0
	}
	return FailedState(r.State)
}

// FailedState tells a pod state in words (PodState) that ended badly: a
// non-zero exit, a kill or an eviction.
func FailedState(s string) bool {
	return (strings.Contains(s, "(exit ") && !strings.Contains(s, "(exit 0)")) || strings.HasPrefix(s, "OOMKilled") ||
		s == "Failed" || s == "Evicted"
}

// FailedPods are the pods of records that failed, and named, the pod the
// diagnosis is about when the status warns or failed (nil: none): it gets
// the status's reason, the others their last state.
func FailedPods(records []PodRecord, named *PodRef, reason string) []FailedPod {
	var out []FailedPod
	found := false
	for _, r := range records {
		isNamed := named != nil && r.Role == named.Role && r.Index == named.Index
		if !isNamed && !r.Failed() {
			continue
		}
		f := FailedPod{Role: r.Role, Index: r.Index, Pod: r.Pod, Node: r.Node, Reason: r.State, ExitCode: r.ExitCode, Signal: r.Signal}
		if isNamed {
			found = true
			if reason != "" {
				f.Reason = reason
			}
		}
		out = append(out, f)
	}
	if named != nil && !found {
		// Named by an Event or a log line; no record of its pod.
		out = append(out, FailedPod{Role: named.Role, Index: named.Index, Reason: reason})
	}
	return out
}

// PodRestarts sums a pod's container restarts.
func PodRestarts(p *corev1.Pod) int32 {
	var n int32
	for _, c := range p.Status.ContainerStatuses {
		n += c.RestartCount
	}
	return n
}

// RecordPods is what a status keeps of a job's pods: those there now, and
// for a Launcher or Worker no longer there, its last record, marked gone.
// The newest Launcher and each Worker index once; Launcher first.
func RecordPods(prev []PodRecord, launcher, workers []corev1.Pod) []PodRecord {
	type key struct {
		role  string
		index int32
	}
	now := map[key]PodRecord{}
	created := map[key]metav1.Time{}
	add := func(role string, p *corev1.Pod) {
		idx := int32(0)
		if role == "worker" {
			if i, err := strconv.Atoi(p.Labels["batch.kubernetes.io/job-completion-index"]); err == nil {
				idx = int32(i)
			}
		}
		k := key{role, idx}
		// A restarted Launcher or Worker: the newest pod stands for it.
		if t, ok := created[k]; ok && p.CreationTimestamp.Before(&t) {
			return
		}
		created[k] = p.CreationTimestamp
		code, signal := PodExit(p)
		now[k] = PodRecord{Role: role, Index: idx, Pod: p.Name, Node: p.Spec.NodeName, State: PodState(p), Restarts: PodRestarts(p),
			ExitCode: code, Signal: signal}
	}
	for i := range launcher {
		add("launcher", &launcher[i])
	}
	for i := range workers {
		add("worker", &workers[i])
	}
	for _, r := range prev {
		k := key{r.Role, r.Index}
		if _, ok := now[k]; !ok {
			r.Gone = true
			now[k] = r
		}
	}
	out := make([]PodRecord, 0, len(now))
	for _, r := range now {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Role != out[j].Role {
			return out[i].Role == "launcher"
		}
		return out[i].Index < out[j].Index
	})
	if len(out) > MaxPodRecords {
		out = out[:MaxPodRecords]
	}
	return out
}

// WithTransition appends a transition, keeping the latest MaxHistory.
func WithTransition(h []Transition, t Transition) []Transition {
	if len(t.Message) > 300 {
		t.Message = t.Message[:297] + "..."
	}
	h = append(append([]Transition(nil), h...), t)
	if len(h) > MaxHistory {
		h = h[len(h)-MaxHistory:]
	}
	return h
}

// linuxSignals name the signals that end containers (Linux's numbers: a
// container's, whatever system the client runs on).
var linuxSignals = map[int32]string{1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 6: "SIGABRT", 7: "SIGBUS",
	8: "SIGFPE", 9: "SIGKILL", 11: "SIGSEGV", 13: "SIGPIPE", 14: "SIGALRM", 15: "SIGTERM"}

// SignalName is a Linux signal's name (SIGKILL), or "signal N".
func SignalName(n int32) string {
	if s, ok := linuxSignals[n]; ok {
		return s
	}
	return fmt.Sprintf("signal %d", n)
}

// Ended says how a failed pod ended, in words: "exit code 137, SIGKILL";
// empty when its record had no exit code.
func (f FailedPod) Ended() string {
	if f.ExitCode == nil {
		return ""
	}
	out := fmt.Sprintf("exit code %d", *f.ExitCode)
	if f.Signal != 0 {
		out += ", " + SignalName(f.Signal)
	}
	return out
}
