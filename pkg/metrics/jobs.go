package metrics

import (
	"context"
	"fmt"
	"sync"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/cached"
	"github.com/mpijob/mpijob/pkg/runtimes"
)

// Label names of the per-job series. A job's name is "trainjob", not
// "job": Prometheus gives every scraped series a "job" label of its own
// (the scrape job), which would rename ours.
const (
	labelNamespace = "namespace"
	labelTrainJob  = "trainjob"
	labelPhase     = "phase"
	labelPod       = "pod"
	labelRole      = "role"
	labelReason    = "reason"
)

var (
	jobPhaseDesc = prometheus.NewDesc(namespace+"_job_phase",
		"1 for each MPI job, labelled with its current phase (the phase of mpijob.dev/status).",
		[]string{labelNamespace, labelTrainJob, labelPhase}, nil)
	jobSinceDesc = prometheus.NewDesc(namespace+"_job_phase_since_timestamp_seconds",
		"When each MPI job entered its current phase (Unix time), labelled with the phase and the diagnosis's reason: the alerts read how long a job has been in a phase, and which jobs the diagnosis names stuck.",
		[]string{labelNamespace, labelTrainJob, labelPhase, labelReason}, nil)
	jobPodDesc = prometheus.NewDesc(namespace+"_job_pod_info",
		"1 for each pod of an MPI job, with its role (Launcher or Worker): join it with the kubelets' container metrics on namespace and pod.",
		[]string{labelNamespace, labelTrainJob, labelPod, labelRole}, nil)
)

// JobState is what the jobs collector reports of one MPI job.
type JobState struct {
	Namespace, Name string
	Phase           api.Phase
	// Reason is the diagnosis's reason; Since is when the job entered its
	// phase (zero: not known, no series).
	Reason string
	Since  time.Time
	// Pods maps each of the job's pod names to its role, api.RoleLauncher
	// or api.RoleWorker.
	Pods map[string]string
	// Requests are what its placed, unfinished pods ask for now.
	Requests Requests
}

// JobsCollector reports every MPI job's current phase and its pods' roles
// at each scrape, from the manager's cache: a gauge that is always what
// the jobs are now, also after a restart, and that disappears with the job.
type JobsCollector struct {
	// Cache is the manager's cache. Its informers' own objects are read in
	// place: a List would copy every JobSet pod into a new slice at every
	// scrape (4,500 pod structs at 500 jobs × 8 Workers, about 9 MB).
	Cache crcache.Informers
	// Elected is closed once this replica leads; until then it reports
	// nothing, so two replicas never report the same job twice. Nil: always.
	Elected <-chan struct{}
	// Statuses keeps each job's phase, reason and since between scrapes,
	// decoded again only when its status annotation changed. Nil: every
	// scrape decodes every job's status.
	Statuses *StatusMemo
}

// StatusMemo remembers what the jobs collector read of each job's status
// annotation. A scrape at 500 running jobs decoded 500 statuses of most
// of a kilobyte each (their history and pods), which was about 5 % of
// the leader's CPU while the jobs started (a CPU profile during
// bench/scale); most jobs' statuses do not change between two scrapes.
type StatusMemo struct {
	mu      sync.Mutex
	entries map[jobKey]memoEntry
	// decodes counts the statuses decoded (what the memo saves; tests).
	decodes int
}

type jobKey struct{ ns, name string }

type memoEntry struct {
	raw string
	sum api.Summary
	ok  bool
}

// read is api.ReadSummary of job k's annotations (ok false: no status,
// or one that is not valid), from the last scrape when its status
// annotation is the same; seen collects this scrape's entries (jobs gone
// since are forgotten). A nil memo decodes every time.
func (m *StatusMemo) read(k jobKey, annotations map[string]string, seen map[jobKey]memoEntry) (api.Summary, bool) {
	raw := annotations[api.StatusAnnotation]
	if m != nil {
		if e, ok := m.entries[k]; ok && e.raw == raw {
			seen[k] = e
			return e.sum, e.ok
		}
		m.decodes++
	}
	sum, ok, err := api.ReadSummary(annotations)
	ok = ok && err == nil
	if m != nil {
		seen[k] = memoEntry{raw: raw, sum: sum, ok: ok}
	}
	return sum, ok
}

var _ prometheus.Collector = JobsCollector{}

// Describe sends the collector's two descriptors.
func (c JobsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- jobPhaseDesc
	ch <- jobSinceDesc
	ch <- jobPodDesc
	ch <- jobRequestsDesc
	ch <- namespaceInfoDesc
	ch <- gpuQuotaDesc
}

