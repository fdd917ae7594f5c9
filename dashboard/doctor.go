// The Cluster page: kubectl mpijob doctor's checks (pkg/doctor), made as
// the user.

package dashboard

import (
	"net/http"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/mpijob/mpijob/pkg/doctor"
)

// Doctor is the answer of GET /api/doctor.
type Doctor struct {
	// Findings are kubectl mpijob doctor's, in its order.
	Findings []doctor.Finding `json:"findings"`
	// Worst is the highest severity among them (ok, warning or error).
	Worst string `json:"worst"`
	// Namespace is where the admission probe's server dry run went.
	Namespace string `json:"namespace"`
}

// doctor runs the doctor's checks as the user; ?namespace= is where the
// admission probe (a server dry run of a small job) goes. What the user
// may not read is skipped, as in the CLI.
func (s *Server) doctor(w http.ResponseWriter, r *http.Request, c *userClients) {
	ns := r.URL.Query().Get("namespace")
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		writeError(w, http.StatusBadRequest, "namespace "+quoteOrEmpty(ns)+": give the namespace where the admission check's dry run goes (?namespace=team-a)")
		return
	}
	fs := doctor.Run(r.Context(), doctor.Env{Client: c.WithWatch, Discovery: c.cs.Discovery(), Namespace: ns})
	writeJSON(w, http.StatusOK, Doctor{Findings: fs, Worst: doctor.Worst(fs), Namespace: ns})
}

func quoteOrEmpty(s string) string {
	if s == "" {
		return "(none)"
	}
	return `"` + s + `"`
}
