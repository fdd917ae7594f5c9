package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/yaml"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/stacks"
)

// The handlers' tests run against a fake API server: one object store that
// every user shares, with each user's requests allowed or refused by their
// RBAC as the local cluster grants it (config/rbac): a tenant edits their
// own namespace, a viewer reads it, an administrator does everything.

// grant lets a user take verbs on resources ("pods/log" for a
// subresource) in a namespace ("" for every namespace and cluster-wide).
type grant struct {
	ns        string
	verbs     string // "get,list,watch" or "*"
	resources string // "trainjobs,pods" or "*"
}

var rbac = map[string][]grant{
	"dev-a": {
		{ns: "team-a", verbs: "*", resources: "trainjobs,trainingruntimes,pods,pods/log,events,secrets,resourcequotas,localqueues,workloads"},
		{verbs: "get,list,watch", resources: "clustertrainingruntimes,leases"},
	},
	"viewer-a": {
		{ns: "team-a", verbs: "get,list,watch", resources: "trainjobs,trainingruntimes,pods,pods/log,events"},
		{verbs: "get,list,watch", resources: "clustertrainingruntimes,leases"},
	},
	"dev-b": {
		{ns: "team-b", verbs: "*", resources: "trainjobs,trainingruntimes,pods,pods/log,events,secrets,resourcequotas"},
		{verbs: "get,list,watch", resources: "clustertrainingruntimes,leases"},
	},
	"admin": {{verbs: "*", resources: "*"}},
}

func allowed(user, verb, resource, ns string) bool {
	has := func(list, x string) bool {
		for _, v := range strings.Split(list, ",") {
			if v == "*" || v == x {
				return true
			}
		}
		return false
	}
	for _, g := range rbac[user] {
		if (g.ns == "" || g.ns == ns) && has(g.verbs, verb) && has(g.resources, resource) {
			return true
		}
	}
	return false
}

// forbidden is the API server's own refusal.
func forbidden(user, verb, group, resource, name, ns string) error {
	where := "at the cluster scope"
	if ns != "" {
		where = fmt.Sprintf("in the namespace %q", ns)
	}
	return apierrors.NewForbidden(schema.GroupResource{Group: group, Resource: resource}, name,
		fmt.Errorf("User %q cannot %s resource %q in API group %q %s", user, verb, resource, group, where))
}

// fakeAPI is the fake API server and the dashboard in front of it.
type fakeAPI struct {
	t      *testing.T
	store  client.WithWatch
	server *Server
	h      http.Handler
	// namespaces the fake API server has; terminating, those being
	// deleted.
	namespaces  []string
	terminating map[string]bool
}

// namespaceObjects are the fake API server's namespaces, those in
// f.terminating being deleted.
func (f *fakeAPI) namespaceObjects() []corev1.Namespace {
	var out []corev1.Namespace
	for _, n := range f.namespaces {
		ns := corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}
		if f.terminating[n] {
			ns.Status.Phase = corev1.NamespaceTerminating
		}
		out = append(out, ns)
	}
	return out
}

// token is the bearer token of a user of the fake API server.
func token(user string) string { return "token-" + user }

func newFakeAPI(t *testing.T, objs ...client.Object) *fakeAPI {
	t.Helper()
	namespaces := []string{"team-a", "team-b"}
	for _, n := range namespaces {
		objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}})
	}
	objs = append(objs, shippedRuntime(t, "mpi-openmpi"),
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: api.ManagerLeaseNamespace, Name: api.ManagerLeaseName},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("mpijob-manager-0"), LeaseDurationSeconds: ptr.To[int32](15),
				RenewTime: ptr.To(metav1.NewMicroTime(time.Now()))}})
	store := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithStatusSubresource(&trainer.TrainJob{}).Build()
	f := &fakeAPI{t: t, store: store, namespaces: namespaces}
	f.server = &Server{Base: &rest.Config{Host: "https://fake.invalid"},
		Users: []LoginUser{{Name: "dev-a", Token: token("dev-a")}, {Name: "viewer-a", Token: token("viewer-a")}},
		dial:  f.dial, listDirect: true, collectStacks: fakeStacks,
		// Tenants may not list namespaces: the dashboard's own account
		// names the candidates, and each user's access review decides.
		Namespaces: func(context.Context) ([]corev1.Namespace, error) { return f.namespaceObjects(), nil }}
	f.h = f.server.Handler()
	return f
}

// fakeStacks answers for the stack collector without pods: each Worker
// hosts one rank (its index), in comm.Allreduce; the Launcher none.
func fakeStacks(_ context.Context, _ *rest.Config, _ kubernetes.Interface, _ string, pods []stacks.Pod) (stacks.Result, error) {
	var ranks []stacks.Rank
	for _, p := range pods {
		if p.Worker >= 0 {
			ranks = append(ranks, stacks.Rank{Rank: p.Worker, Pod: p, State: "running", Hook: true,
				Frames: []stacks.Frame{{File: "/opt/train.py", Line: 120, Func: "step", Source: "comm.Allreduce(a, b)"}}})
		}
	}
	g := stacks.GroupRanks(ranks)
	return stacks.Result{Ranks: ranks, Groups: g, Contrast: stacks.Contrast(g)}, nil
}

// shippedRuntime is one of the runtimes the project ships (config/runtimes).
func shippedRuntime(t *testing.T, name string) *trainer.ClusterTrainingRuntime {
	t.Helper()
	b, err := os.ReadFile("../config/runtimes/" + name + ".yaml")
	if err != nil {
		t.Fatal(err)
	}
	rt := &trainer.ClusterTrainingRuntime{}
	if err := yaml.Unmarshal(b, rt); err != nil {
		t.Fatal(err)
	}
	return rt
}

