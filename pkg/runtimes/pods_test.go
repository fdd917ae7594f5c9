package runtimes

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/mpijob/mpijob/pkg/api"
)

// Workers come by their index as a number (10 after 2), Launchers newest
// first; other jobs' pods are left out.
func TestJobPods(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	pod := func(job, rj, name, index string, created time.Time) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, CreationTimestamp: metav1.NewTime(created), Labels: map[string]string{
			jobsetv1alpha2.JobSetNameKey: job, jobsetv1alpha2.ReplicatedJobNameKey: rj, "batch.kubernetes.io/job-completion-index": index,
		}}}
	}
	c := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(
		pod("j", "node", "j-node-0-10-aaaaa", "10", t0),
		pod("j", "node", "j-node-0-2-bbbbb", "2", t0),
		pod("j", "launcher", "j-launcher-0-0-old00", "0", t0),
		pod("j", "launcher", "j-launcher-0-0-new00", "0", t0.Add(time.Minute)),
		pod("other", "node", "other-node-0-0-ccccc", "0", t0),
	).Build()
	launcher, workers, err := JobPods(context.Background(), c, &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "j"}})
	if err != nil {
		t.Fatal(err)
	}
	names := func(ps []corev1.Pod) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.Name)
		}
		return out
	}
	if d := cmp.Diff([]string{"j-launcher-0-0-new00", "j-launcher-0-0-old00"}, names(launcher)); d != "" {
		t.Errorf("launchers (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"j-node-0-2-bbbbb", "j-node-0-10-aaaaa"}, names(workers)); d != "" {
		t.Errorf("workers (-want +got):\n%s", d)
	}
}
