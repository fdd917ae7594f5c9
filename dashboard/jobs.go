package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/cached"
	"github.com/mpijob/mpijob/pkg/jobstatus"
	"github.com/mpijob/mpijob/pkg/jobview"
	"github.com/mpijob/mpijob/pkg/queue"
	"github.com/mpijob/mpijob/pkg/runtimes"
)

// listJobs is /api/jobs?namespace=NS, with a JobQuery's filters, order
// and page (ParseJobQuery): a JobPage.
func (s *Server) listJobs(w http.ResponseWriter, r *http.Request, c *userClients) {
	q, err := ParseJobQuery(r.URL.Query())
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	page, err := s.jobPage(r.Context(), c, r.URL.Query().Get("namespace"), q, 0)
	if err != nil {
		s.apiError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, page)
}

// jobPage is the page q asks for of ns's jobs (jobsWithin), queued jobs
// with their estimated start.
func (s *Server) jobPage(ctx context.Context, c *userClients, ns string, q JobQuery, maxAge time.Duration) (JobPage, error) {
	jobs, err := s.jobsWithin(ctx, c, ns, maxAge)
	if err != nil {
		return JobPage{}, err
	}
	// Estimates read every job of a namespace (its finished runs).
	jobview.EstimateStarts(jobs, time.Now())
	return q.Apply(jobs), nil
}

// jobsOf lists the jobs of ns ("" = every namespace the user may see).
func (s *Server) jobsOf(ctx context.Context, c *userClients, ns string) ([]jobview.Job, error) {
	return s.jobsWithin(ctx, c, ns, 0)
}

// jobsWithin is jobsOf, in no particular order (JobQuery.Apply sorts),
// where the namespaces the user may list, for ns "", may be up to maxAge
// old: a live stream's pushes after its first reuse them instead of asking
// the API server once per namespace on every change.
func (s *Server) jobsWithin(ctx context.Context, c *userClients, ns string, maxAge time.Duration) ([]jobview.Job, error) {
	nss := []string{ns}
	if ns == "" {
		var err error
		if nss, err = s.listable(ctx, c, maxAge); err != nil {
			return nil, err
		}
	}
	mpiRuntimes := c.mpiRuntimes(ctx)
	jobs := []jobview.Job{}
	now := time.Now()
	for _, n := range nss {
		cc, err := s.jobsCache(ctx, c, c.token, n)
		if err != nil {
			return nil, err
		}
		tjs, statuses, err := jobsIn(ctx, cc, n)
		if err != nil {
			return nil, err
		}
		jobs = s.rows.appendViews(jobs, tjs, statuses, mpiRuntimes, now)
	}
	return jobs, nil
}

