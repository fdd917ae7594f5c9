// Command burst creates many MPI TrainJobs at once through the running
// local cluster's API server and mpijob's admission webhook, as dev-a from
// concurrent clients (a bounded loop on loopback), and accounts for every
// one: admitted, or denied with its reason; then it lists what the cluster
// holds, so a job lost (admitted, not there) or duplicated (there, never
// admitted) shows. One in ten jobs is invalid on purpose (0 slots per
// worker) and must be denied with the field. With -kill, the leading
// mpijob-manager pod is killed (grace 0) a quarter into the burst: the
// other replica keeps serving, creates that meet the dead pod must be
// refused, never let through unvalidated, and the Deployment replaces it. It prints admission latency (p50/p99) and an outcomes table.
//
//	go run ./bench/burst [-n 500] [-clients 20] [-kill]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"os"
	"sort"
	"strings"
	"sync"

	"text/tabwriter"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/kubectl/pkg/util/podutils"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/bench/internal/local"
	"github.com/mpijob/mpijob/pkg/localcluster"
)

func main() {
	n := flag.Int("n", 500, "TrainJob creates")
	clients := flag.Int("clients", 20, "concurrent clients")
	kill := flag.Bool("kill", false, "kill the leading mpijob-manager pod a quarter into the burst")
	flag.Parse()
	if err := run(*n, *clients, *kill); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// result is one create's outcome.
type result struct {
	name    string
	invalid bool
	latency time.Duration
	outcome string
}

func run(n, clients int, kill bool) error {
	opts, err := local.Cluster(context.Background())
	if err != nil {
		return err
	}
	admin, err := newClient(opts, "admin")
	if err != nil {
		return err
	}
	devA, err := newClient(opts, "dev-a")
	if err != nil {
		return err
	}
	ctx := context.Background()
	ns := "burst-" + utilrand.String(5)
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return err
	}
	defer func() {
		_ = admin.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}()
	if err := admin.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "dev-a-edit", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "dev-a"}},
	}); err != nil {
		return err
	}
	// RBAC reaches the authorizer's cache in a moment.
	time.Sleep(2 * time.Second)

	results := make([]result, n)
	next := make(chan int)
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				results[i] = create(ctx, devA, ns, i)
			}
		}()
	}
	var killedAt, backAt time.Duration
	var killErr error
	start := time.Now()
	killDone := make(chan struct{})
	for i := range n {
		if kill && i == n/4 {
			go func() {
				defer close(killDone)
				killedAt = time.Since(start)
				killErr = killManager(ctx, opts, admin)
				backAt = time.Since(start)
			}()
		}
		next <- i
	}
	close(next)
	wg.Wait()
	total := time.Since(start)
	if kill {
		<-killDone
		if killErr != nil {
			return fmt.Errorf("killing mpijob-manager: %w", killErr)
		}
	}

	// What the cluster holds, against what was admitted.
	list := &trainer.TrainJobList{}
	if err := admin.List(ctx, list, client.InNamespace(ns)); err != nil {
		return err
	}
	there := map[string]int{}
	for _, tj := range list.Items {
		there[tj.Name]++
	}
	outcomes := map[string]int{}
	var admitted, denied []time.Duration
	lost, unexpected, invalidAdmitted := 0, 0, 0
	for _, r := range results {
		outcomes[r.outcome]++
		if r.outcome == "admitted" {
			admitted = append(admitted, r.latency)
			if there[r.name] != 1 {
				lost++
			}
			if r.invalid {
				invalidAdmitted++
			}
		} else {
			denied = append(denied, r.latency)
			if there[r.name] != 0 {
				unexpected++
			}
		}
	}

	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "%d TrainJob creates from %d clients as dev-a (1 in 10 invalid on purpose), %s in all (%.0f/s)", n, clients, total.Round(time.Millisecond), float64(n)/total.Seconds())
	if kill {
		fmt.Fprintf(w, "; leading mpijob-manager pod killed at %s, 2 replicas Ready again at %s", killedAt.Round(time.Millisecond), backAt.Round(time.Millisecond))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "\nadmission latency\tcount\tp50\tp99\tmax\t")
	lat := func(name string, d []time.Duration) {
		if len(d) == 0 {
			fmt.Fprintf(w, "%s\t0\t-\t-\t-\t\n", name)
			return
		}
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\t\n", name, len(d), pct(d, 50), pct(d, 99), d[len(d)-1].Round(100*time.Microsecond))
	}
	lat("admitted", admitted)
	lat("denied", denied)
	fmt.Fprintln(w, "\noutcome\tcount\t")
	keys := make([]string, 0, len(outcomes))
	for k := range outcomes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "%s\t%d\t\n", k, outcomes[k])
	}
	fmt.Fprintln(w, "\ncheck\tcount\t")
	fmt.Fprintf(w, "TrainJobs in the namespace\t%d\t\n", len(list.Items))
	fmt.Fprintf(w, "admitted but not there (lost)\t%d\t\n", lost)
	fmt.Fprintf(w, "there but not admitted (duplicated or let through)\t%d\t\n", unexpected)
	fmt.Fprintf(w, "invalid jobs admitted\t%d\t\n", invalidAdmitted)
	if err := w.Flush(); err != nil {
		return err
	}
	if lost+unexpected+invalidAdmitted > 0 {
		return errors.New("the burst lost, duplicated or let through jobs")
	}
	return nil
}

