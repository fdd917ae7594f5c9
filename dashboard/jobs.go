package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	authzv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/jobview"
	"github.com/mpijob/mpijob/pkg/queue"
	"github.com/mpijob/mpijob/pkg/runtimes"
)

// Namespace is a namespace the user may see jobs in, and what they may do.
type Namespace struct {
	Name      string `json:"name"`
	CanDelete bool   `json:"canDelete"`
	CanPatch  bool   `json:"canPatch"`
	CanCreate bool   `json:"canCreate"`
	CanLogs   bool   `json:"canLogs"`
}

func (s *Server) namespaces(w http.ResponseWriter, r *http.Request, c *userClients) {
	nss, err := s.namespacesOf(r.Context(), c)
	if err != nil {
		s.apiError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"namespaces": nss})
}

// namespacesOf lists the namespaces where the user may list TrainJobs,
// with the actions they may take there, from their own access reviews.
func (s *Server) namespacesOf(ctx context.Context, c *userClients) ([]Namespace, error) {
	var candidates []string
	list, err := c.cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	switch {
	case err == nil:
		for _, n := range list.Items {
			candidates = append(candidates, n.Name)
		}
	case apierrors.IsForbidden(err) && s.Namespaces != nil:
		if candidates, err = s.Namespaces(ctx); err != nil {
			return nil, err
		}
	default:
		return nil, err
	}
	type result struct {
		ns  Namespace
		ok  bool
		err error
	}
	out := make([]result, len(candidates))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, name := range candidates {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			ok, err := c.can(ctx, name, "list", "trainer.kubeflow.org", "trainjobs", "")
			if err != nil || !ok {
				out[i] = result{err: err}
				return
			}
			n := Namespace{Name: name}
			n.CanDelete, _ = c.can(ctx, name, "delete", "trainer.kubeflow.org", "trainjobs", "")
			n.CanPatch, _ = c.can(ctx, name, "patch", "trainer.kubeflow.org", "trainjobs", "")
			n.CanCreate, _ = c.can(ctx, name, "create", "trainer.kubeflow.org", "trainjobs", "")
			n.CanLogs, _ = c.can(ctx, name, "get", "", "pods", "log")
			out[i] = result{ns: n, ok: true}
		}()
	}
	wg.Wait()
	var nss []Namespace
	for _, r := range out {
		if r.err != nil {
			return nil, r.err
		}
		if r.ok {
			nss = append(nss, r.ns)
		}
	}
	sort.Slice(nss, func(i, j int) bool { return nss[i].Name < nss[j].Name })
	return nss, nil
}

