package usage

import (
	"context"
	"fmt"
	"regexp"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/mpijob/mpijob/pkg/api"
)

// PodUse is what one pod of a job uses now, by pod name.
type PodUse struct {
	// CPUCores is the pod's CPU use over the last minute, in cores.
	CPUCores float64 `json:"cpuCores"`
	// MemoryBytes is its working set now.
	MemoryBytes float64 `json:"memoryBytes"`
	// GPUPercent is its GPUs' mean utilisation now, from NVIDIA's DCGM
	// exporter (nil: no sample, as on a cluster that does not run it).
	GPUPercent *float64 `json:"gpuPercent,omitempty"`
}

// PodSelector matches exactly the pods of TrainJob name in ns, in the
// labels the kubelet's and DCGM's series carry: JobSet names them
// NAME-launcher-0-0-xxxxx and NAME-node-0-N-xxxxx, and a job whose name
// starts the same (train, train-2) is not matched.
func PodSelector(ns, name string) string {
	re := "^" + regexp.QuoteMeta(name) + "-(" + api.LauncherJob + "|" + api.WorkerJob + ")-[0-9]+-[0-9]+-[a-z0-9]{5}$"
	return fmt.Sprintf(`namespace=%q,pod=~%q`, ns, re)
}

// TopQueries are the PromQL of what job's pods use now: CPU and memory
// from the recording rules' per-pod series (group mpijob.resources), and
// GPU utilisation from NVIDIA's DCGM exporter where a cluster runs it (the
// dashboard's Metrics tab reads the same series).
func TopQueries(ns, job string) (cpu, memory, gpu string, err error) {
	for _, n := range []string{ns, job} {
		if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
			return "", "", "", fmt.Errorf("%q is not a name", n)
		}
	}
	sel := fmt.Sprintf(`{namespace=%q,trainjob=%q}`, ns, job)
	return "max by (pod) (pod:mpijob_cpu_usage_cores:rate1m" + sel + ")", "max by (pod) (pod:mpijob_memory_working_set_bytes:sum" + sel + ")",
		"avg by (pod) (DCGM_FI_DEV_GPU_UTIL{" + PodSelector(ns, job) + "})", nil
}

// ReadTop asks Prometheus what job's pods use now, by pod name; a pod
// Prometheus has no sample of (a kwok pod, one that just started) is
// absent.
func ReadTop(ctx context.Context, prom promv1.API, ns, job string, now time.Time) (map[string]PodUse, error) {
	cq, mq, gq, err := TopQueries(ns, job)
	if err != nil {
		return nil, err
	}
	out := map[string]PodUse{}
	for i, q := range []string{cq, mq, gq} {
		v, _, err := prom.Query(ctx, q, now)
		if err != nil {
			return nil, err
		}
		vec, _ := v.(model.Vector)
		for _, s := range vec {
			pod := string(s.Metric["pod"])
			u := out[pod]
			switch i {
			case 0:
				u.CPUCores = float64(s.Value)
			case 1:
				u.MemoryBytes = float64(s.Value)
			default:
				u.GPUPercent = ptr.To(float64(s.Value))
			}
			out[pod] = u
		}
	}
	return out, nil
}
