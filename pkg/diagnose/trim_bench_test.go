package diagnose

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// BenchmarkCachedPod measures what one MPI Worker pod costs mpijob-manager's
// cache: the heap held by the pod as the API server sends it (a Running
// Worker read from the local cluster, managedFields included,
// testdata/worker-pod.json, made into jobs of 8 Workers: each job its own
// name, owner, affinity and start second, each Worker its own name, index,
// host and address, and every third Worker ready a second later) against
// the same pods after the cache's transform, each holding its own copy of
// everything (trimJobSetPod) and with what they repeat held once
// (TrimJobSetPod). At 500 jobs × 8 Workers the cache holds 4,500 of them.
// Run: go test ./pkg/diagnose -run '^$' -bench CachedPod
func BenchmarkCachedPod(b *testing.B) {
	raw, err := os.ReadFile("testdata/worker-pod.json")
	if err != nil {
		b.Fatal(err)
	}
	const n, perJob = 2000, 8
	base := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	perPod := func(transform func(any) (any, error)) float64 {
		pods := make([]any, n)
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for i := range pods {
			p := &corev1.Pod{}
			if err := json.Unmarshal(raw, p); err != nil {
				b.Fatal(err)
			}
			asWorker(p, i/perJob, i%perJob, base)
			if pods[i], err = transform(p); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(pods)
		return float64(after.HeapAlloc-before.HeapAlloc) / n
	}
	asSent := func(o any) (any, error) { return o, nil }
	alone := func(o any) (any, error) { trimJobSetPod(o.(*corev1.Pod)); return o, nil }
	var sent, own, cached float64
	for b.Loop() {
		sent, own, cached = perPod(asSent), perPod(alone), perPod(TrimPod)
	}
	b.ReportMetric(sent, "B/pod-as-sent")
	b.ReportMetric(own, "B/pod-trimmed-own-copies")
	b.ReportMetric(cached, "B/pod-cached")
	b.ReportMetric(cached/own, "cached/own-copies")
	b.ReportMetric(cached*4500/(1<<20), "MiB/4500-pods")
}

// asWorker makes the decoded Worker p Worker w of job j, started at base
// plus j seconds.
func asWorker(p *corev1.Pod, j, w int, base time.Time) {
	job := fmt.Sprintf("job-%04d", j)
	p.Name = fmt.Sprintf("%s-node-0-%d-x%04d", job, w, j)
	p.UID = types.UID(fmt.Sprintf("0000%04d-0000-0000-0000-%012d", j, w))
	p.Labels["jobset.sigs.k8s.io/jobset-name"] = job
	p.Labels[completionIndexLabel] = fmt.Sprint(w)
	p.Spec.Hostname = fmt.Sprintf("%s-node-0-%d", job, w)
	p.Spec.Subdomain = job
	p.Spec.NodeName = fmt.Sprintf("mpijob-node-%d", 1+w%2)
	p.Status.PodIP = fmt.Sprintf("10.244.%d.%d", j%250, w)
	p.OwnerReferences[0].Name = job + "-node-0"
	p.OwnerReferences[0].UID = types.UID(fmt.Sprintf("0000%04d-0000-0000-0000-000000000000", j))
	if a := p.Spec.Affinity; a != nil && a.PodAntiAffinity != nil {
		for _, t := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			for k := range t.LabelSelector.MatchExpressions {
				if e := &t.LabelSelector.MatchExpressions[k]; e.Key == "jobset.sigs.k8s.io/jobset-name" {
					e.Values = []string{job}
				}
			}
		}
	}
	started := metav1.NewTime(base.Add(time.Duration(j) * time.Second))
	ready := started
	if w%3 == 0 {
		ready = metav1.NewTime(started.Add(time.Second))
	}
	for k := range p.Status.Conditions {
		c := &p.Status.Conditions[k]
		c.LastTransitionTime = started
		if c.Type == corev1.PodReady || c.Type == corev1.ContainersReady {
			c.LastTransitionTime = ready
		}
	}
	for k := range p.Status.ContainerStatuses {
		if r := p.Status.ContainerStatuses[k].State.Running; r != nil {
			r.StartedAt = started
		}
	}
	p.Status.StartTime = &started
}

// BenchmarkShareRepeats measures the keys that find what a cached Worker
// repeats (shareRepeats: its owner, containers, affinity, node selector,
// tolerations, conditions and container states), in one run: hashed as
// their JSON, as the cache did until 2026-12-03 (encoding/json's
// reflection), against their protobuf encoding (keyOf), for a real
// trimmed Worker (testdata/worker-pod.json). It prints both and their
// ratio. Run: go test ./pkg/diagnose -run '^$' -bench ShareRepeats
func BenchmarkShareRepeats(b *testing.B) {
	p := realWorker(b)
	trimJobSetPod(p)
	// As shareRepeats does, with a node selector and a node affinity (a
	// GPU Worker's) that the Worker read lacks.
	p.Spec.NodeSelector = map[string]string{"nvidia.com/gpu.product": "NVIDIA-H200"}
	p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/arch", Operator: "In", Values: []string{"amd64"}}},
		}}},
	}}
	if len(p.Spec.Tolerations) == 0 || len(p.Status.Conditions) == 0 || len(p.Status.ContainerStatuses) == 0 {
		b.Fatal("testdata/worker-pod.json lacks the parts shareRepeats keys")
	}
	jsonKey := func(v any) [sha256.Size]byte {
		raw, err := json.Marshal(v)
		if err != nil {
			b.Fatal(err)
		}
		return sha256.Sum256(raw)
	}
	var sink [sha256.Size]byte
	asJSON := func() {
		for _, v := range []any{p.OwnerReferences, p.Spec.InitContainers, p.Spec.Containers, p.Spec.Affinity,
			p.Spec.NodeSelector, p.Spec.Tolerations, p.Status.Conditions, p.Status.InitContainerStatuses,
			p.Status.ContainerStatuses} {
			sink = jsonKey(v)
		}
	}
	asProtobuf := func() {
		sink, _ = keyOf(p.OwnerReferences)
		sink, _ = keyOf(p.Spec.InitContainers)
		sink, _ = keyOf(p.Spec.Containers)
		sink, _ = keyOf([]corev1.Affinity{*p.Spec.Affinity})
		sink, _ = keyOf([]map[string]string{p.Spec.NodeSelector})
		sink, _ = keyOf(p.Spec.Tolerations)
		sink, _ = keyOf(p.Status.Conditions)
		sink, _ = keyOf(p.Status.InitContainerStatuses)
		sink, _ = keyOf(p.Status.ContainerStatuses)
	}
	per := func(f func()) float64 {
		const n = 200
		start := time.Now()
		for range n {
			f()
		}
		return float64(time.Since(start).Nanoseconds()) / n
	}
	var j, pb float64
	for b.Loop() {
		j, pb = per(asJSON), per(asProtobuf)
	}
	_ = sink
	b.ReportMetric(j, "ns/worker-json")
	b.ReportMetric(pb, "ns/worker-protobuf")
	b.ReportMetric(j/pb, "json/protobuf")
}

// realWorker is the Running Worker read from the local cluster
// (testdata/worker-pod.json), as the API server sent it.
func realWorker(tb testing.TB) *corev1.Pod {
	tb.Helper()
	raw, err := os.ReadFile("testdata/worker-pod.json")
	if err != nil {
		tb.Fatal(err)
	}
	p := &corev1.Pod{}
	if err := json.Unmarshal(raw, p); err != nil {
		tb.Fatal(err)
	}
	return p
}
