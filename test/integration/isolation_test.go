//go:build e2e

package integration

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/localcluster"
	"github.com/mpijob/mpijob/test/framework"
)

// Tenant isolation on real pods, enforced by the local cluster's policy
// engine (kube-router) from the NetworkPolicy mpijob-manager writes per job:
// a pod of another tenant, and a pod of the same tenant outside the job,
// cannot open TCP to a running Worker's sshd (by pod IP or DNS name) or to
// any port its ranks listen on, while the job's own Launcher can and the job
// Succeeds. Every target is first shown open from the Launcher, so a refusal
// is the policy's and not a closed port's.
func TestNetworkIsolationOnRealPods(t *testing.T) {
	c := framework.Get(t)
	ctx := context.Background()
	devA, devB := c.As(t, "dev-a"), c.As(t, "dev-b")

	name := framework.UniqueName("guarded")
	// The ranks run long enough to be probed, then the job succeeds.
	job := framework.MakeTrainJob(name, "team-a", "mpi-openmpi").NumNodes(2).
		Command("mpirun", "sh", "-c", "sleep 40").Obj()
	if err := devA.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Client.Delete(context.Background(), job) })
	outsiderB := probePod(t, c, devB, "team-b")
	outsiderA := probePod(t, c, devA, "team-a")

	launcher := c.WaitForPods(t, "team-a", name, "launcher", 1, 2*time.Minute)[0].Name
	workers := c.WaitForPods(t, "team-a", name, "node", 2, 2*time.Minute)
	worker := waitRunning(t, c, "team-a", workers[0].Name)
	waitRunning(t, c, "team-a", launcher)

	// Wait until the ranks (orted and the MPI processes) listen on the
	// Worker besides sshd.
	var ports []int
	err := wait.PollUntilContextTimeout(ctx, time.Second, 90*time.Second, true, func(context.Context) (bool, error) {
		ports = listeningPorts(t, c, "team-a", worker.Name)
		return len(ports) > 1, nil
	})
	if err != nil {
		t.Fatalf("no rank port besides sshd listened on Worker %s within 90s (ports %v)", worker.Name, ports)
	}
	dnsName := fmt.Sprintf("%s.%s.team-a.svc.cluster.local", worker.Spec.Hostname, worker.Spec.Subdomain)
	type target struct {
		host string
		port int
	}
	targets := []target{{worker.Status.PodIP, 2222}, {dnsName, 2222}}
	for _, p := range ports {
		if p != 2222 {
			targets = append(targets, target{worker.Status.PodIP, p})
		}
	}
	for _, tg := range targets {
		what := fmt.Sprintf("%s:%d", tg.host, tg.port)
		if !canConnect(t, c, "team-a", launcher, tg.host, tg.port) {
			t.Errorf("the job's own Launcher cannot reach its Worker at %s", what)
			continue
		}
		if canConnect(t, c, "team-b", outsiderB, tg.host, tg.port) {
			t.Errorf("a team-b pod reached team-a's Worker at %s", what)
		}
		if canConnect(t, c, "team-a", outsiderA, tg.host, tg.port) {
			t.Errorf("a team-a pod outside the job reached its Worker at %s", what)
		}
	}
	c.WaitForStatus(t, "team-a", name, 3*time.Minute, func(s api.Status) bool {
		if s.Phase == api.PhaseFailed {
			t.Fatalf("the guarded job failed: %s: %s", s.Reason, s.Message)
		}
		return s.Phase == api.PhaseSucceeded
	})

	t.Run("dev-b cannot read the job's secret, pods, logs or events", func(t *testing.T) {
		forbidden := map[string]func() error{
			"SSH key Secret": func() error {
				return devB.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: name + "-mpi-ssh-auth"}, &corev1.Secret{})
			},
			"Worker pod": func() error {
				return devB.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: worker.Name}, &corev1.Pod{})
			},
			"pod list": func() error { return devB.List(ctx, &corev1.PodList{}, client.InNamespace("team-a")) },
			"events":   func() error { return devB.List(ctx, &corev1.EventList{}, client.InNamespace("team-a")) },
		}
		// The Secret exists, so a refusal is RBAC's, not a 404.
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: name + "-mpi-ssh-auth"}, &corev1.Secret{}); err != nil {
			t.Fatalf("the job's SSH Secret: %v", err)
		}
		for what, do := range forbidden {
			if err := do(); !apierrors.IsForbidden(err) {
				t.Errorf("dev-b reading team-a's %s: %v, want Forbidden", what, err)
			}
		}
		out, err := c.Kubectl(t, "dev-b", "team-a", "", "logs", launcher)
		if err == nil || !strings.Contains(out, "Forbidden") {
			t.Errorf("dev-b read the Launcher's log: %v\n%s", err, out)
		}
	})
}

