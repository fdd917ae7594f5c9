package jobview

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/runtimes"
)

// Resources summarizes what the job asks for.
type Resources struct {
	Workers        int32 `json:"workers"`
	SlotsPerWorker int32 `json:"slotsPerWorker"`
	// Worker and Launcher are what one pod asks for (its requests, else
	// its limits), Total what the job does.
	Worker   map[string]string `json:"worker"`
	Launcher map[string]string `json:"launcher"`
	Total    map[string]string `json:"total"`
	// Summary is the job in a sentence (Summary).
	Summary       string `json:"summary"`
	WorkerImage   string `json:"workerImage,omitempty"`
	LauncherImage string `json:"launcherImage,omitempty"`
	// Launchers is how many Launcher pods the job has (1). The requests
	// and limits of one Launcher and one Worker, and the requests of the
	// whole job, as describe prints them (an out-of-memory next step
	// sends the user to the limits).
	Launchers        int32             `json:"launchers"`
	LauncherRequests map[string]string `json:"launcherRequests"`
	LauncherLimits   map[string]string `json:"launcherLimits"`
	WorkerRequests   map[string]string `json:"workerRequests"`
	WorkerLimits     map[string]string `json:"workerLimits"`
	TotalRequests    map[string]string `json:"totalRequests"`
}

// ResourcesOf is what a job of shape s asks for: per Worker, for the
// Launcher, in total, and a one-line summary.
func ResourcesOf(s runtimes.Shape) *Resources {
	wReq, wLim := runtimes.PodDemand(&s.WorkerPod)
	lReq, lLim := runtimes.PodDemand(&s.LauncherPod)
	pick := func(req, lim corev1.ResourceList) corev1.ResourceList {
		out := corev1.ResourceList{}
		for k, v := range lim {
			out[k] = v
		}
		for k, v := range req {
			out[k] = v
		}
		return out
	}
	worker, launcher := pick(wReq, wLim), pick(lReq, lLim)
	r := &Resources{
		Workers: s.Workers, SlotsPerWorker: s.SlotsPerWorker, Launchers: s.Launchers,
		Worker: Quantities(worker), Launcher: Quantities(launcher), Total: Quantities(sum(launcher, 1, worker, s.Workers)),
		Summary:          Summary(s.Workers, s.SlotsPerWorker, worker),
		LauncherRequests: Quantities(lReq), LauncherLimits: Quantities(lLim),
		WorkerRequests: Quantities(wReq), WorkerLimits: Quantities(wLim),
		TotalRequests: Quantities(sum(lReq, int64(s.Launchers), wReq, s.Workers)),
	}
	for _, c := range s.WorkerPod.Containers {
		if c.Name == api.NodeContainer {
			r.WorkerImage = c.Image
		}
	}
	for _, c := range s.LauncherPod.Containers {
		if c.Name == api.NodeContainer {
			r.LauncherImage = c.Image
		}
	}
	return r
}

// sum is launchers × launcher + workers × worker.
func sum(launcher corev1.ResourceList, launchers int64, worker corev1.ResourceList, workers int32) corev1.ResourceList {
	total := corev1.ResourceList{}
	for _, part := range []struct {
		rl corev1.ResourceList
		n  int64
	}{{worker, int64(workers)}, {launcher, launchers}} {
		for k, v := range part.rl {
			q := v.DeepCopy()
			q.Mul(part.n)
			if t, ok := total[k]; ok {
				q.Add(t)
			}
			total[k] = q
		}
	}
	return total
}

// Summary is a job of the given Workers and slots per worker, each Worker asking
// for worker, in a sentence: "4 Workers × 2 slots = 8 ranks, 8 CPUs, 32Gi,
// 4 GPUs" (no CPUs or memory where a Worker asks for none). The wizard's
// Review step says the same (testdata/summaries.json).
func Summary(workers, slots int32, worker corev1.ResourceList) string {
	slots = max(slots, 1)
	ranks := int(workers) * int(slots)
	parts := []string{fmt.Sprintf("%d %s × %d %s = %d %s", workers, api.Agree(int(workers), "Worker", "Workers"), slots,
		api.Agree(int(slots), "slot", "slots"), ranks, api.Agree(ranks, "rank", "ranks"))}
	if cpu, ok := worker[corev1.ResourceCPU]; ok {
		cpu.Mul(int64(workers))
		parts = append(parts, Readable(corev1.ResourceCPU, cpu)+" CPUs")
	}
	if mem, ok := worker[corev1.ResourceMemory]; ok {
		mem.Mul(int64(workers))
		parts = append(parts, Readable(corev1.ResourceMemory, mem))
	}
	gpus := resource.Quantity{}
	for k, v := range worker {
		if strings.HasSuffix(string(k), "/gpu") {
			q := v.DeepCopy()
			q.Mul(int64(workers))
			gpus.Add(q)
		}
	}
	n := gpus.Value()
	return strings.Join(append(parts, fmt.Sprintf("%d %s", n, api.Agree(int(n), "GPU", "GPUs"))), ", ")
}

// Quantities is a resource list in words: "cpu": "500m".
func Quantities(rl corev1.ResourceList) map[string]string {
	out := map[string]string{}
	for k, v := range rl {
		out[string(k)] = Readable(k, v)
	}
	return out
}

// Readable writes a quantity as people read it. A sum keeps its exact
// canonical form when that is short ("3", "500m", "2Gi"); otherwise CPUs
// are written in cores ("1000.1", not "1000100m") and bytes in the largest
// binary unit, to three significant digits ("128Mi", "1.5Gi", not
// "134217738").
func Readable(name corev1.ResourceName, q resource.Quantity) string {
	s := q.String()
	switch {
	case name == corev1.ResourceCPU:
		m := q.MilliValue()
		if m%1000 == 0 || m < 1000 {
			return s
		}
		return strconv.FormatFloat(float64(m)/1000, 'f', -1, 64)
	case name == corev1.ResourceMemory || name == corev1.ResourceEphemeralStorage || strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix):
		if strings.HasSuffix(s, "i") || q.Value() < 1024 {
			return s
		}
		v := float64(q.Value())
		for _, u := range []struct {
			suffix string
			size   float64
		}{{"Ei", 1 << 60}, {"Pi", 1 << 50}, {"Ti", 1 << 40}, {"Gi", 1 << 30}, {"Mi", 1 << 20}, {"Ki", 1 << 10}} {
			if v >= u.size {
				return strconv.FormatFloat(v/u.size, 'g', 3, 64) + u.suffix
			}
		}
	}
	return s
}
