package dashboard

import (
	"fmt"
	"io"
	"mime"
	"net/http"
	"path"
	"strconv"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/artifacts"
	"github.com/mpijob/mpijob/pkg/registry"
)

// Artifacts is what the Artifacts tab shows.
type Artifacts struct {
	// Connection or Claim, and URI, say where the artifacts are; Objects
	// are they.
	Connection string             `json:"connection,omitempty"`
	Claim      string             `json:"claim,omitempty"`
	URI        string             `json:"uri,omitempty"`
	Objects    []artifacts.Object `json:"objects"`
	// Models are the objects that are model files (registry.IsModelFile):
	// what the Register button offers.
	Models []string `json:"models,omitempty"`
	// Message says why there are none to show (no data connection, ...).
	Message string `json:"message,omitempty"`
	// Error is set when they cannot be read (the store refused, ...).
	Error string `json:"error,omitempty"`
}

// tenantStoreTransport reaches tenants' object stores, one for the
// dashboard's life (its connections are reused across reads).
var tenantStoreTransport = artifacts.NoLocalTransport()

// artifactsTransport is how the dashboard reaches a tenant's store.
func artifactsTransport() artifacts.Option { return artifacts.WithTransport(tenantStoreTransport) }

// jobArtifacts lists what the job wrote to its data connection (reading
// the connection's Secret as the user) or its PVC (through a reader pod
// the user starts).
func (s *Server) jobArtifacts(w http.ResponseWriter, r *http.Request, c *userClients) {
	st, ok := s.openStore(w, r, c)
	if !ok || st == nil {
		return
	}
	defer func() { _ = st.Close() }()
	loc := st.Location()
	objs, err := st.List(r.Context())
	if err != nil {
		writeJSON(w, http.StatusBadGateway, Artifacts{Connection: loc.Connection, Claim: loc.Claim, URI: loc.URI, Objects: []artifacts.Object{}, Message: err.Error(), Error: err.Error()})
		return
	}
	if objs == nil {
		objs = []artifacts.Object{}
	}
	var models []string
	for _, o := range objs {
		if registry.IsModelFile(o.Name) {
			models = append(models, o.Name)
		}
	}
	writeJSON(w, http.StatusOK, Artifacts{Connection: loc.Connection, Claim: loc.Claim, URI: loc.URI, Objects: objs, Models: models})
}

// jobArtifact downloads one artifact.
func (s *Server) jobArtifact(w http.ResponseWriter, r *http.Request, c *userClients) {
	st, ok := s.openStore(w, r, c)
	if !ok || st == nil {
		return
	}
	defer func() { _ = st.Close() }()
	name := r.PathValue("file")
	body, size, err := st.Open(r.Context(), name)
	if err != nil {
		writeError(w, http.StatusNotFound, err.Error())
		return
	}
	defer func() { _ = body.Close() }()
	ct := mime.TypeByExtension(path.Ext(name))
	if ct == "" {
		ct = "application/octet-stream"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", path.Base(name)))
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = io.Copy(w, body)
}

// openStore finds the job's store; on a job without a data connection it
// answers with the reason (and a nil store).
func (s *Server) openStore(w http.ResponseWriter, r *http.Request, c *userClients) (artifacts.Source, bool) {
	ns, name := r.PathValue("ns"), r.PathValue("name")
	tj := &trainer.TrainJob{}
	if err := c.Get(r.Context(), client.ObjectKey{Namespace: ns, Name: name}, tj); err != nil {
		if apierrors.IsNotFound(err) {
			writeError(w, http.StatusNotFound, fmt.Sprintf("MPI job %s does not exist in namespace %s", name, ns))
			return nil, false
		}
		s.apiError(w, err)
		return nil, false
	}
	// The endpoint is the tenant's to write: the dashboard never connects
	// to its own loopback or to link-local addresses for it.
	st, err := artifacts.Open(r.Context(), c, c.cfg, tj, artifacts.WithTransport(tenantStoreTransport))
	if artifacts.IsNoStorage(err) {
		writeJSON(w, http.StatusOK, Artifacts{Objects: []artifacts.Object{}, Message: err.Error()})
		return nil, true
	}
	if err != nil {
		writeJSON(w, http.StatusForbidden, Artifacts{Objects: []artifacts.Object{}, Message: err.Error(), Error: err.Error()})
		return nil, false
	}
	return st, true
}
