package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/spf13/cobra"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/artifacts"
	"github.com/mpijob/mpijob/pkg/progress"
	"github.com/mpijob/mpijob/pkg/registry"
	"github.com/mpijob/mpijob/pkg/suggest"
)

// RegistryEnv names the model registry when --registry is not given:
// NAMESPACE/SERVICE of its Service.
const RegistryEnv = "MPIJOB_MODEL_REGISTRY"

// DefaultRegistry is the registry's Service when neither --registry nor
// MPIJOB_MODEL_REGISTRY names one: the local cluster's.
const DefaultRegistry = "model-registry/model-registry"

// registerOptions are `kubectl mpijob register`'s.
type registerOptions struct {
	*Options
	job, ref    string
	artifact    string
	registrySvc string
	registryURL string
	registryCA  string
	newModel    bool
	// transport is the registry's (tests set it; nil: from the flags).
	transport registry.Transport
}

func newRegisterCommand(o *Options) *cobra.Command {
	r := &registerOptions{Options: o}
	cmd := &cobra.Command{
		Use:   "register JOB NAME[:VERSION]",
		Short: "Register a succeeded MPI job's model in the model registry (OpenShift AI's Model Registry)",
		Long: "Register the model a succeeded MPI job wrote to $MPIJOB_OUTPUT_URI as version VERSION (default: the job's name) " +
			"of model NAME in a Kubeflow Model Registry: the model file's URI (s3://BUCKET/KEY?endpoint=...&defaultRegion=..., " +
			"or pvc://CLAIM/PATH), its format, the job's accuracy and loss, and where it came from (namespace, job, runtime, " +
			"Workers, image, who created the job) as properties. The registry is reached as you, with your kubeconfig's token: at the address " +
			"its Service names (--registry NAMESPACE/SERVICE, default $" + RegistryEnv + " or " + DefaultRegistry + "), or at --registry-url. Registering the same job's model under the same version again changes nothing.",
		Example: "  kubectl mpijob register digits digits-classifier:v1\n" +
			"  kubectl mpijob register digits digits-classifier --artifact model.npz\n" +
			"  kubectl mpijob register digits digits-classifier:v2 --registry-url https://my-registry-rest.apps.example.com --registry-ca ca.crt",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 2 {
				return usageErr("register takes the job and the model: kubectl mpijob register JOB NAME[:VERSION], e.g. kubectl mpijob register digits digits-classifier:v1")
			}
			return nil
		},
		ValidArgsFunction: o.completeJobs,
		RunE: func(cmd *cobra.Command, args []string) error {
			r.job, r.ref = args[0], args[1]
			return r.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&r.artifact, "artifact", "", "the artifact to register (default: the job's one model.* file)")
	cmd.Flags().StringVar(&r.registrySvc, "registry", "", "the registry's Service, NAMESPACE/SERVICE (default $"+RegistryEnv+", else "+DefaultRegistry+")")
	cmd.Flags().StringVar(&r.registryURL, "registry-url", "", "the registry's REST address, instead of the one its Service names (OpenShift AI: its REST route)")
	cmd.Flags().StringVar(&r.registryCA, "registry-ca", "", "the PEM file of the CA that signed the registry's certificate (default: the system's)")
	cmd.Flags().BoolVar(&r.newModel, "new-model", false, "create model NAME even though a registered model has a name close to it")
	return cmd
}

