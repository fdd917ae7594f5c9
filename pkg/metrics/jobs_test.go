package metrics

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/mpijob/mpijob/pkg/api"
)

func jobPod(ns, job, rj, name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
		jobsetv1alpha2.JobSetNameKey: job, jobsetv1alpha2.ReplicatedJobNameKey: rj,
	}}}
}

func trainJob(ns, name, status string) *trainer.TrainJob {
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if status != "" {
		tj.Annotations = map[string]string{api.StatusAnnotation: status}
	}
	return tj
}

// Every MPI job is one phase series; its pods carry their roles; a
// TrainJob without the manager's status (not an MPI job, or not seen yet)
// is left out with its pods; a same-named job of another namespace has
// only its own pods.
func TestJobsCollector(t *testing.T) {
	objs := []client.Object{
		trainJob("team-a", "hello", `{"phase":"Running","reason":"RankSilent","launcher":"Running","lastTransitionTime":"2026-11-26T10:00:00Z"}`),
		trainJob("team-a", "done", `{"phase":"Succeeded","launcher":"Succeeded"}`),
		trainJob("team-a", "torch", ""),
		trainJob("team-b", "hello", `{"phase":"Queued","launcher":"Pending"}`),
		jobPod("team-a", "hello", "launcher", "hello-launcher-0-0-abcde"),
		jobPod("team-a", "hello", "node", "hello-node-0-0-fghij"),
		jobPod("team-a", "hello", "node", "hello-node-0-1-klmno"),
		jobPod("team-b", "hello", "node", "hello-node-0-0-zzzzz"),
		jobPod("team-a", "torch", "node", "torch-node-0-0-yyyyy"),
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web-7d9f", Labels: map[string]string{"app": "web"}}},
	}
	if err := testutil.CollectAndCompare(JobsCollector{Cache: informersOf(t, objs...)}, strings.NewReader(wantJobSeries)); err != nil {
		t.Error(err)
	}
}

// informers is the part of a controller-runtime cache the collector reads:
// an informer per kind, here client-go's own with the objects in its store
// (not started: nothing is listed or watched).
type informers struct {
	crcache.Informers
	byType map[reflect.Type]toolscache.SharedIndexInformer
}

func (f informers) GetInformer(_ context.Context, obj client.Object, _ ...crcache.InformerGetOption) (crcache.Informer, error) {
	inf, ok := f.byType[reflect.TypeOf(obj)]
	if !ok {
		return nil, fmt.Errorf("no informer of %T", obj)
	}
	return inf, nil
}

