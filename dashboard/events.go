// A job's Events, the manager's own checked against the status that
// vouches for them.

package dashboard

import (
	"context"
	"net/http"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/jobstatus"
)

// Event is one event of the job or its children.
type Event struct {
	Time    time.Time `json:"time"`
	Type    string    `json:"type"`
	Reason  string    `json:"reason"`
	Object  string    `json:"object"`
	Message string    `json:"message"`
	Count   int32     `json:"count"`
	// Forged: it says it comes from mpijob-manager, and the manager does
	// not vouch for it (api.ForgedEvent).
	Forged bool `json:"forged,omitempty"`
}

func (s *Server) jobEvents(w http.ResponseWriter, r *http.Request, c *userClients) {
	evs, err := c.eventsOf(r.Context(), r.PathValue("ns"), r.PathValue("name"))
	if err != nil {
		s.apiError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"events": evs})
}

func (c *userClients) eventsOf(ctx context.Context, ns, name string) ([]Event, error) {
	var st api.Status
	tj := &trainer.TrainJob{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, tj); err == nil && jobstatus.Get(ctx, c, tj) == nil {
		st, _ = api.StatusOf(tj)
	}
	return c.eventsWith(ctx, ns, name, st)
}

// eventsWith is eventsOf for a job whose status st is already read.
func (c *userClients) eventsWith(ctx context.Context, ns, name string, st api.Status) ([]Event, error) {
	list := &corev1.EventList{}
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	out := []Event{}
	for _, e := range api.JobEvents(name, list.Items) {
		out = append(out, Event{Time: api.EventTime(e), Type: e.Type, Reason: e.Reason, Object: e.InvolvedObject.Kind + "/" + e.InvolvedObject.Name, Message: e.Message, Count: max(e.Count, 1),
			Forged: api.ForgedEvent(e, st)})
	}
	return out, nil
}