// Transport is the registry's, from the flags (and the environment): at
// --registry-url, else at the address its Service names; reached with
// your kubeconfig's token.
func (r *registerOptions) Transport(ctx context.Context, cl *clients) (registry.Transport, error) {
	if r.transport != nil {
		return r.transport, nil
	}
	address := r.registryURL
	if address == "" {
		svc, field := r.registrySvc, "--registry"
		if svc == "" {
			svc, field = os.Getenv(RegistryEnv), RegistryEnv
		}
		if svc == "" {
			svc, field = DefaultRegistry, "--registry"
		}
		ns, name, ok := strings.Cut(svc, "/")
		if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return nil, usageErr("%s %q: name the registry's Service as NAMESPACE/SERVICE, e.g. %s", field, svc, DefaultRegistry)
		}
		s := &corev1.Service{}
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
			switch {
			case apierrors.IsNotFound(err):
				return nil, usageErr("%s %s: there is no model registry Service %s in namespace %s: name the registry with --registry NAMESPACE/SERVICE (OpenShift AI: rhoai-model-registries/NAME) or --registry-url URL", field, svc, name, ns)
			case apierrors.IsForbidden(err):
				return nil, &registry.AccessError{Where: "Service " + svc, Err: err}
			}
			return nil, err
		}
		if address = registry.AddressOf(s.Annotations); address == "" {
			return nil, usageErr("Service %s does not say where its registry's REST API is (annotation %s or %s): give --registry-url URL", svc, registry.URLAnnotation, registry.ODHRESTAnnotation)
		}
	}
	token := ""
	if cl.cfg != nil {
		token = cl.cfg.BearerToken
		if token == "" && cl.cfg.BearerTokenFile != "" {
			b, err := os.ReadFile(cl.cfg.BearerTokenFile)
			if err != nil {
				return nil, err
			}
			token = strings.TrimSpace(string(b))
		}
	}
	if token == "" {
		return nil, usageErr("your kubeconfig has no token to give the model registry (it takes a bearer token, as OpenShift AI's does): log in with one (oc login), or use a context that has one")
	}
	return registry.NewDirect(address, token, r.registryCA)
}

// Run registers the job's model.
func (r *registerOptions) Run(ctx context.Context) error {
	ref, err := registry.ParseRef("NAME[:VERSION]", r.ref, r.job)
	if err != nil {
		return usageErr("%v", err)
	}
	cl, err := r.clients()
	if err != nil {
		return err
	}
	t, err := r.Transport(ctx, cl)
	if err != nil {
		var fe *registry.FieldError
		if errors.As(err, &fe) {
			return usageErr("%v", err)
		}
		return err
	}
	tj, err := cl.job(ctx, r.job)
	if err != nil {
		return err
	}
	// Trainer's Complete condition says it first; mpijob's phase follows.
	if s, _ := statusOf(tj); s.Phase != api.PhaseSucceeded && !meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobComplete) {
		return usageErr("MPI job %s is %s: a model is registered from a job that succeeded (kubectl mpijob wait %s --for=Succeeded, then register it)", r.job, s.Phase, r.job)
	}
	m, err := r.model(ctx, cl, tj, ref)
	if err != nil {
		return err
	}
	c := registry.Client{T: t}
	if !r.newModel {
		existing, err := c.FindModel(ctx, ref.Name)
		if err != nil {
			return r.explain(err, ref)
		}
		if existing == nil {
			names, err := c.ModelNames(ctx)
			if err != nil {
				return r.explain(err, ref)
			}
			if near := suggest.Closest(ref.Name, names); near != "" {
				return usageErr("model %s is not in the registry, but %s is: did you mean kubectl mpijob register %s %s:%s? To create model %s, add --new-model",
					ref.Name, near, r.job, near, ref.Version, ref.Name)
			}
		}
	}
	res, err := c.Register(ctx, m)
	if err != nil {
		return r.explain(err, ref)
	}
	if res.Unchanged {
		fmt.Fprintf(r.Out, "model %s version %s is already registered from job %s: nothing changed (%s)\n", ref.Name, ref.Version, r.job, m.URI)
		return nil
	}
	what := "version"
	if res.NewModel {
		what = "new model, version"
	}
	fmt.Fprintf(r.Out, "registered %s %s of %s from job %s: %s (%s%s)\n", what, ref.Version, ref.Name, r.job, m.URI, formatName(m), metricsText(m.Metrics))
	return nil
}

// explain adds what to do to a registry's error.
func (r *registerOptions) explain(err error, ref registry.Ref) error {
	var un *registry.UnreachableError
	var acc *registry.AccessError
	var taken *registry.TakenError
	again := fmt.Sprintf("kubectl mpijob register %s %s", r.job, ref)
	switch {
	case errors.As(err, &un):
		return fmt.Errorf("%w. The job and its artifacts are unchanged; register it once the registry answers: %s", err, again)
	case errors.As(err, &acc):
		return fmt.Errorf("%w. Ask the registry's administrator for access to it (OpenShift AI: Settings, Model registry settings, Manage permissions)", err)
	case errors.As(err, &taken):
		return usageErr("%v, e.g. %s %s:%s-2", err, r.job, ref.Name, ref.Version)
	}
	return err
}

