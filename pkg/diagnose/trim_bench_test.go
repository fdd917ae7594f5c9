package diagnose

import (
	"encoding/json"
	"os"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// BenchmarkCachedPod measures what one MPI Worker pod costs mpijob-manager's
// cache: the heap held by the pod as the API server sends it (a Running
// Worker read from the local cluster, managedFields included,
// testdata/worker-pod.json) against the same pod after the cache's transform
// (TrimPod). At 500 jobs × 8 Workers the cache holds 4,500 of them. Run:
// go test ./pkg/diagnose -run '^$' -bench CachedPod
func BenchmarkCachedPod(b *testing.B) {
	raw, err := os.ReadFile("testdata/worker-pod.json")
	if err != nil {
		b.Fatal(err)
	}
	const n = 2000
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
	var sent, cached float64
	for b.Loop() {
		sent, cached = perPod(asSent), perPod(TrimPod)
	}
	b.ReportMetric(sent, "B/pod-as-sent")
	b.ReportMetric(cached, "B/pod-cached")
	b.ReportMetric(cached/sent, "cached/sent")
	b.ReportMetric(cached*4500/(1<<20), "MiB/4500-pods")
}