func (c *userClients) can(ctx context.Context, ns, verb, group, resource, sub string) (bool, error) {
	rev, err := c.cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authzv1.SelfSubjectAccessReview{
		Spec: authzv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authzv1.ResourceAttributes{
			Namespace: ns, Verb: verb, Group: group, Resource: resource, Subresource: sub,
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return rev.Status.Allowed, nil
}

func (s *Server) listJobs(w http.ResponseWriter, r *http.Request, c *userClients) {
	jobs, err := s.jobsOf(r.Context(), c, r.URL.Query().Get("namespace"))
	if err != nil {
		s.apiError(w, err)
		return
	}
	jobview.EstimateStarts(jobs, time.Now())
	writeJSON(w, http.StatusOK, map[string]any{"jobs": jobs})
}

// jobsOf lists the jobs of ns ("" = every namespace the user may see).
func (s *Server) jobsOf(ctx context.Context, c *userClients, ns string) ([]jobview.Job, error) {
	var nss []string
	if ns != "" {
		nss = []string{ns}
	} else if all, _ := c.can(ctx, "", "list", "trainer.kubeflow.org", "trainjobs", ""); all {
		nss = []string{""}
	} else {
		list, err := s.namespacesOf(ctx, c)
		if err != nil {
			return nil, err
		}
		for _, n := range list {
			nss = append(nss, n.Name)
		}
	}
	mpiRuntimes := c.mpiRuntimes(ctx)
	jobs := []jobview.Job{}
	for _, n := range nss {
		cc, err := s.jobsCache(ctx, c, c.token, n)
		if err != nil {
			return nil, err
		}
		list := &trainer.TrainJobList{}
		// Read-only: JobOf copies what it needs.
		if err := cc.List(ctx, list, inNamespace(n), client.UnsafeDisableDeepCopy); err != nil {
			return nil, err
		}
		for i := range list.Items {
			j := jobview.JobOf(&list.Items[i])
			j.MPI = j.MPI || mpiRuntimes[j.Runtime]
			jobs = append(jobs, j)
		}
	}
	sort.SliceStable(jobs, func(i, j int) bool {
		if !jobs[i].Created.Equal(jobs[j].Created) {
			return jobs[i].Created.After(jobs[j].Created)
		}
		return jobs[i].Namespace+"/"+jobs[i].Name < jobs[j].Namespace+"/"+jobs[j].Name
	})
	return jobs, nil
}

// Detail is the job page.
type Detail struct {
	Job       jobview.Job        `json:"job"`
	Pods      []jobview.Pod      `json:"pods"`
	Resources *jobview.Resources `json:"resources,omitempty"`
	YAML      string             `json:"yaml"`
	// RuntimeKind is ClusterTrainingRuntime, or TrainingRuntime for a
	// per-job runtime.
	RuntimeKind string `json:"runtimeKind"`
	// StaleNote says, while mpijob-manager is not running, that the status
	// may be stale and how old it is (the CLI's and the SDK's words).
	StaleNote string `json:"staleNote,omitempty"`
	// History is the job's transitions as its status kept them: what its
	// Events said, after the cluster's Events expired.
	History []api.Transition `json:"history,omitempty"`
	// status is the manager's status of the job, which vouches for its
	// Events (eventsWith).
	status api.Status
}

func (s *Server) getJob(w http.ResponseWriter, r *http.Request, c *userClients) {
	d, err := s.detailOf(r.Context(), c, r.PathValue("ns"), r.PathValue("name"))
	if err != nil {
		if apierrors.IsNotFound(err) {
			writeError(w, http.StatusNotFound, fmt.Sprintf("MPI job %s does not exist in namespace %s (it may have been deleted)", r.PathValue("name"), r.PathValue("ns")))
			return
		}
		s.apiError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

func (s *Server) detailOf(ctx context.Context, c *userClients, ns, name string) (*Detail, error) {
	tj := &trainer.TrainJob{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, tj); err != nil {
		return nil, err
	}
	d := &Detail{Job: jobview.JobOf(tj), RuntimeKind: ptr.Deref(tj.Spec.RuntimeRef.Kind, trainer.ClusterTrainingRuntimeKind)}
	if st, ok := api.StatusOf(tj); ok {
		d.status = st
		d.StaleNote = c.managerState(ctx).StaleNote(st.ObservedTime, time.Now())
	}
	if d.Job.Phase == api.PhaseQueued {
		// The estimate needs the namespace's finished jobs.
		if jobs, err := s.jobsOf(ctx, c, ns); err == nil {
			jobs = append(jobs, d.Job)
			jobview.EstimateStarts(jobs, time.Now())
			d.Job.Estimate = jobs[len(jobs)-1].Estimate
		}
	}
	pods, err := c.jobPods(ctx, ns, name)
	if err != nil && !apierrors.IsForbidden(err) {
		return nil, err
	}
	d.Pods = jobview.Pods(pods, d.status, d.Job.WorkersTotal)
	d.History = d.status.History
	if spec, _, found, err := (runtimes.RuntimeLookup{Client: c}).Get(ctx, tj); err == nil && found {
		d.Job.MPI = d.Job.MPI || runtimes.IsMPI(spec)
		if shape, err := runtimes.ShapeOf(tj, spec); err == nil {
			d.Resources = jobview.ResourcesOf(shape)
		}
	}
	clean := tj.DeepCopy()
	clean.ManagedFields = nil
	clean.APIVersion, clean.Kind = trainer.GroupVersion.String(), trainer.TrainJobKind
	b, err := yaml.Marshal(clean)
	if err != nil {
		return nil, err
	}
	d.YAML = string(b)
	return d, nil
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
		if tj.Labels[queue.NameLabel] != "" {
			// Kueue turns spec.suspend back on a job it manages (and the
			// program then starts over): suspend and resume go through its
			// Workload's spec.active, as the user.
			if _, err := queue.SetActive(r.Context(), c, tj.Namespace, tj.UID, !suspend); err != nil {
				if errors.Is(err, queue.ErrNoWorkload) {
					writeError(w, http.StatusConflict, err.Error())
					return
				}
				s.apiError(w, err)
				return
			}
			j := jobview.JobOf(tj)
			j.Suspended = suspend
			writeJSON(w, http.StatusOK, j)
			return
		}
		patch := fmt.Sprintf(`{"spec":{"suspend":%t}}`, suspend)
		if err := c.Patch(r.Context(), tj, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
			s.apiError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, jobview.JobOf(tj))
	}
}

// Event is one event of the job or its children.
type Event struct {
	Time    time.Time `json:"time"`
	Type    string    `json:"type"`
	Reason  string    `json:"reason"`
	Object  string    `json:"object"`
	Message string    `json:"message"`
	Count   int32     `json:"count"`
	// Forged: it says it comes from mpijob-manager, and the manager does
	// not vouch for it (api.ForgedEvent).
	Forged bool `json:"forged,omitempty"`
}

func (s *Server) jobEvents(w http.ResponseWriter, r *http.Request, c *userClients) {
	evs, err := c.eventsOf(r.Context(), r.PathValue("ns"), r.PathValue("name"))
	if err != nil {
		s.apiError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"events": evs})
}

func (c *userClients) eventsOf(ctx context.Context, ns, name string) ([]Event, error) {
	var st api.Status
	tj := &trainer.TrainJob{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, tj); err == nil {
		st, _ = api.StatusOf(tj)
	}
	return c.eventsWith(ctx, ns, name, st)
}

// eventsWith is eventsOf for a job whose status st is already read.
func (c *userClients) eventsWith(ctx context.Context, ns, name string, st api.Status) ([]Event, error) {
	list := &corev1.EventList{}
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	out := []Event{}
	for _, e := range api.JobEvents(name, list.Items) {
		out = append(out, Event{Time: api.EventTime(e), Type: e.Type, Reason: e.Reason, Object: e.InvolvedObject.Kind + "/" + e.InvolvedObject.Name, Message: e.Message, Count: max(e.Count, 1),
			Forged: api.ForgedEvent(e, st)})
	}
	return out, nil
}

func inNamespace(ns string) client.ListOption {
	if ns == "" {
		return &client.ListOptions{}
	}
	return client.InNamespace(ns)
}

// mpiRuntimes names the ClusterTrainingRuntimes with an MPI policy, read
// as the user at most every 30 seconds.
func (c *userClients) mpiRuntimes(ctx context.Context) map[string]bool {
	c.rtMu.Lock()
	defer c.rtMu.Unlock()
	if c.rtNames != nil && time.Since(c.rtRead) < 30*time.Second {
		return c.rtNames
	}
	out := map[string]bool{}
	rts := &trainer.ClusterTrainingRuntimeList{}
	if err := c.List(ctx, rts); err == nil {
		for i := range rts.Items {
			out[rts.Items[i].Name] = runtimes.IsMPI(&rts.Items[i].Spec)
		}
	}
	c.rtNames, c.rtRead = out, time.Now()
	return out
}

// Manager is what mpijob-manager's Lease says: whether the statuses shown
// are current.
type Manager struct {
	Running bool       `json:"running"`
	Since   *time.Time `json:"since,omitempty"`
	// Note is the banner while it is not running ("" when it runs).
	Note string `json:"note,omitempty"`
}

func (s *Server) manager(w http.ResponseWriter, r *http.Request, c *userClients) {
	m := c.managerState(r.Context())
	out := Manager{Running: m.Running, Note: m.StaleListNote(time.Now())}
	if !m.Since.IsZero() {
		out.Since = &m.Since
	}
	writeJSON(w, http.StatusOK, out)
}

// managerState reads mpijob-manager's Lease as the user (every signed-in
// user may, config/rbac/aggregate/manager-lease.yaml). When it cannot be
// read, nothing is claimed: Running.
func (c *userClients) managerState(ctx context.Context) api.ManagerState {
	lease := &coordinationv1.Lease{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: api.ManagerLeaseNamespace, Name: api.ManagerLeaseName}, lease); err != nil {
		return api.ManagerState{Running: true}
	}
	return api.ManagerStateOf(lease, time.Now())
}
