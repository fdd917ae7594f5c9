//go:build e2e

package framework

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/jobspec"
	"github.com/mpijob/mpijob/pkg/jobstatus"
	"github.com/mpijob/mpijob/pkg/localcluster"
)

// Scheme knows the core, Trainer and JobSet types, and mpijob's JobStatus.
var Scheme = runtime.NewScheme()

func init() {
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, trainer.AddToScheme, jobsetv1alpha2.AddToScheme, api.AddJobStatusToScheme} {
		if err := add(Scheme); err != nil {
			panic(err)
		}
	}
}

// Cluster is the cluster under test.
type Cluster struct {
	// Kubeconfig is the file the clients come from.
	Kubeconfig string
	// Config is the admin REST config.
	Config *rest.Config
	// Client is an admin controller-runtime client.
	Client client.Client
	// Clientset is an admin client-go clientset (logs, discovery).
	Clientset kubernetes.Interface
}

var (
	once    sync.Once
	shared  *Cluster
	initErr error
)

// KubeconfigPath is MPIJOB_KUBECONFIG, or the local cluster's kubeconfig.
func KubeconfigPath() (string, error) {
	if p := os.Getenv("MPIJOB_KUBECONFIG"); p != "" {
		return p, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	opts, err := localcluster.DefaultOptions(wd)
	if err != nil {
		return "", err
	}
	return opts.KubeconfigPath(), nil
}

// Get returns the shared cluster, failing the test with what to do when
// there is none.
func Get(t testing.TB) *Cluster {
	t.Helper()
	once.Do(func() {
		path, err := KubeconfigPath()
		if err != nil {
			initErr = err
			return
		}
		if _, err := os.Stat(path); err != nil {
			initErr = fmt.Errorf("no cluster to test against (%s is missing): run `make test-e2e`, `make dev`, or set MPIJOB_KUBECONFIG", path)
			return
		}
		cfg, err := restConfig(path, "")
		if err != nil {
			initErr = err
			return
		}
		c, err := client.New(cfg, client.Options{Scheme: Scheme})
		if err != nil {
			initErr = err
			return
		}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			initErr = err
			return
		}
		shared = &Cluster{Kubeconfig: path, Config: cfg, Client: c, Clientset: cs}
	})
	if initErr != nil {
		t.Fatalf("local cluster: %v", initErr)
	}
	return shared
}

func restConfig(path, contextName string) (*rest.Config, error) {
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: path}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: contextName}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("failed to load kubeconfig %s (context %q): %w", path, contextName, err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	return cfg, nil
}

// Kubectl runs the real kubectl as user (a kubeconfig context) in
// namespace ns with stdin, and returns its combined output: kubectl on
// PATH, or the one built for the local cluster.
func (c *Cluster) Kubectl(t testing.TB, user, ns, stdin string, args ...string) (string, error) {
	t.Helper()
	bin, err := exec.LookPath("kubectl")
	if err != nil {
		wd, _ := os.Getwd()
		opts, oerr := localcluster.DefaultOptions(wd)
		if oerr != nil {
			t.Fatalf("no kubectl on PATH and no local cluster: %v", oerr)
		}
		bin = opts.Kubectl()
	}
	full := append([]string{"--kubeconfig", c.Kubeconfig, "--context", user, "-n", ns}, args...)
	cmd := exec.Command(bin, full...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	t.Logf("kubectl %s → %v\n%s", strings.Join(args, " "), err, out)
	return string(out), err
}

// As returns a client that acts as user, through the kubeconfig context of
// that name. The test is skipped, with the reason, when the kubeconfig has
// no such context (a cluster other than the local one).
func (c *Cluster) As(t testing.TB, user string) client.Client {
	t.Helper()
	raw, err := clientcmd.LoadFromFile(c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := raw.Contexts[user]; !ok {
		t.Skipf("kubeconfig %s has no context %q: the multi-user tests need the local cluster's users", c.Kubeconfig, user)
	}
	cfg, err := restConfig(c.Kubeconfig, user)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(cfg, client.Options{Scheme: Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// NewNamespace creates a namespace for one test and deletes it afterwards.
func (c *Cluster) NewNamespace(t testing.TB, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: prefix + "-",
		Labels:       map[string]string{"mpijob.dev/test": sanitize(t.Name())},
	}}
	if err := c.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("failed to create test namespace: %v", err)
	}
	t.Cleanup(func() {
		if os.Getenv("MPIJOB_KEEP_NAMESPACES") != "" {
			t.Logf("keeping namespace %s (MPIJOB_KEEP_NAMESPACES is set)", ns.Name)
			return
		}
		_ = c.Client.Delete(context.Background(), ns)
	})
	return ns.Name
}

func sanitize(s string) string {
	s = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '-'
	}, s)
	if len(s) > 63 {
		s = s[:63]
	}
	return strings.Trim(s, "-_.")
}

