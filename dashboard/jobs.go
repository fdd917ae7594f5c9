package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	authzv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/progress"
	"github.com/mpijob/mpijob/pkg/queue"
	"github.com/mpijob/mpijob/pkg/runtimes"
)

// Job is one row of the Training jobs page: the manager's Status in the
// same words as the CLI and the SDK.
type Job struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	// Runtime is the runtime the user chose (the base of a per-job runtime).
	Runtime string `json:"runtime"`
	// MPI is true for jobs on an MPI runtime (those mpijob-manager reports on).
	MPI            bool              `json:"mpi"`
	Phase          api.Phase         `json:"phase"`
	Reason         string            `json:"reason,omitempty"`
	Message        string            `json:"message,omitempty"`
	NextStep       string            `json:"nextStep,omitempty"`
	NextSteps      []string          `json:"nextSteps,omitempty"`
	QueuePosition  *int32            `json:"queuePosition,omitempty"`
	Launcher       api.LauncherState `json:"launcher,omitempty"`
	WorkersReady   int32             `json:"workersReady"`
	WorkersTotal   int32             `json:"workersTotal"`
	SlotsPerWorker int32             `json:"slotsPerWorker"`
	Creator        string            `json:"creator,omitempty"`
	Created        time.Time         `json:"created"`
	Started        *time.Time        `json:"started,omitempty"`
	Finished       *time.Time        `json:"finished,omitempty"`
	Transitioned   *time.Time        `json:"transitioned,omitempty"`
	// Observed is when mpijob-manager last wrote this status.
	Observed *time.Time `json:"observed,omitempty"`
	// Estimate is a queued job's estimated start (estimateStarts).
	Estimate  *Estimate `json:"estimate,omitempty"`
	Suspended bool      `json:"suspended"`
	Deleting  bool      `json:"deleting,omitempty"`
	// Progress is the last progress the ranks reported (nil: none).
	Progress *progress.TrainerStatus `json:"progress,omitempty"`
}

// JobOf turns a TrainJob into its row.
func JobOf(tj *trainer.TrainJob) Job {
	j := Job{
		Name: tj.Name, Namespace: tj.Namespace,
		Runtime:  api.RuntimeOf(tj.Labels, tj.Spec.RuntimeRef.Name),
		Creator:  tj.Annotations[api.CreatorAnnotation],
		Created:  tj.CreationTimestamp.Time,
		Deleting: tj.DeletionTimestamp != nil,
	}
	// Kueue keeps every job it manages suspended until it admits it: such
	// a job is suspended by its user only when the diagnosis says so (its
	// Workload is inactive), below.
	kueue := tj.Labels[queue.NameLabel] != ""
	j.Suspended = !kueue && ptr.Deref(tj.Spec.Suspend, false)
	if p, ok := progress.Read(tj.Annotations); ok {
		j.Progress = &p
	}
	if tr := tj.Spec.Trainer; tr != nil {
		j.WorkersTotal = ptr.Deref(tr.NumNodes, 0)
		j.SlotsPerWorker = ptr.Deref(tr.NumProcPerNode, 0)
	}
	// The manager's status, or the fallback the CLI and the SDK use too.
	st, ok := api.StatusOf(tj)
	j.MPI = ok || tj.Labels[api.BaseRuntimeLabel] != ""
	if !ok {
		j.Phase, j.Message = st.Phase, st.Message
		if st.CompletionTime != nil {
			j.Finished = &st.CompletionTime.Time
		}
		return j
	}
	j.Phase, j.Reason, j.Message, j.NextStep, j.NextSteps = st.Phase, st.Reason, st.Message, st.NextStep, st.NextSteps
	if kueue {
		j.Suspended = st.Phase == api.PhaseSuspended
	}
	j.QueuePosition, j.Launcher = st.QueuePosition, st.Launcher
	j.WorkersReady, j.WorkersTotal = st.WorkersReady, st.WorkersTotal
	if st.SlotsPerWorker > 0 {
		j.SlotsPerWorker = st.SlotsPerWorker
	}
	if st.StartTime != nil {
		j.Started = &st.StartTime.Time
	}
	if st.CompletionTime != nil {
		j.Finished = &st.CompletionTime.Time
	}
	if st.LastTransitionTime != nil {
		j.Transitioned = &st.LastTransitionTime.Time
	}
	if st.ObservedTime != nil {
		j.Observed = &st.ObservedTime.Time
	}
	return j
}

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
	estimateStarts(jobs, time.Now())
	writeJSON(w, http.StatusOK, map[string]any{"jobs": jobs})
}