// Collect lists the jobs and sends their series.
func (c JobsCollector) Collect(ch chan<- prometheus.Metric) {
	if c.Elected != nil {
		select {
		case <-c.Elected:
		default:
			return
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	jobs, err := CachedJobStates(ctx, c.Cache, c.Statuses)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(jobPhaseDesc, err)
		return
	}
	for _, m := range JobSeries(jobs) {
		ch <- m
	}
	costCenters, quotas, err := cachedUsage(ctx, c.Cache)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(jobRequestsDesc, err)
		return
	}
	for _, m := range UsageSeries(jobs, costCenters, quotas) {
		ch <- m
	}
}

// JobSeries turns job states into the collector's series.
func JobSeries(jobs []JobState) []prometheus.Metric {
	var out []prometheus.Metric
	for _, j := range jobs {
		out = append(out, prometheus.MustNewConstMetric(jobPhaseDesc, prometheus.GaugeValue, 1, j.Namespace, j.Name, string(j.Phase)))
		if !j.Since.IsZero() {
			out = append(out, prometheus.MustNewConstMetric(jobSinceDesc, prometheus.GaugeValue, float64(j.Since.Unix()), j.Namespace, j.Name, string(j.Phase), j.Reason))
		}
		for pod, role := range j.Pods {
			out = append(out, prometheus.MustNewConstMetric(jobPodDesc, prometheus.GaugeValue, 1, j.Namespace, j.Name, pod, role))
		}
	}
	return out
}

// CachedJobStates reads every MPI job (a TrainJob with the manager's
// status) and the pods of its JobSet from the objects a controller-runtime
// cache holds, in place: they are the cache's own and only read here.
// memo (nil: none) keeps the statuses' summaries between calls.
func CachedJobStates(ctx context.Context, c crcache.Informers, memo *StatusMemo) ([]JobState, error) {
	byJob := map[jobKey]map[string]string{}
	requests := map[jobKey]Requests{}
	err := each(ctx, c, &corev1.Pod{}, func(p *corev1.Pod) {
		job, ok := p.Labels[jobsetv1alpha2.JobSetNameKey]
		if !ok {
			return
		}
		k := jobKey{p.Namespace, job}
		if byJob[k] == nil {
			byJob[k] = map[string]string{}
		}
		byJob[k][p.Name] = api.PodRole(p.Labels[jobsetv1alpha2.ReplicatedJobNameKey])
		if PodCounts(p) {
			addRequests(requests, k, &p.Spec)
		}
	})
	if err != nil {
		return nil, err
	}
	// Each job's status: its JobStatus, or (an older manager's) the
	// TrainJob's annotation.
	statuses := api.JobStatusIndex{}
	if err := each(ctx, c, &api.JobStatus{}, statuses.Add); err != nil {
		return nil, err
	}
	var out []JobState
	seen := map[jobKey]memoEntry{}
	if memo != nil {
		memo.mu.Lock()
		defer memo.mu.Unlock()
	}
	err = each(ctx, c, &trainer.TrainJob{}, func(tj *trainer.TrainJob) {
		k := jobKey{tj.Namespace, tj.Name}
		annotations := tj.Annotations
		if s := statuses.For(&tj.ObjectMeta); s != nil && s.Status != "" && s.OwnedBy(tj.UID) {
			annotations = map[string]string{api.StatusAnnotation: s.Status}
		}
		if !api.HasStatus(annotations) {
			return
		}
		if st, ok := memo.read(k, annotations, seen); ok {
			out = append(out, JobState{Namespace: tj.Namespace, Name: tj.Name, Phase: st.Phase, Reason: st.Reason, Since: st.Since, Pods: byJob[k], Requests: requests[k]})
		}
	})
	if memo != nil && err == nil {
		memo.entries = seen
	}
	return out, err
}

// addRequests adds to requests[k] what spec asks of each resource the
// usage series report, without lists of its own (runtimes.EachRequest).
func addRequests(requests map[jobKey]Requests, k jobKey, spec *corev1.PodSpec) {
	job := requests[k]
	runtimes.EachRequest(spec, func(name corev1.ResourceName, q resource.Quantity) {
		if r := UsageResource(name); r != "" {
			if job == nil {
				job = Requests{}
				requests[k] = job
			}
			job[r] += q.AsApproximateFloat64()
		}
	})
}

// each is cached.Each, for which an informer it cannot read is an error.
func each[T client.Object](ctx context.Context, c crcache.Informers, obj T, fn func(T)) error {
	ok, err := cached.Each(ctx, c, obj, fn)
	if err == nil && !ok {
		err = fmt.Errorf("the cache's informer of %T is not a SharedIndexInformer", obj)
	}
	return err
}