// WaitForTrainJob polls until the TrainJob has a true condition of one of
// the given types and returns it; it fails the test on timeout, with the
// job's conditions and pods in the message.
func (c *Cluster) WaitForTrainJob(t testing.TB, ns, name string, timeout time.Duration, condTypes ...string) string {
	t.Helper()
	var got string
	tj := &trainer.TrainJob{}
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, tj); err != nil {
			return false, nil //nolint:nilerr // keep polling through transient errors
		}
		for _, cond := range tj.Status.Conditions {
			for _, want := range condTypes {
				if cond.Type == want && cond.Status == metav1.ConditionTrue {
					got = want
					return true, nil
				}
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("TrainJob %s/%s reached none of %v within %s; conditions: %+v\npods:\n%s", ns, name, condTypes, timeout, tj.Status.Conditions, c.describePods(ns))
	}
	return got
}

func (c *Cluster) describePods(ns string) string {
	pods := &corev1.PodList{}
	if err := c.Client.List(context.Background(), pods, client.InNamespace(ns)); err != nil {
		return err.Error()
	}
	var b strings.Builder
	b.WriteString(c.nodePressure())
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "  %s node=%s phase=%s", p.Name, p.Spec.NodeName, p.Status.Phase)
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Waiting != nil {
				fmt.Fprintf(&b, " waiting=%s(%s)", cs.State.Waiting.Reason, cs.State.Waiting.Message)
			}
			if cs.State.Terminated != nil {
				fmt.Fprintf(&b, " terminated=%s exit=%d", cs.State.Terminated.Reason, cs.State.Terminated.ExitCode)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// nodePressure names the nodes under disk, memory or PID pressure, one
// line each: a node short of disk deletes images and stops starting pods,
// which fails a test far from its cause (a CI run on a machine with 4 GiB
// free failed 15 tests with pods in ContainerCreating).
func (c *Cluster) nodePressure() string {
	nodes := &corev1.NodeList{}
	if err := c.Client.List(context.Background(), nodes); err != nil {
		return "  (nodes: " + err.Error() + ")\n"
	}
	var b strings.Builder
	for _, n := range nodes.Items {
		for _, cond := range n.Status.Conditions {
			switch cond.Type {
			case corev1.NodeDiskPressure, corev1.NodeMemoryPressure, corev1.NodePIDPressure:
				if cond.Status == corev1.ConditionTrue {
					fmt.Fprintf(&b, "  NODE %s has %s since %s: %s\n", n.Name, cond.Type, cond.LastTransitionTime.UTC().Format(time.RFC3339), cond.Message)
				}
			}
		}
	}
	return b.String()
}

// EnsureImages builds the named MPI images (localcluster.Images) that the
// local cluster does not build at start, and imports them into its nodes,
// once: the first test that needs a flavour pays for its build. Against
// another cluster (MPIJOB_KUBECONFIG) the images must already be there.
func (c *Cluster) EnsureImages(t testing.TB, names ...string) {
	t.Helper()
	if os.Getenv("MPIJOB_KUBECONFIG") != "" {
		return
	}
	imgs, err := localcluster.SelectImages(names, false)
	if err != nil {
		t.Fatal(err)
	}
	opts, err := localcluster.DefaultOptions(Dir(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := localcluster.EnsureImages(context.Background(), opts, testWriter{t}, imgs, "needed by "+t.Name()); err != nil {
		t.Fatalf("failed to build or import images %v: %v", names, err)
	}
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// JobPods lists the pods of a TrainJob's replicated job ("launcher" or "node").
func (c *Cluster) JobPods(t testing.TB, ns, trainJob, replicatedJob string) []corev1.Pod {
	t.Helper()
	pods := &corev1.PodList{}
	if err := c.Client.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabels{
		jobsetv1alpha2.JobSetNameKey:        trainJob,
		jobsetv1alpha2.ReplicatedJobNameKey: replicatedJob,
	}); err != nil {
		t.Fatalf("failed to list pods of %s/%s: %v", ns, trainJob, err)
	}
	return pods.Items
}

// PodLog returns the whole log of a pod's first container.
func (c *Cluster) PodLog(t testing.TB, ns, pod string) string {
	t.Helper()
	b, err := c.Clientset.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{}).DoRaw(context.Background())
	if err != nil {
		t.Fatalf("failed to read log of pod %s/%s: %v", ns, pod, err)
	}
	return string(b)
}

// Dir returns the repository root, for tests that read config/.
func Dir(t testing.TB) string {
	t.Helper()
	wd, _ := os.Getwd()
	root, err := localcluster.FindRepoRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Clean(root)
}

// WaitForStatus polls until mpijob-manager's Status of the TrainJob
// satisfies ok, and returns it; it fails the test with the last Status.
func (c *Cluster) WaitForStatus(t testing.TB, ns, name string, timeout time.Duration, ok func(api.Status) bool) api.Status {
	t.Helper()
	var last api.Status
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		tj := &trainer.TrainJob{}
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, tj); err != nil {
			return false, nil //nolint:nilerr // keep polling through transient errors
		}
		if err := jobstatus.Get(ctx, c.Client, tj); err != nil {
			return false, nil //nolint:nilerr // keep polling through transient errors
		}
		s, found, err := api.ReadStatus(tj.Annotations)
		if err != nil || !found {
			return false, nil //nolint:nilerr // not written yet
		}
		last = s
		return ok(s), nil
	})
	if err != nil {
		t.Fatalf("mpijob status of %s/%s did not reach the expected state within %s; last: %+v\npods:\n%s", ns, name, timeout, last, c.describePods(ns))
	}
	return last
}

