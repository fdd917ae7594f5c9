package usage

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/model"
)

func TestParseSince(t *testing.T) {
	cases := map[string]struct {
		in   string
		want time.Duration
		err  bool
	}{
		"days":             {in: "7d", want: 7 * 24 * time.Hour},
		"minutes":          {in: "30m", want: 30 * time.Minute},
		"weeks":            {in: "2w", want: 14 * 24 * time.Hour},
		"no unit":          {in: "7", err: true},
		"words":            {in: "7 days", err: true},
		"zero":             {in: "0d", err: true},
		"longer than 90d":  {in: "13w", err: true},
		"seconds refused":  {in: "90s", err: true},
		"negative refused": {in: "-1d", err: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseSince(tc.in)
			if (err != nil) != tc.err || got != tc.want {
				t.Errorf("ParseSince(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.err)
			}
		})
	}
}

func TestQueries(t *testing.T) {
	req, used, err := Queries("team-a", 7*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if want := `sum by (namespace, cost_center, resource) (sum_over_time(namespace_resource:mpijob_requests:sum{namespace="team-a"}[1w])) * 15 / 3600`; req != want {
		t.Errorf("requests query\n got %s\nwant %s", req, want)
	}
	if want := `sum by (namespace, cost_center) (sum_over_time(namespace:mpijob_cpu_used_cores:sum{namespace="team-a"}[1w])) * 15 / 3600`; used != want {
		t.Errorf("used query\n got %s\nwant %s", used, want)
	}
	if _, _, err := Queries(`a"} or vector(1) or {x="`, time.Hour); err == nil {
		t.Error("a namespace that is no name was put into a query")
	}
}

func TestRows(t *testing.T) {
	s := func(ns, cc, res string, v float64) *model.Sample {
		m := model.Metric{"namespace": model.LabelValue(ns), "cost_center": model.LabelValue(cc)}
		if res != "" {
			m["resource"] = model.LabelValue(res)
		}
		return &model.Sample{Metric: m, Value: model.SampleValue(v)}
	}
	req := model.Vector{s("team-b", "", "cpu", 1), s("team-a", "cc-1", "cpu", 4.5), s("team-a", "cc-1", "memory", 3*(1<<30)),
		s("team-a", "cc-1", "nvidia.com/gpu", 2), s("team-a", "cc-1", "amd.com/gpu", 1)}
	used := model.Vector{s("team-a", "cc-1", "", 1.25)}
	want := []Row{
		{Namespace: "team-a", CostCenter: "cc-1", CPUHours: 4.5, MemoryGiBHours: 3, GPUHours: 3, CPUUsedHours: 1.25},
		{Namespace: "team-b", CPUHours: 1},
	}
	if diff := cmp.Diff(want, Rows(req, used)); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
}

func TestTopQueries(t *testing.T) {
	cpu, mem, gpu, err := TopQueries("team-a", "hello")
	if err != nil {
		t.Fatal(err)
	}
	if want := `max by (pod) (pod:mpijob_cpu_usage_cores:rate1m{namespace="team-a",trainjob="hello"})`; cpu != want {
		t.Errorf("cpu query\n got %s\nwant %s", cpu, want)
	}
	if want := `max by (pod) (pod:mpijob_memory_working_set_bytes:sum{namespace="team-a",trainjob="hello"})`; mem != want {
		t.Errorf("memory query\n got %s\nwant %s", mem, want)
	}
	if want := `avg by (pod) (DCGM_FI_DEV_GPU_UTIL{namespace="team-a",pod=~"^hello-(launcher|node)-[0-9]+-[0-9]+-[a-z0-9]{5}$"})`; gpu != want {
		t.Errorf("gpu query\n got %s\nwant %s", gpu, want)
	}
	if _, _, _, err := TopQueries("team-a", `x"}`); err == nil {
		t.Error("a job name that is no name was put into a query")
	}
}