// model is what is registered from tj: its model file, metrics and
// provenance.
func (r *registerOptions) model(ctx context.Context, cl *clients, tj *trainer.TrainJob, ref registry.Ref) (registry.Model, error) {
	src, err := artifacts.Open(ctx, cl, cl.cfg, tj)
	if artifacts.IsNoStorage(err) {
		return registry.Model{}, usageErr("%s", err.Error())
	}
	if err != nil {
		return registry.Model{}, err
	}
	defer func() { _ = src.Close() }()
	objs, err := src.List(ctx)
	if err != nil {
		return registry.Model{}, err
	}
	var names []string
	for _, o := range objs {
		names = append(names, o.Name)
	}
	file, err := registry.PickModel(tj.Name, names, r.artifact)
	if err != nil {
		return registry.Model{}, usageErr("%v", err)
	}
	m := registry.Model{Ref: ref, Artifact: file, Metrics: map[string]float64{}}
	switch s := src.(type) {
	case *artifacts.Store:
		m.URI = registry.S3URI(s.Object(file))
	default:
		m.URI = src.Location().URI + file
	}
	m.Format, m.FormatVersion, _ = registry.FormatOf(file)
	if p, ok := progress.Of(tj); ok {
		for _, k := range []string{"accuracy", "loss"} {
			if v, ok := p.TrainMetrics[k]; ok {
				m.Metrics[k] = v
			}
		}
	}
	m.Provenance = map[string]string{
		"namespace": tj.Namespace, "job": tj.Name, "uid": string(tj.UID),
		"runtime": api.RuntimeOf(tj.Labels, tj.Spec.RuntimeRef.Name),
		"creator": tj.Annotations[api.CreatorAnnotation],
	}
	if tj.Spec.Trainer != nil && tj.Spec.Trainer.NumNodes != nil {
		m.Provenance["workers"] = strconv.Itoa(int(*tj.Spec.Trainer.NumNodes))
	}
	if img := jobImage(ctx, cl, tj); img != "" {
		m.Provenance["image"] = img
	}
	for k, v := range m.Provenance {
		if v == "" {
			delete(m.Provenance, k)
		}
	}
	m.Author = whoAmI(ctx, cl)
	m.Description = fmt.Sprintf("Trained by MPI job %s/%s (runtime %s)", tj.Namespace, tj.Name, m.Provenance["runtime"])
	return m, nil
}

// jobImage is the image the job's Workers ran ("" when unknown).
func jobImage(ctx context.Context, cl *clients, tj *trainer.TrainJob) string {
	if tj.Spec.Trainer != nil && tj.Spec.Trainer.Image != nil {
		return *tj.Spec.Trainer.Image
	}
	var spec *trainer.TrainingRuntimeSpec
	if ptr.Deref(tj.Spec.RuntimeRef.Kind, "") == trainer.TrainingRuntimeKind {
		rt := &trainer.TrainingRuntime{}
		if cl.Get(ctx, client.ObjectKey{Namespace: tj.Namespace, Name: tj.Spec.RuntimeRef.Name}, rt) == nil {
			spec = &rt.Spec
		}
	} else {
		rt := &trainer.ClusterTrainingRuntime{}
		if cl.Get(ctx, client.ObjectKey{Name: tj.Spec.RuntimeRef.Name}, rt) == nil {
			spec = &rt.Spec
		}
	}
	if spec == nil {
		return ""
	}
	if img := workerImage(spec); img != "-" {
		return img
	}
	return ""
}

// whoAmI is the user's name, as the API server knows it ("" when it will
// not say).
func whoAmI(ctx context.Context, cl *clients) string {
	r, err := cl.cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return ""
	}
	return r.Status.UserInfo.Username
}

func formatName(m registry.Model) string {
	if m.Format == "" {
		return "format unknown"
	}
	return "format " + m.Format
}

func metricsText(ms map[string]float64) string {
	var parts []string
	for _, k := range []string{"accuracy", "loss"} {
		if v, ok := ms[k]; ok {
			parts = append(parts, fmt.Sprintf(", %s %s", k, registry.FormatFloat(v)))
		}
	}
	return strings.Join(parts, "")
}
