// Package jobstatus reads mpijob-manager's JobStatuses (pkg/api/jobstatus.go)
// beside the TrainJobs they belong to, for every Go reader (the CLI, the
// dashboard's backend, the manager's own controllers and metrics, the
// tests): Get and List join each job's JobStatus into its in-memory
// TrainJob (api.JoinStatus), so what reads a status afterwards (api.StatusOf,
// jobview) reads the JobStatus's. A cluster or a role that predates
// JobStatus (api.JobStatusesUnread) leaves each job with its annotation.
package jobstatus

import (
	"context"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/api"
)

// Get joins tj's JobStatus into tj (read with r), when it has one.
func Get(ctx context.Context, r client.Reader, tj *trainer.TrainJob) error {
	return GetMeta(ctx, r, &tj.ObjectMeta)
}

// GetMeta is Get for a job's metadata alone.
func GetMeta(ctx context.Context, r client.Reader, m *metav1.ObjectMeta) error {
	s := &api.JobStatus{}
	err := r.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Name}, s)
	switch {
	case err == nil:
		api.JoinStatus(m, s)
		return nil
	case apierrors.IsNotFound(err) || api.JobStatusesUnread(err):
		return nil
	default:
		return err
	}
}

// Index lists the JobStatuses that opts select (the namespace the jobs
// were listed in, or every one) with r; an empty index when they cannot
// be read (api.JobStatusesUnread).
func Index(ctx context.Context, r client.Reader, opts ...client.ListOption) (api.JobStatusIndex, error) {
	ix, _, err := IndexAt(ctx, r, opts...)
	return ix, err
}

// IndexAt is Index with the list's resource version, for a watch of the
// JobStatuses to start from ("" when they cannot be read: no watch).
func IndexAt(ctx context.Context, r client.Reader, opts ...client.ListOption) (api.JobStatusIndex, string, error) {
	l := &api.JobStatusList{}
	if err := r.List(ctx, l, opts...); err != nil {
		if api.JobStatusesUnread(err) {
			return nil, "", nil
		}
		return nil, "", err
	}
	ix := api.IndexJobStatuses(l.Items)
	if ix == nil {
		ix = api.JobStatusIndex{}
	}
	return ix, l.ResourceVersion, nil
}

// List joins each of jobs (listed with opts) to its JobStatus, listed
// with the same opts.
func List(ctx context.Context, r client.Reader, jobs []trainer.TrainJob, opts ...client.ListOption) error {
	if len(jobs) == 0 {
		return nil
	}
	ix, err := Index(ctx, r, opts...)
	if err != nil {
		return err
	}
	ix.Join(jobs)
	return nil
}
