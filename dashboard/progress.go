// A job's progress history, as the ranks reported it.

package dashboard

import (
	"net/http"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/progress"
	"github.com/mpijob/mpijob/pkg/runtimes"
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
	launchers, _, err := runtimes.JobPods(r.Context(), c, &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
	if err != nil {
		s.apiError(w, err)
		return
	}
	out := ProgressHistory{Points: []progress.Point{}}
	if len(launchers) > 0 { // the newest first
		limit := int64(8 << 20)
		b, err := c.cs.CoreV1().Pods(ns).GetLogs(launchers[0].Name, &corev1.PodLogOptions{Container: api.NodeContainer, Timestamps: true, LimitBytes: &limit}).DoRaw(r.Context())
		if err == nil {
			out.Points = append(out.Points, progress.All(string(b))...)
		}
	}
	writeJSON(w, http.StatusOK, out)
}
