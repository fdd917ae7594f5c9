package registry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/artifacts"
	"github.com/mpijob/mpijob/pkg/progress"
	"github.com/mpijob/mpijob/pkg/runtimes"
	"github.com/mpijob/mpijob/pkg/suggest"
)

// Env names the registry's Service (NAMESPACE/SERVICE) when none is given.
const Env = "MPIJOB_MODEL_REGISTRY"

// DefaultService is the registry's Service when neither a flag nor Env
// names one: the local cluster's.
const DefaultService = "model-registry/model-registry"

// Succeeded says why tj's model cannot be registered yet (nil: it can):
// a model is registered from a job that succeeded. Trainer's Complete
// condition says so first; mpijob's phase follows.
func Succeeded(tj *trainer.TrainJob, wait string) error {
	s, _ := api.StatusOf(tj)
	if s.Phase == api.PhaseSucceeded || meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobComplete) {
		return nil
	}
	return &NotSucceededError{Job: tj.Name, Phase: string(s.Phase), Wait: wait}
}

// NotSucceededError is a job whose model cannot be registered yet.
type NotSucceededError struct{ Job, Phase, Wait string }

func (e *NotSucceededError) Error() string {
	return fmt.Sprintf("MPI job %s is %s: a model is registered from a job that succeeded (%s, then register it)", e.Job, e.Phase, e.Wait)
}

// Resolve is the registry's transport: at rawURL, else at the address the
// Service svc (NAMESPACE/SERVICE; "" for Env, else DefaultService) names,
// read with c as the caller. token is the caller's; ca a PEM file or "".
// field names where svc came from, for errors.
func Resolve(ctx context.Context, c client.Reader, field, svc, rawURL, ca, token string) (Transport, error) {
	address := rawURL
	if address == "" {
		if svc == "" {
			svc, field = os.Getenv(Env), Env
		}
		if svc == "" {
			svc = DefaultService
		}
		ns, name, err := SplitService(field, svc)
		if err != nil {
			return nil, err
		}
		s := &corev1.Service{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
			switch {
			case apierrors.IsNotFound(err):
				return nil, &FieldError{Field: field, Value: svc, Fix: fmt.Sprintf("there is no model registry Service %s in namespace %s: name the registry's Service (OpenShift AI: rhoai-model-registries/NAME) or its URL", name, ns)}
			case apierrors.IsForbidden(err):
				return nil, &AccessError{Where: "Service " + svc, Err: err}
			}
			return nil, err
		}
		if address = AddressOf(s.Annotations); address == "" {
			return nil, &FieldError{Field: field, Value: svc, Fix: fmt.Sprintf("the Service does not say where its registry's REST API is (annotation %s or %s): give the registry's URL", URLAnnotation, ODHRESTAnnotation)}
		}
	}
	if token == "" {
		return nil, &FieldError{Field: "token", Value: "", Fix: "the model registry takes a bearer token, as OpenShift AI's does, and your credentials have none: log in with one (oc login), or use a context that has one"}
	}
	return NewDirect(address, token, ca)
}

// SplitService reads a registry's Service as NAMESPACE/SERVICE; field
// names where it came from, for the error.
func SplitService(field, svc string) (ns, name string, err error) {
	ns, name, ok := strings.Cut(svc, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return "", "", &FieldError{Field: field, Value: svc, Fix: "name the registry's Service as NAMESPACE/SERVICE, e.g. " + DefaultService}
	}
	return ns, name, nil
}

