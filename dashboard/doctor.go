// The Cluster page: kubectl mpijob doctor's checks (pkg/doctor), made as
// the user, and the usage per namespace (pkg/usage).

package dashboard

import (
	"fmt"
	"net/http"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/mpijob/mpijob/pkg/doctor"
	"github.com/mpijob/mpijob/pkg/usage"
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

// Usage is the answer of GET /api/usage.
type Usage struct {
	// Since is the window, as asked (7d).
	Since string `json:"since"`
	// Rows are the namespaces the user may see jobs in, by name.
	Rows []usage.Row `json:"rows"`
}

// usage serves GET /api/usage?since=7d: the usage rules' CPU-, memory-
// and GPU-hours per namespace (pkg/usage). Prometheus knows nothing of
// users, so only the namespaces the user may list jobs in are answered.
func (s *Server) usage(w http.ResponseWriter, r *http.Request, c *userClients) {
	since := r.URL.Query().Get("since")
	if since == "" {
		since = "7d"
	}
	window, err := usage.ParseSince(since)
	if err != nil {
		writeError(w, http.StatusBadRequest, "since "+err.Error())
		return
	}
	prom, err := s.prometheus()
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	mine, err := s.listable(r.Context(), c, 0)
	if err != nil {
		s.apiError(w, err)
		return
	}
	rows, err := usage.Read(r.Context(), prom, "", window, time.Now())
	if err != nil {
		writeError(w, http.StatusBadGateway, fmt.Sprintf("Prometheus at %s did not answer: %v", s.PrometheusURL, err))
		return
	}
	out := Usage{Since: since, Rows: []usage.Row{}}
	all := slices.Equal(mine, []string{""}) // may list jobs in every namespace
	for _, row := range rows {
		if all || slices.Contains(mine, row.Namespace) {
			out.Rows = append(out.Rows, row)
		}
	}
	writeJSON(w, http.StatusOK, out)
}
