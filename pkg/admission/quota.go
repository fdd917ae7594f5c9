package admission

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Demand is what an MPI job asks of its namespace: Launcher pods and
// Worker pods, each with the requests and limits of one pod.
type Demand struct {
	Launchers        int64
	LauncherRequests corev1.ResourceList
	LauncherLimits   corev1.ResourceList
	Workers          int64
	WorkerRequests   corev1.ResourceList
	WorkerLimits     corev1.ResourceList
}

// TotalRequests is what the whole job requests: every Launcher and Worker.
func (d Demand) TotalRequests() corev1.ResourceList {
	total := corev1.ResourceList{}
	for name, q := range d.LauncherRequests {
		add(total, name, mul(q, d.Launchers))
	}
	for name, q := range d.WorkerRequests {
		add(total, name, mul(q, d.Workers))
	}
	return total
}

// TotalLimits is the whole job's limits: every Launcher and Worker.
func (d Demand) TotalLimits() corev1.ResourceList {
	total := corev1.ResourceList{}
	for name, q := range d.LauncherLimits {
		add(total, name, mul(q, d.Launchers))
	}
	for name, q := range d.WorkerLimits {
		add(total, name, mul(q, d.Workers))
	}
	return total
}

// QuotaViolation is one quota line the job would exceed.
type QuotaViolation struct {
	// Quota is the ResourceQuota's name and Key the quota line
	// (requests.nvidia.com/gpu, limits.memory, pods, ...).
	Quota, Key string
	// Requested is the job's total; Hard the quota; Used what is in use.
	Requested, Hard, Used resource.Quantity
	// PerWorker and Launcher split Requested.
	PerWorker, Launcher resource.Quantity
	// Workers is the job's Worker count; MaxWorkers the most that would fit
	// (-1 when even the Launcher alone does not fit).
	Workers, MaxWorkers int64
	// Queued is set for a job that Kueue queues: it waits for what other
	// jobs use, so it is refused only when it is larger than the whole quota.
	Queued bool
}

// Message is the denial a person reads, with the numbers and a way out:
// "requested 12 nvidia.com/gpu (4 workers × 3), quota 8, in use 0: use at
// most 2 workers or ask for a larger quota".
func (v QuotaViolation) Message() string {
	name := displayName(v.Key)
	breakdown := fmt.Sprintf("%d workers × %s", v.Workers, v.PerWorker.String())
	if !v.Launcher.IsZero() {
		breakdown += " + launcher " + v.Launcher.String()
	}
	way := "ask for a larger quota"
	switch {
	case v.MaxWorkers >= 1:
		way = fmt.Sprintf("use at most %d workers or ask for a larger quota", v.MaxWorkers)
	case v.MaxWorkers == 0 && !v.PerWorker.IsZero():
		way = "free some of the quota (other jobs use it) or ask for a larger quota"
	}
	if v.Queued {
		return fmt.Sprintf("requested %s %s (%s), quota %s: more than the whole quota, so it could never start (queued jobs wait only for what other jobs use): %s (ResourceQuota %s)",
			v.Requested.String(), name, breakdown, v.Hard.String(), way, v.Quota)
	}
	return fmt.Sprintf("requested %s %s (%s), quota %s, in use %s: %s (ResourceQuota %s)",
		v.Requested.String(), name, breakdown, v.Hard.String(), v.Used.String(), way, v.Quota)
}

// displayName turns a quota key into the resource people know.
func displayName(key string) string {
	switch key {
	case "requests.cpu", "cpu":
		return "CPU"
	case "requests.memory", "memory":
		return "memory"
	case "limits.cpu":
		return "CPU (limits)"
	case "limits.memory":
		return "memory (limits)"
	case "pods", "count/pods":
		return "pods"
	}
	return strings.TrimPrefix(key, "requests.")
}

