package jobview

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/mpijob/mpijob/pkg/api"
)

// Pod is one Launcher or Worker pod of a job.
type Pod struct {
	Name string `json:"name"`
	// Role is "launcher" or "worker"; Index is the Worker's index.
	Role     string     `json:"role" ts:"'launcher' | 'worker'"`
	Index    int        `json:"index"`
	Node     string     `json:"node,omitempty"`
	Phase    string     `json:"phase"`
	Ready    bool       `json:"ready"`
	Restarts int32      `json:"restarts"`
	State    string     `json:"state"`
	Detail   string     `json:"detail,omitempty"`
	Started  *time.Time `json:"started,omitempty"`
	// Health is green (healthy), yellow (pending or starting), red
	// (failed) or grey (gone).
	Health string `json:"health" ts:"'green' | 'yellow' | 'red' | 'grey'"`
	Image  string `json:"image,omitempty"`
	// Gone is true for a pod the job no longer has (JobSet removed it):
	// State is then its last, as the status recorded it.
	Gone bool `json:"gone,omitempty"`
}

// PodOf is one live pod of a job: its role and index, its state in the
// words of api.PodState, and its health.
func PodOf(p *corev1.Pod) Pod {
	out := Pod{Name: p.Name, Role: "worker", Node: p.Spec.NodeName, Phase: string(p.Status.Phase)}
	if p.Labels["jobset.sigs.k8s.io/replicatedjob-name"] == api.LauncherJob {
		out.Role = "launcher"
	}
	out.Index, _ = strconv.Atoi(p.Labels["batch.kubernetes.io/job-completion-index"])
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			out.Ready = true
		}
	}
	if len(p.Spec.Containers) > 0 {
		out.Image = p.Spec.Containers[0].Image
	}
	out.State, out.Restarts = api.PodState(p), api.PodRestarts(p)
	for _, cs := range p.Status.ContainerStatuses {
		switch {
		case cs.State.Waiting != nil:
			out.Detail = cs.State.Waiting.Message
		case cs.State.Terminated != nil:
			out.Detail = cs.State.Terminated.Message
		case cs.State.Running != nil:
			out.Started = &cs.State.Running.StartedAt.Time
		}
	}
	if p.Status.Reason != "" {
		out.Detail = p.Status.Message
	}
	switch {
	case p.DeletionTimestamp != nil:
		out.Health = "grey"
	case p.Status.Phase == corev1.PodFailed || strings.Contains(out.State, "BackOff") || strings.Contains(out.State, "Err"):
		out.Health = "red"
	case p.Status.Phase == corev1.PodSucceeded || (p.Status.Phase == corev1.PodRunning && out.Ready):
		out.Health = "green"
	default:
		out.Health = "yellow"
	}
	return out
}

// Pods is every Launcher and Worker of a job, Launcher first, then
// Workers by index: the live pods; for each the job no longer has, its
// last record in the status (grey, "(pod gone)"); and for a finished job
// whose status recorded none, a grey stand-in. The pods the status names
// as failed are red.
func Pods(live []corev1.Pod, st api.Status, workersTotal int32) []Pod {
	out := make([]Pod, 0, len(live)+len(st.Pods))
	for i := range live {
		out = append(out, PodOf(&live[i]))
	}
	has := func(role string, index int) bool {
		for _, p := range out {
			if p.Role == role && p.Index == index {
				return true
			}
		}
		return false
	}
	for _, r := range st.Pods {
		if has(r.Role, int(r.Index)) {
			continue
		}
		out = append(out, Pod{Name: r.Pod, Role: r.Role, Index: int(r.Index), Node: r.Node, Phase: "Gone", Restarts: r.Restarts,
			State: r.State + " (pod gone)", Health: "grey", Gone: true})
	}
	if st.Phase.Finished() {
		// Statuses written before the manager kept records.
		if !has("launcher", 0) {
			out = append(out, Pod{Name: "launcher (gone)", Role: "launcher", Phase: "Gone", State: "pod gone", Health: "grey", Gone: true})
		}
		for i := 0; i < int(workersTotal); i++ {
			if !has("worker", i) {
				out = append(out, Pod{Name: fmt.Sprintf("Worker %d (gone)", i), Role: "worker", Index: i, Phase: "Gone", State: "pod gone", Health: "grey", Gone: true})
			}
		}
	}
	for i := range out {
		p := &out[i]
		if p.Gone && api.FailedState(strings.TrimSuffix(p.State, " (pod gone)")) {
			p.Health = "red"
		}
		for _, f := range st.Failed {
			if f.Role != p.Role || int(f.Index) != p.Index || !p.Gone {
				continue
			}
			// The diagnosis says why it failed; its last record may not
			// (a rank killed while its pod still ran).
			p.Health = "red"
			switch last := strings.TrimSuffix(p.State, " (pod gone)"); {
			case p.State == "pod gone":
				p.State = f.Reason + " (pod gone)"
			case !api.FailedState(last) && f.Reason != last:
				p.State = f.Reason + " (pod gone; last seen " + last + ")"
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Role != out[j].Role {
			return out[i].Role == "launcher"
		}
		if out[i].Index != out[j].Index {
			return out[i].Index < out[j].Index
		}
		return out[i].Name < out[j].Name
	})
	return out
}
