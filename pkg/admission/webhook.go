package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/runtimes"
)

// Webhook paths the manager serves.
const (
	MutatePath   = "/mutate-trainer-kubeflow-org-v1alpha1-trainjob"
	ValidatePath = "/validate-trainer-kubeflow-org-v1alpha1-trainjob"
)

// RuntimeLookup finds the runtime a TrainJob references.
type RuntimeLookup struct {
	Client client.Reader
}

// Get returns the runtime's spec and annotations; found is false when it
// does not exist.
func (l RuntimeLookup) Get(ctx context.Context, tj *trainer.TrainJob) (spec *trainer.TrainingRuntimeSpec, annotations map[string]string, found bool, err error) {
	kind := trainer.ClusterTrainingRuntimeKind
	if tj.Spec.RuntimeRef.Kind != nil {
		kind = *tj.Spec.RuntimeRef.Kind
	}
	switch kind {
	case trainer.TrainingRuntimeKind:
		rt := &trainer.TrainingRuntime{}
		err = l.Client.Get(ctx, client.ObjectKey{Namespace: tj.Namespace, Name: tj.Spec.RuntimeRef.Name}, rt)
		spec, annotations = &rt.Spec, rt.Annotations
	default:
		rt := &trainer.ClusterTrainingRuntime{}
		err = l.Client.Get(ctx, client.ObjectKey{Name: tj.Spec.RuntimeRef.Name}, rt)
		spec, annotations = &rt.Spec, rt.Annotations
	}
	if apierrors.IsNotFound(err) {
		return nil, nil, false, nil
	}
	return spec, annotations, err == nil, err
}

// MPIRuntimeNames lists the ClusterTrainingRuntimes with an MPI policy.
func (l RuntimeLookup) MPIRuntimeNames(ctx context.Context) []string {
	list := &trainer.ClusterTrainingRuntimeList{}
	if err := l.Client.List(ctx, list); err != nil {
		return nil
	}
	var out []string
	for i := range list.Items {
		if runtimes.IsMPI(&list.Items[i].Spec) {
			out = append(out, list.Items[i].Name)
		}
	}
	sort.Strings(out)
	return out
}

// Mutator stamps the creator of a TrainJob. On create the annotation is
// the requesting user, whatever the request said; on update it keeps the
// stored value, so nobody can forge or change it.
//
// It also refuses a TrainJob whose MPI runtime does not exist, with a
// suggestion: mutating webhooks run before validating ones, so this answer
// comes before Trainer's own "not found".
type Mutator struct {
	Decoder  admission.Decoder
	Runtimes RuntimeLookup
}

// Handle implements admission.Handler.
func (m *Mutator) Handle(ctx context.Context, req admission.Request) admission.Response {
	tj := &trainer.TrainJob{}
	if err := m.Decoder.Decode(req, tj); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if req.Operation == admissionv1.Create && m.Runtimes.Client != nil {
		if resp, denied := unknownRuntime(ctx, m.Runtimes, tj); denied {
			return resp
		}
	}
	want := req.UserInfo.Username
	if req.Operation == admissionv1.Update {
		old := &trainer.TrainJob{}
		if err := m.Decoder.DecodeRaw(req.OldObject, old); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		v, ok := old.Annotations[api.CreatorAnnotation]
		if !ok {
			return admission.Allowed("no creator recorded")
		}
		want = v
	}
	if tj.Annotations[api.CreatorAnnotation] == want {
		return admission.Allowed("")
	}
	if tj.Annotations == nil {
		tj.Annotations = map[string]string{}
	}
	tj.Annotations[api.CreatorAnnotation] = want
	raw, err := json.Marshal(tj)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, raw)
}

// Validator admits MPI TrainJobs: validation, runtime policy, quota
// pre-flight and warnings. Other TrainJobs pass untouched.
type Validator struct {
	Decoder  admission.Decoder
	Runtimes RuntimeLookup
	// Client reads ResourceQuotas.
	Client client.Reader
}

