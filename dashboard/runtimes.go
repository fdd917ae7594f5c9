// The MPI runtimes: the wizard's picker, a new runtime from a template
// (built by runtimes.FromTemplate), and the Test runtime runs.

package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/jobpods"
	"github.com/mpijob/mpijob/pkg/jobview"
	"github.com/mpijob/mpijob/pkg/runtimes"
	"github.com/mpijob/mpijob/pkg/runtimetest"
)

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

// RuntimeInfo is one MPI runtime as the wizard's picker shows it.
type RuntimeInfo struct {
	Name string `json:"name"`
	// Namespace is set for a namespace's own runtime (a TrainingRuntime),
	// empty for a ClusterTrainingRuntime.
	Namespace   string `json:"namespace,omitempty"`
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

// listRuntimes answers the MPI runtimes a job may pick: the cluster's,
// then those of namespace ?namespace= (runtimes.ListBases), each marked
// by its namespace.
func (s *Server) listRuntimes(w http.ResponseWriter, r *http.Request, c *userClients) {
	bases, err := runtimes.ListBases(r.Context(), c, r.URL.Query().Get("namespace"))
	if err != nil {
		s.apiError(w, err)
		return
	}
	out := []RuntimeInfo{}
	for _, b := range bases {
		if info, ok := runtimeInfo(b); ok {
			out = append(out, info)
		}
	}
	canCreate, _ := c.can(r.Context(), "", "create", trainer.GroupVersion.Group, "clustertrainingruntimes", "")
	writeJSON(w, http.StatusOK, map[string]any{"runtimes": out, "canCreate": canCreate, "policyKeys": policyKeys()})
}

// runtimeInfo describes an MPI runtime (false for other frameworks').
func runtimeInfo(rt *trainer.ClusterTrainingRuntime) (RuntimeInfo, bool) {
	if !runtimes.IsMPI(&rt.Spec) {
		return RuntimeInfo{}, false
	}
	info := RuntimeInfo{
		Name: rt.Name, Namespace: rt.Namespace, MPI: rt.Annotations["mpijob.dev/mpi-implementation"], Description: rt.Annotations[api.DescriptionAnnotation],
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
	// The cluster's runtime of that name, or the test namespace's own.
	rt, err := runtimes.FindBase(r.Context(), c, req.Namespace, r.PathValue("name"))
	if err != nil {
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
		_, err := runtimetest.Run(ctx, c, req.Namespace, rt, runtimetest.Options{Timeout: 5 * time.Minute, Log: jobpods.Reader{CS: c.cs}.Log, Progress: func(p runtimetest.Progress) {
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
	tmpl := &trainer.ClusterTrainingRuntime{}
	if err := c.Get(r.Context(), client.ObjectKey{Name: in.From}, tmpl); err != nil || !runtimes.IsMPI(&tmpl.Spec) {
		if err != nil && !apierrors.IsNotFound(err) {
			s.apiError(w, err)
			return
		}
		msg := fmt.Sprintf("template %q is not an MPI runtime of this cluster", in.From)
		writeJSON(w, http.StatusUnprocessableEntity, CreateAnswer{Error: msg, Fields: []FieldError{{Field: "from", Message: msg}}})
		return
	}
	rt, err := runtimes.FromTemplate(tmpl, runtimes.Template{Name: in.Name, Description: in.Description, Image: in.Image, Policy: in.Policy})
	if te := (*runtimes.TemplateError)(nil); errors.As(err, &te) {
		writeJSON(w, http.StatusUnprocessableEntity, CreateAnswer{Error: te.Message, Fields: []FieldError{{Field: te.Field, Message: te.Message}}})
		return
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
