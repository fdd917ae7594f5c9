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
	Workers        int32             `json:"workers"`
	SlotsPerWorker int32             `json:"slotsPerWorker"`
	Worker         map[string]string `json:"worker"`
	Launcher       map[string]string `json:"launcher"`
	Total          map[string]string `json:"total"`
	Summary        string            `json:"summary"`
	WorkerImage    string            `json:"workerImage,omitempty"`
	LauncherImage  string            `json:"launcherImage,omitempty"`
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
	total := corev1.ResourceList{}
	for k, v := range worker {
		q := v.DeepCopy()
		q.Mul(int64(s.Workers))
		total[k] = q
	}
	for k, v := range launcher {
		if _, ok := total[k]; !ok {
			total[k] = resource.Quantity{}
		}
		q := total[k]
		q.Add(v)
		total[k] = q
	}
	r := &Resources{Workers: s.Workers, SlotsPerWorker: s.SlotsPerWorker, Worker: Quantities(worker), Launcher: Quantities(launcher), Total: Quantities(total)}
	gpus := resource.Quantity{}
	for k, v := range worker {
		if strings.HasSuffix(string(k), "/gpu") {
			q := v.DeepCopy()
			q.Mul(int64(s.Workers))
			gpus.Add(q)
		}
	}
	cpu, mem := worker[corev1.ResourceCPU], worker[corev1.ResourceMemory]
	cpu.Mul(int64(s.Workers))
	mem.Mul(int64(s.Workers))
	r.Summary = fmt.Sprintf("%d %s × %d %s, %s CPUs, %s, %s GPUs", s.Workers, api.Agree(int(s.Workers), "Worker", "Workers"), s.SlotsPerWorker,
		api.Agree(int(s.SlotsPerWorker), "slot", "slots"), Readable(corev1.ResourceCPU, cpu), Readable(corev1.ResourceMemory, mem), gpus.String())
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
