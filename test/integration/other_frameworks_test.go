//go:build e2e

package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	"sigs.k8s.io/yaml"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/jobspec"
	"github.com/mpijob/mpijob/pkg/localcluster"
	"github.com/mpijob/mpijob/pkg/netpol"
	"github.com/mpijob/mpijob/test/framework"
)

// upstreamRuntimeFiles are Kubeflow Trainer v2.3's own runtimes of the
// non-MPI frameworks, read from its module: the shapes PyTorch, JAX,
// XGBoost and Flux users run.
var upstreamRuntimeFiles = map[string]string{
	"torch":   "manifests/base/runtimes/torch_distributed.yaml",
	"jax":     "manifests/base/runtimes/jax_distributed.yaml",
	"xgboost": "manifests/base/runtimes/xgboost_distributed.yaml",
	"flux":    "examples/flux/flux-runtime.yaml",
}

// upstreamRuntime loads one of upstream's runtimes with every image set
// to the local cluster's user image (nothing is pulled from outside) and
// the security context that the tenants' namespaces require (Pod Security
// "restricted"; upstream's runtimes set none), so their pods can start.
func upstreamRuntime(t *testing.T, framework string) *trainer.ClusterTrainingRuntime {
	t.Helper()
	rt := trainerRuntime(t, upstreamRuntimeFiles[framework])
	for i := range rt.Spec.Template.Spec.ReplicatedJobs {
		pod := &rt.Spec.Template.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec
		pod.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](1000),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
		restricted := &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
		for k := range pod.InitContainers {
			pod.InitContainers[k].Image = localcluster.UserImage
			pod.InitContainers[k].SecurityContext = restricted.DeepCopy()
		}
		for k := range pod.Containers {
			pod.Containers[k].Image = localcluster.UserImage
			pod.Containers[k].SecurityContext = restricted.DeepCopy()
		}
	}
	return rt
}

