// A job's progress history, as the ranks reported it.

package dashboard

import (
	"net/http"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mpijob/mpijob/pkg/jobpods"
	"github.com/mpijob/mpijob/pkg/progress"
)

// ProgressHistory is every progress report of a job so far, for the
// loss and accuracy charts.
type ProgressHistory struct {
	Points []progress.Point `json:"points"`
}

// jobProgress reads every progress report from the Launcher's log, as the
// user.
func (s *Server) jobProgress(w http.ResponseWriter, r *http.Request, c *userClients) {
	ns, name := r.PathValue("ns"), r.PathValue("name")
	jp, err := jobpods.ListLive(r.Context(), c, &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
	if err != nil {
		s.apiError(w, err)
		return
	}
	out := ProgressHistory{Points: []progress.Point{}}
	if l := jp.Launcher(); l != nil {
		if text, err := (jobpods.Reader{CS: c.cs}).ReadPod(r.Context(), ns, l.Name, jobpods.Window{}); err == nil {
			out.Points = append(out.Points, progress.All(text)...)
		}
	}
	writeJSON(w, http.StatusOK, out)
}
