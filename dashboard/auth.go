// Who the user is: their token (a Bearer header, an OAuth proxy's forwarded
// token or the login page's session), the clients that act as them, and
// their own access reviews. Every handler runs behind authed.

package dashboard

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

type userClients struct {
	client.WithWatch
	token   string
	cs      kubernetes.Interface
	cfg     *rest.Config // for exec (a PVC's artifacts)
	user    string
	groups  []string
	checked time.Time

	rtMu    sync.Mutex
	rtNames map[string]bool
	rtRead  time.Time
}

// tokenOf finds the user's token: a Bearer header, an OAuth proxy's
// forwarded token, or the token of the session the cookie names. expired
// is true for a cookie whose session is unknown or over.
func (s *Server) tokenOf(r *http.Request) (token string, expired bool) {
	if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") {
		return strings.TrimSpace(strings.TrimPrefix(h, "Bearer ")), false
	}
	if t := r.Header.Get("X-Forwarded-Access-Token"); t != "" {
		return t, false
	}
	if c, err := r.Cookie(SessionCookie); err == nil && c.Value != "" {
		t, ok := s.sessions.token(c.Value, time.Now())
		return t, !ok
	}
	return "", false
}

type handlerFunc func(w http.ResponseWriter, r *http.Request, c *userClients)

// authed resolves the user's clients and answers 401 when the token is
// missing, invalid or expired.
func (s *Server) authed(h handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		token, expired := s.tokenOf(r)
		if expired {
			writeError(w, http.StatusUnauthorized, "your session has expired or the token is not valid: log in again")
			return
		}
		if token == "" {
			writeError(w, http.StatusUnauthorized, "not logged in: log in, or send Authorization: Bearer <token>")
			return
		}
		c, err := s.clientsFor(r.Context(), token)
		if err != nil {
			if apierrors.IsUnauthorized(err) {
				writeError(w, http.StatusUnauthorized, "your session has expired or the token is not valid: log in again")
				return
			}
			s.apiError(w, err)
			return
		}
		h(w, r, c)
	}
}

// clientsFor returns clients acting with token, checking the token with
// a SelfSubjectReview at most once a minute.
func (s *Server) clientsFor(ctx context.Context, token string) (*userClients, error) {
	s.mu.Lock()
	if s.clients == nil {
		s.clients = map[string]*userClients{}
	}
	c, ok := s.clients[token]
	sum := sha256.Sum256([]byte(token))
	refusedAt, refused := s.refused[sum]
	s.mu.Unlock()
	if ok && time.Since(c.checked) < time.Minute {
		return c, nil
	}
	if refused && time.Since(refusedAt) < refusedFor {
		return nil, errRefusedToken
	}
	cfg := rest.AnonymousClientConfig(s.Base)
	cfg.BearerToken = token
	cfg.QPS, cfg.Burst = 50, 100
	// Admission's placement warnings reach the request that asked
	// (withPlacement); others are dropped, as before.
	cfg.WarningHandlerWithContext = placementWarnings{}
	var cl client.WithWatch
	var cs kubernetes.Interface
	if s.dial != nil {
		cl, cs = s.dial(token)
	} else {
		var err error
		if cl, err = client.NewWithWatch(cfg, client.Options{Scheme: scheme}); err != nil {
			return nil, err
		}
		if cs, err = kubernetes.NewForConfig(cfg); err != nil {
			return nil, err
		}
	}
	rev, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		s.mu.Lock()
		delete(s.clients, token)
		if apierrors.IsUnauthorized(err) {
			if s.refused == nil || len(s.refused) >= refusedMax {
				s.refused = map[[32]byte]time.Time{}
			}
			s.refused[sum] = time.Now()
		}
		s.mu.Unlock()
		return nil, err
	}
	c = &userClients{WithWatch: cl, token: token, cs: cs, cfg: cfg, user: rev.Status.UserInfo.Username, groups: rev.Status.UserInfo.Groups, checked: time.Now()}
	s.mu.Lock()
	if len(s.clients) > 1000 {
		s.clients = map[string]*userClients{}
	}
	s.clients[token] = c
	s.mu.Unlock()
	return c, nil
}

// A refused token is answered from memory for refusedFor; at most
// refusedMax are remembered (the map starts again when full).
const (
	refusedFor = 10 * time.Second
	refusedMax = 4096
)

var errRefusedToken = apierrors.NewUnauthorized("the token was refused moments ago")

func (s *Server) loginUsers(w http.ResponseWriter, _ *http.Request) {
	out := []LoginUser{}
	out = append(out, s.Users...)
	writeJSON(w, http.StatusOK, map[string]any{"users": out, "proxy": len(s.Users) == 0})
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	var body struct {
		User  string `json:"user"`
		Token string `json:"token"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&body); err != nil {
		writeError(w, http.StatusBadRequest, "the login request is not JSON: send {\"user\": NAME} or {\"token\": TOKEN}")
		return
	}
	token := body.Token
	if token == "" {
		names := []string{}
		for _, u := range s.Users {
			names = append(names, u.Name)
			if u.Name == body.User {
				token = u.Token
			}
		}
		if token == "" {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("user %q: no such user here; choose one of %s, or paste a token", body.User, strings.Join(names, ", ")))
			return
		}
	}
	c, err := s.clientsFor(r.Context(), token)
	if err != nil {
		if apierrors.IsUnauthorized(err) {
			writeError(w, http.StatusUnauthorized, "the cluster does not accept this token: check it, or ask for a new one")
			return
		}
		s.apiError(w, err)
		return
	}
	id, err := s.sessions.start(c.user, token, time.Now())
	if errors.Is(err, errFull) {
		writeError(w, http.StatusServiceUnavailable, "cannot start a session: "+err.Error())
		return
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, "cannot start a session: "+err.Error())
		return
	}
	// The cookie holds an opaque session id; the token stays here.
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: id, Path: "/", MaxAge: int(SessionLifetime.Seconds()),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: secureRequest(r)})
	writeJSON(w, http.StatusOK, map[string]any{"user": c.user})
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(SessionCookie); err == nil {
		s.sessions.end(c.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	writeJSON(w, http.StatusOK, map[string]any{})
}

func (s *Server) whoami(w http.ResponseWriter, _ *http.Request, c *userClients) {
	writeJSON(w, http.StatusOK, map[string]any{"user": c.user, "groups": c.groups})
}

func (c *userClients) can(ctx context.Context, ns, verb, group, resource, sub string) (bool, error) {
	rev, err := c.cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authzv1.SelfSubjectAccessReview{
		Spec: authzv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authzv1.ResourceAttributes{
			Namespace: ns, Verb: verb, Group: group, Resource: resource, Subresource: sub,
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return rev.Status.Allowed, nil
}
