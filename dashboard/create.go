package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/mpijob/mpijob/pkg/admission"
	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/jobspec"
	"github.com/mpijob/mpijob/pkg/jobview"
	"github.com/mpijob/mpijob/pkg/queue"
	"github.com/mpijob/mpijob/pkg/runtimes"
	"github.com/mpijob/mpijob/pkg/runtimetest"
	"github.com/mpijob/mpijob/pkg/suggest"
)

// The create wizard builds jobs with the same builder as `kubectl mpijob
// create` and the SDK (pkg/jobspec): the same inputs give the same objects.

// RuntimeInfo is one MPI runtime as the wizard's picker shows it.
type RuntimeInfo struct {
	Name        string `json:"name"`
	MPI         string `json:"mpi,omitempty"`
	Description string `json:"description,omitempty"`
	// LauncherImage and WorkerImage are the runtime's images.
	LauncherImage string `json:"launcherImage,omitempty"`
	WorkerImage   string `json:"workerImage,omitempty"`
	// LauncherHostsRanks: the Launcher is a Worker too (no Launcher sizes).
	LauncherHostsRanks bool `json:"launcherHostsRanks"`
	// Workers and SlotsPerWorker are the runtime's defaults.
	Workers        int32 `json:"workers"`
	SlotsPerWorker int32 `json:"slotsPerWorker"`
	// WorkerRequests and LauncherRequests are the runtime's sizes.
	WorkerRequests   map[string]string `json:"workerRequests,omitempty"`
	LauncherRequests map[string]string `json:"launcherRequests,omitempty"`
	// Command is the Launcher's default command.
	Command []string `json:"command,omitempty"`
	// Policy is the runtime's policy.mpijob.dev/* annotations.
	Policy map[string]string `json:"policy,omitempty"`
}

