package placement

import (
	"context"
	"errors"
	"fmt"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/jobstatus"
	"github.com/mpijob/mpijob/pkg/jobview"
	"github.com/mpijob/mpijob/pkg/queue"
	"github.com/mpijob/mpijob/pkg/runtimes"
)

// Reader gathers Judge's Input for a job about to be created, from the
// manager's caches: no call to the API server but the priority classes'.
type Reader struct {
	// Client reads nodes, every pod (the manager's trimmed cache of them)
	// and the namespace's TrainJobs (for the estimate).
	Client client.Reader
	// Queues answers where a new job would stand in its Kueue queue; nil
	// when Kueue is not consulted.
	Queues *queue.Snapshots
	// Priorities reads Kueue's WorkloadPriorityClasses (nil: every job
	// counts as priority 0).
	Priorities client.Reader
	// Now is the clock (tests).
	Now func() time.Time
	// Wait bounds the wait for the nodes and pods (0: DefaultWait).
	Wait time.Duration
}

// DefaultWait is how long a placement check waits for the manager's cache
// of nodes and pods. Only the leader's controllers keep that cache: on the
// replica that does not lead, the first dry run starts it, and on a large
// cluster its first read can take longer than the webhook's 10 s, which
// would fail the dry run. The check then says to try again instead; the
// cache stays, and the next dry run reads it at once.
const DefaultWait = 4 * time.Second

// ErrStillReading is Judge's error when the nodes and pods were not read
// within Wait.
var ErrStillReading = errors.New("mpijob-manager is still reading the cluster's nodes and pods (the first placement check on this replica): run the dry run again in a moment")

// ReadFree reads the nodes (with nodeReader) and every pod (with
// podReader and podOpts: from a cache, client.UnsafeDisableDeepCopy, as
// the pods are only read) and works out what each schedulable node has
// free (Free). The nodes are returned when they were read, even when the
// pods could not be.
func ReadFree(ctx context.Context, nodeReader, podReader client.Reader, podOpts ...client.ListOption) ([]corev1.Node, []NodeFree, error) {
	nodes := &corev1.NodeList{}
	if err := nodeReader.List(ctx, nodes); err != nil {
		return nil, nil, fmt.Errorf("failed to read the nodes: %w", err)
	}
	pods := &corev1.PodList{}
	if err := podReader.List(ctx, pods, podOpts...); err != nil {
		return nodes.Items, nil, fmt.Errorf("failed to read the pods: %w", err)
	}
	return nodes.Items, Free(nodes.Items, pods.Items), nil
}

// Judge says whether the cluster can place tj, of the given shape, now.
// A redacted answer (a reader who may not list nodes) says only whether
// the job fits (Input.Redacted).
func (r *Reader) Judge(ctx context.Context, tj *trainer.TrainJob, shape runtimes.Shape, redacted bool) (Answer, error) {
	wait := r.Wait
	if wait <= 0 {
		wait = DefaultWait
	}
	rctx, cancel := context.WithTimeout(ctx, wait)
	nodes, free, err := ReadFree(rctx, r.Client, r.Client, client.UnsafeDisableDeepCopy)
	timedOut := rctx.Err() != nil && ctx.Err() == nil
	cancel()
	if err != nil {
		if timedOut {
			return Answer{}, ErrStillReading
		}
		return Answer{}, err
	}
	in := Input{
		Workers: shape.Workers, Worker: &shape.WorkerPod, Launcher: &shape.LauncherPod,
		Nodes: nodes, Free: free, Redacted: redacted,
	}
	if lq := tj.Labels[queue.NameLabel]; lq != "" && r.Queues != nil {
		q, err := r.queue(ctx, tj, lq)
		if err != nil {
			return Answer{}, err
		}
		in.Queue = q
	}
	return Judge(in), nil
}

func (r *Reader) queue(ctx context.Context, tj *trainer.TrainJob, lq string) (*Queue, error) {
	var priority int32
	if pc := tj.Labels[queue.PriorityLabel]; pc != "" && r.Priorities != nil {
		classes, err := queue.PriorityClasses(ctx, r.Priorities)
		if err != nil && !errors.Is(err, queue.ErrNoKueue) {
			return nil, err
		}
		priority = int32(classes[pc])
	}
	p, err := r.Queues.Prospect(ctx, tj.Namespace, lq, priority)
	if err != nil || p == nil {
		return nil, err
	}
	q := &Queue{Name: p.Queue, ClusterQueue: p.ClusterQueue, Ahead: p.Ahead}
	if q.ClusterQueue == "" || q.Ahead == 0 {
		return q, nil
	}
	// The wording of the jobs list's estimate: the position times the
	// namespace's median run.
	list := &trainer.TrainJobList{}
	if err := r.Client.List(ctx, list, client.InNamespace(tj.Namespace)); err != nil {
		return nil, fmt.Errorf("failed to read the TrainJobs of %s: %w", tj.Namespace, err)
	}
	if err := jobstatus.List(ctx, r.Client, list.Items, client.InNamespace(tj.Namespace)); err != nil {
		return nil, fmt.Errorf("failed to read the JobStatuses of %s: %w", tj.Namespace, err)
	}
	jobs := make([]jobview.Job, 0, len(list.Items)+1)
	for i := range list.Items {
		jobs = append(jobs, jobview.JobOf(&list.Items[i]))
	}
	pos := q.Ahead + 1
	jobs = append(jobs, jobview.Job{Namespace: tj.Namespace, Phase: api.PhaseQueued, QueuePosition: &pos})
	now := time.Now()
	if r.Now != nil {
		now = r.Now()
	}
	jobview.EstimateStarts(jobs, now)
	if e := jobs[len(jobs)-1].Estimate; e != nil {
		if e.Start != nil {
			q.Estimate = fmt.Sprintf("in about %s (%s)", duration.HumanDuration(e.Start.Sub(now)), e.Basis)
		} else {
			q.Estimate = "unknown: " + e.Basis
		}
	}
	return q, nil
}