// Opting out of the per-job NetworkPolicy restores reach from other pods.
func TestNetworkPolicyOptOutRestoresReach(t *testing.T) {
	c := framework.Get(t)
	ctx := context.Background()
	devA, devB := c.As(t, "dev-a"), c.As(t, "dev-b")
	name := framework.UniqueName("open")
	job := framework.MakeTrainJob(name, "team-a", "mpi-openmpi").NumNodes(1).Command("sleep", "300").Obj()
	job.Annotations = map[string]string{api.NetworkPolicyAnnotation: "disabled"}
	if err := devA.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Client.Delete(context.Background(), job) })
	outsider := probePod(t, c, devB, "team-b")
	worker := waitRunning(t, c, "team-a", c.WaitForPods(t, "team-a", name, "node", 1, 2*time.Minute)[0].Name)
	// sshd starts a moment after the container.
	err := wait.PollUntilContextTimeout(ctx, time.Second, 30*time.Second, true, func(context.Context) (bool, error) {
		return canConnect(t, c, "team-b", outsider, worker.Status.PodIP, 2222), nil
	})
	if err != nil {
		t.Errorf("with %s=disabled a team-b pod still cannot reach the Worker's sshd at %s:2222", api.NetworkPolicyAnnotation, worker.Status.PodIP)
	}
}

// Services have working ClusterIPs (kube-proxy on the host): a pod reaches
// another pod through its Service's name and ClusterIP, and the API server
// through the kubernetes Service, as in-cluster clients do.
func TestServicesHaveClusterIPs(t *testing.T) {
	c := framework.Get(t)
	ctx := context.Background()
	ns := c.NewNamespace(t, "svc")
	probePodCmd(t, c, c.Client, ns, map[string]string{"app": "web"}, "python3", "-m", "http.server", "8080")
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "web"},
			Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	if err := c.Client.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	from := probePod(t, c, c.Client, ns)
	targets := map[string]int{
		svc.Spec.ClusterIP:                     80,
		"web." + ns + ".svc.cluster.local":     80,
		"10.96.0.1":                            443,
		"kubernetes.default.svc.cluster.local": 443,
	}
	for host, port := range targets {
		// Endpoints and the proxy's rules follow the pod in a moment.
		err := wait.PollUntilContextTimeout(ctx, time.Second, 30*time.Second, true, func(context.Context) (bool, error) {
			return canConnect(t, c, ns, from, host, port), nil
		})
		if err != nil {
			t.Errorf("a pod cannot reach %s:%d through its Service", host, port)
		}
	}
}

// probePod starts a pod that only sleeps, as user cl in ns, and returns its
// name once it runs.
func probePod(t *testing.T, c *framework.Cluster, cl client.Client, ns string) string {
	t.Helper()
	return probePodCmd(t, c, cl, ns, nil, "sleep", "600")
}

// probePodCmd starts a pod running command, as user cl in ns, and returns
// its name once it runs.
func probePodCmd(t *testing.T, c *framework.Cluster, cl client.Client, ns string, labels map[string]string, command ...string) string {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: framework.UniqueName("probe"), Namespace: ns, Labels: labels},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](1000),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name: "probe", Image: "ghcr.io/mpijob/openmpi:4.1", ImagePullPolicy: corev1.PullIfNotPresent,
				Command: command,
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
	if err := cl.Create(context.Background(), pod); err != nil {
		t.Fatalf("probe pod in %s: %v", ns, err)
	}
	t.Cleanup(func() { _ = c.Client.Delete(context.Background(), pod) })
	waitRunning(t, c, ns, pod.Name)
	return pod.Name
}

// waitRunning waits until the pod runs and returns it.
func waitRunning(t *testing.T, c *framework.Cluster, ns, name string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{}
	err := wait.PollUntilContextTimeout(context.Background(), 300*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p); err != nil {
			return false, nil //nolint:nilerr // keep polling
		}
		return p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "", nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s is not Running after 2m", ns, name)
	}
	return p
}