// TokenOf is the bearer token of a REST config ("" when it has none).
func TokenOf(cfg *rest.Config) (string, error) {
	if cfg == nil {
		return "", nil
	}
	if cfg.BearerToken != "" || cfg.BearerTokenFile == "" {
		return cfg.BearerToken, nil
	}
	b, err := os.ReadFile(cfg.BearerTokenFile)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// FromJob is what registering tj's model as ref writes: the model file
// among its artifacts (artifact, or its one model.*), the file's URI, its
// format, the job's metrics and provenance. Everything is read as the
// caller (c, cfg and cs are theirs); opts reach the artifacts' store.
func FromJob(ctx context.Context, c client.Client, cfg *rest.Config, cs kubernetes.Interface, tj *trainer.TrainJob, ref Ref, artifact string, opts ...artifacts.Option) (Model, error) {
	src, err := artifacts.Open(ctx, c, cfg, tj, opts...)
	if err != nil {
		return Model{}, err
	}
	defer func() { _ = src.Close() }()
	objs, err := src.List(ctx)
	if err != nil {
		return Model{}, err
	}
	var names []string
	for _, o := range objs {
		names = append(names, o.Name)
	}
	file, err := PickModel(tj.Name, names, artifact)
	if err != nil {
		return Model{}, err
	}
	m := Model{Ref: ref, Artifact: file, Metrics: map[string]float64{}}
	if s, ok := src.(*artifacts.Store); ok {
		m.URI = S3URI(s.Object(file))
	} else {
		m.URI = src.Location().URI + file
	}
	m.Format, m.FormatVersion, _ = FormatOf(file)
	if p, ok := progress.Of(tj); ok {
		for _, k := range rules.Metrics {
			if v, ok := p.TrainMetrics[k]; ok {
				m.Metrics[k] = v
			}
		}
	}
	m.Provenance = map[string]string{
		"namespace": tj.Namespace, "job": tj.Name, "uid": string(tj.UID),
		"runtime": api.RuntimeOf(tj.Labels, tj.Spec.RuntimeRef.Name),
		"creator": tj.Annotations[api.CreatorAnnotation],
		"image":   jobImage(ctx, c, tj),
	}
	if tj.Spec.Trainer != nil && tj.Spec.Trainer.NumNodes != nil {
		m.Provenance["workers"] = strconv.Itoa(int(*tj.Spec.Trainer.NumNodes))
	}
	for k, v := range m.Provenance {
		if v == "" {
			delete(m.Provenance, k)
		}
	}
	if cs != nil {
		if r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{}); err == nil {
			m.Author = r.Status.UserInfo.Username
		}
	}
	m.Description = fmt.Sprintf("Trained by MPI job %s/%s (runtime %s)", tj.Namespace, tj.Name, m.Provenance["runtime"])
	return m, nil
}

// jobImage is the image the job's Workers ran ("" when unknown).
func jobImage(ctx context.Context, c client.Reader, tj *trainer.TrainJob) string {
	if tj.Spec.Trainer != nil && tj.Spec.Trainer.Image != nil {
		return *tj.Spec.Trainer.Image
	}
	var spec *trainer.TrainingRuntimeSpec
	if ptr.Deref(tj.Spec.RuntimeRef.Kind, "") == trainer.TrainingRuntimeKind {
		rt := &trainer.TrainingRuntime{}
		if c.Get(ctx, client.ObjectKey{Namespace: tj.Namespace, Name: tj.Spec.RuntimeRef.Name}, rt) == nil {
			spec = &rt.Spec
		}
	} else {
		rt := &trainer.ClusterTrainingRuntime{}
		if c.Get(ctx, client.ObjectKey{Name: tj.Spec.RuntimeRef.Name}, rt) == nil {
			spec = &rt.Spec
		}
	}
	if spec == nil {
		return ""
	}
	return runtimes.WorkerImage(spec)
}

// TypoError is a model name that is not in the registry while a close one
// is: likely a typo. Creating the model anyway takes an explicit choice.
type TypoError struct{ Name, Near string }

func (e *TypoError) Error() string {
	return fmt.Sprintf("model %s is not in the registry, but %s is", e.Name, e.Near)
}

// CheckName refuses a new model whose name is close to a registered one.
func (c Client) CheckName(ctx context.Context, name string) error {
	existing, err := c.FindModel(ctx, name)
	if err != nil || existing != nil {
		return err
	}
	names, err := c.ModelNames(ctx)
	if err != nil {
		return err
	}
	if near := suggest.Closest(name, names); near != "" {
		return &TypoError{Name: name, Near: near}
	}
	return nil
}

// IsUserError reports errors that are the caller's input (exit 2, 400).
func IsUserError(err error) bool {
	var fe *FieldError
	var typo *TypoError
	var taken *TakenError
	var ns *NotSucceededError
	return errors.As(err, &fe) || errors.As(err, &typo) || errors.As(err, &taken) || errors.As(err, &ns) || artifacts.IsNoStorage(err)
}
