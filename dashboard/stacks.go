// Where a running job's ranks are: every rank's stack, grouped.

package dashboard

import (
	"context"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/jobpods"
	"github.com/mpijob/mpijob/pkg/stacks"
)

// collectStacks runs the stack collector in a job's pods as the user
// (stacks.Collect; the handlers' tests give one of their own).
type collectStacks func(ctx context.Context, cfg *rest.Config, cs kubernetes.Interface, ns string, pods []stacks.Pod) (stacks.Result, error)

// jobStacks takes every rank's stack of a running job, as the user (the
// right to create pods/exec, as kubectl mpijob stacks), and answers the
// groups. A POST: it signals the ranks' processes, which keep running.
func (s *Server) jobStacks(w http.ResponseWriter, r *http.Request, c *userClients) {
	tj, ok := s.jobOf(w, r, c)
	if !ok {
		return
	}
	ns, name := r.PathValue("ns"), r.PathValue("name")
	st, _ := api.StatusOf(tj)
	if st.Phase.Finished() {
		writeError(w, http.StatusConflict, fmt.Sprintf("job %s is %s: stacks show where a running job's ranks are; its Logs tab has its output", name, st.Phase))
		return
	}
	jp, err := jobpods.ListLive(r.Context(), c, tj)
	if err != nil {
		s.apiError(w, err)
		return
	}
	pods := stacks.PodsOf(jp)
	if len(pods) == 0 {
		writeError(w, http.StatusConflict, fmt.Sprintf("job %s has no running pod now (phase %s): its Overview says why", name, st.Phase))
		return
	}
	collect := s.collectStacks
	if collect == nil {
		collect = stacks.Collect
	}
	res, err := collect(r.Context(), c.cfg, c.cs, ns, pods)
	if err != nil {
		if apierrors.IsForbidden(err) {
			writeError(w, http.StatusForbidden, err.Error())
			return
		}
		s.apiError(w, err)
		return
	}
	if res.Ranks == nil {
		res.Ranks = []stacks.Rank{}
	}
	if res.Groups == nil {
		res.Groups = []stacks.Group{}
	}
	writeJSON(w, http.StatusOK, res)
}