// trainerRuntime reads a ClusterTrainingRuntime from Trainer's module, as
// Trainer ships it.
func trainerRuntime(t *testing.T, path string) *trainer.ClusterTrainingRuntime {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/kubeflow/trainer/v2").Output()
	if err != nil {
		t.Fatalf("locating Trainer's module: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), path))
	if err != nil {
		t.Fatal(err)
	}
	rt := &trainer.ClusterTrainingRuntime{}
	if err := yaml.Unmarshal(b, rt); err != nil {
		t.Fatal(err)
	}
	return rt
}

// ensureClusterRuntime creates rt unless a runtime of its name exists,
// and removes it after the test when it made it.
func ensureClusterRuntime(t *testing.T, c *framework.Cluster, rt *trainer.ClusterTrainingRuntime) {
	t.Helper()
	err := c.Client.Create(context.Background(), rt)
	switch {
	case apierrors.IsAlreadyExists(err):
	case err != nil:
		t.Fatalf("creating upstream's runtime %s: %v", rt.Name, err)
	default:
		t.Cleanup(func() { _ = c.Client.Delete(context.Background(), rt) })
	}
}

// A TrainJob whose runtime is not an MPI runtime is admitted exactly as
// upstream admits it, for each of upstream's non-MPI runtime shapes: a
// PyTorch user's job created from a colleague's exported manifest (which
// carries the colleague's creator and an mpijob status), with far more
// nodes than mpijob's cap, then edited, is admitted and left as written:
// no mpijob annotation, no Event and no NetworkPolicy from mpijob-manager,
// while an MPI job created beside them gets all three.
func TestOtherFrameworksAreAdmittedAsUpstream(t *testing.T) {
	c := framework.Get(t)
	ctx := context.Background()
	ns, user := editableNamespace(t, c, "upstream")

	// The control: an MPI job, suspended, gets mpijob's status, Event
	// and NetworkPolicy.
	mpiJob := framework.MakeTrainJob(framework.UniqueName("control"), ns, "mpi-openmpi").NumNodes(1).Suspend().Obj()
	if err := user.Create(ctx, mpiJob); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Client.Delete(context.Background(), mpiJob) })

	exported := map[string]string{api.CreatorAnnotation: "dev-b", api.StatusAnnotation: `{"phase":"Succeeded","reason":"Copied"}`, "team.example.com/note": "from dev-b"}
	var jobs []*trainer.TrainJob
	for _, fw := range []string{"torch", "jax", "xgboost", "flux"} {
		rt := upstreamRuntime(t, fw)
		ensureClusterRuntime(t, c, rt)
		tj := &trainer.TrainJob{
			ObjectMeta: metav1.ObjectMeta{Name: framework.UniqueName(fw), Namespace: ns, Annotations: exported},
			Spec: trainer.TrainJobSpec{
				RuntimeRef: trainer.RuntimeRef{Name: rt.Name, APIGroup: ptr.To(trainer.GroupVersion.Group), Kind: ptr.To(trainer.ClusterTrainingRuntimeKind)},
				Trainer:    &trainer.Trainer{NumNodes: ptr.To[int32](300)},
				Suspend:    ptr.To(true),
			},
		}
		t.Cleanup(func() { _ = c.Client.Delete(context.Background(), tj) })
		t.Run(fw, func(t *testing.T) {
			if err := jobspec.CreateTrainJob(ctx, user, tj); err != nil {
				t.Fatalf("a %s job from a colleague's manifest with 300 nodes: %v, want admitted as upstream admits it", fw, err)
			}
			jobs = append(jobs, tj)
			// Edited as upstream allows (Trainer keeps spec.trainer as it
			// was created; the job stays suspended, 300 nodes would not
			// fit this cluster): its labels and annotations, mpijob's
			// names among them the user's own here.
			patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"a"},"annotations":{"mpijob.dev/status":"{}"}}}`))
			if err := user.Patch(ctx, tj.DeepCopy(), patch); err != nil {
				t.Errorf("editing the %s job: %v", fw, err)
			}
		})
	}

	// The control's Event and NetworkPolicy say the manager has looked at
	// jobs created at the same time.
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		return len(managerEvents(t, c, ns, mpiJob.Name)) > 0 &&
			c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: netpol.Name(mpiJob)}, &networkingv1.NetworkPolicy{}) == nil, nil
	}); err != nil {
		t.Fatalf("the MPI job %s got no Event or NetworkPolicy from mpijob-manager within 2 minutes", mpiJob.Name)
	}
	got := &trainer.TrainJob{}
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(mpiJob), got); err != nil || got.Annotations[api.CreatorAnnotation] != trainerUser {
		t.Errorf("the MPI job's creator: %q (%v), want %s", got.Annotations[api.CreatorAnnotation], err, trainerUser)
	}
	for _, tj := range jobs {
		got := &trainer.TrainJob{}
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(tj), got); err != nil {
			t.Fatal(err)
		}
		want := map[string]string{api.CreatorAnnotation: "dev-b", api.StatusAnnotation: "{}", "team.example.com/note": "from dev-b"}
		for k, v := range want {
			if got.Annotations[k] != v {
				t.Errorf("%s: annotation %s = %q, want %q as its user wrote it", tj.Name, k, got.Annotations[k], v)
			}
		}
		for k := range got.Annotations {
			if _, ok := want[k]; !ok && strings.Contains(k, "mpijob") {
				t.Errorf("%s carries mpijob's annotation %s", tj.Name, k)
			}
		}
		if evs := managerEvents(t, c, ns, tj.Name); len(evs) > 0 {
			t.Errorf("%s got Events from mpijob-manager: %v", tj.Name, evs)
		}
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: netpol.Name(tj)}, &networkingv1.NetworkPolicy{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s got a NetworkPolicy from mpijob-manager (%v)", tj.Name, err)
		}
	}
}

// trainerUser is who the tests of other frameworks act as: a user of
// its own, so that the namespaces it may edit show in no other test's
// view (the dashboard's tests list dev-a's namespaces).
const trainerUser = "trainer-user"

// editableNamespace is a namespace of the test's own where trainerUser has
// edit, with no Kueue queue (a queued job of 300 nodes would be admitted
// and started) and no quota: what a plain Trainer user has. It returns the
// namespace and a client acting as that user.
func editableNamespace(t *testing.T, c *framework.Cluster, prefix string) (string, client.Client) {
	t.Helper()
	ns := c.NewNamespace(t, prefix)
	if err := c.Client.Create(context.Background(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: trainerUser + "-edit", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: trainerUser}},
	}); err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(c.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: trainerUser, Groups: []string{"system:authenticated"}}
	cl, err := client.New(cfg, client.Options{Scheme: framework.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return ns, cl
}

// managerEvents are the Events mpijob-manager recorded about job name in
// namespace ns.
func managerEvents(t *testing.T, c *framework.Cluster, ns, name string) []string {
	t.Helper()
	evs := &corev1.EventList{}
	if err := c.Client.List(context.Background(), evs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs.Items {
		if e.InvolvedObject.Name == name && (e.ReportingController == api.FieldManager || e.Source.Component == api.FieldManager) {
			out = append(out, e.Reason)
		}
	}
	return out
}

// A PyTorch job deleted and created again at once is admitted, as
// upstream admits it: mpijob's check of an earlier job's pods holds only
// for MPI jobs, whose Launcher would reach the old Workers by name.
func TestTorchJobDeletedAndRecreatedAtOnce(t *testing.T) {
	c := framework.Get(t)
	ctx := context.Background()
	ns, user := editableNamespace(t, c, "recreate")
	rt := upstreamRuntime(t, "torch")
	ensureClusterRuntime(t, c, rt)
	job := func() *trainer.TrainJob {
		return &trainer.TrainJob{
			ObjectMeta: metav1.ObjectMeta{Name: "torch-again", Namespace: ns},
			Spec: trainer.TrainJobSpec{
				RuntimeRef: trainer.RuntimeRef{Name: rt.Name, APIGroup: ptr.To(trainer.GroupVersion.Group), Kind: ptr.To(trainer.ClusterTrainingRuntimeKind)},
				Trainer: &trainer.Trainer{NumNodes: ptr.To[int32](1), Command: []string{"sleep", "300"},
					ResourcesPerNode: &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi"), corev1.ResourceCPU: resource.MustParse("100m")}}},
			},
		}
	}
	first := job()
	if err := jobspec.CreateTrainJob(ctx, user, first); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Client.Delete(context.Background(), job()) })
	var pods corev1.PodList
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		err := c.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: first.Name})
		return err == nil && len(pods.Items) > 0 && pods.Items[0].Status.Phase == corev1.PodRunning, nil
	}); err != nil {
		t.Fatalf("the torch job's pod did not run within 2 minutes")
	}
	if err := user.Delete(ctx, first, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	// Created again while the first job's pod is still there (it takes
	// its grace period to stop), retried only while the first TrainJob
	// itself is not yet gone.
	var err error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if err = user.Create(ctx, job()); !apierrors.IsAlreadyExists(err) {
			break
		}
	}
	if err != nil {
		t.Fatalf("a torch job deleted and created again at once: %v, want admitted", err)
	}
	// What makes this the case the issue is about: a pod of the first job
	// was still there (being stopped, or not reached by the garbage
	// collector yet); mpijob refused such creates for every framework.
	left := &corev1.PodList{}
	if err := c.Client.List(ctx, left, client.InNamespace(ns), client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: first.Name}); err != nil {
		t.Fatal(err)
	}
	earlier := map[types.UID]bool{}
	for _, p := range pods.Items {
		earlier[p.UID] = true
	}
	still := 0
	for _, p := range left.Items {
		if earlier[p.UID] {
			still++
		}
	}
	if still == 0 {
		t.Errorf("no pod of the first job was left when the job was created again: the test did not reach its case")
	}
}

// Upstream's own MPI runtime keeps upstream's behaviour where its jobs can
// run: no cluster Worker cap and no quota pre-flight (those are mpijob's
// runtimes' conventions), but a refusal, with the reason, where the job
// could never run as its user meant. mpijob-manager adds the runtime to
// its webhooks' match condition when it appears.
func TestUpstreamMPIRuntimeKeepsUpstreamBehaviour(t *testing.T) {
	c := framework.Get(t)
	ctx := context.Background()
	ns, user := editableNamespace(t, c, "upstream-mpi")
	rt := trainerRuntime(t, "manifests/base/runtimes/deepspeed_distributed.yaml")
	ensureClusterRuntime(t, c, rt)
	job := func(name string, nodes int32) *trainer.TrainJob {
		return &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: trainer.TrainJobSpec{
				RuntimeRef: trainer.RuntimeRef{Name: rt.Name, APIGroup: ptr.To(trainer.GroupVersion.Group), Kind: ptr.To(trainer.ClusterTrainingRuntimeKind)},
				Trainer:    &trainer.Trainer{NumNodes: ptr.To(nodes)},
				Suspend:    ptr.To(true),
			}}
	}
	// Its jobs reach mpijob's webhooks once the manager has put the new
	// runtime into the match condition.
	long := strings.Repeat("d", 45)
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		err := user.Create(ctx, job(long, 1), client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), "metadata.name: Too long: use at most 44 characters"), nil
	}); err != nil {
		t.Fatalf("a job of %s with a 45-character name is not refused with the reason within 30 s: mpijob's webhooks never saw it", rt.Name)
	}
	wide := job(framework.UniqueName("ds-wide"), 300)
	if err := user.Create(ctx, wide); err != nil {
		t.Fatalf("a job of 300 nodes on %s: %v, want admitted as upstream admits it (the cap is for mpijob's runtimes)", rt.Name, err)
	}
	t.Cleanup(func() { _ = c.Client.Delete(context.Background(), wide) })
	got := &trainer.TrainJob{}
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(wide), got); err != nil || got.Annotations[api.CreatorAnnotation] != trainerUser {
		t.Errorf("the MPI job's creator %q (%v), want %s", got.Annotations[api.CreatorAnnotation], err, trainerUser)
	}
	img := job(framework.UniqueName("ds-img"), 1)
	img.Spec.Trainer.Image = ptr.To("registry.example.com/team/train:1")
	if err := user.Create(ctx, img, client.DryRunAll); err == nil || !strings.Contains(err.Error(), "gives spec.trainer.image to the Launcher only") {
		t.Errorf("an image the Workers would not get: %v, want refused with the reason", err)
	}
}
