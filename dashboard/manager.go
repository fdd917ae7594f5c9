// Whether mpijob-manager runs, from its leader-election Lease: a status
// it no longer keeps is marked stale.

package dashboard

import (
	"context"
	"net/http"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/api"
)

// Manager is what mpijob-manager's Lease says: whether the statuses shown
// are current.
type Manager struct {
	Running bool       `json:"running"`
	Since   *time.Time `json:"since,omitempty"`
	// Note is the banner while it is not running ("" when it runs).
	Note string `json:"note,omitempty"`
}

func (s *Server) manager(w http.ResponseWriter, r *http.Request, c *userClients) {
	m := c.managerState(r.Context())
	out := Manager{Running: m.Running, Note: m.StaleListNote(time.Now())}
	if !m.Since.IsZero() {
		out.Since = &m.Since
	}
	writeJSON(w, http.StatusOK, out)
}

// managerState reads mpijob-manager's Lease as the user (every signed-in
// user may, config/rbac/aggregate/manager-lease.yaml). When it cannot be
// read, nothing is claimed: Running.
func (c *userClients) managerState(ctx context.Context) api.ManagerState {
	lease := &coordinationv1.Lease{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: api.ManagerLeaseNamespace, Name: api.ManagerLeaseName}, lease); err != nil {
		return api.ManagerState{Running: true}
	}
	return api.ManagerStateOf(lease, time.Now())
}