// canConnect reports whether pod (as cluster admin, through kubectl exec)
// can open a TCP connection to host:port within 3 seconds.
//
// A DNS name is resolved first, inside the pod, with a resolver's own
// timeout (a lost UDP answer costs glibc 5 s), then the TCP connect gets 3 s:
// a slow DNS answer must not read as a blocked port. A name that does not
// resolve fails the test, since then neither answer would mean anything.
func canConnect(t *testing.T, c *framework.Cluster, ns, pod, host string, port int) bool {
	t.Helper()
	script := fmt.Sprintf(`ip=$(timeout 15 getent ahostsv4 %[1]s | awk 'NR==1{print $1}')
[ -n "$ip" ] || { echo "UNRESOLVED %[1]s"; exit 2; }
timeout 3 bash -c "echo > /dev/tcp/$ip/%[2]d" && echo REACHED`, host, port)
	out, err := c.Kubectl(t, "admin", ns, "", "exec", pod, "--", "bash", "-c", script)
	if strings.Contains(out, "UNRESOLVED") {
		t.Fatalf("pod %s/%s cannot resolve %s: %s", ns, pod, host, out)
	}
	return err == nil && strings.Contains(out, "REACHED")
}

// listeningPorts returns the TCP ports a pod listens on at a non-loopback
// address, read from /proc/net/tcp{,6} inside it.
func listeningPorts(t *testing.T, c *framework.Cluster, ns, pod string) []int {
	t.Helper()
	out, err := c.Kubectl(t, "admin", ns, "", "exec", pod, "--", "cat", "/proc/net/tcp", "/proc/net/tcp6")
	if err != nil {
		return nil
	}
	return parseListening(out)
}

func parseListening(procNetTCP string) []int {
	seen := map[int]bool{}
	for _, line := range strings.Split(procNetTCP, "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || f[3] != "0A" { // 0A: LISTEN
			continue
		}
		addr, port, ok := strings.Cut(f[1], ":")
		if !ok || addr == "0100007F" || addr == "00000000000000000000000001000000" {
			continue // loopback only
		}
		p, err := strconv.ParseInt(port, 16, 32)
		if err == nil {
			seen[int(p)] = true
		}
	}
	var ports []int
	for p := range seen {
		ports = append(ports, p)
	}
	sort.Ints(ports)
	return ports
}

// A tenant cannot give a pod one of Kubernetes' own priority classes,
// which could preempt what keeps the nodes and the cluster running: the
// tenants' namespaces scope them with a quota of no such pods
// (config/dev/tenants.yaml, as docs/admin.md advises). Priority classes
// of the tenant's own choosing that are not the system's stay allowed.
func TestTenantsCannotUseSystemPriority(t *testing.T) {
	c := framework.Get(t)
	devA := c.As(t, "dev-a")
	pod := func(class string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "prio-", Namespace: "team-a"},
			Spec: corev1.PodSpec{
				PriorityClassName: class,
				SecurityContext:   &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
				Containers: []corev1.Container{{Name: "c", Image: localcluster.UserImage, Command: []string{"true"},
					SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}},
			}}
	}
	for _, class := range []string{"system-node-critical", "system-cluster-critical"} {
		err := devA.Create(context.Background(), pod(class), client.DryRunAll)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "no-system-priority") {
			t.Errorf("dev-a's pod with priority class %s: %v, want Forbidden by quota no-system-priority", class, err)
		}
	}
	if err := devA.Create(context.Background(), pod(""), client.DryRunAll); err != nil {
		t.Errorf("dev-a's pod with no priority class: %v", err)
	}
}

// A tenant's pod cannot reach mpijob-manager's pods (the webhook port, the
// metrics port): only the host, where the API server, the kubelets and
// Prometheus run, may (config/dev/release/manager-ingress.yaml). The red team's
// pod sent 6 MB AdmissionReviews of its own to the webhook port. The API
// server still reaches it: an MPI job is admitted.
func TestTenantPodsCannotReachTheManager(t *testing.T) {
	c := framework.Get(t)
	ctx := context.Background()
	devA := c.As(t, "dev-a")
	pods, err := localcluster.ManagerPods(ctx, c.Client)
	if err != nil || len(pods) == 0 {
		t.Fatalf("mpijob-manager's pods: %d (%v)", len(pods), err)
	}
	probe := probePod(t, c, devA, "team-a")
	for _, p := range pods {
		for _, port := range []int{9443, 8443} {
			if canConnect(t, c, "team-a", probe, p.Status.PodIP, port) {
				t.Errorf("a team-a pod reached mpijob-manager pod %s at %s:%d", p.Name, p.Status.PodIP, port)
			}
		}
	}
	if err := framework.SubmitW(ctx, devA, framework.MakeTrainJob(framework.UniqueName("admitted"), "team-a", "mpi-openmpi").NumNodes(1), client.DryRunAll); err != nil {
		t.Errorf("an MPI job's admission with the policy in place: %v", err)
	}
}