// dial gives the clients of token's user: the shared store behind their
// RBAC, and a clientset that answers their reviews.
func (f *fakeAPI) dial(tok string) (client.WithWatch, kubernetes.Interface) {
	user, known := strings.CutPrefix(tok, "token-")
	if _, ok := rbac[user]; !ok {
		known = false
	}
	resourceOf := func(obj runtime.Object) (group, resource string) {
		gvk, err := apiutil.GVKForObject(obj, scheme)
		if err != nil {
			f.t.Fatalf("no kind for %T: %v", obj, err)
		}
		kind := strings.TrimSuffix(gvk.Kind, "List")
		return gvk.Group, strings.ToLower(kind) + "s"
	}
	check := func(verb string, obj runtime.Object, name, ns string) error {
		group, resource := resourceOf(obj)
		if !known {
			return apierrors.NewUnauthorized("Unauthorized")
		}
		if !allowed(user, verb, resource, ns) {
			return forbidden(user, verb, group, resource, name, ns)
		}
		return nil
	}
	listNS := func(opts []client.ListOption) string {
		lo := &client.ListOptions{}
		lo.ApplyOptions(opts)
		return lo.Namespace
	}
	cl := interceptor.NewClient(f.store, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := check("get", obj, key.Name, key.Namespace); err != nil {
				return err
			}
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if err := check("list", list, "", listNS(opts)); err != nil {
				return err
			}
			return c.List(ctx, list, opts...)
		},
		Watch: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) (watch.Interface, error) {
			if err := check("watch", list, "", listNS(opts)); err != nil {
				return nil, err
			}
			return c.Watch(ctx, list, opts...)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if err := check("create", obj, obj.GetName(), obj.GetNamespace()); err != nil {
				return err
			}
			return c.Create(ctx, obj, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if err := check("delete", obj, obj.GetName(), obj.GetNamespace()); err != nil {
				return err
			}
			return c.Delete(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if err := check("patch", obj, obj.GetName(), obj.GetNamespace()); err != nil {
				return err
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if err := check("update", obj, obj.GetName(), obj.GetNamespace()); err != nil {
				return err
			}
			return c.Update(ctx, obj, opts...)
		},
	})
	var nss []runtime.Object
	for _, n := range f.namespaces {
		nss = append(nss, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}})
	}
	cs := kubefake.NewClientset(nss...)
	cs.PrependReactor("create", "selfsubjectreviews", func(clienttesting.Action) (bool, runtime.Object, error) {
		if !known {
			return true, nil, apierrors.NewUnauthorized("Unauthorized")
		}
		return true, &authnv1.SelfSubjectReview{Status: authnv1.SelfSubjectReviewStatus{UserInfo: authnv1.UserInfo{
			Username: user, Groups: []string{"system:authenticated"}}}}, nil
	})
	cs.PrependReactor("create", "selfsubjectaccessreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
		rev := a.(clienttesting.CreateAction).GetObject().(*authzv1.SelfSubjectAccessReview)
		ra := rev.Spec.ResourceAttributes
		res := ra.Resource
		if ra.Subresource != "" {
			res += "/" + ra.Subresource
		}
		rev.Status.Allowed = allowed(user, ra.Verb, res, ra.Namespace)
		return true, rev, nil
	})
	cs.PrependReactor("list", "namespaces", func(clienttesting.Action) (bool, runtime.Object, error) {
		if !allowed(user, "list", "namespaces", "") {
			return true, nil, forbidden(user, "list", "", "namespaces", "", "")
		}
		return false, nil, nil
	})
	return cl, cs
}

// answer is one HTTP answer of the dashboard.
type answer struct {
	code   int
	body   string
	header http.Header
}

func (a answer) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(a.body), v); err != nil {
		t.Fatalf("answer is not JSON (%v): %s", err, a.body)
	}
}

// do sends one request as user ("" for none).
func (f *fakeAPI) do(user, method, path, body string) answer {
	f.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, "http://localhost:9090"+path, rd)
	if user != "" {
		req.Header.Set("Authorization", "Bearer "+token(user))
	} else {
		// A browser on the dashboard's own page (the cross-site guard).
		req.Header.Set("Origin", "http://localhost:9090")
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, req)
	return answer{code: rec.Code, body: rec.Body.String(), header: rec.Header()}
}

// job makes an MPI TrainJob of 2 Workers in ns with a manager's status, and
// its Launcher and Worker pods (running).
func mpiJob(ns, name string, st *api.Status) []client.Object {
	tj := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(t0),
			Annotations: map[string]string{api.CreatorAnnotation: "dev-a"}},
		Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: "mpi-openmpi"},
			Trainer: &trainer.Trainer{NumNodes: ptr.To[int32](2), NumProcPerNode: ptr.To[int32](1)}},
	}
	if st != nil {
		enc, err := st.Encode()
		if err != nil {
			panic(err)
		}
		tj.Annotations[api.StatusAnnotation] = enc
	}
	pod := func(role string, index int) *corev1.Pod {
		rj := api.WorkerJob
		if role == "launcher" {
			rj = api.LauncherJob
		}
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%s-0-%d-x", name, rj, index), Labels: map[string]string{
				"jobset.sigs.k8s.io/jobset-name": name, "jobset.sigs.k8s.io/replicatedjob-name": rj,
				"batch.kubernetes.io/job-completion-index": fmt.Sprint(index)}},
			Spec: corev1.PodSpec{NodeName: "mpijob-node-1", Containers: []corev1.Container{{Name: "node", Image: "ghcr.io/mpijob/openmpi:4.1"}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
				ContainerStatuses: []corev1.ContainerStatus{{Name: "node", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(t0)}}}}},
		}
	}
	return []client.Object{tj, pod("launcher", 0), pod("worker", 0), pod("worker", 1)}
}