// Handle implements admission.Handler.
func (v *Validator) Handle(ctx context.Context, req admission.Request) admission.Response {
	tj := &trainer.TrainJob{}
	if err := v.Decoder.Decode(req, tj); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if tj.Namespace == "" {
		tj.Namespace = req.Namespace
	}
	if req.Operation == admissionv1.Update {
		old := &trainer.TrainJob{}
		if err := v.Decoder.DecodeRaw(req.OldObject, old); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		if prev, ok := old.Annotations[api.CreatorAnnotation]; ok && tj.Annotations[api.CreatorAnnotation] != prev {
			return deny(tj, field.ErrorList{field.Forbidden(field.NewPath("metadata", "annotations").Key(api.CreatorAnnotation),
				fmt.Sprintf("the creator of a job cannot change (it is %q)", prev))})
		}
		return admission.Allowed("")
	}
	spec, annotations, found, err := v.Runtimes.Get(ctx, tj)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("failed to read runtime %s: %w", tj.Spec.RuntimeRef.Name, err))
	}
	if found && !runtimes.IsMPI(spec) {
		return admission.Allowed("not an MPI job")
	}
	job := Job{TrainJob: tj, RuntimeFound: found}
	if !found {
		if resp, denied := denyUnknownRuntime(ctx, v.Runtimes, tj); denied {
			return resp
		}
		// Not ours to judge: Trainer answers for non-MPI runtimes.
		return admission.Allowed("")
	}
	policy, perrs := ParsePolicy(annotations)
	if len(perrs) > 0 {
		return admission.Denied(fmt.Sprintf("runtime %s has an invalid policy, ask its administrator to fix it: %s", tj.Spec.RuntimeRef.Name, perrs.ToAggregate().Error()))
	}
	shape, err := runtimes.ShapeOf(tj, spec)
	if err != nil {
		return admission.Denied(err.Error())
	}
	job.Workers, job.WorkerPod, job.LauncherPod = shape.Workers, &shape.WorkerPod, &shape.LauncherPod
	if errs := ValidateTrainJob(job, policy); len(errs) > 0 {
		return deny(tj, errs)
	}
	quotas := &corev1.ResourceQuotaList{}
	if err := v.Client.List(ctx, quotas, client.InNamespace(tj.Namespace)); err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("failed to read ResourceQuotas of %s: %w", tj.Namespace, err))
	}
	if violations := CheckQuota(DemandOf(shape), quotas.Items); len(violations) > 0 {
		msgs := make([]string, 0, len(violations))
		for _, q := range violations {
			msgs = append(msgs, q.Message())
		}
		return admission.Denied(fmt.Sprintf("MPI job %s does not fit the quota of namespace %s: %s", tj.Name, tj.Namespace, strings.Join(msgs, "; ")))
	}
	return admission.Allowed("").WithWarnings(Warnings(job)...)
}

// DemandOf turns a Shape into what it asks of quota.
func DemandOf(s runtimes.Shape) Demand {
	d := Demand{Launchers: int64(s.Launchers), Workers: int64(s.Workers)}
	d.WorkerRequests, d.WorkerLimits = PodDemand(&s.WorkerPod)
	d.LauncherRequests, d.LauncherLimits = PodDemand(&s.LauncherPod)
	return d
}

// looksMPI guesses whether an unknown runtime name was meant to be an MPI
// runtime, so typos get a suggestion without judging other frameworks.
func looksMPI(name string, known []string) bool {
	return strings.HasPrefix(name, "mpi") || suggestClose(name, known)
}

func deny(tj *trainer.TrainJob, errs field.ErrorList) admission.Response {
	err := apierrors.NewInvalid(schema.GroupKind{Group: trainer.GroupVersion.Group, Kind: trainer.TrainJobKind}, tj.Name, errs)
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{
		Allowed: false,
		Result:  &err.ErrStatus,
	}}
}

// unknownRuntime denies a TrainJob whose runtime does not exist when the
// name looks like an MPI runtime, suggesting the closest one.
func unknownRuntime(ctx context.Context, l RuntimeLookup, tj *trainer.TrainJob) (admission.Response, bool) {
	_, _, found, err := l.Get(ctx, tj)
	if err != nil || found {
		return admission.Response{}, false
	}
	return denyUnknownRuntime(ctx, l, tj)
}

// denyUnknownRuntime denies a TrainJob whose runtime is known not to exist
// when its name looks like an MPI runtime.
func denyUnknownRuntime(ctx context.Context, l RuntimeLookup, tj *trainer.TrainJob) (admission.Response, bool) {
	known := l.MPIRuntimeNames(ctx)
	if !looksMPI(tj.Spec.RuntimeRef.Name, known) {
		return admission.Response{}, false
	}
	return deny(tj, ValidateTrainJob(Job{TrainJob: tj, KnownRuntimes: known}, Policy{})), true
}