func create(ctx context.Context, cl client.Client, ns string, i int) result {
	r := result{name: fmt.Sprintf("job-%04d", i), invalid: i%10 == 9}
	slots := int32(1)
	if r.invalid {
		slots = 0
	}
	tj := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: r.name, Namespace: ns},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{Name: "mpi-openmpi"},
			// Suspended: the burst measures admission, not 500 running jobs.
			Suspend: ptr.To(true),
			Trainer: &trainer.Trainer{NumNodes: ptr.To[int32](2), NumProcPerNode: ptr.To(slots)},
		},
	}
	start := time.Now()
	err := cl.Create(ctx, tj)
	r.latency = time.Since(start)
	r.outcome = classify(err)
	return r
}

// classify names an outcome: admitted, or denied with the kind of reason.
func classify(err error) string {
	var st apierrors.APIStatus
	switch {
	case err == nil:
		return "admitted"
	case strings.Contains(err.Error(), "failed calling webhook"):
		return "denied: webhook unavailable (" + webhookName(err.Error()) + ")"
	case errors.As(err, &st):
		s := st.Status()
		what := string(s.Reason)
		if d := s.Details; d != nil && len(d.Causes) > 0 {
			what += " " + d.Causes[0].Field
		} else if s.Message != "" {
			what += ": " + s.Message[:min(len(s.Message), 90)]
		}
		return "denied: " + what
	}
	return "error: " + err.Error()
}

func webhookName(msg string) string {
	_, rest, ok := strings.Cut(msg, "failed calling webhook \"")
	if !ok {
		return "?"
	}
	name, _, _ := strings.Cut(rest, "\"")
	return name
}

// killManager kills the leading mpijob-manager pod at once (grace 0) and
// waits until the Deployment runs two Ready replicas again; the other
// replica serves the webhooks meanwhile.
func killManager(ctx context.Context, opts localcluster.Options, admin client.Client) error {
	cfg, err := local.Config(opts, "", 0, 0)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	leader, err := localcluster.ManagerLeader(ctx, cs)
	if err != nil {
		return err
	}
	if leader == "" {
		return errors.New("no mpijob-manager pod leads")
	}
	if err := localcluster.DeleteManagerPod(ctx, admin, leader, localcluster.GraceNow); err != nil {
		return err
	}
	// The Deployment's status still counts the killed pod for a moment:
	// wait for its replacement first.
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := localcluster.ManagerPods(ctx, admin)
		if err != nil {
			return false, err
		}
		// Both pods Ready, neither the killed one: the Deployment's own
		// status still counts the killed pod Ready for a moment.
		replaced := len(pods) == 2
		for _, p := range pods {
			replaced = replaced && p.Name != leader && podutils.IsPodReady(&p)
		}
		return replaced, nil
	})
	if err != nil {
		return fmt.Errorf("the killed pod %s is not replaced: %w", leader, err)
	}
	return localcluster.WaitRollout(ctx, admin, localcluster.ManagerNamespace, localcluster.ManagerDeployment, 3*time.Minute)
}

func newClient(opts localcluster.Options, user string) (client.Client, error) {
	cfg, err := local.Config(opts, user, 1000, 1000)
	if err != nil {
		return nil, err
	}
	cfg.Timeout = 60 * time.Second
	return newClientFor(cfg)
}

func newClientFor(cfg *rest.Config) (client.Client, error) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = trainer.AddToScheme(scheme)
	return client.New(cfg, client.Options{Scheme: scheme})
}

func pct(sorted []time.Duration, p int) time.Duration {
	return local.Percentile(sorted, p).Round(100 * time.Microsecond)
}