// CheckQuota adds the job's demand to what each quota has in use and
// returns every line it would exceed, sorted by quota and key. A job that
// exactly fills a quota fits.
func CheckQuota(d Demand, quotas []corev1.ResourceQuota) []QuotaViolation {
	return checkQuota(d, quotas, false)
}

// CheckQuotaQueued is CheckQuota for a job that Kueue queues (it has a
// LocalQueue): Kueue admits a queued job only when its ClusterQueue, sized
// to the namespace's quota, has room for the whole job, so what other jobs
// use never refuses it: it waits Queued. Only a job larger than the whole
// quota, which could never start, is refused.
func CheckQuotaQueued(d Demand, quotas []corev1.ResourceQuota) []QuotaViolation {
	return checkQuota(d, quotas, true)
}

func checkQuota(d Demand, quotas []corev1.ResourceQuota, queued bool) []QuotaViolation {
	var out []QuotaViolation
	for _, q := range quotas {
		if len(q.Spec.Scopes) > 0 || q.Spec.ScopeSelector != nil {
			// Scoped quotas (priority class, terminating, ...) would need
			// the pods' scope; the API server still enforces them.
			continue
		}
		for key, hard := range q.Spec.Hard {
			perWorker, launcher, ok := perPod(d, key)
			if !ok {
				continue
			}
			used := q.Status.Used[key]
			if queued {
				used = resource.Quantity{}
			}
			requested := mul(perWorker, d.Workers)
			requested.Add(launcher)
			total := used.DeepCopy()
			total.Add(requested)
			if total.Cmp(hard) <= 0 {
				continue
			}
			out = append(out, QuotaViolation{
				Quota: q.Name, Key: string(key), Requested: requested, Hard: hard, Used: used,
				PerWorker: perWorker, Launcher: launcher, Workers: d.Workers,
				MaxWorkers: maxWorkers(hard, used, launcher, perWorker), Queued: queued,
			})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Quota != out[j].Quota {
			return out[i].Quota < out[j].Quota
		}
		return out[i].Key < out[j].Key
	})
	return out
}

// perPod returns what one Worker and all Launchers count against quota key.
func perPod(d Demand, key corev1.ResourceName) (perWorker, launchers resource.Quantity, ok bool) {
	one := *resource.NewQuantity(1, resource.DecimalSI)
	switch {
	case key == corev1.ResourcePods || key == "count/pods":
		return one, *resource.NewQuantity(d.Launchers, resource.DecimalSI), true
	case strings.HasPrefix(string(key), "requests."):
		r := corev1.ResourceName(strings.TrimPrefix(string(key), "requests."))
		return d.WorkerRequests[r], mul(d.LauncherRequests[r], d.Launchers), true
	case strings.HasPrefix(string(key), "limits."):
		r := corev1.ResourceName(strings.TrimPrefix(string(key), "limits."))
		return d.WorkerLimits[r], mul(d.LauncherLimits[r], d.Launchers), true
	case key == corev1.ResourceCPU || key == corev1.ResourceMemory || key == corev1.ResourceEphemeralStorage:
		return d.WorkerRequests[key], mul(d.LauncherRequests[key], d.Launchers), true
	}
	return resource.Quantity{}, resource.Quantity{}, false
}

func mul(q resource.Quantity, n int64) resource.Quantity {
	if q.IsZero() || n == 0 {
		return resource.Quantity{Format: q.Format}
	}
	v := q.MilliValue() * n
	return *resource.NewMilliQuantity(v, q.Format)
}

// maxWorkers is how many Workers fit in what is left after the Launcher.
func maxWorkers(hard, used, launcher, perWorker resource.Quantity) int64 {
	left := hard.MilliValue() - used.MilliValue() - launcher.MilliValue()
	if left < 0 {
		return -1
	}
	if perWorker.IsZero() {
		return 0
	}
	return left / perWorker.MilliValue()
}

func add(l corev1.ResourceList, name corev1.ResourceName, q resource.Quantity) {
	cur := l[name]
	cur.Add(q)
	l[name] = cur
}