// WaitForManagerEvents waits until an Event about the job with each of
// reasons is listed, and returns the namespace's Events about the job. The
// manager's Events reach the API server a moment after the status that
// vouches for them; a test that counts them waits for this instead of a
// guess at the delay. (Not for every Event the status vouches for: the
// events.k8s.io recorder folds a repeat of a reason, with another note,
// into the first one's series, which it writes minutes later.)
func (c *Cluster) WaitForManagerEvents(t testing.TB, ns, name string, reasons []string, timeout time.Duration) []corev1.Event {
	t.Helper()
	var about []corev1.Event
	var missing []string
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		evs := &corev1.EventList{}
		if err := c.Client.List(ctx, evs, client.InNamespace(ns)); err != nil {
			return false, nil //nolint:nilerr // keep polling through transient errors
		}
		about = about[:0]
		listed := map[string]bool{}
		for _, e := range evs.Items {
			if e.InvolvedObject.Kind == "TrainJob" && e.InvolvedObject.Name == name {
				about = append(about, e)
				listed[e.Reason] = true
			}
		}
		missing = missing[:0]
		for _, r := range reasons {
			if !listed[r] {
				missing = append(missing, r)
			}
		}
		return len(missing) == 0, nil
	})
	if err != nil {
		var listed []string
		for _, e := range about {
			listed = append(listed, fmt.Sprintf("%s %q", e.Reason, e.Message))
		}
		t.Fatalf("no Event about %s/%s with reason %v within %s; listed: %s", ns, name, missing, timeout, strings.Join(listed, "; "))
	}
	return about
}

// WaitForPods waits until the replicated job has n pods placed on nodes and
// returns them.
func (c *Cluster) WaitForPods(t testing.TB, ns, trainJob, replicatedJob string, n int, timeout time.Duration) []corev1.Pod {
	t.Helper()
	var placed []corev1.Pod
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		placed = placed[:0]
		for _, p := range c.JobPods(t, ns, trainJob, replicatedJob) {
			if p.Spec.NodeName != "" {
				placed = append(placed, p)
			}
		}
		return len(placed) >= n, nil
	})
	if err != nil {
		t.Fatalf("%s/%s: %d of %d %s pods placed after %s\npods:\n%s", ns, trainJob, len(placed), n, replicatedJob, timeout, c.describePods(ns))
	}
	return placed
}

