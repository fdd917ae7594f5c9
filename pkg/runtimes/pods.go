package runtimes

import (
	"context"
	"fmt"
	"sort"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/mpijob/mpijob/pkg/api"
)

// JobPods returns the Launcher and Worker pods of an MPI job: Workers by
// their index, Launchers newest first (a restarted Launcher leaves the
// old pod behind for a while).
func JobPods(ctx context.Context, c client.Reader, tj *trainer.TrainJob) (launcher, workers []corev1.Pod, err error) {
	l := &corev1.PodList{}
	if err := c.List(ctx, l, client.InNamespace(tj.Namespace), client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: tj.Name}); err != nil {
		return nil, nil, err
	}
	for _, p := range l.Items {
		switch p.Labels[jobsetv1alpha2.ReplicatedJobNameKey] {
		case api.LauncherJob:
			launcher = append(launcher, p)
		case api.WorkerJob:
			workers = append(workers, p)
		}
	}
	sort.Slice(workers, func(i, j int) bool { return workerIndex(workers[i]) < workerIndex(workers[j]) })
	sort.Slice(launcher, func(i, j int) bool { return launcher[i].CreationTimestamp.After(launcher[j].CreationTimestamp.Time) })
	return launcher, workers, nil
}

// workerIndex sorts Job completion indexes as numbers.
func workerIndex(p corev1.Pod) string {
	return fmt.Sprintf("%6s", p.Labels["batch.kubernetes.io/job-completion-index"])
}