func (s *Server) listRuntimes(w http.ResponseWriter, r *http.Request, c *userClients) {
	l := &trainer.ClusterTrainingRuntimeList{}
	if err := c.List(r.Context(), l); err != nil {
		s.apiError(w, err)
		return
	}
	out := []RuntimeInfo{}
	for i := range l.Items {
		if info, ok := runtimeInfo(&l.Items[i]); ok {
			out = append(out, info)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	canCreate, _ := c.can(r.Context(), "", "create", trainer.GroupVersion.Group, "clustertrainingruntimes", "")
	writeJSON(w, http.StatusOK, map[string]any{"runtimes": out, "canCreate": canCreate, "policyKeys": policyKeys()})
}

// runtimeInfo describes an MPI runtime (false for other frameworks').
func runtimeInfo(rt *trainer.ClusterTrainingRuntime) (RuntimeInfo, bool) {
	if !runtimes.IsMPI(&rt.Spec) {
		return RuntimeInfo{}, false
	}
	info := RuntimeInfo{
		Name: rt.Name, MPI: rt.Annotations["mpijob.dev/mpi-implementation"], Description: rt.Annotations["mpijob.dev/description"],
		LauncherHostsRanks: runtimes.LauncherAsNode(&rt.Spec), Workers: 1, Policy: map[string]string{},
	}
	for k, v := range rt.Annotations {
		if strings.HasPrefix(k, runtimes.PolicyPrefix) {
			info.Policy[strings.TrimPrefix(k, runtimes.PolicyPrefix)] = v
		}
	}
	shape, err := runtimes.ShapeOf(&trainer.TrainJob{}, &rt.Spec)
	if err != nil {
		return info, true
	}
	info.SlotsPerWorker = shape.SlotsPerWorker
	if c := nodeContainer(&shape.WorkerPod); c != nil {
		info.WorkerImage, info.WorkerRequests = c.Image, jobview.Quantities(c.Resources.Requests)
		for name, q := range c.Resources.Limits {
			if isGPU(name) {
				info.WorkerRequests[string(name)] = q.String()
			}
		}
	}
	if c := nodeContainer(&shape.LauncherPod); c != nil {
		info.LauncherImage, info.LauncherRequests, info.Command = c.Image, jobview.Quantities(c.Resources.Requests), c.Command
	}
	return info, true
}

func nodeContainer(p *corev1.PodSpec) *corev1.Container {
	for i := range p.Containers {
		if p.Containers[i].Name == "node" {
			return &p.Containers[i]
		}
	}
	return nil
}

func isGPU(name corev1.ResourceName) bool { return strings.HasSuffix(string(name), "/gpu") }

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
	if err := jobspec.Create(r.Context(), c, job, dry); err != nil {
		var taken *jobspec.NameTakenError
		if errors.As(err, &taken) {
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
	base := &trainer.ClusterTrainingRuntime{}
	if err := c.Get(r.Context(), client.ObjectKey{Name: in.Runtime}, base); err != nil {
		if !apierrors.IsNotFound(err) {
			s.apiError(w, err)
			return nil, true
		}
		msg := fmt.Sprintf("no runtime %q", in.Runtime)
		if near := suggest.Closest(in.Runtime, runtimes.RuntimeLookup{Client: c}.MPIRuntimeNames(r.Context())); near != "" {
			msg += fmt.Sprintf("; did you mean %q?", near)
		}
		writeJSON(w, http.StatusUnprocessableEntity, CreateAnswer{Error: msg, Fields: []FieldError{{Field: "runtime", Message: msg}}})
		return nil, true
	}
	job, err := jobspec.Build(in, base)
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
		base := &trainer.ClusterTrainingRuntime{}
		if err := c.Get(r.Context(), client.ObjectKey{Name: job.TrainJob.Spec.RuntimeRef.Name}, base); err != nil {
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
	total := d.TotalRequests()
	var out []QuotaLine
	for _, q := range quotas {
		for key, hard := range q.Spec.Hard {
			res := corev1.ResourceName(strings.TrimPrefix(string(key), "requests."))
			want, ok := total[res]
			if !ok || strings.HasPrefix(string(key), "limits.") {
				continue
			}
			used := q.Status.Used[key]
			out = append(out, QuotaLine{Quota: q.Name, Resource: string(res), Requested: want.String(), Hard: hard.String(), Used: used.String()})
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
	var rt *trainer.TrainingRuntime
	if ptr.Deref(src.Spec.RuntimeRef.Kind, "") == trainer.TrainingRuntimeKind {
		rt = &trainer.TrainingRuntime{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: src.Namespace, Name: src.Spec.RuntimeRef.Name}, rt); err != nil {
			s.apiError(w, err)
			return
		}
		if !jobspec.IsDerived(rt.Labels) {
			writeError(w, http.StatusUnprocessableEntity, fmt.Sprintf("job %s runs on the namespace's own TrainingRuntime %s, which the wizard does not edit: copy its YAML instead", src.Name, rt.Name))
			return
		}
	}
	base := &trainer.ClusterTrainingRuntime{}
	if err := c.Get(ctx, client.ObjectKey{Name: api.RuntimeOf(src.Labels, src.Spec.RuntimeRef.Name)}, base); err != nil {
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

// runtimeTests are the Test runtime runs in progress or done, by id.
type runtimeTests struct {
	mu    sync.Mutex
	byID  map[string]*runtimeTestRun
	count int
}

type runtimeTestRun struct {
	user     string
	progress runtimetest.Progress
	err      string
	started  time.Time
}

// testRuntime starts `kubectl mpijob runtimes test` (pkg/runtimetest) as
// the user, with its job in a namespace they choose, and answers its id;
// GET /api/runtime-tests/{id} follows its checks.
func (s *Server) testRuntime(w http.ResponseWriter, r *http.Request, c *userClients) {
	var req struct {
		Namespace string `json:"namespace"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&req); err != nil || req.Namespace == "" {
		writeError(w, http.StatusBadRequest, `say where to run the test job: {"namespace": "NS"}, a namespace where you may create TrainJobs`)
		return
	}
	rt := &trainer.ClusterTrainingRuntime{}
	if err := c.Get(r.Context(), client.ObjectKey{Name: r.PathValue("name")}, rt); err != nil {
		s.apiError(w, err)
		return
	}
	if !runtimes.IsMPI(&rt.Spec) {
		writeError(w, http.StatusUnprocessableEntity, fmt.Sprintf("runtime %s is not an MPI runtime", rt.Name))
		return
	}
	if ok, err := c.can(r.Context(), req.Namespace, "create", trainer.GroupVersion.Group, "trainjobs", ""); err != nil || !ok {
		writeError(w, http.StatusForbidden, fmt.Sprintf("you may not create TrainJobs in namespace %s, where the test job would run", req.Namespace))
		return
	}
	t := &s.tests
	t.mu.Lock()
	if t.byID == nil {
		t.byID = map[string]*runtimeTestRun{}
	}
	// Forget runs older than an hour.
	for id, run := range t.byID {
		if time.Since(run.started) > time.Hour {
			delete(t.byID, id)
		}
	}
	t.count++
	id := fmt.Sprintf("%d-%s", t.count, rt.Name)
	run := &runtimeTestRun{user: c.user, started: time.Now()}
	t.byID[id] = run
	t.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
		defer cancel()
		_, err := runtimetest.Run(ctx, c, req.Namespace, rt, runtimetest.Options{Timeout: 5 * time.Minute, Log: c.podLog, Progress: func(p runtimetest.Progress) {
			t.mu.Lock()
			run.progress = p
			t.mu.Unlock()
		}})
		if err != nil {
			t.mu.Lock()
			run.err, run.progress.Done = api.CleanText(err.Error()), true
			t.mu.Unlock()
		}
	}()
	writeJSON(w, http.StatusAccepted, map[string]string{"id": id})
}

func (s *Server) runtimeTest(w http.ResponseWriter, r *http.Request, c *userClients) {
	t := &s.tests
	t.mu.Lock()
	defer t.mu.Unlock()
	run, ok := t.byID[r.PathValue("id")]
	if !ok || run.user != c.user {
		writeError(w, http.StatusNotFound, "no such runtime test (runs are kept an hour)")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"progress": run.progress, "error": run.err})
}

// NewRuntime is a ClusterTrainingRuntime made from another one as a
// template: its shape, with a name, a description, an image and a policy
// of its own.
type NewRuntime struct {
	// From is the template runtime.
	From        string `json:"from"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Image replaces the Launcher's and the Workers' image ("": the template's).
	Image string `json:"image,omitempty"`
	// Policy is policy.mpijob.dev/KEY: VALUE by KEY; it replaces the template's.
	Policy map[string]string `json:"policy,omitempty"`
}

// createRuntime creates (or with ?dryRun=true only checks) a runtime from a
// template, as the user: only those who may create ClusterTrainingRuntimes
// can. mpijob's runtime webhook checks the policy and names a bad key or
// value, which comes back by field (policy.KEY).
func (s *Server) createRuntime(w http.ResponseWriter, r *http.Request, c *userClients) {
	var in NewRuntime
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		writeJSON(w, http.StatusBadRequest, CreateAnswer{Error: "the runtime's inputs are not valid JSON: " + err.Error()})
		return
	}
	bad := func(field, msg string) {
		writeJSON(w, http.StatusUnprocessableEntity, CreateAnswer{Error: msg, Fields: []FieldError{{Field: field, Message: msg}}})
	}
	if errs := validation.IsDNS1123Subdomain(in.Name); in.Name == "" || len(errs) > 0 {
		bad("name", fmt.Sprintf("name %q: use lower-case letters, digits, '-' and '.', starting and ending with a letter or digit", in.Name))
		return
	}
	tmpl := &trainer.ClusterTrainingRuntime{}
	if err := c.Get(r.Context(), client.ObjectKey{Name: in.From}, tmpl); err != nil || !runtimes.IsMPI(&tmpl.Spec) {
		if err != nil && !apierrors.IsNotFound(err) {
			s.apiError(w, err)
			return
		}
		bad("from", fmt.Sprintf("template %q is not an MPI runtime of this cluster", in.From))
		return
	}
	if in.Image != "" {
		if _, err := name.ParseReference(in.Image); err != nil {
			bad("image", fmt.Sprintf("image %q is not an image reference: use e.g. registry.example.com/team/mpi:1", in.Image))
			return
		}
	}
	rt := &trainer.ClusterTrainingRuntime{Spec: *tmpl.Spec.DeepCopy()}
	rt.APIVersion, rt.Kind = trainer.GroupVersion.String(), trainer.ClusterTrainingRuntimeKind
	rt.Name, rt.Labels = in.Name, maps.Clone(tmpl.Labels)
	rt.Annotations = map[string]string{}
	for k, v := range tmpl.Annotations {
		if !strings.HasPrefix(k, runtimes.PolicyPrefix) && k != "kubectl.kubernetes.io/last-applied-configuration" {
			rt.Annotations[k] = v
		}
	}
	if in.Description != "" {
		rt.Annotations["mpijob.dev/description"] = in.Description
	}
	for k, v := range in.Policy {
		if v = strings.TrimSpace(v); v != "" {
			rt.Annotations[runtimes.PolicyPrefix+k] = v
		}
	}
	if in.Image != "" {
		for i := range rt.Spec.Template.Spec.ReplicatedJobs {
			pod := &rt.Spec.Template.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec
			for j := range pod.Containers {
				if pod.Containers[j].Name == "node" {
					pod.Containers[j].Image = in.Image
				}
			}
		}
	}
	var opts []client.CreateOption
	dry := r.URL.Query().Get("dryRun") == "true"
	if dry {
		opts = append(opts, client.DryRunAll)
	}
	b, _ := yaml.Marshal(rt)
	if err := c.Create(r.Context(), rt, opts...); err != nil {
		var st apierrors.APIStatus
		if !errors.As(err, &st) || st.Status().Code == 0 {
			s.apiError(w, err)
			return
		}
		ans := CreateAnswer{Error: api.CleanText(st.Status().Message)}
		if d := st.Status().Details; d != nil {
			for _, cause := range d.Causes {
				f := cause.Field
				if k, ok := strings.CutPrefix(f, "metadata.annotations["+runtimes.PolicyPrefix); ok {
					f = "policy." + strings.TrimSuffix(k, "]")
				} else if f == "metadata.name" {
					f = "name"
				}
				ans.Fields = append(ans.Fields, FieldError{Field: f, Message: api.CleanText(cause.Message)})
			}
		}
		writeJSON(w, int(st.Status().Code), ans)
		return
	}
	code := http.StatusCreated
	if dry {
		code = http.StatusOK
	}
	writeJSON(w, code, CreateAnswer{Name: rt.Name, YAML: string(b), DryRun: dry})
}

// policyKeys are the policy keys a runtime may carry, without the prefix.
func policyKeys() []string {
	out := make([]string, 0, len(runtimes.PolicyKeys))
	for _, k := range runtimes.PolicyKeys {
		out = append(out, strings.TrimPrefix(k, runtimes.PolicyPrefix))
	}
	return out
}