// UniqueName returns prefix plus a random suffix, for objects in shared
// namespaces (team-a): reusing a TrainJob name while the last job's pods
// still terminate lets the new Launcher reach the old Workers.
func UniqueName(prefix string) string { return prefix + "-" + utilrand.String(5) }

// CopyRuntime creates a copy of the ClusterTrainingRuntime base (its
// labels and spec, no annotations), changed by mutate, under a unique name
// starting with prefix, and deletes it after the test.
func (c *Cluster) CopyRuntime(t testing.TB, base, prefix string, mutate func(*trainer.ClusterTrainingRuntime)) *trainer.ClusterTrainingRuntime {
	t.Helper()
	ctx := context.Background()
	src := &trainer.ClusterTrainingRuntime{}
	if err := c.Client.Get(ctx, client.ObjectKey{Name: base}, src); err != nil {
		t.Fatalf("runtime %s: %v", base, err)
	}
	rt := &trainer.ClusterTrainingRuntime{Spec: *src.Spec.DeepCopy()}
	rt.Name, rt.Labels = UniqueName(prefix), src.Labels
	if mutate != nil {
		mutate(rt)
	}
	if err := c.Client.Create(ctx, rt); err != nil {
		t.Fatalf("create runtime %s: %v", rt.Name, err)
	}
	t.Cleanup(func() { _ = c.Client.Delete(context.Background(), rt) })
	return rt
}

// Submit creates a test job as cl would through kubectl mpijob create: its
// per-job runtime (if any) first, then the TrainJob, which then owns the
// runtime. A dry run or a refused job removes the runtime again.
func Submit(ctx context.Context, cl client.Client, tj *trainer.TrainJob, rt *trainer.TrainingRuntime, opts ...client.CreateOption) error {
	if rt == nil {
		return cl.Create(ctx, tj, opts...)
	}
	rt = rt.DeepCopy()
	rt.Name, rt.Namespace = tj.Name, tj.Namespace
	rt.Labels[api.JobLabel] = tj.Name
	tj.Spec.RuntimeRef.Name = tj.Name
	if err := cl.Create(ctx, rt); err != nil {
		return err
	}
	err := jobspec.CreateTrainJob(ctx, cl, tj, opts...)
	dry := false
	for _, o := range opts {
		if o == client.DryRunAll {
			dry = true
		}
	}
	if err != nil || dry {
		_ = cl.Delete(ctx, rt)
		return err
	}
	patch := client.MergeFrom(rt.DeepCopy())
	rt.OwnerReferences = jobspec.Owned(rt, tj)
	return cl.Patch(ctx, rt, patch)
}

// SubmitW is Submit for a wrapper.
func SubmitW(ctx context.Context, cl client.Client, w *TrainJobWrapper, opts ...client.CreateOption) error {
	return Submit(ctx, cl, w.Obj(), w.Runtime(), opts...)
}

// WaitForWarningEvent waits for a Warning Event of reason in namespace ns
// and fails the test when none comes within timeout.
func (c *Cluster) WaitForWarningEvent(t testing.TB, ns, reason string, timeout time.Duration) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		evs := &corev1.EventList{}
		if err := c.Client.List(ctx, evs, client.InNamespace(ns)); err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Reason == reason && e.Type == corev1.EventTypeWarning {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Errorf("no Warning Event %s in %s within %s: %v", reason, ns, timeout, err)
	}
}

// PrometheusURL is MPIJOB_PROMETHEUS_URL, or the local cluster's
// Prometheus; empty when MPIJOB_KUBECONFIG names another cluster and no
// Prometheus is given.
func PrometheusURL() string {
	if u := os.Getenv("MPIJOB_PROMETHEUS_URL"); u != "" {
		return u
	}
	if os.Getenv("MPIJOB_KUBECONFIG") != "" {
		return ""
	}
	return localcluster.PrometheusURL
}

// ForgetImage removes an MPI image from the local cluster's nodes (not
// from the cache): the next pod that needs it waits for the image builder.
func (c *Cluster) ForgetImage(t testing.TB, ref string) {
	t.Helper()
	if os.Getenv("MPIJOB_KUBECONFIG") != "" {
		t.Skip("removes an image from the local cluster's nodes; MPIJOB_KUBECONFIG points elsewhere")
	}
	opts, err := localcluster.DefaultOptions(Dir(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := localcluster.ForgetImage(context.Background(), opts, ref); err != nil {
		t.Fatal(err)
	}
}
