package dashboard

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/jobstatus"
	"github.com/mpijob/mpijob/pkg/registry"
)

// RegisterRequest is the Artifacts tab's Register form: version "" is the
// job's name; artifact "" the job's one model file.
type RegisterRequest struct {
	Name     string `json:"name"`
	Version  string `json:"version,omitempty"`
	Artifact string `json:"artifact,omitempty"`
	NewModel bool   `json:"newModel,omitempty"`
}

// RegisterAnswer says what a registration did, or why it did not.
type RegisterAnswer struct {
	Model     string `json:"model,omitempty"`
	Version   string `json:"version,omitempty"`
	URI       string `json:"uri,omitempty"`
	Format    string `json:"format,omitempty"`
	Unchanged bool   `json:"unchanged,omitempty"`
	NewModel  bool   `json:"newModel,omitempty"`
	// Message is the sentence the tab shows.
	Message string `json:"message,omitempty"`
	// Error is why nothing was registered; Field the form's field it is
	// about ("name", "version", "artifact"); Near a registered model whose
	// name is close to the one given (a likely typo); Command the one that
	// registers it later when the registry did not answer.
	Error   string `json:"error,omitempty"`
	Field   string `json:"field,omitempty"`
	Near    string `json:"near,omitempty"`
	Command string `json:"command,omitempty"`
}

// registerModel registers a succeeded job's model in the model registry
// whose Service the dashboard was given (ModelRegistry), as the user: their
// token reaches the registry, which applies its own access rules, and the
// job and its artifacts are read with their rights.
func (s *Server) registerModel(w http.ResponseWriter, r *http.Request, c *userClients) {
	ns, name := r.PathValue("ns"), r.PathValue("name")
	var req RegisterRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, RegisterAnswer{Error: "the request is not a registration: " + err.Error()})
		return
	}
	version := strings.TrimSpace(req.Version)
	if version == "" {
		version = name
	}
	ref, err := registry.ParseRef("name", strings.TrimSpace(req.Name)+":"+version, name)
	if err != nil {
		field := "name"
		if strings.Contains(err.Error(), "(version)") {
			field = "version"
		}
		writeJSON(w, http.StatusBadRequest, RegisterAnswer{Error: err.Error(), Field: field})
		return
	}
	later := fmt.Sprintf("kubectl mpijob register %s %s -n %s", name, ref, ns)
	fail := func(err error) {
		ans := RegisterAnswer{Model: ref.Name, Version: ref.Version, Error: err.Error()}
		var typo *registry.TypoError
		var taken *registry.TakenError
		var fe *registry.FieldError
		var un *registry.UnreachableError
		var acc *registry.AccessError
		code := http.StatusBadRequest
		switch {
		case errors.As(err, &typo):
			ans.Field, ans.Near = "name", typo.Near
			ans.Error = fmt.Sprintf("%v: did you mean %s? To create model %s, choose Create a new model", err, typo.Near, ref.Name)
		case errors.As(err, &taken):
			ans.Field = "version"
		case errors.As(err, &fe) && fe.Field == "--artifact":
			ans.Field = "artifact"
		case errors.As(err, &un):
			code, ans.Command = http.StatusBadGateway, later
			ans.Error = fmt.Sprintf("%v. The job and its artifacts are unchanged; register it once the registry answers.", err)
		case errors.As(err, &acc):
			code = http.StatusForbidden
		case registry.IsUserError(err):
		default:
			code = http.StatusBadGateway
		}
		writeJSON(w, code, ans)
	}
	tj := &trainer.TrainJob{}
	if err := c.Get(r.Context(), client.ObjectKey{Namespace: ns, Name: name}, tj); err != nil {
		if apierrors.IsNotFound(err) {
			writeError(w, http.StatusNotFound, fmt.Sprintf("MPI job %s does not exist in namespace %s", name, ns))
			return
		}
		s.apiError(w, err)
		return
	}
	if err := jobstatus.Get(r.Context(), c, tj); err != nil {
		s.apiError(w, err)
		return
	}
	if err := registry.Succeeded(tj, "wait until it succeeded"); err != nil {
		fail(err)
		return
	}
	t, err := registry.Resolve(r.Context(), c, "the dashboard's --model-registry", s.ModelRegistry, "", "", c.token)
	if err != nil {
		fail(err)
		return
	}
	m, err := registry.FromJob(r.Context(), c, c.cfg, c.cs, tj, ref, strings.TrimSpace(req.Artifact), artifactsTransport())
	if err != nil {
		fail(err)
		return
	}
	rc := registry.Client{T: t}
	if !req.NewModel {
		if err := rc.CheckName(r.Context(), ref.Name); err != nil {
			fail(err)
			return
		}
	}
	res, err := rc.Register(r.Context(), m)
	if err != nil {
		fail(err)
		return
	}
	ans := RegisterAnswer{Model: ref.Name, Version: ref.Version, URI: m.URI, Format: m.Format, Unchanged: res.Unchanged, NewModel: res.NewModel}
	switch {
	case res.Unchanged:
		ans.Message = fmt.Sprintf("Version %s of %s is already registered from this job: nothing changed.", ref.Version, ref.Name)
	case res.NewModel:
		ans.Message = fmt.Sprintf("Registered %s, a new model, version %s.", ref.Name, ref.Version)
	default:
		ans.Message = fmt.Sprintf("Registered version %s of %s.", ref.Version, ref.Name)
	}
	writeJSON(w, http.StatusOK, ans)
}
