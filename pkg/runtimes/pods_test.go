package runtimes

import (
	"context"
	"fmt"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/mpijob/mpijob/pkg/api"
)

// A job's pods are found the same through the manager's index and by
// label (a reader without the index: the API server, the CLI's client).
func TestListJobSetPods(t *testing.T) {
	pod := func(ns, job, name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{jobsetv1alpha2.JobSetNameKey: job}}}
	}
	objs := []client.Object{
		pod("team-a", "j", "j-0"), pod("team-a", "j", "j-1"), pod("team-a", "k", "k-0"), pod("team-b", "j", "j-0"),
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "plain"}},
	}
	readers := map[string]client.Reader{
		"indexed":  fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(objs...).WithIndex(&corev1.Pod{}, PodsByJobSet, IndexByJobSet).Build(),
		"by label": fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(objs...).Build(),
	}
	// The index is what the indexed reader answers from: one that refuses
	// label selectors still finds them.
	readers["index only"] = noLabels{readers["indexed"]}
	for name, r := range readers {
		t.Run(name, func(t *testing.T) {
			l, err := ListJobSetPods(context.Background(), r, "team-a", "j")
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range l.Items {
				got = append(got, p.Namespace+"/"+p.Name)
			}
			sort.Strings(got)
			if d := cmp.Diff([]string{"team-a/j-0", "team-a/j-1"}, got); d != "" {
				t.Errorf("pods (-want +got):\n%s", d)
			}
		})
	}
}

// A client of the API server lists a job's pods in one LIST, by label:
// the API server refuses the manager's index as a field selector (400),
// and ListJobSetPods, made for the manager's cache, asks it first.
func TestListJobSetPodsByLabelMakesOneList(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "j-0", Labels: map[string]string{jobsetv1alpha2.JobSetNameKey: "j"}}}
	for name, tc := range map[string]struct {
		list      func(context.Context, client.Reader) (*corev1.PodList, error)
		wantLists int
	}{
		"by label": {list: func(ctx context.Context, r client.Reader) (*corev1.PodList, error) {
			return ListJobSetPodsByLabel(ctx, r, "team-a", "j")
		}, wantLists: 1},
		"index, then label": {list: func(ctx context.Context, r client.Reader) (*corev1.PodList, error) {
			return ListJobSetPods(ctx, r, "team-a", "j")
		}, wantLists: 2},
	} {
		t.Run(name, func(t *testing.T) {
			r := &apiServer{Reader: fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(pod).Build()}
			l, err := tc.list(context.Background(), r)
			if err != nil {
				t.Fatal(err)
			}
			if len(l.Items) != 1 || r.lists != tc.wantLists {
				t.Errorf("%d pods in %d LISTs (%d refused), want 1 pod in %d", len(l.Items), r.lists, r.refused, tc.wantLists)
			}
		})
	}
}

// apiServer counts LISTs and refuses a field selector on a field pods do
// not have, as the API server does.
type apiServer struct {
	client.Reader
	lists, refused int
}

func (a *apiServer) List(ctx context.Context, l client.ObjectList, opts ...client.ListOption) error {
	a.lists++
	o := &client.ListOptions{}
	o.ApplyOptions(opts)
	if o.FieldSelector != nil && !o.FieldSelector.Empty() {
		a.refused++
		return fmt.Errorf("field label not supported: %s", o.FieldSelector)
	}
	return a.Reader.List(ctx, l, opts...)
}

// noLabels refuses lists by label.
type noLabels struct{ client.Reader }

func (n noLabels) List(ctx context.Context, l client.ObjectList, opts ...client.ListOption) error {
	o := &client.ListOptions{}
	o.ApplyOptions(opts)
	if o.LabelSelector != nil {
		return fmt.Errorf("listed by label")
	}
	return n.Reader.List(ctx, l, opts...)
}

// controller is an owner list whose one reference is the controller.
func controller(kind, apiVersion, name string, uid types.UID) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: ptr.To(true)}}
}

// helloJobs are the Launcher's and the Workers' Jobs of JobSet hello (UID
// js-1), as the cache holds their metadata.
func helloJobs() []metav1.PartialObjectMetadata {
	return []metav1.PartialObjectMetadata{
		{ObjectMeta: metav1.ObjectMeta{Name: "hello-launcher-0", UID: "job-l", OwnerReferences: controller("JobSet", "jobset.x-k8s.io/v1alpha2", "hello", "js-1")}},
		{ObjectMeta: metav1.ObjectMeta{Name: "hello-node-0", UID: "job-n", OwnerReferences: controller("JobSet", "jobset.x-k8s.io/v1alpha2", "hello", "js-1")}},
	}
}

