//go:build e2e

package integration

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/localcluster"
	"github.com/mpijob/mpijob/test/framework"
)

// Every MPI job gets a NetworkPolicy admitting only its own pods, owned by
// the job; the opt-out annotation prevents it. (isolation_test.go proves
// the local cluster enforces it on real pods.)
func TestNetworkPolicyPerJob(t *testing.T) {
	c := framework.Get(t)
	ctx := context.Background()
	ns := c.NewNamespace(t, "netpol")
	suspended := func(name string) *framework.TrainJobWrapper {
		w := framework.MakeTrainJob(name, ns, "mpi-openmpi").NumNodes(2)
		w.Spec.Suspend = ptr.To(true)
		return w
	}
	job := suspended("guarded").Obj()
	if err := c.Client.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	optOut := suspended("open").Obj()
	if err := c.Client.Create(ctx, optOut); err != nil {
		t.Fatal(err)
	}

	np := &networkingv1.NetworkPolicy{}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "guarded-mpi"}, np) == nil, nil
	})
	if err != nil {
		t.Fatalf("no NetworkPolicy guarded-mpi after 30s")
	}
	if got := np.Spec.PodSelector.MatchLabels["jobset.sigs.k8s.io/jobset-name"]; got != "guarded" {
		t.Errorf("podSelector jobset-name = %q, want guarded", got)
	}
	if len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].From) != 1 || np.Spec.Ingress[0].From[0].PodSelector.MatchLabels["jobset.sigs.k8s.io/jobset-name"] != "guarded" {
		t.Errorf("ingress = %+v, want only from the job's own pods", np.Spec.Ingress)
	}
	if !metav1.IsControlledBy(np, job) {
		t.Errorf("NetworkPolicy is not controlled by the TrainJob: %+v", np.OwnerReferences)
	}

	// A job that opts out has none: its policy goes once the controller
	// has seen the annotation (the same step that keeps a job created
	// opted out without one), and stays gone.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "open-mpi"}, &networkingv1.NetworkPolicy{}) == nil, nil
	})
	if err != nil {
		t.Fatalf("no NetworkPolicy open-mpi after 30s, before it opts out")
	}
	if err := c.Client.Patch(ctx, optOut, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+api.NetworkPolicyAnnotation+`":"disabled"}}}`))); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "open-mpi"}, &networkingv1.NetworkPolicy{})), nil
	})
	if err != nil {
		t.Errorf("the job opted out with %s: disabled, and its NetworkPolicy is still there after 30s", api.NetworkPolicyAnnotation)
	}

	// Deleting the job removes its policy (garbage collection by owner).
	if err := c.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "guarded-mpi"}, &networkingv1.NetworkPolicy{})), nil
	})
	if err != nil {
		t.Errorf("NetworkPolicy outlived its TrainJob")
	}
}

// The manager's metrics are served over HTTPS to authorized callers only.
func TestMetricsNeedAuthorization(t *testing.T) {
	c := framework.Get(t)
	ctx := context.Background()
	ns := c.NewNamespace(t, "metrics")

	// A job the manager has seen, so the counters exist.
	job := framework.MakeTrainJob("counted", ns, "mpi-openmpi").NumNodes(1).Obj()
	job.Spec.Suspend = ptr.To(true)
	if err := c.Client.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	c.WaitForStatus(t, ns, "counted", time.Minute, func(s api.Status) bool { return s.Phase == api.PhaseSuspended })

	// A ServiceAccount allowed to read /metrics, as Prometheus would be.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "scraper", Namespace: ns}}
	if err := c.Client.Create(ctx, sa); err != nil {
		t.Fatal(err)
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "mpijob-test-metrics-" + ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "mpijob-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "scraper", Namespace: ns}},
	}
	if err := c.Client.Create(ctx, crb); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Client.Delete(context.Background(), crb) })
	allowed := token(t, c, ns, "scraper")
	other := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "nobody", Namespace: ns}}
	if err := c.Client.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	denied := token(t, c, ns, "nobody")

	// The leading replica counts the jobs; its certificate is checked
	// against the manager's own CA under the metrics Service's name.
	leader, err := localcluster.ManagerLeader(ctx, c.Clientset)
	if err != nil || leader == "" {
		t.Fatalf("no mpijob-manager pod leads (%v)", err)
	}
	url, tlsCfg, err := localcluster.ManagerMetrics(ctx, c.Client, leader)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		token    string
		wantCode int
		wantBody string
	}{
		"no token":           {wantCode: http.StatusUnauthorized},
		"a forged token":     {token: "eyJhbGciOiJSUzI1NiJ9.forged.forged", wantCode: http.StatusUnauthorized},
		"token without RBAC": {token: denied, wantCode: http.StatusForbidden},
		"metrics reader": {token: allowed, wantCode: http.StatusOK,
			wantBody: fmt.Sprintf(`mpijob_jobs_created_total{namespace=%q,runtime="mpi-openmpi"} 1`, ns)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var code int
			var body string
			// Authorization caches and RBAC propagation take a moment.
			_ = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
				code, body = scrape(t, url, tlsCfg, tc.token)
				return code == tc.wantCode && strings.Contains(body, tc.wantBody), nil
			})
			if code != tc.wantCode {
				t.Fatalf("GET %s: %d, want %d", url, code, tc.wantCode)
			}
			if !strings.Contains(body, tc.wantBody) {
				t.Errorf("metrics lack %q", tc.wantBody)
			}
		})
	}
}

func token(t *testing.T, c *framework.Cluster, ns, sa string) string {
	t.Helper()
	tr, err := c.Clientset.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), sa,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for %s: %v", sa, err)
	}
	return tr.Status.Token
}

func scrape(t *testing.T, url string, tlsCfg *tls.Config, token string) (int, string) {
	t.Helper()
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
