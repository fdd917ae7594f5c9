package cli

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/jobpods"
	"github.com/mpijob/mpijob/pkg/jobstatus"
	"github.com/mpijob/mpijob/pkg/jobview"
	"github.com/mpijob/mpijob/pkg/logstore"
	"github.com/mpijob/mpijob/pkg/placement"
	"github.com/mpijob/mpijob/pkg/runtimes"
	"github.com/mpijob/mpijob/pkg/suggest"
)

// scheme is mpijob's, with the CRDs doctor reads.
var scheme = func() *runtime.Scheme {
	s := api.NewScheme()
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	return s
}()

// clients are the API clients of one command run.
type clients struct {
	client.WithWatch
	cs        kubernetes.Interface
	namespace string
	// cfg is the user's REST config, for exec (nil in unit tests).
	cfg *rest.Config
	// store reads the log store's API as the user (nil: none).
	store logstore.Reader
	// warnings holds what admission said of where a job would be placed
	// (nil in unit tests).
	warnings *warningSplitter
}

// warningSplitter keeps the admission warnings that say whether the
// cluster can place a job now (placement.Prefix), for create to print as
// its answer, and passes every other warning on.
type warningSplitter struct {
	next      rest.WarningHandler
	mu        sync.Mutex
	placement []string
}

// HandleWarningHeader implements rest.WarningHandler.
func (w *warningSplitter) HandleWarningHeader(code int, agent, text string) {
	if line, ok := placement.FromWarning(code, text); ok {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.placement = append(w.placement, line)
		return
	}
	w.next.HandleWarningHeader(code, agent, text)
}

// Placement returns, and forgets, the placement lines heard so far.
func (w *warningSplitter) Placement() []string {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.placement
	w.placement = nil
	return out
}

func (o *Options) clients() (*clients, error) {
	if o.ClientsFunc != nil {
		return o.ClientsFunc()
	}
	cfg, err := o.Config.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	// Admission warnings (slots per worker ≠ GPUs, missing memory limits)
	// reach the user as kubectl shows them.
	// What a server dry run says of placement is kept for create to print.
	warnings := &warningSplitter{next: rest.NewWarningWriter(o.ErrOut, rest.WarningWriterOptions{Deduplicate: true})}
	cfg.WarningHandler = warnings
	cl, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ns, _, err := o.Config.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, err
	}
	return &clients{WithWatch: cl, cs: cs, namespace: ns, cfg: cfg, store: logstore.NewReader(cs), warnings: warnings}, nil
}

// job gets an MPI job by name; a missing name gets "did you mean".
func (c *clients) job(ctx context.Context, name string) (*trainer.TrainJob, error) {
	tj := &trainer.TrainJob{}
	err := c.Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: name}, tj)
	if apierrors.IsNotFound(err) {
		msg := fmt.Sprintf("MPI job %q not found in namespace %s", name, c.namespace)
		l := &trainer.TrainJobList{}
		if c.List(ctx, l, client.InNamespace(c.namespace)) == nil {
			var names []string
			for _, j := range l.Items {
				names = append(names, j.Name)
			}
			if s := suggest.Closest(name, names); s != "" {
				msg += fmt.Sprintf(": did you mean %q?", s)
			}
		}
		return nil, &exitError{code: ExitNotFound, msg: msg}
	}
	if err != nil {
		return nil, err
	}
	if fw := c.frameworkOf(ctx, tj); fw != jobview.FrameworkMPI && fw != jobview.FrameworkUnknown {
		return nil, notMPI(tj, fw)
	}
	if err := jobstatus.Get(ctx, c, tj); err != nil {
		return nil, err
	}
	return tj, nil
}

// notMPI says that a TrainJob is another framework's, and where to read it.
func notMPI(tj *trainer.TrainJob, fw string) error {
	return &exitError{code: ExitNotFound, msg: fmt.Sprintf("TrainJob %q in namespace %s is a %s job (runtime %s), not an MPI job: kubectl mpijob shows and changes MPI jobs only; "+
		"read it with `kubectl get trainjob %s -n %s`, or list every framework's jobs with `kubectl mpijob get --all-frameworks`",
		tj.Name, tj.Namespace, fw, tj.Spec.RuntimeRef.Name, tj.Name, tj.Namespace)}
}

// frameworkOf is one job's framework (jobview.FrameworkOf), reading only
// its runtime; unknown when that cannot be read.
func (c *clients) frameworkOf(ctx context.Context, tj *trainer.TrainJob) string {
	ref := jobview.RefOf(tj)
	rts := jobview.Frameworks{}
	if _, mine := tj.Labels[api.BaseRuntimeLabel]; mine {
		return jobview.FrameworkMPI
	}
	if ref.RuntimeKind == trainer.TrainingRuntimeKind {
		rt := &trainer.TrainingRuntime{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: tj.Namespace, Name: ref.RuntimeName}, rt); err == nil {
			rts.Namespaced = map[string]map[string]string{tj.Namespace: {rt.Name: jobview.RuntimeFramework(&rt.Spec, rt.Labels)}}
		}
	} else {
		rt := &trainer.ClusterTrainingRuntime{}
		if err := c.Get(ctx, client.ObjectKey{Name: ref.RuntimeName}, rt); err == nil {
			rts.Cluster = map[string]string{rt.Name: jobview.RuntimeFramework(&rt.Spec, rt.Labels)}
		}
	}
	return jobview.FrameworkOf(ref, rts)
}