func TestOwnedByJobSet(t *testing.T) {
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "team-a", UID: "js-1"}}
	jobs := append(helloJobs(),
		// A Job with the JobSet's label that another JobSet (or nobody) controls.
		metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "hello-launcher-9", UID: "job-x", OwnerReferences: controller("JobSet", "jobset.x-k8s.io/v1alpha2", "hello", "js-old")}},
	)
	now := metav1.Now()
	pod := func(name string, owners []metav1.OwnerReference, stopping bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: owners}}
		if stopping {
			p.DeletionTimestamp = &now
		}
		return p
	}
	pods := []corev1.Pod{
		pod("launcher", controller("Job", "batch/v1", "hello-launcher-0", "job-l"), false),
		pod("worker", controller("Job", "batch/v1", "hello-node-0", "job-n"), false),
		pod("bare", nil, false),
		pod("wrong-uid", controller("Job", "batch/v1", "hello-launcher-0", "job-other"), false),
		pod("other-jobset", controller("Job", "batch/v1", "hello-launcher-9", "job-x"), false),
		pod("not-a-job", controller("ReplicaSet", "apps/v1", "hello-launcher-0", "job-l"), false),
		pod("job-gone-stopping", controller("Job", "batch/v1", "hello-node-1", "job-gone"), true),
		pod("job-gone-running", controller("Job", "batch/v1", "hello-node-1", "job-gone"), false),
		pod("stopping-elsewhere", controller("Job", "batch/v1", "other-node-0", "job-gone"), true),
	}
	var got []string
	for _, p := range OwnedByJobSet(pods, jobs, js) {
		got = append(got, p.Name)
	}
	// A pod whose Job is gone is not the job's, stopping or not: one made
	// with the job's labels and a made-up owner is deleted by the garbage
	// collector and stops just the same (the red team's forged Launcher).
	if diff := cmp.Diff([]string{"launcher", "worker"}, got); diff != "" {
		t.Errorf("pods kept (-want +got):\n%s", diff)
	}
}

// A job whose pods are all its own (nearly every job): OwnedByJobSet
// gives its pods back as they are, without a list of copies; one pod that
// is not its own, first, last or between, is left out of a new list.
func TestOwnedByJobSetCopiesNoPodsWhenAllAreOwned(t *testing.T) {
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "team-a", UID: "js-1"}}
	jobs := helloJobs()
	pods := []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "launcher", OwnerReferences: controller("Job", "batch/v1", "hello-launcher-0", "job-l")}}}
	for i := range 8 {
		pods = append(pods, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("worker-%d", i), OwnerReferences: controller("Job", "batch/v1", "hello-node-0", "job-n")}})
	}
	var got []corev1.Pod
	allocs := testing.AllocsPerRun(100, func() { got = OwnedByJobSet(pods, jobs, js) })
	if len(got) != len(pods) || &got[0] != &pods[0] {
		t.Errorf("all %d pods owned: got %d pods in another list, want the pods themselves", len(pods), len(got))
	}
	if allocs > 1 {
		t.Errorf("%.0f allocations for a job of 9 pods all its own, want at most 1 (the Jobs by name)", allocs)
	}
	stranger := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "forged", OwnerReferences: controller("Job", "batch/v1", "hello-node-0", "job-forged")}}
	for name, at := range map[string]int{"first": 0, "between": 4, "last": len(pods)} {
		t.Run("one not its own, "+name, func(t *testing.T) {
			mixed := append(append(append([]corev1.Pod{}, pods[:at]...), stranger), pods[at:]...)
			var names []string
			for _, p := range OwnedByJobSet(mixed, jobs, js) {
				names = append(names, p.Name)
			}
			var want []string
			for _, p := range pods {
				want = append(want, p.Name)
			}
			if diff := cmp.Diff(want, names); diff != "" {
				t.Errorf("pods kept (-want +got):\n%s", diff)
			}
		})
	}
}

// JobSetPods finds a job's Jobs through the manager's JobsByJobSet index
// where its reader has it: a label selector made the cache look at every
// Job of the namespace at each lookup. A reader without the index (the
// API server) is asked by label, and both give the same pods.
func TestJobSetPodsReadsTheJobsIndex(t *testing.T) {
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "team-a", UID: "js-1"}}
	job := func(ns, jobset, name string, uid types.UID, owner types.UID) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid,
			Labels:          map[string]string{jobsetv1alpha2.JobSetNameKey: jobset},
			OwnerReferences: controller("JobSet", "jobset.x-k8s.io/v1alpha2", jobset, owner)}}
	}
	objs := []client.Object{
		job("team-a", "hello", "hello-launcher-0", "job-l", "js-1"),
		job("team-a", "hello", "hello-node-0", "job-n", "js-1"),
		job("team-a", "other", "other-node-0", "job-o", "js-2"),
		job("team-b", "hello", "hello-node-0", "job-b", "js-3"),
	}
	pods := []corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "launcher", OwnerReferences: controller("Job", "batch/v1", "hello-launcher-0", "job-l")}},
		{ObjectMeta: metav1.ObjectMeta{Name: "worker", OwnerReferences: controller("Job", "batch/v1", "hello-node-0", "job-n")}},
		{ObjectMeta: metav1.ObjectMeta{Name: "other", OwnerReferences: controller("Job", "batch/v1", "other-node-0", "job-o")}},
	}
	indexed := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(objs...).
		WithIndex(JobMetadata(), JobsByJobSet, IndexByJobSet).Build()
	readers := map[string]client.Reader{
		// The manager's cache: a reader that refuses label selectors still
		// finds the Jobs, through the index.
		"index only": noLabels{indexed},
		"by label":   &apiServer{Reader: fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(objs...).Build()},
	}
	for name, r := range readers {
		t.Run(name, func(t *testing.T) {
			owned, err := JobSetPods(context.Background(), r, js, pods)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range owned {
				got = append(got, p.Name)
			}
			if d := cmp.Diff([]string{"launcher", "worker"}, got); d != "" {
				t.Errorf("pods (-want +got):\n%s", d)
			}
		})
	}
}
