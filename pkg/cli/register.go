package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/registry"
)

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
			"its Service names (--registry NAMESPACE/SERVICE, default $" + registry.Env + " or " + registry.DefaultService + "), or at --registry-url. Registering the same job's model under the same version again changes nothing.",
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
	cmd.Flags().StringVar(&r.registrySvc, "registry", "", "the registry's Service, NAMESPACE/SERVICE (default $"+registry.Env+", else "+registry.DefaultService+")")
	cmd.Flags().StringVar(&r.registryURL, "registry-url", "", "the registry's REST address, instead of the one its Service names (OpenShift AI: its REST route)")
	cmd.Flags().StringVar(&r.registryCA, "registry-ca", "", "the PEM file of the CA that signed the registry's certificate (default: the system's)")
	cmd.Flags().BoolVar(&r.newModel, "new-model", false, "create model NAME even though a registered model has a name close to it")
	return cmd
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
	t := r.transport
	if t == nil {
		token, err := registry.TokenOf(cl.cfg)
		if err != nil {
			return err
		}
		if t, err = registry.Resolve(ctx, cl, "--registry", r.registrySvc, r.registryURL, r.registryCA, token); err != nil {
			return r.explain(err, ref)
		}
	}
	tj, err := cl.job(ctx, r.job)
	if err != nil {
		return err
	}
	if err := registry.Succeeded(tj, "kubectl mpijob wait "+r.job+" --for=Succeeded"); err != nil {
		return usageErr("%v", err)
	}
	m, err := registry.FromJob(ctx, cl, cl.cfg, cl.cs, tj, ref, r.artifact)
	if err != nil {
		return r.explain(err, ref)
	}
	c := registry.Client{T: t}
	if !r.newModel {
		if err := c.CheckName(ctx, ref.Name); err != nil {
			return r.explain(err, ref)
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
	var typo *registry.TypoError
	again := api.RegisterCommand(r.job, ref.Name, ref.Version, "")
	switch {
	case errors.As(err, &typo):
		return usageErr("%v: did you mean kubectl mpijob register %s %s:%s? To create model %s, add --new-model", err, r.job, typo.Near, ref.Version, ref.Name)
	case errors.As(err, &un):
		return fmt.Errorf("%w. The job and its artifacts are unchanged; register it once the registry answers: %s", err, again)
	case errors.As(err, &acc):
		return fmt.Errorf("%w. Ask the registry's administrator for access to it (OpenShift AI: Settings, Model registry settings, Manage permissions)", err)
	case errors.As(err, &taken):
		return usageErr("%v, e.g. %s %s:%s-2", err, r.job, ref.Name, ref.Version)
	case registry.IsUserError(err):
		return usageErr("%v", err)
	}
	return err
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