// frameworks reads the framework of every ClusterTrainingRuntime, and of
// the TrainingRuntimes of namespace ns (every namespace when ""): the
// runtimes jobview.FrameworkOf tells MPI jobs by. What cannot be read is
// left out (a job on it is of an unknown framework).
func (c *clients) frameworks(ctx context.Context, ns string) jobview.Frameworks {
	out := jobview.Frameworks{Cluster: map[string]string{}, Namespaced: map[string]map[string]string{}}
	cl := &trainer.ClusterTrainingRuntimeList{}
	if err := c.List(ctx, cl); err == nil {
		for i := range cl.Items {
			out.Cluster[cl.Items[i].Name] = jobview.RuntimeFramework(&cl.Items[i].Spec, cl.Items[i].Labels)
		}
	}
	var opts []client.ListOption
	if ns != "" {
		opts = append(opts, client.InNamespace(ns))
	}
	nl := &trainer.TrainingRuntimeList{}
	if err := c.List(ctx, nl, opts...); err == nil {
		for i := range nl.Items {
			rt := &nl.Items[i]
			if out.Namespaced[rt.Namespace] == nil {
				out.Namespaced[rt.Namespace] = map[string]string{}
			}
			out.Namespaced[rt.Namespace][rt.Name] = jobview.RuntimeFramework(&rt.Spec, rt.Labels)
		}
	}
	return out
}

// runtimeSpec finds the runtime a job names (or would name).
func (c *clients) runtimeSpec(ctx context.Context, ns, name, kind string) (*trainer.TrainingRuntimeSpec, map[string]string, error) {
	if kind == trainer.TrainingRuntimeKind {
		rt := &trainer.TrainingRuntime{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, rt); err != nil {
			return nil, nil, c.unknownRuntime(ctx, name, err)
		}
		return &rt.Spec, rt.Annotations, nil
	}
	rt := &trainer.ClusterTrainingRuntime{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, rt); err != nil {
		return nil, nil, c.unknownRuntime(ctx, name, err)
	}
	return &rt.Spec, rt.Annotations, nil
}

func (c *clients) unknownRuntime(ctx context.Context, name string, err error) error {
	if !apierrors.IsNotFound(err) {
		return err
	}
	msg := fmt.Sprintf("runtime %q does not exist", name)
	if bases, err := runtimes.ListBases(ctx, c, c.namespace); err == nil {
		var names []string
		for _, r := range bases {
			names = append(names, r.Name)
		}
		if s := suggest.Closest(name, names); s != "" {
			msg += fmt.Sprintf(": did you mean %q?", s)
		} else if len(names) > 0 {
			msg += ": MPI runtimes are " + strings.Join(names, ", ")
		}
	}
	return &exitError{code: ExitNotFound, msg: msg + " (`kubectl mpijob runtimes list`)"}
}

// pods returns the Launcher and Worker pods of a job, Workers by index.
func (c *clients) pods(ctx context.Context, tj *trainer.TrainJob) (launcher, workers []corev1.Pod, err error) {
	p, err := jobpods.ListLive(ctx, c, tj)
	return p.Launchers, p.Workers, err
}

// statusOf is the job's Status: mpijob-manager's when it wrote one, else a
// coarse one from Trainer's conditions (ok false).
func statusOf(tj *trainer.TrainJob) (api.Status, bool) {
	return api.StatusOf(tj)
}

// complete lists the names list returns that start with toComplete, for
// shell completion; any error means no suggestions.
func (o *Options) complete(cmd *cobra.Command, toComplete string, list func(context.Context, *clients) ([]string, error)) ([]string, cobra.ShellCompDirective) {
	c, err := o.clients()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Second)
	defer cancel()
	names, err := list(ctx, c)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, toComplete) {
			out = append(out, n)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

func (o *Options) completeJobs(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	return o.complete(cmd, toComplete, func(ctx context.Context, c *clients) ([]string, error) {
		l := &trainer.TrainJobList{}
		err := c.List(ctx, l, client.InNamespace(c.namespace))
		var names []string
		for _, j := range l.Items {
			names = append(names, j.Name)
		}
		return names, err
	})
}

func (o *Options) completeRuntimes(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	return o.complete(cmd, toComplete, func(ctx context.Context, c *clients) ([]string, error) {
		l := &trainer.ClusterTrainingRuntimeList{}
		err := c.List(ctx, l)
		var names []string
		for _, r := range l.Items {
			if runtimes.IsMPI(&r.Spec) {
				names = append(names, r.Name)
			}
		}
		return names, err
	})
}

func (o *Options) completeNamespaces(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	return o.complete(cmd, toComplete, func(ctx context.Context, c *clients) ([]string, error) {
		l := &corev1.NamespaceList{}
		err := c.List(ctx, l)
		var names []string
		for _, n := range l.Items {
			names = append(names, n.Name)
		}
		return names, err
	})
}

func (o *Options) completeContexts(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	raw, err := o.Config.ToRawKubeConfigLoader().RawConfig()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []string
	for name := range raw.Contexts {
		if strings.HasPrefix(name, toComplete) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out, cobra.ShellCompDirectiveNoFileComp
}

// managerState reads mpijob-manager's Lease as the user (every signed-in
// user may). When it cannot be read, nothing is claimed: Running.
func (c *clients) managerState(ctx context.Context) api.ManagerState {
	if c.cs == nil {
		return api.ManagerState{Running: true}
	}
	lease, err := c.cs.CoordinationV1().Leases(api.ManagerLeaseNamespace).Get(ctx, api.ManagerLeaseName, metav1.GetOptions{})
	if err != nil {
		return api.ManagerState{Running: true}
	}
	return api.ManagerStateOf(lease, time.Now())
}
