//go:build e2e

package integration

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/localcluster"
	"github.com/mpijob/mpijob/test/framework"
)

// 500 TrainJob creates from 20 concurrent clients as dev-a through the API
// server and mpijob's webhooks: every create is admitted or denied with a
// reason, and the namespace then holds exactly the admitted jobs (none
// lost, none duplicated, no invalid one let through). bench/burst measures
// the same burst's latency.
func TestCreateBurstAccountsForEveryCreate(t *testing.T) {
	c := framework.Get(t)
	ns := burstNamespace(t, c)
	outcomes := createBurst(t, c, ns, 500, 20, nil)
	defer drain(t, c, ns)
	if outcomes["admitted"] != 450 || outcomes["denied: Invalid spec.trainer.numProcPerNode"] != 50 {
		t.Errorf("outcomes %v, want 450 admitted and the 50 invalid ones denied with their field", outcomes)
	}
}

// The same burst with the leading mpijob-manager pod killed (grace 0) a
// quarter in: the other replica keeps serving the webhooks, creates that
// met the killed pod are refused (failurePolicy Fail), never admitted
// unvalidated, and still none is lost or duplicated; the Deployment
// replaces the pod and a replica leads again.
func TestManagerDownDuringCreateBurst(t *testing.T) {
	c := framework.Get(t)
	if os.Getenv("MPIJOB_KUBECONFIG") != "" {
		t.Skip("kills a mpijob-manager pod of the local cluster; MPIJOB_KUBECONFIG points elsewhere")
	}
	ctx := context.Background()
	ns := burstNamespace(t, c)
	killed, err := localcluster.ManagerLeader(ctx, c.Clientset)
	if err != nil || killed == "" {
		t.Fatalf("no mpijob-manager pod leads (%v)", err)
	}
	outcomes := createBurst(t, c, ns, 500, 20, func() {
		if err := localcluster.DeleteManagerPod(ctx, c.Client, killed, localcluster.GraceNow); err != nil {
			t.Errorf("kill manager pod %s: %v", killed, err)
		}
	})
	defer drain(t, c, ns)
	unavailable := 0
	for k, n := range outcomes {
		if strings.HasPrefix(k, "denied: webhook unavailable") {
			unavailable += n
		}
	}
	t.Logf("with pod %s killed during the burst: %d creates met no webhook and were refused; outcomes %v", killed, unavailable, outcomes)
	// One manager alone refuses everything from the kill until it is back
	// (100 of 450 admitted when it ran as one process); the second replica
	// keeps most of the burst admitted.
	if outcomes["admitted"] < 225 {
		t.Errorf("only %d of 450 valid creates admitted (%d refused for an unavailable webhook): the other replica did not keep serving", outcomes["admitted"], unavailable)
	}
	waitManagerReady(t, c)
	if leader, _ := localcluster.ManagerLeader(ctx, c.Clientset); leader == killed {
		t.Errorf("the killed pod %s still holds the Lease", killed)
	}
}

// drain deletes the burst's jobs and waits until they are gone, so the
// hundreds of them do not load the manager while the next tests run.
func drain(t *testing.T, c *framework.Cluster, ns string) {
	t.Helper()
	ctx := context.Background()
	// One delete of hundreds of jobs can outlast the API server's request
	// on a loaded machine (a stream reset): asked again until none is
	// left, as deleting what is being deleted changes nothing.
	var last error
	deleted := false
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 4*time.Minute, true, func(ctx context.Context) (bool, error) {
		l := &metav1.PartialObjectMetadataList{}
		l.SetGroupVersionKind(trainer.GroupVersion.WithKind("TrainJobList"))
		if err := c.Client.List(ctx, l, client.InNamespace(ns)); err != nil {
			last = err
			return false, nil //nolint:nilerr // keep polling
		}
		if len(l.Items) == 0 {
			return true, nil
		}
		if !deleted {
			err := c.Client.DeleteAllOf(ctx, &trainer.TrainJob{}, client.InNamespace(ns))
			deleted, last = err == nil, err
		}
		return false, nil
	})
	if err != nil {
		t.Errorf("the burst's jobs in %s are not gone after 4m (last error: %v)", ns, last)
	}
}