// jobsIn is the TrainJobs of ns that r holds, read in place where r is a
// cache: a list of 10,000 jobs copies none of them. The caller must not
// change them. statuses are their JobStatuses, to join to them.
func jobsIn(ctx context.Context, r client.Reader, ns string) (tjs []*trainer.TrainJob, statuses api.JobStatusIndex, err error) {
	// A user's cache holds JobStatuses only where the user may list them
	// (jobsCache); anything else is asked, and a refusal is no status.
	withStatuses := true
	if uc, ok := r.(*userCache); ok {
		withStatuses = uc.statuses
	}
	if cc, ok := r.(ctrlcache.Cache); ok {
		// The cache watches ns alone ("" = every namespace).
		if tjs, read, err := cached.All[*trainer.TrainJob](ctx, cc, &trainer.TrainJob{}); err != nil || read {
			if err != nil || !withStatuses {
				return tjs, nil, err
			}
			sts, read, err := cached.All[*api.JobStatus](ctx, cc, &api.JobStatus{})
			if err != nil || !read {
				statuses, err = jobstatus.Index(ctx, r, inNamespace(ns))
				return tjs, statuses, err
			}
			return tjs, api.IndexJobStatusPointers(sts), nil
		}
	}
	list := &trainer.TrainJobList{}
	if err := r.List(ctx, list, inNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
		return nil, nil, err
	}
	out := make([]*trainer.TrainJob, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	if withStatuses {
		statuses, err = jobstatus.Index(ctx, r, inNamespace(ns))
	}
	return out, statuses, err
}

// listable is the namespaces whose jobs c may list ("" alone when c may
// list them in every namespace), asked again when the answer at hand is
// older than maxAge: one access review per namespace the cluster has.
func (s *Server) listable(ctx context.Context, c *userClients, maxAge time.Duration) ([]string, error) {
	s.mu.Lock()
	got, ok := s.listed[c.token]
	s.mu.Unlock()
	if ok && maxAge > 0 && time.Since(got.at) <= maxAge {
		return got.namespaces, nil
	}
	at := time.Now()
	var nss []string
	if all, _ := c.can(ctx, "", "list", "trainer.kubeflow.org", "trainjobs", ""); all {
		nss = []string{""}
	} else {
		list, err := s.namespacesOf(ctx, c)
		if err != nil {
			return nil, err
		}
		nss = []string{}
		for _, n := range list {
			nss = append(nss, n.Name)
		}
	}
	s.mu.Lock()
	if s.listed == nil {
		s.listed = map[string]listed{}
	}
	s.listed[c.token] = listed{at: at, namespaces: nss}
	s.mu.Unlock()
	return nss, nil
}

// listed is what listable found for a user, and when it asked.
type listed struct {
	at         time.Time
	namespaces []string
}

// Detail is the job page: the one detail of a job (pkg/jobview), which
// describe prints too.
type Detail = jobview.Detail

func (s *Server) getJob(w http.ResponseWriter, r *http.Request, c *userClients) {
	d, err := s.detailOf(r.Context(), c, r.PathValue("ns"), r.PathValue("name"))
	if err != nil {
		if apierrors.IsNotFound(err) {
			writeError(w, http.StatusNotFound, jobGone(r.PathValue("ns"), r.PathValue("name")))
			return
		}
		s.apiError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// jobGone says that MPI job ns/name is not there.
func jobGone(ns, name string) string {
	return fmt.Sprintf("MPI job %s does not exist in namespace %s (it may have been deleted)", name, ns)
}

// jobOf reads the TrainJob of the request's {ns} and {name} as the user;
// when it cannot, it answers (404 with jobGone, else the API server's
// error) and ok is false.
func (s *Server) jobOf(w http.ResponseWriter, r *http.Request, c *userClients) (tj *trainer.TrainJob, ok bool) {
	ns, name := r.PathValue("ns"), r.PathValue("name")
	tj = &trainer.TrainJob{}
	if err := c.Get(r.Context(), client.ObjectKey{Namespace: ns, Name: name}, tj); err != nil {
		if apierrors.IsNotFound(err) {
			writeError(w, http.StatusNotFound, jobGone(ns, name))
			return nil, false
		}
		s.apiError(w, err)
		return nil, false
	}
	if err := jobstatus.Get(r.Context(), c, tj); err != nil {
		s.apiError(w, err)
		return nil, false
	}
	return tj, true
}

func (s *Server) detailOf(ctx context.Context, c *userClients, ns, name string) (*Detail, error) {
	// Gather, as the user: the job, its pods, its runtime, the manager's
	// state.
	tj := &trainer.TrainJob{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, tj); err != nil {
		return nil, err
	}
	if err := jobstatus.Get(ctx, c, tj); err != nil {
		return nil, err
	}
	now := time.Now()
	k := jobview.Known{Job: tj, Now: now}
	if api.HasStatus(tj.Annotations) {
		m := c.managerState(ctx)
		k.Manager = &m
	}
	pods, err := c.jobPods(ctx, ns, name)
	if err != nil && !apierrors.IsForbidden(err) {
		return nil, err
	}
	k.Pods = pods
	switch rt, err := (runtimes.RuntimeLookup{Client: c}).Find(ctx, tj); {
	case err != nil:
		k.RuntimeError = err.Error()
	case rt != nil:
		k.Runtime, k.RuntimeAnnotations = rt.Spec, rt.Annotations
	}
	// Decide: one detail (pkg/jobview).
	d := jobview.DetailOf(k)
	if d.Job.Phase == api.PhaseQueued {
		// The estimate needs the namespace's finished jobs.
		if jobs, err := s.jobsOf(ctx, c, ns); err == nil {
			jobs = append(jobs, d.Job)
			jobview.EstimateStarts(jobs, now)
			d.Job.Estimate = jobs[len(jobs)-1].Estimate
		}
	}
	return &d, nil
}

func (c *userClients) jobPods(ctx context.Context, ns, name string) ([]corev1.Pod, error) {
	list := &corev1.PodList{}
	if err := c.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{"jobset.sigs.k8s.io/jobset-name": name}); err != nil {
		return nil, err
	}
	return list.Items, nil
}

func (s *Server) deleteJob(w http.ResponseWriter, r *http.Request, c *userClients) {
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: r.PathValue("ns"), Name: r.PathValue("name")}}
	if err := c.Delete(r.Context(), tj, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		s.apiError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"deleted": tj.Name})
}

func (s *Server) suspendJob(suspend bool) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, c *userClients) {
		tj := &trainer.TrainJob{}
		if err := c.Get(r.Context(), client.ObjectKey{Namespace: r.PathValue("ns"), Name: r.PathValue("name")}, tj); err != nil {
			s.apiError(w, err)
			return
		}
		if err := jobstatus.Get(r.Context(), c, tj); err != nil {
			s.apiError(w, err)
			return
		}
		// Kueue turns spec.suspend back on a job it manages (and the
		// program then starts over): queue.SetSuspended goes through its
		// Workload's spec.active then, as the user.
		how, err := queue.SetSuspended(r.Context(), c, tj, suspend)
		if errors.Is(err, queue.ErrNoWorkload) {
			writeError(w, http.StatusConflict, err.Error())
			return
		}
		if err != nil {
			s.apiError(w, err)
			return
		}
		j := jobview.JobOf(tj)
		if how.Workload != "" {
			j.Suspended = suspend
		}
		writeJSON(w, http.StatusOK, j)
	}
}
