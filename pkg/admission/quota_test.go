package admission

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func quota(name string, hard, used corev1.ResourceList) corev1.ResourceQuota {
	return corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.ResourceQuotaSpec{Hard: hard}, Status: corev1.ResourceQuotaStatus{Hard: hard, Used: used}}
}

func gpuJob(workers int64, gpus string) Demand {
	return Demand{Launchers: 1, LauncherRequests: rl("cpu", "100m", "memory", "128Mi"), LauncherLimits: rl("memory", "512Mi"),
		Workers: workers, WorkerRequests: rl("nvidia.com/gpu", gpus, "memory", "8Gi"), WorkerLimits: rl("nvidia.com/gpu", gpus, "memory", "8Gi")}
}

func TestCheckQuota(t *testing.T) {
	teamA := quota("team-quota", rl("requests.nvidia.com/gpu", "8", "requests.memory", "64Gi", "limits.memory", "64Gi"), rl())
	cases := map[string]struct {
		demand Demand
		quotas []corev1.ResourceQuota
		// queued checks as for a job Kueue queues (CheckQuotaQueued).
		queued bool
		want   []string
	}{
		"the issue's example: 4 workers × 3 GPUs against 8": {
			demand: gpuJob(4, "3"), quotas: []corev1.ResourceQuota{teamA},
			want: []string{"requested 12 nvidia.com/gpu (4 workers × 3), quota 8, in use 0: use at most 2 workers or ask for a larger quota (ResourceQuota team-quota)"},
		},
		"exactly fits: admitted": {
			demand: gpuJob(4, "2"), quotas: []corev1.ResourceQuota{teamA},
		},
		"one over because of what is in use": {
			demand: gpuJob(4, "2"), quotas: []corev1.ResourceQuota{quota("q", rl("requests.nvidia.com/gpu", "8"), rl("requests.nvidia.com/gpu", "1"))},
			want: []string{"requested 8 nvidia.com/gpu (4 workers × 2), quota 8, in use 1: use at most 3 workers or ask for a larger quota (ResourceQuota q)"},
		},
		"quota all used: free some": {
			demand: gpuJob(1, "1"), quotas: []corev1.ResourceQuota{quota("q", rl("requests.nvidia.com/gpu", "8"), rl("requests.nvidia.com/gpu", "8"))},
			want: []string{"requested 1 nvidia.com/gpu (1 workers × 1), quota 8, in use 8: free some of the quota (other jobs use it) or ask for a larger quota (ResourceQuota q)"},
		},
		"memory counts the launcher": {
			demand: gpuJob(8, "1"), quotas: []corev1.ResourceQuota{teamA},
			want: []string{
				"requested 66048Mi memory (limits) (8 workers × 8Gi + launcher 512Mi), quota 64Gi, in use 0: use at most 7 workers or ask for a larger quota (ResourceQuota team-quota)",
				"requested 65664Mi memory (8 workers × 8Gi + launcher 128Mi), quota 64Gi, in use 0: use at most 7 workers or ask for a larger quota (ResourceQuota team-quota)",
			},
		},
		"pods count": {
			demand: gpuJob(4, "0"), quotas: []corev1.ResourceQuota{quota("pods", rl("pods", "4"), rl())},
			want: []string{"requested 5 pods (4 workers × 1 + launcher 1), quota 4, in use 0: use at most 3 workers or ask for a larger quota (ResourceQuota pods)"},
		},
		"launcher alone does not fit": {
			demand: gpuJob(1, "1"), quotas: []corev1.ResourceQuota{quota("cpu", rl("requests.cpu", "50m"), rl())},
			want: []string{"requested 100m CPU (1 workers × 0 + launcher 100m), quota 50m, in use 0: ask for a larger quota (ResourceQuota cpu)"},
		},
		"scoped quotas are left to the API server": {
			demand: gpuJob(4, "3"),
			quotas: []corev1.ResourceQuota{{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Spec: corev1.ResourceQuotaSpec{Hard: rl("requests.nvidia.com/gpu", "1"), Scopes: []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeBestEffort}}}},
		},
		"queued: what other jobs use does not refuse it, it waits Queued": {
			demand: gpuJob(4, "2"), queued: true,
			quotas: []corev1.ResourceQuota{quota("q", rl("requests.nvidia.com/gpu", "8"), rl("requests.nvidia.com/gpu", "8"))},
		},
		"queued: larger than the whole quota is refused, whatever is in use": {
			demand: gpuJob(4, "3"), queued: true,
			quotas: []corev1.ResourceQuota{quota("q", rl("requests.nvidia.com/gpu", "8"), rl("requests.nvidia.com/gpu", "5"))},
			want:   []string{"requested 12 nvidia.com/gpu (4 workers × 3), quota 8: more than the whole quota, so it could never start (queued jobs wait only for what other jobs use): use at most 2 workers or ask for a larger quota (ResourceQuota q)"},
		},
		"resources the job does not ask for": {
			demand: gpuJob(2, "1"), quotas: []corev1.ResourceQuota{quota("storage", rl("requests.storage", "1Gi", "count/secrets", "1"), rl())},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []string
			check := CheckQuota
			if tc.queued {
				check = CheckQuotaQueued
			}
			for _, v := range check(tc.demand, tc.quotas) {
				got = append(got, v.Message())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("violations (-want,+got):\n%s", diff)
			}
		})
	}
}

var cmpQuantity = cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })

// The comparer must tell different quantities apart, or the tests above
// that use it could not fail.
func TestCmpQuantity(t *testing.T) {
	if !cmp.Equal(resource.MustParse("1Gi"), resource.MustParse("1024Mi"), cmpQuantity) {
		t.Error("1Gi and 1024Mi should be equal")
	}
	if cmp.Equal(resource.MustParse("1Gi"), resource.MustParse("1G"), cmpQuantity) {
		t.Error("1Gi and 1G should differ")
	}
	if strings.Contains(cmp.Diff(rl("cpu", "1"), rl("cpu", "1000m"), cmpQuantity), "cpu") {
		t.Error("1 and 1000m CPU should be equal")
	}
}

func TestDemandTotalRequests(t *testing.T) {
	d := Demand{
		Launchers: 1, LauncherRequests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
		Workers: 2, WorkerRequests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi"), "nvidia.com/gpu": resource.MustParse("4")},
	}
	got := d.TotalRequests()
	for name, want := range map[corev1.ResourceName]string{corev1.ResourceCPU: "300m", corev1.ResourceMemory: "384Mi", "nvidia.com/gpu": "8"} {
		if q := got[name]; q.String() != want {
			t.Errorf("%s = %s, want %s", name, q.String(), want)
		}
	}
}