func burstNamespace(t *testing.T, c *framework.Cluster) string {
	t.Helper()
	ns := c.NewNamespace(t, "burst")
	if err := c.Client.Create(context.Background(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "dev-a-edit", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "dev-a"}},
	}); err != nil {
		t.Fatal(err)
	}
	return ns
}

// createBurst creates n suspended MPI TrainJobs (1 in 10 with 0 slots per
// worker, invalid on purpose) as dev-a from clients goroutines, calls
// during (if set) a quarter in, checks that the namespace holds exactly the
// admitted ones, and returns the count of each outcome.
func createBurst(t *testing.T, c *framework.Cluster, ns string, n, clients int, during func()) map[string]int {
	t.Helper()
	ctx := context.Background()
	devA := c.As(t, "dev-a")
	// RBAC reaches the authorizer in a moment.
	if err := waitAllowed(ctx, devA, ns); err != nil {
		t.Fatal(err)
	}
	outcome := make([]string, n)
	next := make(chan int)
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				slots := int32(1)
				if i%10 == 9 {
					slots = 0
				}
				err := devA.Create(ctx, &trainer.TrainJob{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("job-%04d", i), Namespace: ns},
					Spec: trainer.TrainJobSpec{
						RuntimeRef: trainer.RuntimeRef{Name: "mpi-openmpi"},
						Suspend:    ptr.To(true),
						Trainer:    &trainer.Trainer{NumNodes: ptr.To[int32](2), NumProcPerNode: ptr.To(slots)},
					},
				})
				outcome[i] = classifyCreate(err)
			}
		}()
	}
	var dwg sync.WaitGroup
	for i := range n {
		if during != nil && i == n/4 {
			dwg.Add(1)
			go func() { defer dwg.Done(); during() }()
		}
		next <- i
	}
	close(next)
	wg.Wait()
	dwg.Wait()

	list := &trainer.TrainJobList{}
	if err := c.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	there := map[string]bool{}
	for _, tj := range list.Items {
		there[tj.Name] = true
	}
	counts := map[string]int{}
	for i, o := range outcome {
		counts[o]++
		name := fmt.Sprintf("job-%04d", i)
		switch {
		case strings.HasPrefix(o, "error:"):
			t.Errorf("%s: neither admitted nor denied with a reason: %s", name, o)
		case o == "admitted" && !there[name]:
			t.Errorf("%s was admitted but is not there (lost)", name)
		case o == "admitted" && i%10 == 9:
			t.Errorf("%s has 0 slots per worker and was admitted", name)
		case o != "admitted" && there[name]:
			t.Errorf("%s was refused (%s) but is there", name, o)
		}
	}
	if len(list.Items) != counts["admitted"] {
		t.Errorf("%d TrainJobs in %s, %d admitted", len(list.Items), ns, counts["admitted"])
	}
	t.Logf("%d creates from %d clients: %v", n, clients, counts)
	return counts
}

func classifyCreate(err error) string {
	if err == nil {
		return "admitted"
	}
	if _, rest, ok := strings.Cut(err.Error(), "failed calling webhook \""); ok {
		hook, _, _ := strings.Cut(rest, "\"")
		return "denied: webhook unavailable (" + hook + ")"
	}
	if st, ok := err.(apierrors.APIStatus); ok {
		s := st.Status()
		what := string(s.Reason)
		if s.Details != nil && len(s.Details.Causes) > 0 {
			what += " " + s.Details.Causes[0].Field
		} else if len(s.Message) > 0 {
			what += ": " + s.Message[:min(len(s.Message), 100)]
		}
		return "denied: " + what
	}
	return "error: " + err.Error()
}

func waitAllowed(ctx context.Context, cl client.Client, ns string) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := cl.List(ctx, &trainer.TrainJobList{}, client.InNamespace(ns))
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}
