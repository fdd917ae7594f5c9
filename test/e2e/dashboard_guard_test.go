//go:build e2e

package e2e

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/localcluster"
	"github.com/mpijob/mpijob/test/framework"
)

// A page on another port of the same host (issue 26's reproduction) can
// neither create a job nor suspend one as the user logged in to the
// dashboard that make dev serves, and JSON sent as text/plain is refused.
func TestDashboardRefusesCrossSiteRequests(t *testing.T) {
	t.Parallel()
	c := framework.Get(t)
	victim := framework.UniqueName("csrf")
	expect(t, mpijob(t, "dev-a", "team-a", "create", victim, "--workers", "1", "--", "sleep", "120"), 0, "created")
	t.Cleanup(func() { mpijob(t, "dev-a", "team-a", "delete", victim, "--wait=false") })
	// Admitted and running, so spec.suspend is false unless someone sets it.
	expect(t, mpijob(t, "dev-a", "team-a", "wait", victim, "--for=Running", "--timeout", "3m"), 0, "is Running")

	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	dash := localcluster.DashboardURL
	send := func(method, path, origin, contentType, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, dash+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		resp, err := browser.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := send("POST", "/api/login", dash, "application/json", `{"user":"dev-a"}`); code != 200 {
		t.Fatalf("login as dev-a: %d %s", code, body)
	}
	evil := "http://127.0.0.1:9999"
	forged := framework.UniqueName("forged")
	for name, tc := range map[string]struct {
		method, path, origin, contentType, body string
		code                                    int
		says                                    string
	}{
		"create from another port": {method: "POST", path: "/api/jobs/team-a", origin: evil, contentType: "application/json",
			body: `{"name":"` + forged + `","workers":1}`, code: 403, says: "not from this dashboard"},
		"create as text/plain from another port": {method: "POST", path: "/api/jobs/team-a", origin: evil, contentType: "text/plain",
			body: `{"name":"` + forged + `","workers":1}`, code: 403, says: "cross-site"},
		"create as text/plain, no Origin": {method: "POST", path: "/api/jobs/team-a", contentType: "text/plain",
			body: `{"name":"` + forged + `","workers":1}`, code: 403, says: "cross-site"},
		"create as text/plain from the dashboard's origin": {method: "POST", path: "/api/jobs/team-a", origin: dash, contentType: "text/plain",
			body: `{"name":"` + forged + `","workers":1}`, code: 415, says: "Content-Type: application/json"},
		"suspend another job from another port": {method: "POST", path: "/api/jobs/team-a/" + victim + "/suspend", origin: evil, code: 403, says: "not from this dashboard"},
		"delete from another port":              {method: "DELETE", path: "/api/jobs/team-a/" + victim, origin: evil, code: 403, says: "not from this dashboard"},
	} {
		t.Run(name, func(t *testing.T) {
			code, body := send(tc.method, tc.path, tc.origin, tc.contentType, tc.body)
			if code != tc.code || !strings.Contains(body, tc.says) {
				t.Errorf("HTTP %d %s, want %d saying %q", code, body, tc.code, tc.says)
			}
		})
	}
	ctx := context.Background()
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: forged}, &trainer.TrainJob{}); !apierrors.IsNotFound(err) {
		t.Errorf("the cross-site create made job %s (err %v)", forged, err)
	}
	tj := &trainer.TrainJob{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: victim}, tj); err != nil {
		t.Fatalf("the cross-site delete removed %s: %v", victim, err)
	}
	if tj.Spec.Suspend != nil && *tj.Spec.Suspend {
		t.Errorf("the cross-site suspend suspended %s", victim)
	}
	// The same session, from the dashboard's own page, does act.
	if code, body := send("POST", "/api/jobs/team-a/"+victim+"/suspend", dash, "", ""); code != 200 {
		t.Errorf("suspend from the dashboard's own origin: %d %s", code, body)
	}
}
