// Package usage reads what MPI jobs used, per namespace, from the usage
// recording rules (config/monitoring/recording-rules.yaml, group
// mpijob.usage): CPU-, memory- and GPU-hours asked for, and CPU-hours
// used. kubectl mpijob usage and the dashboard's Cluster page ask the same
// queries (Queries) and read the answers the same way (Rows).
package usage

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/util/validation"
)

// RuleInterval is the usage rules' evaluation interval: each sample of a
// recorded series stands for that long.
const RuleInterval = 15 * time.Second

// The recorded series the queries read.
const (
	RequestsSeries = "namespace_resource:mpijob_requests:sum"
	CPUUsedSeries  = "namespace:mpijob_cpu_used_cores:sum"
)

// Row is one namespace's usage over the window.
type Row struct {
	Namespace  string `json:"namespace"`
	CostCenter string `json:"costCenter,omitempty"`
	// CPUHours, MemoryGiBHours and GPUHours are what its MPI jobs' pods
	// asked for, times how long they were placed.
	CPUHours       float64 `json:"cpuHours"`
	MemoryGiBHours float64 `json:"memoryGiBHours"`
	GPUHours       float64 `json:"gpuHours"`
	// CPUUsedHours is the CPU they used (the kubelets' measure).
	CPUUsedHours float64 `json:"cpuUsedHours"`
}

var sinceRE = regexp.MustCompile(`^([1-9][0-9]*)([mhdw])$`)

// ParseSince reads a window such as 30m, 12h, 7d or 2w (at most 90 days:
// what a Prometheus keeps is often less).
func ParseSince(s string) (time.Duration, error) {
	m := sinceRE.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("%q is not a window: use a whole number and m, h, d or w, e.g. 7d", s)
	}
	n, _ := strconv.Atoi(m[1])
	unit := map[string]time.Duration{"m": time.Minute, "h": time.Hour, "d": 24 * time.Hour, "w": 7 * 24 * time.Hour}[m[2]]
	d := time.Duration(n) * unit
	if d > 90*24*time.Hour {
		return 0, fmt.Errorf("%q is longer than 90 days: use at most 90d", s)
	}
	return d, nil
}

// Queries are the PromQL of the usage of namespace ns ("" every one) over
// the window since: resource-hours asked for by resource, and CPU-hours
// used.
func Queries(ns string, since time.Duration) (requests, cpuUsed string, err error) {
	sel := ""
	if ns != "" {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return "", "", fmt.Errorf("namespace %q: %s", ns, strings.Join(errs, "; "))
		}
		sel = fmt.Sprintf(`{namespace=%q}`, ns)
	}
	window := model.Duration(since).String()
	hours := fmt.Sprintf("%g / 3600", RuleInterval.Seconds())
	requests = fmt.Sprintf("sum by (namespace, cost_center, resource) (sum_over_time(%s%s[%s])) * %s", RequestsSeries, sel, window, hours)
	cpuUsed = fmt.Sprintf("sum by (namespace, cost_center) (sum_over_time(%s%s[%s])) * %s", CPUUsedSeries, sel, window, hours)
	return requests, cpuUsed, nil
}

// Read asks Prometheus for the usage of namespace ns ("" every one) over
// the window since, ending at now; rows by namespace.
func Read(ctx context.Context, prom promv1.API, ns string, since time.Duration, now time.Time) ([]Row, error) {
	rq, uq, err := Queries(ns, since)
	if err != nil {
		return nil, err
	}
	req, _, err := prom.Query(ctx, rq, now)
	if err != nil {
		return nil, err
	}
	used, _, err := prom.Query(ctx, uq, now)
	if err != nil {
		return nil, err
	}
	return Rows(req, used), nil
}

// Rows turns the two queries' answers into one row per namespace and cost
// center, by namespace.
func Rows(requests, cpuUsed model.Value) []Row {
	type key struct{ ns, cc string }
	rows := map[key]*Row{}
	row := func(m model.Metric) *Row {
		k := key{string(m["namespace"]), string(m["cost_center"])}
		if rows[k] == nil {
			rows[k] = &Row{Namespace: k.ns, CostCenter: k.cc}
		}
		return rows[k]
	}
	if v, ok := requests.(model.Vector); ok {
		for _, s := range v {
			r, val := row(s.Metric), float64(s.Value)
			switch res := string(s.Metric["resource"]); {
			case res == "cpu":
				r.CPUHours += val
			case res == "memory":
				r.MemoryGiBHours += val / (1 << 30)
			case strings.HasSuffix(res, "/gpu"):
				r.GPUHours += val
			}
		}
	}
	if v, ok := cpuUsed.(model.Vector); ok {
		for _, s := range v {
			row(s.Metric).CPUUsedHours += float64(s.Value)
		}
	}
	out := make([]Row, 0, len(rows))
	for _, r := range rows {
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].CostCenter < out[j].CostCenter
	})
	return out
}
