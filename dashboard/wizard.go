// The create wizard builds jobs with the same builder as `kubectl mpijob
// create` and the SDK (pkg/jobspec): the same inputs give the same objects.

package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/mpijob/mpijob/pkg/admission"
	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/jobspec"
	"github.com/mpijob/mpijob/pkg/jobstatus"
	"github.com/mpijob/mpijob/pkg/placement"
	"github.com/mpijob/mpijob/pkg/queue"
	"github.com/mpijob/mpijob/pkg/runtimes"
	"github.com/mpijob/mpijob/pkg/suggest"
)

// FieldError is a bad value the wizard shows next to its field: field is
// jobspec.Input's JSON name ("resources_per_worker.nvidia.com/gpu" for
// one resource).
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// CreateAnswer is the answer to a create or a dry run.
type CreateAnswer struct {
	Name      string `json:"name,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	// YAML is what was (or would be) created: the TrainJob, and its
	// per-job TrainingRuntime when it has one.
	YAML   string       `json:"yaml,omitempty"`
	Error  string       `json:"error,omitempty"`
	Fields []FieldError `json:"fields,omitempty"`
	// DryRun is true when nothing was created.
	DryRun bool `json:"dryRun"`
	// Placement is what a dry run said of whether the cluster can place
	// the job now: whether its pods fit in what the nodes have free, the
	// free GPUs, and where it would stand in its Kueue queue.
	Placement []string `json:"placement,omitempty"`
}

// placementKey is the context key of a request's placement lines.
type placementKey struct{}

// placementLines collects the placement warnings of one request.
type placementLines struct {
	mu    sync.Mutex
	lines []string
}

// withPlacement returns a context whose API calls' placement warnings are
// collected in the returned placementLines.
func withPlacement(ctx context.Context) (context.Context, *placementLines) {
	p := &placementLines{}
	return context.WithValue(ctx, placementKey{}, p), p
}

func (p *placementLines) get() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lines
}

// placementWarnings hands admission's placement warnings to the request
// whose context collects them.
type placementWarnings struct{}

// HandleWarningHeaderWithContext implements rest.WarningHandlerWithContext.
func (placementWarnings) HandleWarningHeaderWithContext(ctx context.Context, code int, _ string, text string) {
	p, ok := ctx.Value(placementKey{}).(*placementLines)
	line, isPlacement := placement.FromWarning(code, text)
	if !ok || !isPlacement {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lines = append(p.lines, line)
}

// createJob builds a job from the wizard's inputs and creates it as the
// user, or only asks the API server (admission included) with ?dryRun=true.
func (s *Server) createJob(w http.ResponseWriter, r *http.Request, c *userClients) {
	ns := r.PathValue("ns")
	dry := r.URL.Query().Get("dryRun") == "true"
	job, bad := s.buildJob(w, r, c, ns)
	if bad {
		return
	}
	ans := CreateAnswer{Name: job.TrainJob.Name, Namespace: ns, YAML: jobYAML(job), DryRun: dry}
	ctx, placed := withPlacement(r.Context())
	if err := jobspec.Create(ctx, c, job, dry); err != nil {
		var taken *jobspec.NameTakenError
		if apierrors.IsAlreadyExists(err) {
			// A job on a cluster runtime: the API server's own refusal names
			// no field; the wizard shows it at the name.
			taken = &jobspec.NameTakenError{Msg: fmt.Sprintf("MPI job %s already exists in namespace %s: pick another name, or delete it first", job.TrainJob.Name, ns)}
		}
		if taken != nil || errors.As(err, &taken) {
			writeJSON(w, http.StatusConflict, CreateAnswer{Error: taken.Error(), Fields: []FieldError{{Field: "name", Message: taken.Error()}}})
			return
		}
		var st apierrors.APIStatus
		if !errors.As(err, &st) || st.Status().Code == 0 {
			s.apiError(w, err)
			return
		}
		writeJSON(w, int(st.Status().Code), CreateAnswer{Error: api.CleanText(st.Status().Message), Fields: causeFields(st.Status().Details)})
		return
	}
	code := http.StatusCreated
	if dry {
		code = http.StatusOK
	}
	ans.Placement = placed.get()
	writeJSON(w, code, ans)
}

// buildJob reads the inputs and builds the job; on bad input it answers
// (400 or 422, naming the field) and returns bad.
func (s *Server) buildJob(w http.ResponseWriter, r *http.Request, c *userClients, ns string) (job *jobspec.Job, bad bool) {
	var in jobspec.Input
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		writeJSON(w, http.StatusBadRequest, CreateAnswer{Error: "the job's inputs are not valid JSON: " + err.Error()})
		return nil, true
	}
	in.Namespace = ns
	if in.Runtime == "" {
		in.Runtime = jobspec.DefaultRuntime
	}
	base, err := runtimes.FindBase(r.Context(), c, ns, in.Runtime)
	if err != nil {
		if !apierrors.IsNotFound(err) {
			s.apiError(w, err)
			return nil, true
		}
		msg := fmt.Sprintf("no runtime %q", in.Runtime)
		var names []string
		if bases, err := runtimes.ListBases(r.Context(), c, ns); err == nil {
			for _, b := range bases {
				names = append(names, b.Name)
			}
		}
		if near := suggest.Closest(in.Runtime, names); near != "" {
			msg += fmt.Sprintf("; did you mean %q?", near)
		}
		writeJSON(w, http.StatusUnprocessableEntity, CreateAnswer{Error: msg, Fields: []FieldError{{Field: "runtime", Message: msg}}})
		return nil, true
	}
	job, err = jobspec.Build(in, base)
	if err != nil {
		var e *jobspec.Error
		if errors.As(err, &e) {
			writeJSON(w, http.StatusUnprocessableEntity, CreateAnswer{Error: e.Error(), Fields: []FieldError{{Field: e.Field, Message: e.Error()}}})
			return nil, true
		}
		writeError(w, http.StatusUnprocessableEntity, err.Error())
		return nil, true
	}
	// Data connections and PVCs are read as the user: one that is missing
	// or lacks a key is said before anything is created.
	if err := jobspec.CheckStorage(r.Context(), c, ns, in); err != nil {
		var e *jobspec.Error
		if errors.As(err, &e) {
			writeJSON(w, http.StatusUnprocessableEntity, CreateAnswer{Error: e.Error(), Fields: []FieldError{{Field: e.Field, Message: e.Error()}}})
			return nil, true
		}
		s.apiError(w, err)
		return nil, true
	}
	return job, false
}

// jobYAML is the job's objects as YAML documents, runtime first.
func jobYAML(job *jobspec.Job) string {
	var docs []string
	if job.Runtime != nil {
		rt := job.Runtime.DeepCopy()
		rt.APIVersion, rt.Kind = trainer.GroupVersion.String(), trainer.TrainingRuntimeKind
		if b, err := yaml.Marshal(rt); err == nil {
			docs = append(docs, string(b))
		}
	}
	if b, err := yaml.Marshal(job.TrainJob); err == nil {
		docs = append(docs, string(b))
	}
	return strings.Join(docs, "---\n")
}

// causeFields maps the API server's causes (admission's field paths and
// quota lines) to the wizard's fields.
func causeFields(d *metav1.StatusDetails) []FieldError {
	if d == nil {
		return nil
	}
	var out []FieldError
	for _, cause := range d.Causes {
		msg := cause.Message
		if cause.Type == api.QuotaCauseType {
			msg = "over the namespace's quota"
			var q api.QuotaCause
			if json.Unmarshal([]byte(cause.Message), &q) == nil {
				msg = fmt.Sprintf("requested %s %s, quota %s, in use %s (ResourceQuota %s)", q.Requested, q.Resource, q.Quota, q.InUse, q.ResourceQuota)
			}
		}
		out = append(out, FieldError{Field: wizardField(cause.Field), Message: api.CleanText(msg)})
	}
	return out
}

// wizardField turns a field path of the API (or a quota line) into the
// wizard's field name.
func wizardField(path string) string {
	switch {
	case path == "metadata.name":
		return "name"
	case path == "spec.trainer.numNodes", path == "pods", path == "count/pods":
		return "workers"
	case path == "spec.trainer.numProcPerNode":
		return "slots_per_worker"
	case path == "spec.trainer.command":
		return "command"
	case path == "spec.trainer.image":
		return "image"
	case path == "spec.runtimeRef.name":
		return "runtime"
	case strings.Contains(path, queue.NameLabel):
		return "queue"
	case strings.HasPrefix(path, "metadata.labels["+api.JobLabel), strings.HasPrefix(path, "metadata.annotations"):
		return "name"
	case strings.HasPrefix(path, "requests."), strings.HasPrefix(path, "limits."):
		res := strings.TrimPrefix(strings.TrimPrefix(path, "requests."), "limits.")
		return "resources_per_worker." + res
	case path == "cpu", path == "memory":
		return "resources_per_worker." + path
	}
	return path
}

// QuotaLine is one line of a namespace's quota as the job would use it.
type QuotaLine struct {
	Quota     string `json:"quota"`
	Resource  string `json:"resource"`
	Requested string `json:"requested"`
	Hard      string `json:"hard"`
	Used      string `json:"used"`
}

// QuotaCheck is the live quota check of the wizard: the numbers of the
// admission pre-flight (the same function, admission.CheckQuota or
// CheckQuotaQueued for a job Kueue queues), before the user submits.
type QuotaCheck struct {
	Fits   bool         `json:"fits"`
	Queued bool         `json:"queued"`
	Lines  []QuotaLine  `json:"lines"`
	Fields []FieldError `json:"fields,omitempty"`
	Error  string       `json:"error,omitempty"`
}

func (s *Server) quotaCheck(w http.ResponseWriter, r *http.Request, c *userClients) {
	ns := r.PathValue("ns")
	job, bad := s.buildJob(w, r, c, ns)
	if bad {
		return
	}
	var spec *trainer.TrainingRuntimeSpec
	if job.Runtime != nil {
		spec = &job.Runtime.Spec
	} else {
		ref := job.TrainJob.Spec.RuntimeRef
		base, err := runtimes.FindBaseOfKind(r.Context(), c, job.TrainJob.Namespace, ref.Name, ptr.Deref(ref.Kind, ""))
		if err != nil {
			s.apiError(w, err)
			return
		}
		spec = &base.Spec
	}
	shape, err := runtimes.ShapeOf(job.TrainJob, spec)
	if err != nil {
		writeJSON(w, http.StatusUnprocessableEntity, QuotaCheck{Error: err.Error()})
		return
	}
	quotas := &corev1.ResourceQuotaList{}
	if err := c.List(r.Context(), quotas, client.InNamespace(ns)); err != nil {
		if apierrors.IsForbidden(err) {
			// Without the right to read quotas the check cannot be made;
			// admission still makes it.
			writeJSON(w, http.StatusOK, QuotaCheck{Fits: true, Error: "you may not read the quotas of " + ns + ": admission checks them when you create the job"})
			return
		}
		s.apiError(w, err)
		return
	}
	queued := job.TrainJob.Labels[queue.NameLabel] != "" || c.hasDefaultQueue(r.Context(), ns)
	demand := admission.DemandOf(shape)
	check := admission.CheckQuota
	if queued {
		check = admission.CheckQuotaQueued
	}
	violations := check(demand, quotas.Items)
	out := QuotaCheck{Fits: len(violations) == 0, Queued: queued, Lines: quotaLines(demand, quotas.Items)}
	for _, v := range violations {
		out.Fields = append(out.Fields, FieldError{Field: wizardField(v.Key), Message: v.Message()})
	}
	writeJSON(w, http.StatusOK, out)
}

// quotaLines is every quota line the job asks for, with its numbers.
func quotaLines(d admission.Demand, quotas []corev1.ResourceQuota) []QuotaLine {
	requests, limits := d.TotalRequests(), d.TotalLimits()
	var out []QuotaLine
	for _, q := range quotas {
		if len(q.Spec.Scopes) > 0 || q.Spec.ScopeSelector != nil {
			// A scoped quota (a priority class, say) counts only some
			// pods: admission leaves it to the API server, and so does
			// this summary.
			continue
		}
		for key, hard := range q.Spec.Hard {
			// requests.cpu and cpu count requests; limits.memory limits.
			total, res := requests, corev1.ResourceName(strings.TrimPrefix(string(key), "requests."))
			if name, ok := strings.CutPrefix(string(key), "limits."); ok {
				total, res = limits, corev1.ResourceName(name)
			}
			want, ok := total[res]
			if !ok {
				continue
			}
			used := q.Status.Used[key]
			out = append(out, QuotaLine{Quota: q.Name, Resource: string(key), Requested: want.String(), Hard: hard.String(), Used: used.String()})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Quota+out[i].Resource < out[j].Quota+out[j].Resource })
	return out
}

// hasDefaultQueue reports whether ns has a Kueue LocalQueue "default",
// which Kueue gives every new job without a queue.
func (c *userClients) hasDefaultQueue(ctx context.Context, ns string) bool {
	lq := &unstructured.Unstructured{}
	lq.SetAPIVersion("kueue.x-k8s.io/v1beta2")
	lq.SetKind("LocalQueue")
	return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "default"}, lq) == nil
}

// CloneSource is what the wizard starts from to clone a job: the inputs
// that build the same job (jobspec.InputOf, as `kubectl mpijob clone`), and
// what the wizard cannot carry.
type CloneSource struct {
	Input jobspec.Input `json:"input"`
	// NotCarried names what the source has that the wizard's inputs do not
	// (runtime patches for volumes or tolerations): `kubectl mpijob clone`
	// keeps them.
	NotCarried []string `json:"notCarried,omitempty"`
	// WorkerMemoryLimit and LauncherMemoryLimit are the memory limits the
	// source's pods had, for "Edit and resubmit" after an OOM kill.
	WorkerMemoryLimit   string `json:"workerMemoryLimit,omitempty"`
	LauncherMemoryLimit string `json:"launcherMemoryLimit,omitempty"`
	Reason              string `json:"reason,omitempty"`
}

func (s *Server) jobInput(w http.ResponseWriter, r *http.Request, c *userClients) {
	ctx := r.Context()
	src := &trainer.TrainJob{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: r.PathValue("ns"), Name: r.PathValue("name")}, src); err != nil {
		s.apiError(w, err)
		return
	}
	if err := jobstatus.Get(ctx, c, src); err != nil {
		s.apiError(w, err)
		return
	}
	var rt *trainer.TrainingRuntime
	baseKind := src.Labels[api.BaseRuntimeKindLabel]
	if ptr.Deref(src.Spec.RuntimeRef.Kind, "") == trainer.TrainingRuntimeKind {
		rt = &trainer.TrainingRuntime{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: src.Namespace, Name: src.Spec.RuntimeRef.Name}, rt); err != nil {
			s.apiError(w, err)
			return
		}
		if !jobspec.IsDerived(rt.Labels) {
			// On the namespace's own runtime itself: that is the base.
			rt, baseKind = nil, trainer.TrainingRuntimeKind
		}
	}
	base, err := runtimes.FindBaseOfKind(ctx, c, src.Namespace, api.RuntimeOf(src.Labels, src.Spec.RuntimeRef.Name), baseKind)
	if err != nil {
		s.apiError(w, err)
		return
	}
	in, kept := jobspec.InputOf(src, rt, base)
	out := CloneSource{Input: in}
	for _, p := range kept {
		out.NotCarried = append(out.NotCarried, "runtime patch of "+p.Manager)
	}
	spec := &base.Spec
	if rt != nil {
		spec = &rt.Spec
	}
	if shape, err := runtimes.ShapeOf(src, spec); err == nil {
		if ct := nodeContainer(&shape.WorkerPod); ct != nil {
			if q, ok := ct.Resources.Limits[corev1.ResourceMemory]; ok {
				out.WorkerMemoryLimit = q.String()
			}
		}
		if ct := nodeContainer(&shape.LauncherPod); ct != nil {
			if q, ok := ct.Resources.Limits[corev1.ResourceMemory]; ok {
				out.LauncherMemoryLimit = q.String()
			}
		}
	}
	if st, ok := api.StatusOf(src); ok {
		out.Reason = st.Reason
	}
	writeJSON(w, http.StatusOK, out)
}