// A namespace whose administrator chose one NetworkPolicy for all its MPI
// jobs (mpijob.dev/network-policy-scope: namespace) gets exactly that: one
// policy, mpijob-jobs, listing its jobs, and none per job. A pod outside the
// jobs still cannot reach a Worker; another MPI job of the namespace now can
// (the isolation given up for fewer policies). Back to a policy per job,
// each job gets its own, the shared one goes, and the other job is shut out
// again. Enforced by the local cluster's kube-router on running pods.
func TestSharedNetworkPolicyPerNamespace(t *testing.T) {
	t.Parallel()
	c := framework.Get(t)
	ctx := context.Background()
	ns := c.NewNamespace(t, "shared")
	setScope := func(scope string) {
		t.Helper()
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			o := &corev1.Namespace{}
			if err := c.Client.Get(ctx, client.ObjectKey{Name: ns}, o); err != nil {
				return err
			}
			if o.Annotations == nil {
				o.Annotations = map[string]string{}
			}
			o.Annotations[api.NetworkPolicyScopeAnnotation] = scope
			return c.Client.Update(ctx, o)
		})
		if err != nil {
			t.Fatalf("set %s=%s on %s: %v", api.NetworkPolicyScopeAnnotation, scope, ns, err)
		}
	}
	setScope("namespace")
	jobs := []string{"one", "two"}
	for _, name := range jobs {
		job := framework.MakeTrainJob(name, ns, "mpi-openmpi").NumNodes(1).Command("sleep", "300").Obj()
		if err := c.Client.Create(ctx, job); err != nil {
			t.Fatal(err)
		}
	}
	// policies waits until the namespace's policies are want (names).
	policies := func(want ...string) {
		t.Helper()
		sort.Strings(want)
		var got []string
		err := wait.PollUntilContextTimeout(ctx, time.Second, 90*time.Second, true, func(ctx context.Context) (bool, error) {
			list := &networkingv1.NetworkPolicyList{}
			if err := c.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
				return false, err
			}
			got = got[:0]
			for _, np := range list.Items {
				got = append(got, np.Name)
				if np.Name == api.NamespaceNetworkPolicy && !slices.Equal(np.Spec.PodSelector.MatchExpressions[0].Values, jobs) {
					return false, nil
				}
			}
			sort.Strings(got)
			return slices.Equal(got, want), nil
		})
		if err != nil {
			t.Fatalf("NetworkPolicies of %s: %v, want %v (the shared one listing %v)", ns, got, want, jobs)
		}
	}
	policies(api.NamespaceNetworkPolicy)

	outsider := probePod(t, c, c.Client, ns)
	worker := waitRunning(t, c, ns, c.WaitForPods(t, ns, "one", "node", 1, 2*time.Minute)[0].Name)
	launcherOne := waitRunning(t, c, ns, c.WaitForPods(t, ns, "one", "launcher", 1, 2*time.Minute)[0].Name).Name
	launcherTwo := waitRunning(t, c, ns, c.WaitForPods(t, ns, "two", "launcher", 1, 2*time.Minute)[0].Name).Name
	// reach waits until from (a pod) reaches job one's Worker's sshd or
	// not, as want says: the policy engine syncs a moment after a change.
	reach := func(what, from string, want bool) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, time.Second, 45*time.Second, true, func(context.Context) (bool, error) {
			return canConnect(t, c, ns, from, worker.Status.PodIP, 2222) == want, nil
		})
		if err != nil {
			t.Errorf("%s reaches job one's Worker at %s:2222: %v, want %v", what, worker.Status.PodIP, !want, want)
		}
	}
	reach("job one's own Launcher", launcherOne, true)
	reach("job two's Launcher, in a namespace that shares one policy", launcherTwo, true)
	reach("a pod of the namespace outside its MPI jobs", outsider, false)

	setScope("job")
	policies("one"+api.NetworkPolicySuffix, "two"+api.NetworkPolicySuffix)
	reach("job two's Launcher, back to a policy per job", launcherTwo, false)
	reach("a pod of the namespace outside its MPI jobs", outsider, false)
	reach("job one's own Launcher", launcherOne, true)
}