func informersOf(t *testing.T, objs ...client.Object) informers {
	f := informers{byType: map[reflect.Type]toolscache.SharedIndexInformer{}}
	for _, o := range []client.Object{&corev1.Pod{}, &trainer.TrainJob{}, &api.JobStatus{}, &corev1.Namespace{}, &corev1.ResourceQuota{}} {
		f.byType[reflect.TypeOf(o)] = toolscache.NewSharedIndexInformer(&toolscache.ListWatch{}, o, 0, toolscache.Indexers{})
	}
	for _, o := range objs {
		if err := f.byType[reflect.TypeOf(o)].GetStore().Add(o); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

const wantJobSeries = `
# HELP mpijob_job_phase 1 for each MPI job, labelled with its current phase (the phase of mpijob.dev/status).
# TYPE mpijob_job_phase gauge
mpijob_job_phase{namespace="team-a",phase="Running",trainjob="hello"} 1
mpijob_job_phase{namespace="team-a",phase="Succeeded",trainjob="done"} 1
mpijob_job_phase{namespace="team-b",phase="Queued",trainjob="hello"} 1
# HELP mpijob_job_phase_since_timestamp_seconds When each MPI job entered its current phase (Unix time), labelled with the phase and the diagnosis's reason: the alerts read how long a job has been in a phase, and which jobs the diagnosis names stuck.
# TYPE mpijob_job_phase_since_timestamp_seconds gauge
mpijob_job_phase_since_timestamp_seconds{namespace="team-a",phase="Running",reason="RankSilent",trainjob="hello"} 1.7956872e+09
# HELP mpijob_job_pod_info 1 for each pod of an MPI job, with its role (Launcher or Worker): join it with the kubelets' container metrics on namespace and pod.
# TYPE mpijob_job_pod_info gauge
mpijob_job_pod_info{namespace="team-a",pod="hello-launcher-0-0-abcde",role="Launcher",trainjob="hello"} 1
mpijob_job_pod_info{namespace="team-a",pod="hello-node-0-0-fghij",role="Worker",trainjob="hello"} 1
mpijob_job_pod_info{namespace="team-a",pod="hello-node-0-1-klmno",role="Worker",trainjob="hello"} 1
mpijob_job_pod_info{namespace="team-b",pod="hello-node-0-0-zzzzz",role="Worker",trainjob="hello"} 1
# HELP mpijob_namespace_info 1 for each namespace that has an MPI job, with its cost center (the Namespace's label mpijob.dev/cost-center; empty when it has none).
# TYPE mpijob_namespace_info gauge
mpijob_namespace_info{cost_center="",namespace="team-a"} 1
mpijob_namespace_info{cost_center="",namespace="team-b"} 1
`

// A replica that does not lead reports nothing, so two replicas never
// report one job twice; once elected it reports.
func TestJobsCollectorOnlyWhenLeading(t *testing.T) {
	elected := make(chan struct{})
	col := JobsCollector{Cache: informersOf(t, trainJob("team-a", "hello", `{"phase":"Running","launcher":"Running"}`)), Elected: elected}
	if n := testutil.CollectAndCount(col); n != 0 {
		t.Errorf("a standby replica reported %d series, want 0", n)
	}
	close(elected)
	if n := testutil.CollectAndCount(col, "mpijob_job_phase"); n != 1 {
		t.Errorf("the leader reported %d phase series, want 1", n)
	}
}

// A scrape decodes a job's status only when it changed since the last
// scrape (the memo); what it reports is what a scrape without the memo
// reports, also after a status changes, and a job gone is forgotten.
func TestJobsCollectorDecodesOnlyChangedStatuses(t *testing.T) {
	hello := trainJob("team-a", "hello", `{"phase":"Starting","launcher":"Pending"}`)
	done := trainJob("team-a", "done", `{"phase":"Succeeded","launcher":"Succeeded"}`)
	broken := trainJob("team-b", "broken", `{"phase":`)
	inf := informersOf(t, hello, done, broken)
	memo := &StatusMemo{}
	col := JobsCollector{Cache: inf, Statuses: memo}
	scrape := func(what string, wantDecodes int, want map[string]string) {
		t.Helper()
		memo.decodes = 0
		jobs, err := CachedJobStates(context.Background(), inf, memo)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, j := range jobs {
			got[j.Namespace+"/"+j.Name] = string(j.Phase)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: phases (-want +got):\n%s", what, diff)
		}
		if memo.decodes != wantDecodes {
			t.Errorf("%s: %d statuses decoded, want %d", what, memo.decodes, wantDecodes)
		}
		plain, err := CachedJobStates(context.Background(), inf, nil)
		if err != nil {
			t.Fatal(err)
		}
		byName := cmpopts.SortSlices(func(a, b JobState) bool { return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name })
		if diff := cmp.Diff(plain, jobs, byName); diff != "" {
			t.Errorf("%s: the memo's answer differs from a fresh decode (-fresh +memo):\n%s", what, diff)
		}
	}
	scrape("first scrape", 3, map[string]string{"team-a/hello": "Starting", "team-a/done": "Succeeded"})
	scrape("nothing changed", 0, map[string]string{"team-a/hello": "Starting", "team-a/done": "Succeeded"})

	running := hello.DeepCopy()
	running.Annotations[api.StatusAnnotation] = `{"phase":"Running","reason":"Running","launcher":"Running","lastTransitionTime":"2026-11-26T10:00:00Z"}`
	store := inf.byType[reflect.TypeOf(&trainer.TrainJob{})].GetStore()
	if err := store.Update(running); err != nil {
		t.Fatal(err)
	}
	if err := store.Delete(done); err != nil {
		t.Fatal(err)
	}
	scrape("one status changed, one job gone", 1, map[string]string{"team-a/hello": "Running"})
	if _, ok := memo.entries[jobKey{"team-a", "done"}]; ok {
		t.Error("the memo still holds team-a/done after it was deleted")
	}
	if n := testutil.CollectAndCount(col, "mpijob_job_phase_since_timestamp_seconds"); n != 1 {
		t.Errorf("%d since series, want 1 (the running job's)", n)
	}
}

// A job's phase comes from its JobStatus (where mpijob-manager writes it)
// before its annotation (an older manager's); a JobStatus left from a
// deleted job of the same name (another owner UID) is not the new job's.
func TestJobsCollectorReadsJobStatuses(t *testing.T) {
	owned := func(ns, name, uid, status string) *api.JobStatus {
		return &api.JobStatus{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind, Name: name, UID: types.UID(uid)}}},
			Status: status}
	}
	moved := trainJob("team-a", "moved", `{"phase":"Pending"}`)
	moved.UID = "uid-moved"
	fresh := trainJob("team-a", "fresh", "")
	fresh.UID = "uid-fresh-2"
	objs := []client.Object{moved, fresh,
		owned("team-a", "moved", "uid-moved", `{"phase":"Running"}`),
		owned("team-a", "fresh", "uid-fresh-1", `{"phase":"Failed"}`),
	}
	want := `
# HELP mpijob_job_phase 1 for each MPI job, labelled with its current phase (the phase of mpijob.dev/status).
# TYPE mpijob_job_phase gauge
mpijob_job_phase{namespace="team-a",phase="Running",trainjob="moved"} 1
`
	if err := testutil.CollectAndCompare(JobsCollector{Cache: informersOf(t, objs...)}, strings.NewReader(want), "mpijob_job_phase"); err != nil {
		t.Error(err)
	}
}

// addRequests adds a cached pod's requests without lists of its own: the
// scrape reads every cached pod, and runtimes.PodDemand's two lists and
// their sums were the largest of the leader's allocations (44 MB of 810
// MB over 200 jobs, bench/scale, 2026-12-03). The sums are what
// PodDemand's requests give.
func TestAddRequestsAllocatesNothing(t *testing.T) {
	spec := &corev1.PodSpec{Containers: []corev1.Container{
		{Resources: corev1.ResourceRequirements{
			Limits:   corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi")},
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m"), corev1.ResourceMemory: resource.MustParse("1Gi")},
		}},
		{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceEphemeralStorage: resource.MustParse("1Gi"),
		}}},
	}}
	k := jobKey{"team-a", "j"}
	requests := map[jobKey]Requests{}
	addRequests(requests, k, spec)
	want := Requests{"cpu": 2, "memory": 1 << 30, "nvidia.com/gpu": 2}
	if diff := cmp.Diff(want, requests[k]); diff != "" {
		t.Errorf("one pod's requests (-want,+got):\n%s", diff)
	}
	if allocs := testing.AllocsPerRun(100, func() { addRequests(requests, k, spec) }); allocs != 0 {
		t.Errorf("addRequests made %.0f allocations a pod, want 0", allocs)
	}
}
