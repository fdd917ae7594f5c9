package metrics

import (
	"context"
	"fmt"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/mpijob/mpijob/pkg/api"
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
)

var (
	jobPhaseDesc = prometheus.NewDesc(namespace+"_job_phase",
		"1 for each MPI job, labelled with its current phase (the phase of mpijob.dev/status).",
		[]string{labelNamespace, labelTrainJob, labelPhase}, nil)
	jobPodDesc = prometheus.NewDesc(namespace+"_job_pod_info",
		"1 for each pod of an MPI job, with its role (Launcher or Worker): join it with the kubelets' container metrics on namespace and pod.",
		[]string{labelNamespace, labelTrainJob, labelPod, labelRole}, nil)
)

// JobState is what the jobs collector reports of one MPI job.
type JobState struct {
	Namespace, Name string
	Phase           api.Phase
	// Pods maps each of the job's pod names to its role, api.RoleLauncher
	// or api.RoleWorker.
	Pods map[string]string
}

// JobsCollector reports every MPI job's current phase and its pods' roles
// at each scrape, from the manager's cache: a gauge that is always what
// the jobs are now, also after a restart, and that disappears with the job.
type JobsCollector struct {
	// Reader lists TrainJobs and JobSet pods (the manager's cache).
	Reader client.Reader
	// Cache, when set (the manager's cache), is read instead of Reader:
	// its informers' own objects, without the list of copies a List makes
	// (4,500 pod structs at 500 jobs × 8 Workers, about 9 MB at every
	// scrape).
	Cache crcache.Informers
	// Elected is closed once this replica leads; until then it reports
	// nothing, so two replicas never report the same job twice. Nil: always.
	Elected <-chan struct{}
}

var _ prometheus.Collector = JobsCollector{}

// Describe sends the collector's two descriptors.
func (c JobsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- jobPhaseDesc
	ch <- jobPodDesc
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
	var jobs []JobState
	var err error
	if c.Cache != nil {
		jobs, err = CachedJobStates(ctx, c.Cache)
	} else {
		jobs, err = ListJobStates(ctx, c.Reader)
	}
	if err != nil {
		ch <- prometheus.NewInvalidMetric(jobPhaseDesc, err)
		return
	}
	for _, m := range JobSeries(jobs) {
		ch <- m
	}
}

// JobSeries turns job states into the collector's series.
func JobSeries(jobs []JobState) []prometheus.Metric {
	var out []prometheus.Metric
	for _, j := range jobs {
		out = append(out, prometheus.MustNewConstMetric(jobPhaseDesc, prometheus.GaugeValue, 1, j.Namespace, j.Name, string(j.Phase)))
		for pod, role := range j.Pods {
			out = append(out, prometheus.MustNewConstMetric(jobPodDesc, prometheus.GaugeValue, 1, j.Namespace, j.Name, pod, role))
		}
	}
	return out
}

// ListJobStates reads every MPI job (a TrainJob with the manager's status)
// and the pods of its JobSet from r.
func ListJobStates(ctx context.Context, r client.Reader) ([]JobState, error) {
	var tjs trainer.TrainJobList
	if err := r.List(ctx, &tjs, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.HasLabels{jobsetv1alpha2.JobSetNameKey}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	b := newStates()
	for i := range pods.Items {
		b.pod(&pods.Items[i])
	}
	for i := range tjs.Items {
		b.job(&tjs.Items[i])
	}
	return b.out, nil
}

// CachedJobStates is ListJobStates over the objects a controller-runtime
// cache holds, read in place: they are the cache's own and only read here.
func CachedJobStates(ctx context.Context, c crcache.Informers) ([]JobState, error) {
	b := newStates()
	err := eachCached(ctx, c, &corev1.Pod{}, func(o any) {
		if p, ok := o.(*corev1.Pod); ok {
			if _, ok := p.Labels[jobsetv1alpha2.JobSetNameKey]; ok {
				b.pod(p)
			}
		}
	})
	if err != nil {
		return nil, err
	}
	err = eachCached(ctx, c, &trainer.TrainJob{}, func(o any) {
		if tj, ok := o.(*trainer.TrainJob); ok {
			b.job(tj)
		}
	})
	return b.out, err
}

func eachCached(ctx context.Context, c crcache.Informers, obj client.Object, fn func(any)) error {
	inf, err := c.GetInformer(ctx, obj)
	if err != nil {
		return err
	}
	sii, ok := inf.(toolscache.SharedIndexInformer)
	if !ok {
		return fmt.Errorf("the cache's informer of %T is a %T, not a SharedIndexInformer", obj, inf)
	}
	for _, o := range sii.GetStore().List() {
		fn(o)
	}
	return nil
}

type jobKey struct{ ns, name string }

// states gathers pods by job, then each job with a status.
type states struct {
	byJob map[jobKey]map[string]string
	out   []JobState
}

func newStates() *states { return &states{byJob: map[jobKey]map[string]string{}} }

func (b *states) pod(p *corev1.Pod) {
	k := jobKey{p.Namespace, p.Labels[jobsetv1alpha2.JobSetNameKey]}
	if b.byJob[k] == nil {
		b.byJob[k] = map[string]string{}
	}
	b.byJob[k][p.Name] = api.PodRole(p.Labels[jobsetv1alpha2.ReplicatedJobNameKey])
}

func (b *states) job(tj *trainer.TrainJob) {
	st, ok, err := api.ReadStatus(tj.Annotations)
	if err != nil || !ok {
		return
	}
	b.out = append(b.out, JobState{Namespace: tj.Namespace, Name: tj.Name, Phase: st.Phase, Pods: b.byJob[jobKey{tj.Namespace, tj.Name}]})
}