// jobsOf lists the jobs of ns ("" = every namespace the user may see).
func (s *Server) jobsOf(ctx context.Context, c *userClients, ns string) ([]Job, error) {
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
	jobs := []Job{}
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
			j := JobOf(&list.Items[i])
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

// Pod is one Launcher or Worker pod of a job.
type Pod struct {
	Name string `json:"name"`
	// Role is "launcher" or "worker"; Index is the Worker's index.
	Role     string     `json:"role"`
	Index    int        `json:"index"`
	Node     string     `json:"node,omitempty"`
	Phase    string     `json:"phase"`
	Ready    bool       `json:"ready"`
	Restarts int32      `json:"restarts"`
	State    string     `json:"state"`
	Detail   string     `json:"detail,omitempty"`
	Started  *time.Time `json:"started,omitempty"`
	// Health is green (healthy), yellow (pending or starting), red
	// (failed) or grey (gone).
	Health string `json:"health"`
	Image  string `json:"image,omitempty"`
}

// Resources summarizes what the job asks for.
type Resources struct {
	Workers        int32             `json:"workers"`
	SlotsPerWorker int32             `json:"slotsPerWorker"`
	Worker         map[string]string `json:"worker"`
	Launcher       map[string]string `json:"launcher"`
	Total          map[string]string `json:"total"`
	Summary        string            `json:"summary"`
	WorkerImage    string            `json:"workerImage,omitempty"`
	LauncherImage  string            `json:"launcherImage,omitempty"`
}

// Detail is the job page.
type Detail struct {
	Job       Job        `json:"job"`
	Pods      []Pod      `json:"pods"`
	Resources *Resources `json:"resources,omitempty"`
	YAML      string     `json:"yaml"`
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

// gonePods are the Launcher and Workers the status recorded that have no
// pod now (JobSet removed them): grey, red where they failed, with their
// last state.
func gonePods(live []Pod, recorded []api.PodRecord) []Pod {
	var out []Pod
	for _, r := range recorded {
		role := r.Role
		present := false
		for _, p := range live {
			if p.Role == role && p.Index == int(r.Index) {
				present = true
			}
		}
		if present {
			continue
		}
		health := "grey"
		if failedState(r.State) {
			health = "red"
		}
		out = append(out, Pod{Name: r.Pod, Role: role, Index: int(r.Index), Node: r.Node, Phase: "Gone", Restarts: r.Restarts,
			State: r.State + " (pod gone)", Health: health})
	}
	return out
}

// failedState tells a recorded state that ended badly: a non-zero exit,
// or a kill.
func failedState(s string) bool {
	return (strings.Contains(s, "(exit ") && !strings.Contains(s, "(exit 0)")) || strings.HasPrefix(s, "OOMKilled") || s == "Failed"
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
	d := &Detail{Job: JobOf(tj), RuntimeKind: ptr.Deref(tj.Spec.RuntimeRef.Kind, trainer.ClusterTrainingRuntimeKind)}
	if st, ok := api.StatusOf(tj); ok {
		d.status = st
		d.StaleNote = c.managerState(ctx).StaleNote(st.ObservedTime, time.Now())
	}
	if d.Job.Phase == api.PhaseQueued {
		// The estimate needs the namespace's finished jobs.
		if jobs, err := s.jobsOf(ctx, c, ns); err == nil {
			jobs = append(jobs, d.Job)
			estimateStarts(jobs, time.Now())
			d.Job.Estimate = jobs[len(jobs)-1].Estimate
		}
	}
	pods, err := c.jobPods(ctx, ns, name)
	if err != nil && !apierrors.IsForbidden(err) {
		return nil, err
	}
	d.Pods = append(pods, gonePods(pods, d.status.Pods)...)
	d.History = d.status.History
	if spec, _, found, err := (runtimes.RuntimeLookup{Client: c}).Get(ctx, tj); err == nil && found {
		d.Job.MPI = d.Job.MPI || runtimes.IsMPI(spec)
		if shape, err := runtimes.ShapeOf(tj, spec); err == nil {
			d.Resources = resourcesOf(shape)
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

func (c *userClients) jobPods(ctx context.Context, ns, name string) ([]Pod, error) {
	list := &corev1.PodList{}
	if err := c.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{"jobset.sigs.k8s.io/jobset-name": name}); err != nil {
		return nil, err
	}
	out := []Pod{}
	for i := range list.Items {
		out = append(out, podOf(&list.Items[i]))
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Role != out[j].Role {
			return out[i].Role == "launcher"
		}
		if out[i].Index != out[j].Index {
			return out[i].Index < out[j].Index
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

func podOf(p *corev1.Pod) Pod {
	out := Pod{Name: p.Name, Role: "worker", Node: p.Spec.NodeName, Phase: string(p.Status.Phase), State: string(p.Status.Phase)}
	if p.Labels["jobset.sigs.k8s.io/replicatedjob-name"] == api.LauncherJob {
		out.Role = "launcher"
	}
	out.Index, _ = strconv.Atoi(p.Labels["batch.kubernetes.io/job-completion-index"])
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			out.Ready = true
		}
	}
	if len(p.Spec.Containers) > 0 {
		out.Image = p.Spec.Containers[0].Image
	}
	for _, cs := range p.Status.ContainerStatuses {
		out.Restarts += cs.RestartCount
		switch {
		case cs.State.Waiting != nil:
			out.State, out.Detail = cs.State.Waiting.Reason, cs.State.Waiting.Message
		case cs.State.Terminated != nil:
			t := cs.State.Terminated
			out.State = fmt.Sprintf("%s (exit code %d)", t.Reason, t.ExitCode)
			out.Detail = t.Message
		case cs.State.Running != nil:
			out.State = "Running"
			out.Started = &cs.State.Running.StartedAt.Time
		}
	}
	if p.Status.Reason != "" {
		out.State, out.Detail = p.Status.Reason, p.Status.Message
	}
	switch {
	case p.DeletionTimestamp != nil:
		out.Health = "grey"
	case p.Status.Phase == corev1.PodFailed || strings.Contains(out.State, "BackOff") || strings.Contains(out.State, "Err"):
		out.Health = "red"
	case p.Status.Phase == corev1.PodSucceeded || (p.Status.Phase == corev1.PodRunning && out.Ready):
		out.Health = "green"
	default:
		out.Health = "yellow"
	}
	return out
}

func resourcesOf(s runtimes.Shape) *Resources {
	wReq, wLim := runtimes.PodDemand(&s.WorkerPod)
	lReq, lLim := runtimes.PodDemand(&s.LauncherPod)
	pick := func(req, lim corev1.ResourceList) corev1.ResourceList {
		out := corev1.ResourceList{}
		for k, v := range lim {
			out[k] = v
		}
		for k, v := range req {
			out[k] = v
		}
		return out
	}
	worker, launcher := pick(wReq, wLim), pick(lReq, lLim)
	total := corev1.ResourceList{}
	for k, v := range worker {
		q := v.DeepCopy()
		q.Mul(int64(s.Workers))
		total[k] = q
	}
	for k, v := range launcher {
		if _, ok := total[k]; !ok {
			total[k] = resource.Quantity{}
		}
		q := total[k]
		q.Add(v)
		total[k] = q
	}
	r := &Resources{Workers: s.Workers, SlotsPerWorker: s.SlotsPerWorker, Worker: strs(worker), Launcher: strs(launcher), Total: strs(total)}
	gpus := resource.Quantity{}
	for k, v := range worker {
		if strings.HasSuffix(string(k), "/gpu") {
			q := v.DeepCopy()
			q.Mul(int64(s.Workers))
			gpus.Add(q)
		}
	}
	cpu, mem := worker[corev1.ResourceCPU], worker[corev1.ResourceMemory]
	cpu.Mul(int64(s.Workers))
	mem.Mul(int64(s.Workers))
	r.Summary = fmt.Sprintf("%d %s × %d %s, %s CPUs, %s, %s GPUs", s.Workers, plural(int(s.Workers), "Worker", "Workers"), s.SlotsPerWorker,
		plural(int(s.SlotsPerWorker), "slot", "slots"), cpu.String(), mem.String(), gpus.String())
	for _, c := range s.WorkerPod.Containers {
		if c.Name == api.NodeContainer {
			r.WorkerImage = c.Image
		}
	}
	for _, c := range s.LauncherPod.Containers {
		if c.Name == api.NodeContainer {
			r.LauncherImage = c.Image
		}
	}
	return r
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func strs(rl corev1.ResourceList) map[string]string {
	out := map[string]string{}
	for k, v := range rl {
		out[string(k)] = v.String()
	}
	return out
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
			j := JobOf(tj)
			j.Suspended = suspend
			writeJSON(w, http.StatusOK, j)
			return
		}
		patch := fmt.Sprintf(`{"spec":{"suspend":%t}}`, suspend)
		if err := c.Patch(r.Context(), tj, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
			s.apiError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, JobOf(tj))
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
