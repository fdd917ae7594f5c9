package metrics

import (
	"context"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/mpijob/mpijob/pkg/api"
)

// CostCenterLabel on a Namespace names who pays for it: the usage series
// carry it (tenants cannot change their Namespace's labels).
const CostCenterLabel = api.CostCenterLabel

var (
	jobRequestsDesc = prometheus.NewDesc(namespace+"_job_resource_requests",
		"What an MPI job's placed, unfinished pods ask for now, by resource: cpu in cores, memory in bytes, GPUs (nvidia.com/gpu, amd.com/gpu, ...) in devices; a limit counts where a container has no request. The usage recording rules (config/monitoring/recording-rules.yaml, group mpijob.usage) add it up over time into CPU-, memory- and GPU-hours per namespace.",
		[]string{labelNamespace, labelTrainJob, "resource"}, nil)
	namespaceInfoDesc = prometheus.NewDesc(namespace+"_namespace_info",
		"1 for each namespace that has an MPI job, with its cost center (the Namespace's label mpijob.dev/cost-center; empty when it has none).",
		[]string{labelNamespace, "cost_center"}, nil)
	gpuQuotaDesc = prometheus.NewDesc(namespace+"_namespace_gpu_quota",
		"Each namespace's ResourceQuota of GPUs (requests.nvidia.com/gpu, nvidia.com/gpu, ...): its hard limit (type hard) and what pods use of it now (type used), in devices. The alert MPIJobNamespaceGPUQuotaHigh fires at 90 %.",
		[]string{labelNamespace, "resource", "type"}, nil)
)

// Requests are what one job's pods ask for now, by resource name
// (UsageResource).
type Requests map[string]float64

// UsageResource is the name a resource has in the usage series: cpu,
// memory, or a GPU's own name; "" for one usage does not count.
func UsageResource(name corev1.ResourceName) string {
	switch {
	case name == corev1.ResourceCPU:
		return "cpu"
	case name == corev1.ResourceMemory:
		return "memory"
	case strings.HasSuffix(string(name), "/gpu"):
		return string(name)
	}
	return ""
}

// PodCounts reports whether a pod counts toward usage now: placed on a
// node and not finished.
func PodCounts(p *corev1.Pod) bool {
	return p.Spec.NodeName != "" && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed && p.DeletionTimestamp == nil
}

// Quota is one namespace's GPU quota: hard and used, by resource.
type Quota struct {
	Namespace string
	Hard      map[string]float64
	Used      map[string]float64
}

// QuotaOf reads the GPU entries of a ResourceQuota ("requests.nvidia.com/gpu"
// and "nvidia.com/gpu" alike count as nvidia.com/gpu).
func QuotaOf(q *corev1.ResourceQuota) Quota {
	out := Quota{Namespace: q.Namespace, Hard: map[string]float64{}, Used: map[string]float64{}}
	for name, v := range q.Status.Hard {
		if r := UsageResource(corev1.ResourceName(strings.TrimPrefix(string(name), "requests."))); strings.HasSuffix(r, "/gpu") {
			out.Hard[r] += v.AsApproximateFloat64()
			used := q.Status.Used[name]
			out.Used[r] += used.AsApproximateFloat64()
		}
	}
	return out
}

// UsageSeries are the usage series: each job's requests, each namespace
// with MPI jobs and its cost center, and the namespaces' GPU quotas.
func UsageSeries(jobs []JobState, costCenters map[string]string, quotas []Quota) []prometheus.Metric {
	var out []prometheus.Metric
	seen := map[string]bool{}
	for _, j := range jobs {
		seen[j.Namespace] = true
		for _, r := range sortedKeys(j.Requests) {
			out = append(out, prometheus.MustNewConstMetric(jobRequestsDesc, prometheus.GaugeValue, j.Requests[r], j.Namespace, j.Name, r))
		}
	}
	for _, ns := range sortedKeys(seen) {
		out = append(out, prometheus.MustNewConstMetric(namespaceInfoDesc, prometheus.GaugeValue, 1, ns, costCenters[ns]))
	}
	for _, q := range quotas {
		for _, r := range sortedKeys(q.Hard) {
			out = append(out, prometheus.MustNewConstMetric(gpuQuotaDesc, prometheus.GaugeValue, q.Hard[r], q.Namespace, r, "hard"),
				prometheus.MustNewConstMetric(gpuQuotaDesc, prometheus.GaugeValue, q.Used[r], q.Namespace, r, "used"))
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// cachedUsage reads the namespaces' cost centers and GPU quotas from the
// cache.
func cachedUsage(ctx context.Context, c crcache.Informers) (map[string]string, []Quota, error) {
	costCenters := map[string]string{}
	if err := each(ctx, c, &corev1.Namespace{}, func(n *corev1.Namespace) {
		if cc := n.Labels[CostCenterLabel]; cc != "" {
			costCenters[n.Name] = cc
		}
	}); err != nil {
		return nil, nil, err
	}
	var quotas []Quota
	err := each(ctx, c, &corev1.ResourceQuota{}, func(q *corev1.ResourceQuota) {
		if qq := QuotaOf(q); len(qq.Hard) > 0 {
			quotas = append(quotas, qq)
		}
	})
	return costCenters, quotas, err
}
