package dashboard

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sort"
	"strings"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/usage"
)

// Metrics are a job's resource use over its life and its phases as bands,
// for the job page's Metrics tab.
type Metrics struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// Step is the seconds between two points.
	Step   float64        `json:"step"`
	Series []MetricSeries `json:"series"`
	Phases []PhaseBand    `json:"phases"`
	// How says where the numbers come from, in words.
	How string `json:"how"`
}

// MetricSeries is one pod's values of one metric.
type MetricSeries struct {
	// Metric is "cpu" (cores), "memory" (bytes) or "gpu" (utilisation %).
	Metric string `json:"metric" ts:"'cpu' | 'memory' | 'gpu'"`
	Pod    string `json:"pod"`
	// Role is api.RoleLauncher or api.RoleWorker.
	Role string `json:"role" ts:"'Launcher' | 'Worker'"`
	// Points are [unix seconds, value] pairs.
	Points [][2]float64 `json:"points"`
}

// PhaseBand is a stretch of time the job spent in one phase.
type PhaseBand struct {
	Phase api.Phase `json:"phase"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

// metricQueries are the PromQL of each metric of the Metrics tab; %[1]s is
// the namespace matcher and pod selector, %[2]s the rate window. CPU and
// memory come from the kubelets' resource metrics (/metrics/resource),
// GPU utilisation from NVIDIA's DCGM exporter where a cluster runs it.
var metricQueries = []struct{ metric, query string }{
	{"cpu", `sum by (pod) (rate(container_cpu_usage_seconds_total{%[1]s,container!=""}[%[2]s]))`},
	{"memory", `sum by (pod) (container_memory_working_set_bytes{%[1]s,container!=""})`},
	{"gpu", `avg by (pod) (DCGM_FI_DEV_GPU_UTIL{%[1]s})`},
}

// podSelector matches exactly the pods of TrainJob name (usage.PodSelector,
// which kubectl mpijob top reads too).
func podSelector(ns, name string) string { return usage.PodSelector(ns, name) }

// roleOfPod tells the role from a pod name podSelector matched.
func roleOfPod(job, pod string) string {
	if strings.HasPrefix(pod, job+"-"+api.LauncherJob+"-") {
		return api.RoleLauncher
	}
	return api.RoleWorker
}

// metricsRange is the time the Metrics tab covers: the job's life, from
// its creation to its end (or now), with about 240 points and never finer
// than the scrape interval.
func metricsRange(created time.Time, finished *time.Time, now time.Time, scrape time.Duration) (start, end time.Time, step time.Duration) {
	start, end = created, now
	if finished != nil && finished.Before(now) {
		end = finished.Add(3 * scrape)
		if end.After(now) {
			end = now
		}
	}
	if !end.After(start) {
		end = start.Add(scrape)
	}
	step = time.Duration(math.Ceil(end.Sub(start).Seconds()/240)) * time.Second
	if step < scrape {
		step = scrape
	}
	return start, end, step
}

// rateWindow is the range of rate(): four scrapes at least, so one missed
// scrape leaves no gap, and a step's worth on long jobs.
func rateWindow(step, scrape time.Duration) string {
	w := max(4*scrape, step)
	return fmt.Sprintf("%ds", int(w.Seconds()))
}

// phaseBands turns the samples of mpijob_job_phase (one series per phase,
// present while the job was in it) into bands in time order. A band ends
// where the next begins; the last one at end.
func phaseBands(m model.Matrix, end time.Time) []PhaseBand {
	type at struct {
		t     time.Time
		phase api.Phase
	}
	var points []at
	for _, s := range m {
		p := api.Phase(s.Metric["phase"])
		for _, v := range s.Values {
			points = append(points, at{v.Timestamp.Time(), p})
		}
	}
	sort.SliceStable(points, func(i, j int) bool { return points[i].t.Before(points[j].t) })
	var out []PhaseBand
	for _, p := range points {
		if n := len(out); n > 0 && out[n-1].Phase == p.phase {
			continue
		}
		if n := len(out); n > 0 {
			out[n-1].End = p.t
		}
		out = append(out, PhaseBand{Phase: p.phase, Start: p.t})
	}
	if n := len(out); n > 0 {
		out[n-1].End = end
	}
	return out
}

// statusBands are the bands the job's own status tells when Prometheus has
// no phase samples (it did not run then): waiting until the Launcher
// started, Running until the job ended, then the final phase.
func statusBands(created time.Time, st api.Status, end time.Time) []PhaseBand {
	var out []PhaseBand
	waitEnd := end
	if st.StartTime != nil {
		waitEnd = st.StartTime.Time
	} else if st.CompletionTime != nil {
		waitEnd = st.CompletionTime.Time
	}
	if st.StartTime == nil && st.CompletionTime == nil {
		return []PhaseBand{{Phase: st.Phase, Start: created, End: end}}
	}
	out = append(out, PhaseBand{Phase: api.PhasePending, Start: created, End: waitEnd})
	if st.StartTime != nil {
		runEnd := end
		if st.CompletionTime != nil {
			runEnd = st.CompletionTime.Time
		}
		out = append(out, PhaseBand{Phase: api.PhaseRunning, Start: st.StartTime.Time, End: runEnd})
	}
	if st.CompletionTime != nil {
		out = append(out, PhaseBand{Phase: st.Phase, Start: st.CompletionTime.Time, End: end})
	}
	return out
}

// matrixSeries turns a query's result into series of metric.
func matrixSeries(metric, job string, m model.Matrix) []MetricSeries {
	out := []MetricSeries{}
	for _, s := range m {
		pod := string(s.Metric["pod"])
		ms := MetricSeries{Metric: metric, Pod: pod, Role: roleOfPod(job, pod), Points: make([][2]float64, 0, len(s.Values))}
		for _, v := range s.Values {
			if math.IsNaN(float64(v.Value)) {
				continue
			}
			ms.Points = append(ms.Points, [2]float64{float64(v.Timestamp.Unix()), float64(v.Value)})
		}
		out = append(out, ms)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Role != out[j].Role {
			return out[i].Role == api.RoleLauncher
		}
		return out[i].Pod < out[j].Pod
	})
	return out
}

// errNoPrometheus says the dashboard was started without a metrics store.
var errNoPrometheus = errors.New("metrics are not available: this dashboard was started without --prometheus-url (the Prometheus that scrapes the kubelets and mpijob-manager)")

func (s *Server) prometheus() (promv1.API, error) {
	if s.PrometheusURL == "" {
		return nil, errNoPrometheus
	}
	c, err := promapi.NewClient(promapi.Config{Address: s.PrometheusURL})
	if err != nil {
		return nil, err
	}
	return promv1.NewAPI(c), nil
}

// jobMetrics serves GET /api/jobs/{ns}/{name}/metrics. Prometheus knows
// nothing of users, so the job is read as the user first: who may not see
// the job sees none of its metrics.
func (s *Server) jobMetrics(w http.ResponseWriter, r *http.Request, c *userClients) {
	tj, ok := s.jobOf(w, r, c)
	if !ok {
		return
	}
	prom, err := s.prometheus()
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	m, err := s.metricsOf(r.Context(), prom, tj, time.Now())
	if err != nil {
		writeError(w, http.StatusBadGateway, fmt.Sprintf("Prometheus at %s did not answer: %v", s.PrometheusURL, err))
		return
	}
	writeJSON(w, http.StatusOK, m)
}

func (s *Server) metricsOf(ctx context.Context, prom promv1.API, tj *trainer.TrainJob, now time.Time) (*Metrics, error) {
	st, _ := api.StatusOf(tj)
	var finished *time.Time
	if st.CompletionTime != nil {
		finished = &st.CompletionTime.Time
	}
	scrape := s.scrapeInterval()
	start, end, step := metricsRange(tj.CreationTimestamp.Time, finished, now, scrape)
	rng := promv1.Range{Start: start, End: end, Step: step}
	sel := podSelector(tj.Namespace, tj.Name)
	out := &Metrics{Start: start, End: end, Step: step.Seconds(), Series: []MetricSeries{},
		How: fmt.Sprintf("From Prometheus: CPU and memory of each pod's containers as its node's kubelet reports them (resource metrics), GPU utilisation where NVIDIA's DCGM exporter runs, "+
			"the phase from mpijob-manager (mpijob_job_phase); a point every %s.", step)}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for _, q := range metricQueries {
		res, _, err := prom.QueryRange(ctx, fmt.Sprintf(q.query, sel, rateWindow(step, scrape)), rng)
		if err != nil {
			return nil, err
		}
		if m, ok := res.(model.Matrix); ok {
			out.Series = append(out.Series, matrixSeries(q.metric, tj.Name, m)...)
		}
	}
	res, _, err := prom.QueryRange(ctx, fmt.Sprintf(`mpijob_job_phase{namespace=%q,trainjob=%q}`, tj.Namespace, tj.Name), rng)
	if err != nil {
		return nil, err
	}
	if m, ok := res.(model.Matrix); ok {
		out.Phases = phaseBands(m, end)
	}
	if len(out.Phases) == 0 {
		out.Phases = statusBands(tj.CreationTimestamp.Time, st, end)
	}
	out.Phases = endWith(out.Phases, st, end)
	return out, nil
}

// endWith makes a finished job's bands end in its final phase from its
// completion time, as its status says, when Prometheus has not scraped
// that phase yet (it ended less than a scrape ago).
func endWith(bands []PhaseBand, st api.Status, end time.Time) []PhaseBand {
	n := len(bands)
	if st.CompletionTime == nil || n == 0 || bands[n-1].Phase == st.Phase {
		return bands
	}
	done := st.CompletionTime.Time
	if done.After(bands[n-1].Start) && done.Before(end) {
		bands[n-1].End = done
	} else {
		done = bands[n-1].End
	}
	return append(bands, PhaseBand{Phase: st.Phase, Start: done, End: end})
}

func (s *Server) scrapeInterval() time.Duration {
	if s.ScrapeInterval > 0 {
		return s.ScrapeInterval
	}
	return 15 * time.Second
}
