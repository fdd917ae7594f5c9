// The namespaces a user may see jobs in, what they may do there, and the
// data connections (Secrets) the wizard offers in one.

package dashboard

import (
	"context"
	"net/http"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/jobspec"
)

// Namespace is a namespace the user may see jobs in, and what they may do.
type Namespace struct {
	Name      string `json:"name"`
	CanDelete bool   `json:"canDelete"`
	CanPatch  bool   `json:"canPatch"`
	CanCreate bool   `json:"canCreate"`
	CanLogs   bool   `json:"canLogs"`
	// Terminating: the namespace is being deleted; it takes no new job
	// (CanCreate is false), and its jobs are going.
	Terminating bool `json:"terminating,omitempty"`
}

func (s *Server) namespaces(w http.ResponseWriter, r *http.Request, c *userClients) {
	nss, err := s.namespacesOf(r.Context(), c)
	if err != nil {
		s.apiError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"namespaces": nss})
}

// namespacesOf lists the namespaces where the user may list TrainJobs,
// with the actions they may take there, from their own access reviews.
func (s *Server) namespacesOf(ctx context.Context, c *userClients) ([]Namespace, error) {
	var all []corev1.Namespace
	list, err := c.cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	switch {
	case err == nil:
		all = list.Items
	case apierrors.IsForbidden(err) && s.Namespaces != nil:
		if all, err = s.Namespaces(ctx); err != nil {
			return nil, err
		}
	default:
		return nil, err
	}
	candidates := make([]string, 0, len(all))
	terminating := map[string]bool{}
	for _, n := range all {
		candidates = append(candidates, n.Name)
		terminating[n.Name] = n.Status.Phase == corev1.NamespaceTerminating || n.DeletionTimestamp != nil
	}
	type result struct {
		ns  Namespace
		ok  bool
		err error
	}
	out := make([]result, len(candidates))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, name := range candidates {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			ok, err := c.can(ctx, name, "list", "trainer.kubeflow.org", "trainjobs", "")
			if err != nil || !ok {
				out[i] = result{err: err}
				return
			}
			n := Namespace{Name: name, Terminating: terminating[name]}
			n.CanDelete, _ = c.can(ctx, name, "delete", "trainer.kubeflow.org", "trainjobs", "")
			n.CanPatch, _ = c.can(ctx, name, "patch", "trainer.kubeflow.org", "trainjobs", "")
			// The API server refuses every create in a namespace being
			// deleted: the wizard does not offer it.
			n.CanCreate, _ = c.can(ctx, name, "create", "trainer.kubeflow.org", "trainjobs", "")
			n.CanCreate = n.CanCreate && !n.Terminating
			n.CanLogs, _ = c.can(ctx, name, "get", "", "pods", "log")
			out[i] = result{ns: n, ok: true}
		}()
	}
	wg.Wait()
	var nss []Namespace
	for _, r := range out {
		if r.err != nil {
			return nil, r.err
		}
		if r.ok {
			nss = append(nss, r.ns)
		}
	}
	sort.Slice(nss, func(i, j int) bool { return nss[i].Name < nss[j].Name })
	return nss, nil
}

func inNamespace(ns string) client.ListOption {
	if ns == "" {
		return &client.ListOptions{}
	}
	return client.InNamespace(ns)
}

// dataConnections lists the namespace's S3 data connections for the
// wizard, read as the user (names only: never a key's value).
func (s *Server) dataConnections(w http.ResponseWriter, r *http.Request, c *userClients) {
	names, err := jobspec.Connections(r.Context(), c, r.PathValue("ns"))
	if err != nil {
		if apierrors.IsForbidden(err) {
			writeJSON(w, http.StatusOK, map[string]any{"connections": []string{}, "message": "you may not list Secrets in this namespace, so its data connections are not shown"})
			return
		}
		s.apiError(w, err)
		return
	}
	if names == nil {
		names = []string{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"connections": names})
}
