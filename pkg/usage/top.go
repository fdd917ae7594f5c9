package usage

import (
	"context"
	"fmt"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/util/validation"
)

// PodUse is what one pod of a job uses now, by pod name.
type PodUse struct {
	// CPUCores is the pod's CPU use over the last minute, in cores.
	CPUCores float64 `json:"cpuCores"`
	// MemoryBytes is its working set now.
	MemoryBytes float64 `json:"memoryBytes"`
}

// TopQueries are the PromQL of what job's pods use now, from the
// recording rules' per-pod series (group mpijob.resources).
func TopQueries(ns, job string) (cpu, memory string, err error) {
	for _, n := range []string{ns, job} {
		if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
			return "", "", fmt.Errorf("%q is not a name", n)
		}
	}
	sel := fmt.Sprintf(`{namespace=%q,trainjob=%q}`, ns, job)
	return "max by (pod) (pod:mpijob_cpu_usage_cores:rate1m" + sel + ")", "max by (pod) (pod:mpijob_memory_working_set_bytes:sum" + sel + ")", nil
}

// ReadTop asks Prometheus what job's pods use now, by pod name; a pod
// Prometheus has no sample of (a kwok pod, one that just started) is
// absent.
func ReadTop(ctx context.Context, prom promv1.API, ns, job string, now time.Time) (map[string]PodUse, error) {
	cq, mq, err := TopQueries(ns, job)
	if err != nil {
		return nil, err
	}
	out := map[string]PodUse{}
	for i, q := range []string{cq, mq} {
		v, _, err := prom.Query(ctx, q, now)
		if err != nil {
			return nil, err
		}
		vec, _ := v.(model.Vector)
		for _, s := range vec {
			pod := string(s.Metric["pod"])
			u := out[pod]
			if i == 0 {
				u.CPUCores = float64(s.Value)
			} else {
				u.MemoryBytes = float64(s.Value)
			}
			out[pod] = u
		}
	}
	return out, nil
}
