package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A job's placed, unfinished pods count toward its requests (a GPU's limit
// where it has no request); a pending or finished pod does not. A
// namespace's cost center is its label; its GPU quota is its
// ResourceQuota's, requests.nvidia.com/gpu read as nvidia.com/gpu.
func TestUsageSeries(t *testing.T) {
	placed := func(p *corev1.Pod, node string, phase corev1.PodPhase, rl map[string]string) *corev1.Pod {
		p.Spec.NodeName, p.Status.Phase = node, phase
		c := corev1.Container{Name: "node", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}}
		for k, v := range rl {
			if strings.HasSuffix(k, "/gpu") {
				c.Resources.Limits[corev1.ResourceName(k)] = resource.MustParse(v)
			} else {
				c.Resources.Requests[corev1.ResourceName(k)] = resource.MustParse(v)
			}
		}
		p.Spec.Containers = []corev1.Container{c}
		return p
	}
	objs := []client.Object{
		trainJob("team-a", "hello", `{"phase":"Running","launcher":"Running"}`),
		placed(jobPod("team-a", "hello", "launcher", "hello-launcher-0-0-abcde"), "n1", corev1.PodRunning, map[string]string{"cpu": "500m", "memory": "1Gi"}),
		placed(jobPod("team-a", "hello", "node", "hello-node-0-0-fghij"), "n1", corev1.PodRunning, map[string]string{"cpu": "2", "nvidia.com/gpu": "4"}),
		placed(jobPod("team-a", "hello", "node", "hello-node-0-1-klmno"), "n2", corev1.PodRunning, map[string]string{"cpu": "2", "nvidia.com/gpu": "4"}),
		placed(jobPod("team-a", "hello", "node", "hello-node-0-2-pending"), "", corev1.PodPending, map[string]string{"cpu": "2", "nvidia.com/gpu": "4"}),
		placed(jobPod("team-a", "hello", "node", "hello-node-0-3-done"), "n3", corev1.PodSucceeded, map[string]string{"cpu": "2", "nvidia.com/gpu": "4"}),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{CostCenterLabel: "cc-1234"}}},
		&corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "gpus"}, Status: corev1.ResourceQuotaStatus{
			Hard: corev1.ResourceList{"requests.nvidia.com/gpu": resource.MustParse("10"), "requests.cpu": resource.MustParse("64")},
			Used: corev1.ResourceList{"requests.nvidia.com/gpu": resource.MustParse("8"), "requests.cpu": resource.MustParse("5")}}},
	}
	want := `
# HELP mpijob_job_resource_requests What an MPI job's placed, unfinished pods ask for now, by resource: cpu in cores, memory in bytes, GPUs (nvidia.com/gpu, amd.com/gpu, ...) in devices; a limit counts where a container has no request. The usage recording rules (config/monitoring/recording-rules.yaml, group mpijob.usage) add it up over time into CPU-, memory- and GPU-hours per namespace.
# TYPE mpijob_job_resource_requests gauge
mpijob_job_resource_requests{namespace="team-a",resource="cpu",trainjob="hello"} 4.5
mpijob_job_resource_requests{namespace="team-a",resource="memory",trainjob="hello"} 1.073741824e+09
mpijob_job_resource_requests{namespace="team-a",resource="nvidia.com/gpu",trainjob="hello"} 8
# HELP mpijob_namespace_gpu_quota Each namespace's ResourceQuota of GPUs (requests.nvidia.com/gpu, nvidia.com/gpu, ...): its hard limit (type hard) and what pods use of it now (type used), in devices. The alert MPIJobNamespaceGPUQuotaHigh fires at 90 %.
# TYPE mpijob_namespace_gpu_quota gauge
mpijob_namespace_gpu_quota{namespace="team-a",resource="nvidia.com/gpu",type="hard"} 10
mpijob_namespace_gpu_quota{namespace="team-a",resource="nvidia.com/gpu",type="used"} 8
# HELP mpijob_namespace_info 1 for each namespace that has an MPI job, with its cost center (the Namespace's label mpijob.dev/cost-center; empty when it has none).
# TYPE mpijob_namespace_info gauge
mpijob_namespace_info{cost_center="cc-1234",namespace="team-a"} 1
`
	if err := testutil.CollectAndCompare(JobsCollector{Cache: informersOf(t, objs...)}, strings.NewReader(want),
		"mpijob_job_resource_requests", "mpijob_namespace_info", "mpijob_namespace_gpu_quota"); err != nil {
		t.Error(err)
	}
}
